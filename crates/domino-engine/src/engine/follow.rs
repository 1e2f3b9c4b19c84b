//! Which terminal can immediately follow which ([`Follow`]): the static over-approximation
//! of the parser that tree builds prune splits with (module `tree`, "Pruning"), also handed
//! to the scanner ([`crate::lexer::Scanner::followed_by`]).

use crate::grammar::fixpoint::{Csr, least_fixpoint};
use crate::grammar::ir::{self, TerminalId};

/// Above this many terminals [`Follow::new`] does not build the `n × n` matrix.
pub const FOLLOW_MAX_TERMINALS: usize = 20_000;

/// Which terminal can immediately follow which in some sentential form of the grammar.
#[derive(Clone, Debug)]
pub struct Follow {
    /// Words per row; 0 = everything may follow everything (no matrix: [`Follow::all`]).
    n: usize,
    bits: Vec<u64>,
}

impl Follow {
    /// Pairs `(a, b)` such that `… a b …` occurs in a derivation: for every production and
    /// every two right-hand-side positions with only nullable symbols between, LAST of the
    /// first × FIRST of the second.
    ///
    /// Near-linear in the grammar: nullability, FIRST and LAST are propagated along a
    /// worklist of "set of X flows into set of Y" edges (a long rule chain costs one pass, not
    /// one pass per link), and the pair loop visits only the set bits. Above
    /// [`FOLLOW_MAX_TERMINALS`] terminals the `n × n` matrix itself would be the cost (100,000
    /// literal terminals: 1.25 GB), so everything may follow everything ([`Follow::all`]:
    /// less pruning, same masks).
    pub fn new(g: &ir::Grammar) -> Self {
        // Nullable: the least fixpoint over the productions without a terminal.
        let nullable = least_fixpoint(
            g.nonterminals.len(),
            g.productions
                .iter()
                .filter(|p| {
                    p.rhs
                        .iter()
                        .all(|s| matches!(s, ir::Symbol::Nonterminal(_)))
                })
                .map(|p| {
                    let nts = p.rhs.iter().filter_map(|s| match s {
                        ir::Symbol::Nonterminal(x) => Some(x.0),
                        ir::Symbol::Terminal(_) => None,
                    });
                    (p.lhs.0, nts)
                }),
        );
        Self::with_nullable(g, &nullable)
    }

    /// [`Follow::new`] with the grammar's nullable nonterminals already known (`nullable[a]`
    /// for every nonterminal `a`; more entries are ignored), as the parser tables know them.
    pub(crate) fn with_nullable(g: &ir::Grammar, nullable: &[bool]) -> Self {
        let nt = g.nonterminals.len();
        let n = g.terminals.len();
        assert!(nullable.len() >= nt, "a nullable flag per nonterminal");
        if n > FOLLOW_MAX_TERMINALS
            || crate::budget::would_exceed(((3 * nt + n) * n.div_ceil(64) * 8) as u64)
        {
            return Follow::all(n);
        }
        let words = n.div_ceil(64).max(1);
        let is_nullable =
            |s: &ir::Symbol| matches!(s, ir::Symbol::Nonterminal(x) if nullable[x.0 as usize]);
        // FIRST / LAST sets of nonterminals as bitsets over terminals: direct terminals
        // first, then the union along edges `Y ⊆ X` until nothing changes.
        let propagate = |from_end: bool| -> Vec<u64> {
            let mut sets = vec![0u64; nt * words];
            // Edges `x → l` (set of x flows into set of l), gathered in one array and then
            // grouped by `x` (a vector per nonterminal was tens of thousands of small
            // allocations on a big schema).
            let mut pairs: Vec<(u32, u32)> = Vec::with_capacity(2 * g.productions.len());
            let mut last_from = vec![u32::MAX; nt];
            for p in &g.productions {
                let l = p.lhs.0 as usize;
                let mut visit = |s: &ir::Symbol| match s {
                    ir::Symbol::Terminal(t) => {
                        sets[l * words + t.0 as usize / 64] |= 1 << (t.0 % 64);
                    }
                    // (Once per left-hand side in a row: the productions of one
                    // nonterminal are consecutive, and an any-order object's member states
                    // each end N of theirs with the same whitespace.)
                    ir::Symbol::Nonterminal(x) => {
                        if last_from[x.0 as usize] != l as u32 {
                            last_from[x.0 as usize] = l as u32;
                            pairs.push((x.0, l as u32));
                        }
                    }
                };
                if from_end {
                    for s in p.rhs.iter().rev() {
                        visit(s);
                        if !is_nullable(s) {
                            break;
                        }
                    }
                } else {
                    for s in &p.rhs {
                        visit(s);
                        if !is_nullable(s) {
                            break;
                        }
                    }
                }
            }
            let edges = Csr::new(nt, pairs.iter().map(|&(x, l)| (x as usize, l)));
            drop(pairs);
            // The worklist in an order where a set is final before it flows on, cycles aside:
            // a depth-first postorder of the edges, popped last first (every node after the
            // nodes flowing into it). In nonterminal order, a member's value (numbered before
            // its object's member states) was finished after the states ending with it, and
            // sent each of them round again.
            let mut queue: Vec<usize> = Vec::with_capacity(nt);
            {
                let mut seen = vec![false; nt];
                let mut stack: Vec<(usize, usize)> = Vec::new();
                for root in 0..nt {
                    if std::mem::replace(&mut seen[root], true) {
                        continue;
                    }
                    stack.push((root, 0));
                    while let Some((x, i)) = stack.last_mut() {
                        let (x, row) = (*x, edges.row(*x));
                        if let Some(&y) = row.get(*i) {
                            *i += 1;
                            if !std::mem::replace(&mut seen[y as usize], true) {
                                stack.push((y as usize, 0));
                            }
                        } else {
                            stack.pop();
                            queue.push(x);
                        }
                    }
                }
            }
            let mut queued = vec![true; nt];
            while let Some(x) = queue.pop() {
                if crate::budget::over("follow sets") {
                    break;
                }
                queued[x] = false;
                for &y in edges.row(x) {
                    let y = y as usize;
                    if y == x {
                        continue;
                    }
                    let mut changed = false;
                    for w in 0..words {
                        let add = sets[x * words + w];
                        let a = &mut sets[y * words + w];
                        if *a | add != *a {
                            *a |= add;
                            changed = true;
                        }
                    }
                    if changed && !queued[y] {
                        queued[y] = true;
                        queue.push(y);
                    }
                }
            }
            sets
        };
        let first = propagate(false);
        let last = propagate(true);
        // A symbol's FIRST or LAST set: one terminal, or a nonterminal's row (no copies: this
        // loop runs for every pair of positions of every production).
        enum Set<'s> {
            One(usize),
            Row(&'s [u64]),
        }
        fn set_of<'s>(sets: &'s [u64], words: usize, s: &ir::Symbol) -> Set<'s> {
            match s {
                ir::Symbol::Terminal(t) => Set::One(t.0 as usize),
                ir::Symbol::Nonterminal(x) => {
                    Set::Row(&sets[x.0 as usize * words..(x.0 as usize + 1) * words])
                }
            }
        }
        let mut bits = vec![0u64; n * words];
        // `bits[a] |= firsts` for one `a`.
        let add = |bits: &mut [u64], a: usize, firsts: &Set| match firsts {
            Set::One(b) => bits[a * words + b / 64] |= 1 << (b % 64),
            Set::Row(row) => {
                for (w, f) in bits[a * words..(a + 1) * words].iter_mut().zip(row.iter()) {
                    *w |= f;
                }
            }
        };
        // What may follow each occurrence goes to the terminal itself, or for a nonterminal
        // into its right context (`context[x]`: every terminal that may follow some
        // occurrence of `x`), spread over `x`'s last terminals once at the end. Spreading per
        // occurrence cost |last(x)| row unions each time: a value nonterminal occurs in every
        // member state of an any-order object.
        let mut context = vec![0u64; nt * words];
        for p in &g.productions {
            if crate::budget::over("follow sets") {
                break;
            }
            for i in 0..p.rhs.len() {
                for j in i + 1..p.rhs.len() {
                    let firsts = set_of(&first, words, &p.rhs[j]);
                    match p.rhs[i] {
                        ir::Symbol::Terminal(t) => add(&mut bits, t.0 as usize, &firsts),
                        ir::Symbol::Nonterminal(x) => add(&mut context, x.0 as usize, &firsts),
                    }
                    if !is_nullable(&p.rhs[j]) {
                        break;
                    }
                }
            }
        }
        for x in 0..nt {
            let ctx = &context[x * words..(x + 1) * words];
            if ctx.iter().all(|&w| w == 0) {
                continue;
            }
            for (wi, &word) in last[x * words..(x + 1) * words].iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let a = wi * 64 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    for (w, c) in bits[a * words..(a + 1) * words].iter_mut().zip(ctx) {
                        *w |= c;
                    }
                }
            }
        }
        Follow { n: words, bits }
    }

    /// Everything may follow everything (no pruning).
    /// Stored as no matrix at all (an n × n one would be quadratic in the terminals).
    pub fn all(_num_terminals: usize) -> Self {
        Follow {
            n: 0,
            bits: Vec::new(),
        }
    }

    /// Whether this is [`Follow::all`] (no pruning).
    pub fn is_all(&self) -> bool {
        self.n == 0
    }

    /// The relation transposed, for [`crate::lexer::Scanner::with_follow`]: per terminal `b`,
    /// bit `a` set when `b` may follow `a`; `None` for [`Follow::all`]. Linear in the matrix
    /// and its set bits (asking [`Follow::can_follow`] of every pair was about 5 % of
    /// compiling a large schema's grammar).
    pub fn preceders(&self) -> Option<Vec<Box<[u64]>>> {
        if self.is_all() {
            return None;
        }
        let words = self.n;
        let n = self.bits.len() / words;
        let mut rows = vec![vec![0u64; words].into_boxed_slice(); n];
        for a in 0..n {
            for (w, &word) in self.bits[a * words..(a + 1) * words].iter().enumerate() {
                let mut m = word;
                while m != 0 {
                    let b = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    rows[b][a / 64] |= 1 << (a % 64);
                }
            }
        }
        Some(rows)
    }

    #[inline]
    pub fn can_follow(&self, a: TerminalId, b: TerminalId) -> bool {
        self.n == 0 || self.bits[a.0 as usize * self.n + b.0 as usize / 64] >> (b.0 % 64) & 1 == 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{CompileOptions, GrammarSource};

    /// The definition, computed naively: first and last terminals by iteration to a fixpoint,
    /// then every occurrence of `X` followed (through nullable symbols) by `Y` puts
    /// `last(X) × first(Y)` in the relation.
    fn naive(g: &ir::Grammar) -> Vec<Vec<bool>> {
        use ir::Symbol;
        let (nt, n) = (g.nonterminals.len(), g.terminals.len());
        let mut nullable = vec![false; nt];
        let mut first = vec![vec![false; n]; nt];
        let mut last = vec![vec![false; n]; nt];
        let null = |nullable: &[bool], s: &Symbol| matches!(s, Symbol::Nonterminal(x) if nullable[x.0 as usize]);
        loop {
            let mut changed = false;
            for p in &g.productions {
                let l = p.lhs.0 as usize;
                if !nullable[l] && p.rhs.iter().all(|s| null(&nullable, s)) {
                    nullable[l] = true;
                    changed = true;
                }
                for order in [false, true] {
                    let syms: Vec<&Symbol> = if order {
                        p.rhs.iter().rev().collect()
                    } else {
                        p.rhs.iter().collect()
                    };
                    for s in syms {
                        let add: Vec<usize> = match s {
                            Symbol::Terminal(t) => vec![t.0 as usize],
                            Symbol::Nonterminal(x) => {
                                let src = if order { &last } else { &first };
                                (0..n).filter(|&b| src[x.0 as usize][b]).collect()
                            }
                        };
                        let dst = if order { &mut last } else { &mut first };
                        for b in add {
                            if !dst[l][b] {
                                dst[l][b] = true;
                                changed = true;
                            }
                        }
                        if !null(&nullable, s) {
                            break;
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let set = |sets: &[Vec<bool>], s: &Symbol| -> Vec<usize> {
            match s {
                Symbol::Terminal(t) => vec![t.0 as usize],
                Symbol::Nonterminal(x) => (0..n).filter(|&b| sets[x.0 as usize][b]).collect(),
            }
        };
        let mut rel = vec![vec![false; n]; n];
        for p in &g.productions {
            for i in 0..p.rhs.len() {
                for j in i + 1..p.rhs.len() {
                    for a in set(&last, &p.rhs[i]) {
                        for b in set(&first, &p.rhs[j]) {
                            rel[a][b] = true;
                        }
                    }
                    if !null(&nullable, &p.rhs[j]) {
                        break;
                    }
                }
            }
        }
        rel
    }

    #[test]
    fn follow_sets_are_the_definition() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "array", "items": {"type": ["integer", "null"]}},
                "b": {"type": "object", "additionalProperties": {"type": "string"}},
                "c": {"enum": ["x", 1, true]}
            },
            "required": ["a"],
            "patternProperties": {"^z": {"type": "boolean"}}
        });
        let sources = [
            GrammarSource::JsonSchema(schema),
            GrammarSource::Json,
            GrammarSource::Gbnf(
                "root ::= a b? c* (d | e)\na ::= \"x\" | \"\" | a \"y\"\nb ::= (\"p\" | c)? \"q\"?\nc ::= [0-9]+ \"-\"?\nd ::= b b c\ne ::= \"(\" root \")\" | \"\"\n"
                    .into(),
            ),
        ];
        for src in sources {
            let g = src.compile(&CompileOptions::default()).unwrap();
            let f = Follow::new(&g);
            assert!(!f.is_all());
            let rel = naive(&g);
            let preceders = f.preceders().expect("a relation");
            assert_eq!(preceders.len(), rel.len());
            let mut some = 0;
            for (a, row) in rel.iter().enumerate() {
                for (b, &want) in row.iter().enumerate() {
                    let fast = f.can_follow(TerminalId(a as u32), TerminalId(b as u32));
                    assert_eq!(fast, want, "{src:?}: terminal {a} then {b}");
                    let transposed = preceders[b][a / 64] >> (a % 64) & 1 == 1;
                    assert_eq!(transposed, want, "{src:?}: preceders of {b}, terminal {a}");
                    some += fast as usize;
                }
            }
            assert!(some > 0);
        }
    }

    /// The definition on real schemas: the JSONSchemaBench development subset (`../shared/data`
    /// beside the repository, as the integration tests find it), every schema whose grammar is
    /// small enough for [`naive`], in any order and in schema order (member states make long
    /// chains of nonterminals flowing into each other, which the worklist's order is for).
    #[test]
    fn follow_sets_are_the_definition_on_bench_schemas() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let dir = root
            .ancestors()
            .map(|a| a.join("shared/data/jsonschemabench"))
            .find(|p| p.is_dir())
            .expect("../shared/data/jsonschemabench beside the repository");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        files.sort();
        let (mut checked, mut with_objects) = (0, 0);
        for file in files {
            // Every fourth line: a spread over each file, in test time.
            for line in std::fs::read_to_string(&file).unwrap().lines().step_by(4) {
                let v: serde_json::Value = serde_json::from_str(line).unwrap();
                for order in [
                    crate::grammar::PropertyOrder::Any,
                    crate::grammar::PropertyOrder::Schema,
                ] {
                    let opts = CompileOptions {
                        property_order: order,
                        ..Default::default()
                    };
                    let Ok(g) = GrammarSource::JsonSchema(v["schema"].clone()).compile(&opts)
                    else {
                        continue;
                    };
                    if g.terminals.len() > 120 || g.productions.len() > 1_500 {
                        continue;
                    }
                    let f = Follow::new(&g);
                    let rel = naive(&g);
                    for (a, row) in rel.iter().enumerate() {
                        for (b, &want) in row.iter().enumerate() {
                            let fast = f.can_follow(TerminalId(a as u32), TerminalId(b as u32));
                            assert_eq!(fast, want, "{}: terminal {a} then {b}", v["id"]);
                        }
                    }
                    checked += 1;
                    with_objects +=
                        usize::from(g.nonterminals.iter().any(|n| n.starts_with("members")));
                }
            }
        }
        assert!(
            checked > 200 && with_objects > 100,
            "{checked} grammars, {with_objects} with member states"
        );
    }
}
