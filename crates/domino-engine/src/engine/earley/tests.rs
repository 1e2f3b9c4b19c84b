//! Tests for the Earley parser: hand-built grammars, a set-semantics oracle over random
//! grammars, Leo linearity by work counters, round trips, fingerprint soundness.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::*;
use crate::grammar::ir::{Grammar, NonterminalId, Production, Symbol, Terminal, TerminalId};

/// Build an IR grammar from a compact notation: rules separated by `;`, `A -> x y | z`,
/// terminals in single quotes (their text is also their name), `ε` or nothing for empty.
/// The first rule's left-hand side is the start symbol.
pub(super) fn grammar(src: &str) -> Grammar {
    let mut terminals: Vec<String> = Vec::new();
    let mut nts: Vec<String> = Vec::new();
    let intern = |v: &mut Vec<String>, s: &str| -> u32 {
        match v.iter().position(|x| x == s) {
            Some(i) => i as u32,
            None => {
                v.push(s.to_string());
                (v.len() - 1) as u32
            }
        }
    };
    let mut productions = Vec::new();
    for rule in src.split(';').map(str::trim).filter(|r| !r.is_empty()) {
        let (lhs, rhs) = rule.split_once("->").expect("rule has ->");
        let lhs = NonterminalId(intern(&mut nts, lhs.trim()));
        for alt in rhs.split('|') {
            let mut syms = Vec::new();
            for tok in alt.split_whitespace() {
                if tok == "ε" {
                    continue;
                }
                if let Some(name) = tok.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
                    syms.push(Symbol::Terminal(TerminalId(intern(&mut terminals, name))));
                } else {
                    syms.push(Symbol::Nonterminal(NonterminalId(intern(&mut nts, tok))));
                }
            }
            productions.push(Production { lhs, rhs: syms });
        }
    }
    Grammar {
        terminals: terminals
            .iter()
            .map(|n| {
                Terminal::new(
                    n.clone(),
                    Hir::literal(n.as_bytes()),
                    Some(n.as_bytes().to_vec()),
                )
            })
            .collect(),
        nonterminals: nts,
        productions,
        start: NonterminalId(0),
        warnings: Vec::new(),
    }
}

fn tid(g: &Grammar, name: &str) -> TerminalId {
    TerminalId(
        g.terminals
            .iter()
            .position(|t| t.name == name)
            .unwrap_or_else(|| panic!("no terminal {name}")) as u32,
    )
}

fn parser(g: &Grammar) -> Parser {
    Parser::new(Arc::new(ParserTables::new(g)))
}

/// Push whitespace-separated terminal names; panics (with the position) on rejection.
fn push_all(p: &mut Parser, g: &Grammar, input: &str) {
    for (i, name) in input.split_whitespace().enumerate() {
        assert!(
            p.push(tid(g, name)),
            "terminal #{i} {name:?} rejected in {input:?}"
        );
    }
}

fn accepts(g: &Grammar, input: &str) -> bool {
    let mut p = parser(g);
    for name in input.split_whitespace() {
        if !p.push(tid(g, name)) {
            return false;
        }
    }
    p.is_accepting()
}

/// The expected terminals' names, sorted.
fn expected_names(p: &Parser, g: &Grammar) -> Vec<String> {
    let mut v: Vec<String> = p
        .expected()
        .iter()
        .map(|t| g.terminals[t.0 as usize].name.clone())
        .collect();
    v.sort();
    v
}

const JSON_RIGHT: &str = "
    value -> object | array | 'S' | 'N' | 'true' | 'false' | 'null';
    object -> '{' '}' | '{' members '}';
    members -> pair | pair ',' members;
    pair -> 'S' ':' value;
    array -> '[' ']' | '[' elements ']';
    elements -> value | value ',' elements";

const JSON_LEFT: &str = "
    value -> object | array | 'S' | 'N' | 'true' | 'false' | 'null';
    object -> '{' '}' | '{' members '}';
    members -> pair | members ',' pair;
    pair -> 'S' ':' value;
    array -> '[' ']' | '[' elements ']';
    elements -> value | elements ',' value";

#[test]
fn terminal_set_basics() {
    let mut s = TerminalSet::new(130);
    assert!(s.is_empty());
    assert!(s.insert(TerminalId(3)));
    assert!(!s.insert(TerminalId(3)));
    assert!(s.insert(TerminalId(129)));
    assert!(!s.insert(TerminalId(500)), "beyond the universe is ignored");
    assert!(
        s.contains(TerminalId(129))
            && !s.contains(TerminalId(128))
            && !s.contains(TerminalId(9999))
    );
    assert_eq!(
        s.iter().collect::<Vec<_>>(),
        vec![TerminalId(3), TerminalId(129)]
    );
    assert_eq!(s.len(), 2);
    assert!(s.remove(TerminalId(3)) && !s.remove(TerminalId(3)));
    assert_eq!(s.len(), 1);
    // Large universes live on the heap; same behaviour.
    let mut big = TerminalSet::new(1000);
    let mut other = big.clone();
    assert!(big.insert(TerminalId(999)) && big.insert(TerminalId(64)));
    assert_ne!(big, other);
    assert!(!big.intersects(&other));
    other.union_with(&big);
    assert_eq!(big, other);
    assert!(big.intersects(&other));
    assert_eq!(
        other.iter().collect::<Vec<_>>(),
        vec![TerminalId(64), TerminalId(999)]
    );
    assert_eq!(big.words().len(), 16);
}

#[test]
fn arithmetic_left_recursion() {
    let g = grammar("E -> E '+' T | T; T -> T '*' F | F; F -> '(' E ')' | 'n'");
    assert!(accepts(&g, "n"));
    assert!(accepts(&g, "n + n * n"));
    assert!(accepts(&g, "( n + n ) * n + ( ( n ) )"));
    assert!(!accepts(&g, "n +"));
    assert!(!accepts(&g, "( n"));
    assert!(!accepts(&g, "n n"));
    let mut p = parser(&g);
    assert_eq!(expected_names(&p, &g), vec!["(", "n"]);
    push_all(&mut p, &g, "( n");
    assert_eq!(expected_names(&p, &g), vec![")", "*", "+"]);
    assert!(!p.is_accepting());
    assert!(!p.push(tid(&g, "n")), "n cannot follow n");
    assert_eq!(p.depth(), 2, "rejected push leaves the state");
    push_all(&mut p, &g, ")");
    assert!(p.is_accepting());
}

#[test]
fn json_expected_sets() {
    for src in [JSON_RIGHT, JSON_LEFT] {
        let g = grammar(src);
        let mut p = parser(&g);
        assert_eq!(
            expected_names(&p, &g),
            vec!["N", "S", "[", "false", "null", "true", "{"]
        );
        push_all(&mut p, &g, "{ S : [ N , { } , S");
        assert_eq!(expected_names(&p, &g), vec![",", "]"]);
        push_all(&mut p, &g, "]");
        assert_eq!(expected_names(&p, &g), vec![",", "}"]);
        assert!(!p.is_accepting());
        push_all(&mut p, &g, "}");
        assert!(p.is_accepting());
        assert!(p.expected().is_empty());
        assert!(accepts(&g, "[ [ [ ] ] , { S : null , S : true } ]"));
        assert!(!accepts(&g, "[ N , ]"));
        assert!(!accepts(&g, "{ S }"));
    }
}

#[test]
fn ambiguous_concatenation() {
    let g = grammar("E -> E E | 'a'");
    for n in 1..40 {
        let s = vec!["a"; n].join(" ");
        assert!(accepts(&g, &s), "a^{n}");
    }
    let g = grammar("S -> S S | '(' S ')' | '(' ')'");
    assert!(accepts(&g, "( ) ( ( ) ( ) ) ( )"));
    assert!(!accepts(&g, "( ) ( ( ) ( ) ( )"));
}

#[test]
fn nullable_heavy() {
    let g = grammar("S -> A B C 'x' | A B; A -> ε | 'a'; B -> A A; C -> B | 'c'");
    assert!(parser(&g).is_accepting(), "empty sentence");
    for ok in [
        "x",
        "a",
        "a a",
        "a a a",
        "a a a a x",
        "c x",
        "a c x",
        "a a a c x",
        "a a a a a x",
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in ["a a a a", "a a a a c x", "x x", "c", "a a a a a a x"] {
        assert!(!accepts(&g, bad), "{bad}");
    }
}

#[test]
fn cycles_and_star_of_star() {
    // `A -> A | ε` and the lowered shape of ("a"*)*.
    let g = grammar("S -> A 'b'; A -> A | ε | 'a'");
    assert!(accepts(&g, "b") && accepts(&g, "a b") && !accepts(&g, "a a b"));
    let g = grammar("S -> R; R -> R2 R | ε; R2 -> 'a' R2 | ε");
    assert!(parser(&g).is_accepting());
    for n in 1..30 {
        assert!(accepts(&g, &vec!["a"; n].join(" ")));
    }
    let g = grammar("S -> X 'c' | 'b'; X -> Y; Y -> X | S | 'a'");
    assert!(accepts(&g, "a c") && accepts(&g, "b c c c") && accepts(&g, "b") && !accepts(&g, "c"));
}

#[test]
fn unproductive_rules_are_ignored() {
    let g = grammar("S -> 'a' | 'b' U; U -> 'c' U");
    let t = ParserTables::new(&g);
    assert_eq!(t.dropped_productions(), 2);
    let mut p = Parser::new(Arc::new(t));
    assert_eq!(
        expected_names(&p, &g),
        vec!["a"],
        "b only leads into an unproductive rule"
    );
    assert!(!p.push(tid(&g, "b")));
    // A grammar whose start is unproductive: nothing is ever expected or accepted.
    let g = grammar("S -> 'a' S");
    let p = parser(&g);
    assert!(p.expected().is_empty() && !p.is_accepting());
}

#[test]
fn leo_keeps_right_recursion_linear() {
    let cases = [
        ("L -> 'a' L | 'a'", "a"),
        ("L -> 'a' ',' L | 'a'", "a ,"),
        ("L -> 'a' ',' R | 'a'; R -> L", "a ,"),
        ("L -> 'a' L | ε", "a"),
        ("S -> '[' L ']'; L -> 'a' L | ε", "a"),
    ];
    for (src, unit) in cases {
        let g = grammar(src);
        let unit: Vec<TerminalId> = unit.split_whitespace().map(|n| tid(&g, n)).collect();
        let mut work = Vec::new();
        for n in [1000usize, 10_000] {
            let mut p = parser(&g);
            if src.starts_with("S") {
                assert!(p.push(tid(&g, "[")));
            }
            for _ in 0..n {
                for &t in &unit {
                    assert!(p.push(t), "{src}");
                }
            }
            if unit.len() == 2 {
                assert!(p.push(unit[0]));
            }
            if src.starts_with("S") {
                assert!(p.push(tid(&g, "]")));
            }
            assert!(p.is_accepting(), "{src} n={n}");
            let s = p.stats();
            work.push(s.items_added + s.completions);
            assert!(s.completions <= 8 * n as u64 + 16, "{src}: {s:?} for n={n}");
        }
        // Ten times the input, about ten times the work (quadratic would be 100x).
        assert!(work[1] <= 11 * work[0], "{src}: work {work:?}");
    }
}

#[test]
fn left_recursion_is_linear() {
    let g = grammar("L -> L ',' 'a' | 'a'");
    let mut p = parser(&g);
    assert!(p.push(tid(&g, "a")));
    for _ in 0..10_000 {
        assert!(p.push(tid(&g, ",")) && p.push(tid(&g, "a")));
    }
    assert!(p.is_accepting());
    assert!(p.stats().completions <= 3 * 20_001);
}

#[test]
fn push_pop_truncate_round_trips() {
    let g = grammar(JSON_RIGHT);
    let mut p = parser(&g);
    let input: Vec<TerminalId> = "[ { S : [ N , N , { S : null } ] , S : { } } , [ ] , S ]"
        .split_whitespace()
        .map(|n| tid(&g, n))
        .collect();
    let mut states = vec![(
        p.expected().clone(),
        p.state_fingerprint(),
        p.is_accepting(),
    )];
    for &t in &input {
        assert!(p.push(t));
        states.push((
            p.expected().clone(),
            p.state_fingerprint(),
            p.is_accepting(),
        ));
        // push+pop of every expected terminal restores the state exactly
        let before = states.last().expect("state").clone();
        for e in p.expected().clone().iter() {
            assert!(p.push(e));
            p.pop();
            assert_eq!(
                (
                    p.expected().clone(),
                    p.state_fingerprint(),
                    p.is_accepting()
                ),
                before
            );
        }
    }
    assert!(p.is_accepting());
    for d in (0..input.len()).rev() {
        p.pop();
        assert_eq!(p.depth(), d);
        assert_eq!(
            (
                p.expected().clone(),
                p.state_fingerprint(),
                p.is_accepting()
            ),
            states[d]
        );
    }
    p.pop(); // no-op at depth 0
    assert_eq!(p.depth(), 0);
    // Truncate across chunk boundaries, then re-push: identical states.
    let long: Vec<TerminalId> = std::iter::once(tid(&g, "["))
        .chain((0..100).flat_map(|_| [tid(&g, "N"), tid(&g, ",")]))
        .chain([tid(&g, "N"), tid(&g, "]")])
        .collect();
    let mut fps = vec![p.state_fingerprint()];
    for &t in &long {
        assert!(p.push(t));
        fps.push(p.state_fingerprint());
    }
    for target in [150, 64, 63, 33, 32, 31, 1, 0] {
        p.truncate(target);
        assert_eq!(p.depth(), target);
        assert_eq!(p.state_fingerprint(), fps[target]);
        for (i, &t) in long[target..].iter().enumerate() {
            assert!(p.push(t));
            assert_eq!(p.state_fingerprint(), fps[target + i + 1]);
        }
        assert!(p.is_accepting());
    }
}

#[test]
fn clones_are_independent() {
    let g = grammar(JSON_LEFT);
    let mut p = parser(&g);
    push_all(
        &mut p,
        &g,
        "[ N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N",
    );
    let fp = p.state_fingerprint();
    let mut q = p.clone();
    push_all(&mut q, &g, "]");
    assert!(q.is_accepting() && !p.is_accepting());
    assert_eq!(p.state_fingerprint(), fp);
    q.truncate(3);
    push_all(&mut p, &g, ", S ]");
    assert!(p.is_accepting());
    assert_eq!(q.depth(), 3);
    let mut r = q.clone();
    r.pop();
    q.pop();
    assert_eq!(r.state_fingerprint(), q.state_fingerprint());
}

#[test]
fn lazy_fingerprints_match_eager_ones() {
    let g = grammar(JSON_RIGHT);
    let input: Vec<TerminalId> = "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S ]"
        .split_whitespace()
        .map(|n| tid(&g, n))
        .collect();
    let mut eager = parser(&g);
    let mut fps = vec![eager.state_fingerprint()];
    for &t in &input {
        assert!(eager.push(t));
        fps.push(eager.state_fingerprint());
    }
    for skip in [1, 2, 3, 7] {
        let mut lazy = parser(&g);
        for (i, &t) in input.iter().enumerate() {
            assert!(lazy.push(t));
            if (i + 1) % skip == 0 {
                assert_eq!(
                    lazy.state_fingerprint(),
                    fps[i + 1],
                    "after {} terminals",
                    i + 1
                );
            }
        }
        assert_eq!(lazy.state_fingerprint(), fps[input.len()]);
    }
    // A deep dependency chain is computed without recursion.
    let mut deep = parser(&g);
    for _ in 0..100_000 {
        assert!(deep.push(tid(&g, "[")));
    }
    let mut other = deep.clone();
    assert!(deep.push(tid(&g, "N")));
    let fp = deep.state_fingerprint();
    assert!(other.push(tid(&g, "[")) && other.push(tid(&g, "]")));
    assert_eq!(
        other.state_fingerprint(),
        fp,
        "`[^n [ ]` has the future of `[^n N`"
    );
}

#[test]
fn fingerprint_normalises_list_length() {
    for src in [JSON_RIGHT, JSON_LEFT] {
        let g = grammar(src);
        let fp = |input: &str| {
            let mut p = parser(&g);
            push_all(&mut p, &g, input);
            p.state_fingerprint()
        };
        assert_eq!(fp("[ N , N ,"), fp("[ N , N , N ,"), "{src}");
        assert_eq!(fp("[ N , N"), fp("[ S , N , N"));
        // Every pair of an object has the same continuation, first or not.
        assert_eq!(fp("{ S : N , S : [ S"), fp("{ S : N , S : true , S : [ S"));
        assert_eq!(fp("{ S : N , S : [ S"), fp("{ S : [ S"));
        assert_eq!(fp("[ { S : [ N , { S : N"), fp("[ N , { S : [ { S : N"));
        assert_ne!(fp("[ N , N"), fp("[ [ N , N"), "nesting depth matters");
        assert_ne!(fp("[ N"), fp("{ S : N"));
        assert_ne!(fp("[ N"), fp("N"));
    }
}

// ---------------------------------------------------------------------------------------
// Oracle: the grammar's language by set semantics, strings of length <= max_len.

struct Oracle {
    /// Per nonterminal: derivable strings up to max_len.
    lang: Vec<BTreeSet<Vec<u32>>>,
    /// Per nonterminal: prefixes (up to max_len) of derivable strings.
    pref: Vec<BTreeSet<Vec<u32>>>,
    start: usize,
}

impl Oracle {
    fn new(g: &Grammar, max_len: usize) -> Self {
        let n = g.nonterminals.len();
        let mut productive = vec![false; n];
        loop {
            let before = productive.clone();
            for p in &g.productions {
                if p.rhs.iter().all(|s| match s {
                    Symbol::Terminal(_) => true,
                    Symbol::Nonterminal(a) => productive[a.0 as usize],
                }) {
                    productive[p.lhs.0 as usize] = true;
                }
            }
            if productive == before {
                break;
            }
        }
        let concat = |a: &BTreeSet<Vec<u32>>, b: &BTreeSet<Vec<u32>>| {
            let mut out = BTreeSet::new();
            for x in a {
                for y in b {
                    if x.len() + y.len() <= max_len {
                        out.insert([x.as_slice(), y.as_slice()].concat());
                    }
                }
            }
            out
        };
        let term = |t: &TerminalId| BTreeSet::from([vec![t.0]]);
        let mut lang = vec![BTreeSet::new(); n];
        loop {
            let mut changed = false;
            for p in &g.productions {
                let mut acc = BTreeSet::from([vec![]]);
                for s in &p.rhs {
                    let l = match s {
                        Symbol::Terminal(t) => term(t),
                        Symbol::Nonterminal(a) => lang[a.0 as usize].clone(),
                    };
                    acc = concat(&acc, &l);
                }
                for w in acc {
                    changed |= lang[p.lhs.0 as usize].insert(w);
                }
            }
            if !changed {
                break;
            }
        }
        let mut pref: Vec<BTreeSet<Vec<u32>>> = (0..n)
            .map(|a| {
                if productive[a] {
                    BTreeSet::from([vec![]])
                } else {
                    BTreeSet::new()
                }
            })
            .collect();
        loop {
            let mut changed = false;
            for p in &g.productions {
                if !productive[p.lhs.0 as usize] {
                    continue;
                }
                if p.rhs
                    .iter()
                    .any(|s| matches!(s, Symbol::Nonterminal(a) if !productive[a.0 as usize]))
                {
                    continue;
                }
                let mut acc = BTreeSet::from([vec![]]); // L(X1..X_{i-1})
                let mut out = BTreeSet::new();
                for s in &p.rhs {
                    let (l, pr) = match s {
                        Symbol::Terminal(t) => (term(t), BTreeSet::from([vec![], vec![t.0]])),
                        Symbol::Nonterminal(a) => {
                            (lang[a.0 as usize].clone(), pref[a.0 as usize].clone())
                        }
                    };
                    out.extend(concat(&acc, &pr));
                    acc = concat(&acc, &l);
                }
                out.extend(acc);
                for w in out {
                    changed |= pref[p.lhs.0 as usize].insert(w);
                }
            }
            if !changed {
                break;
            }
        }
        Oracle {
            lang,
            pref,
            start: g.start.0 as usize,
        }
    }

    fn viable(&self, w: &[u32]) -> bool {
        self.pref[self.start].contains(w)
    }

    fn accepts(&self, w: &[u32]) -> bool {
        self.lang[self.start].contains(w)
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_grammar(rng: &mut Rng) -> Grammar {
    let nt = 1 + rng.below(4);
    let nterm = 2 + rng.below(2);
    let mut rules = Vec::new();
    for a in 0..nt {
        let mut alts = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let len = rng.below(4);
            let syms: Vec<String> = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        format!("'{}'", (b'a' + rng.below(nterm) as u8) as char)
                    } else {
                        format!("N{}", rng.below(nt))
                    }
                })
                .collect();
            alts.push(if syms.is_empty() {
                "ε".to_string()
            } else {
                syms.join(" ")
            });
        }
        rules.push(format!("N{a} -> {}", alts.join(" | ")));
    }
    // Make sure every terminal exists in the IR (possibly unused).
    rules.push(format!(
        "Z -> {}",
        (0..nterm)
            .map(|i| format!("'{}'", (b'a' + i as u8) as char))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    grammar(&rules.join(";"))
}

const MAX_DEPTH: usize = 5;
const FUTURE_LEN: usize = 3;

/// Depth-first over all terminal strings up to MAX_DEPTH: compare with the oracle at every
/// node, exercise push/pop, and record fingerprint → future signature.
fn explore(
    p: &mut Parser,
    oracle: &Oracle,
    nterm: u32,
    w: &mut Vec<u32>,
    fps: &mut HashMap<u64, BTreeSet<(Vec<u32>, bool)>>,
    src: &str,
) {
    assert_eq!(
        p.is_accepting(),
        oracle.accepts(w),
        "accepting after {w:?} in {src}"
    );
    let expected: Vec<u32> = (0..nterm)
        .filter(|&t| oracle.viable(&[w.as_slice(), &[t]].concat()))
        .collect();
    assert_eq!(
        p.expected().iter().map(|t| t.0).collect::<Vec<_>>(),
        expected,
        "expected after {w:?} in {src}"
    );
    // Future signature for the fingerprint soundness check.
    let mut future = BTreeSet::new();
    let mut stack = vec![vec![]];
    while let Some(v) = stack.pop() {
        let full = [w.as_slice(), &v].concat();
        if !oracle.viable(&full) {
            continue;
        }
        future.insert((v.clone(), oracle.accepts(&full)));
        if v.len() < FUTURE_LEN {
            for t in 0..nterm {
                stack.push([v.as_slice(), &[t]].concat());
            }
        }
    }
    match fps.get(&p.state_fingerprint()) {
        Some(f) => assert_eq!(
            f, &future,
            "equal fingerprints, different futures at {w:?} in {src}"
        ),
        None => {
            fps.insert(p.state_fingerprint(), future);
        }
    }
    if w.len() == MAX_DEPTH {
        return;
    }
    let (fp, exp) = (p.state_fingerprint(), p.expected().clone());
    for t in 0..nterm {
        let after = [w.as_slice(), &[t]].concat();
        assert_eq!(
            p.accepts_after(TerminalId(t)),
            oracle.accepts(&after),
            "accepts_after {after:?} in {src}"
        );
    }
    for t in 0..nterm {
        w.push(t);
        let ok = p.push(TerminalId(t));
        assert_eq!(
            ok,
            expected.contains(&t),
            "push after {:?} in {src}",
            &w[..w.len() - 1]
        );
        if ok {
            explore(p, oracle, nterm, w, fps, src);
            p.pop();
            assert_eq!((p.state_fingerprint(), p.expected()), (fp, &exp));
        }
        w.pop();
    }
}

#[test]
fn random_grammars_agree_with_oracle() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut states = 0usize;
    let mut distinct_fps = 0usize;
    for _ in 0..400 {
        let g = random_grammar(&mut rng);
        let src = format!(
            "{:?}",
            g.productions
                .iter()
                .map(|p| (p.lhs.0, &p.rhs))
                .collect::<Vec<_>>()
        );
        let oracle = Oracle::new(&g, MAX_DEPTH + FUTURE_LEN);
        let mut p = parser(&g);
        let mut fps = HashMap::new();
        explore(
            &mut p,
            &oracle,
            g.terminals.len() as u32,
            &mut Vec::new(),
            &mut fps,
            &src,
        );
        states += 1;
        distinct_fps += fps.len();
    }
    assert!(states == 400 && distinct_fps > 0);
}

/// This thread's CPU time in ns (Linux `schedstat`), so timings on a loaded machine count
/// only the time actually spent running; falls back to wall-clock elsewhere.
fn cpu_ns(wall: std::time::Instant) -> u128 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u128>().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos())
}

/// Timing harness: `cargo test --lib engine::earley::tests::bench_push -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_push() {
    for (name, src) in [("json-right", JSON_RIGHT), ("json-left", JSON_LEFT)] {
        let g = grammar(src);
        let tables = Arc::new(ParserTables::new(&g));
        // A random document-shaped walk: random expected terminals, biased to close.
        let mut rng = Rng(42);
        let mut p = Parser::new(Arc::clone(&tables));
        let mut seq = Vec::new();
        while seq.len() < 200_000 {
            let exp: Vec<TerminalId> = p.expected().iter().collect();
            if exp.is_empty() {
                p = Parser::new(Arc::clone(&tables));
                seq.push(None);
                continue;
            }
            let closing: Vec<TerminalId> = exp
                .iter()
                .copied()
                .filter(|t| matches!(g.terminals[t.0 as usize].name.as_str(), "]" | "}"))
                .collect();
            let opening: Vec<TerminalId> = exp
                .iter()
                .copied()
                .filter(|t| matches!(g.terminals[t.0 as usize].name.as_str(), "[" | "{"))
                .collect();
            let t = if !closing.is_empty() && p.depth() > 300 && rng.below(2) == 0 {
                closing[0]
            } else if !opening.is_empty() && p.depth() < 100 && rng.below(4) == 0 {
                opening[rng.below(opening.len())]
            } else {
                exp[rng.below(exp.len())]
            };
            assert!(p.push(t));
            seq.push(Some(t));
        }
        let origin = std::time::Instant::now();
        let start = cpu_ns(origin);
        let mut p = Parser::new(Arc::clone(&tables));
        let (mut pushes, mut depth_sum) = (0, 0);
        for t in &seq {
            match t {
                Some(t) => {
                    p.push(*t);
                    pushes += 1;
                    depth_sum += p.depth();
                }
                None => p.truncate(0),
            }
        }
        let per_push = (cpu_ns(origin) - start) as f64 / pushes as f64;
        let st = p.stats();
        eprintln!(
            "{name}: per push {:.1} items, {:.2} completions, {:.2} Leo jumps",
            st.items_added as f64 / pushes as f64,
            st.completions as f64 / pushes as f64,
            st.leo_jumps as f64 / pushes as f64
        );
        // push+pop of every expected terminal at each position (the engine's mask pattern)
        let mut p = Parser::new(Arc::clone(&tables));
        let start = cpu_ns(origin);
        let mut probes = 0;
        for t in seq.iter().take(50_000) {
            match t {
                Some(t) => {
                    for e in p.expected().clone().iter() {
                        p.push(e);
                        p.pop();
                        probes += 1;
                    }
                    p.push(*t);
                }
                None => p.truncate(0),
            }
        }
        let per_probe = (cpu_ns(origin) - start) as f64 / probes as f64;
        // Clone (+ first push on the clone) deep inside a long array, the engine's per-token
        // pattern for candidate configurations.
        let mut deep = Parser::new(Arc::clone(&tables));
        let (open, num, comma) = (tid(&g, "["), tid(&g, "N"), tid(&g, ","));
        assert!(deep.push(open) && deep.push(num));
        while deep.depth() < 1000 {
            assert!(deep.push(comma) && deep.push(num));
        }
        let start = cpu_ns(origin);
        for _ in 0..1_000_000 {
            std::hint::black_box(deep.clone());
        }
        let per_clone = (cpu_ns(origin) - start) as f64 / 1_000_000.0;
        let start = cpu_ns(origin);
        for _ in 0..100_000 {
            let mut q = deep.clone();
            q.push(comma);
            std::hint::black_box(&q);
        }
        let per_clone_push = (cpu_ns(origin) - start) as f64 / 100_000.0;
        eprintln!(
            "{name} (thread CPU time): push {per_push:.0} ns ({pushes} pushes, mean depth {:.0}), push+pop {per_probe:.0} ns, \
             at depth {}: clone {per_clone:.0} ns, clone+push {per_clone_push:.0} ns",
            depth_sum as f64 / pushes as f64,
            deep.depth()
        );
    }
}

#[test]
fn clones_work_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Parser>();
    assert_send_sync::<ParserTables>();
    let g = grammar(JSON_RIGHT);
    let mut p = parser(&g);
    push_all(
        &mut p,
        &g,
        "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S",
    );
    // Fingerprints are computed lazily into shared sets: racing threads must agree.
    let fps: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mut q = p.clone();
                scope.spawn(move || {
                    let fp = q.state_fingerprint();
                    q.pop();
                    (fp, q.state_fingerprint())
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                let (a, b) = h.join().expect("thread");
                [a, b]
            })
            .collect()
    });
    let fresh = {
        let mut q = parser(&g);
        push_all(
            &mut q,
            &g,
            "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S",
        );
        let a = q.state_fingerprint();
        q.pop();
        (a, q.state_fingerprint())
    };
    for pair in fps.chunks(2) {
        assert_eq!((pair[0], pair[1]), fresh);
    }
    assert_eq!(p.state_fingerprint(), fresh.0);
}

#[test]
fn long_rule_chains() {
    // Right chain (productivity propagates against rule order) and left chain (one set
    // predicts every nonterminal): built and parsed without recursion.
    let n = 5000;
    let right: Vec<String> = (0..n)
        .map(|i| format!("R{i} -> 'a' R{}", i + 1))
        .chain([format!("R{n} -> 'a'")])
        .collect();
    let g = grammar(&right.join(";"));
    let mut p = parser(&g);
    for _ in 0..=n {
        assert!(!p.is_accepting());
        assert!(p.push(tid(&g, "a")));
    }
    assert!(p.is_accepting() && p.expected().is_empty());
    let left: Vec<String> = (0..n)
        .map(|i| format!("L{i} -> L{} 'b' | 'c'", i + 1))
        .chain([format!("L{n} -> 'a'")])
        .collect();
    let g = grammar(&left.join(";"));
    let mut p = parser(&g);
    assert!(p.push(tid(&g, "a")));
    for _ in 0..n {
        assert!(!p.is_accepting());
        assert!(p.push(tid(&g, "b")));
    }
    assert!(p.is_accepting());
    assert!(accepts(&g, "c b b b") && !accepts(&g, "c c"));
    assert_eq!(p.state_fingerprint(), p.clone().state_fingerprint());
}

/// Textbook Earley recogniser (items with explicit origins, every set closed under
/// predict/complete by iterating to a fixpoint, no Leo, no skip chains): the reference for
/// long inputs, where the set-semantics oracle is too slow.
struct NaiveEarley<'g> {
    g: &'g Grammar,
    /// Per set: (production index, dot, origin).
    sets: Vec<Vec<(usize, usize, usize)>>,
}

impl<'g> NaiveEarley<'g> {
    fn new(g: &'g Grammar) -> Self {
        let mut n = NaiveEarley {
            g,
            sets: vec![Vec::new()],
        };
        for (i, p) in g.productions.iter().enumerate() {
            if p.lhs == g.start {
                n.sets[0].push((i, 0, 0));
            }
        }
        n.close(0);
        n
    }

    fn close(&mut self, k: usize) {
        loop {
            let mut added = Vec::new();
            let set = &self.sets[k];
            for &(p, dot, origin) in set {
                let rhs = &self.g.productions[p].rhs;
                match rhs.get(dot) {
                    Some(Symbol::Nonterminal(b)) => {
                        for (i, q) in self.g.productions.iter().enumerate() {
                            if q.lhs == *b {
                                added.push((i, 0, k));
                            }
                        }
                        // Complete `b` with origin k if it already completed in this set.
                        if set.iter().any(|&(q, d, o)| {
                            o == k
                                && self.g.productions[q].lhs == *b
                                && d == self.g.productions[q].rhs.len()
                        }) {
                            added.push((p, dot + 1, origin));
                        }
                    }
                    Some(Symbol::Terminal(_)) => {}
                    None => {
                        let a = self.g.productions[p].lhs;
                        let src = if origin == k {
                            set.clone()
                        } else {
                            self.sets[origin].clone()
                        };
                        for (q, d, o) in src {
                            if self.g.productions[q].rhs.get(d) == Some(&Symbol::Nonterminal(a)) {
                                added.push((q, d + 1, o));
                            }
                        }
                    }
                }
            }
            let before = self.sets[k].len();
            for it in added {
                if !self.sets[k].contains(&it) {
                    self.sets[k].push(it);
                }
            }
            if self.sets[k].len() == before {
                break;
            }
        }
    }

    fn push(&mut self, t: u32) -> bool {
        let k = self.sets.len() - 1;
        let next: Vec<_> = self.sets[k]
            .iter()
            .filter(|&&(p, d, _)| {
                self.g.productions[p].rhs.get(d) == Some(&Symbol::Terminal(TerminalId(t)))
            })
            .map(|&(p, d, o)| (p, d + 1, o))
            .collect();
        if next.is_empty() {
            return false;
        }
        self.sets.push(next);
        self.close(k + 1);
        true
    }

    fn pop(&mut self) {
        self.sets.pop();
    }

    fn expected(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.sets[self.sets.len() - 1]
            .iter()
            .filter_map(|&(p, d, _)| match self.g.productions[p].rhs.get(d) {
                Some(Symbol::Terminal(t)) => Some(t.0),
                _ => None,
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    fn accepting(&self) -> bool {
        self.sets[self.sets.len() - 1].iter().any(|&(p, d, o)| {
            o == 0
                && self.g.productions[p].lhs == self.g.start
                && d == self.g.productions[p].rhs.len()
        })
    }
}

#[test]
fn long_random_walks_agree_with_textbook_earley() {
    let mut rng = Rng(0x51ed_270b_9e3f_1c05);
    let mut checked = 0;
    let mut leo_jumps = 0;
    while checked < 150 {
        let g = random_grammar(&mut rng);
        let tables = Arc::new(ParserTables::new(&g));
        // Textbook Earley's expected set is only exact when every rule is productive.
        if tables.dropped_productions() != 0 {
            continue;
        }
        checked += 1;
        let nterm = g.terminals.len();
        for _ in 0..4 {
            let mut p = Parser::new(Arc::clone(&tables));
            let mut naive = NaiveEarley::new(&g);
            for step in 0..40 {
                assert_eq!(
                    p.expected().iter().map(|t| t.0).collect::<Vec<_>>(),
                    naive.expected(),
                    "step {step}"
                );
                assert_eq!(p.is_accepting(), naive.accepting(), "step {step}");
                let exp = naive.expected();
                if exp.is_empty() {
                    break;
                }
                // Mostly expected terminals; sometimes an arbitrary one (then both refuse or
                // both accept); sometimes a push/pop round trip.
                let t = if rng.below(5) == 0 {
                    rng.below(nterm) as u32
                } else {
                    exp[rng.below(exp.len())]
                };
                let ok = p.push(TerminalId(t));
                assert_eq!(ok, naive.push(t), "push {t} at step {step}");
                if ok && rng.below(4) == 0 {
                    p.pop();
                    naive.pop();
                }
            }
            leo_jumps += p.stats().leo_jumps;
        }
    }
    assert!(leo_jumps > 0, "the walks exercised Leo records");
}

#[test]
fn random_clone_push_pop_truncate_interleavings() {
    // Several parsers sharing chunks through clones, mutated in random order; each must
    // always equal a parser rebuilt from scratch from its own terminal history.
    let g = grammar(JSON_LEFT);
    let tables = Arc::new(ParserTables::new(&g));
    let mut rng = Rng(0xdead_beef_1234_5678);
    let mut pool: Vec<(Parser, Vec<TerminalId>)> =
        vec![(Parser::new(Arc::clone(&tables)), Vec::new())];
    let mut max_depth = 0;
    for step in 0..3000 {
        let i = rng.below(pool.len());
        match rng.below(30) {
            0 if pool.len() < 8 => {
                let c = pool[i].clone();
                pool.push(c);
            }
            1 if pool.len() > 1 => {
                pool.swap_remove(i);
                continue;
            }
            2 => {
                let d = rng.below(pool[i].1.len() + 1);
                pool[i].0.truncate(d);
                pool[i].1.truncate(d);
            }
            3 | 4 => {
                pool[i].0.pop();
                pool[i].1.pop();
            }
            _ => {
                let exp: Vec<TerminalId> = pool[i].0.expected().iter().collect();
                if !exp.is_empty() {
                    // Prefer opening and continuing over closing so the stacks get deep.
                    let t = exp[rng.below(exp.len())];
                    assert!(pool[i].0.push(t));
                    pool[i].1.push(t);
                }
            }
        }
        let (p, hist) = &pool[i];
        max_depth = max_depth.max(hist.len());
        let mut fresh = Parser::new(Arc::clone(&tables));
        for &t in hist {
            assert!(fresh.push(t));
        }
        assert_eq!(p.depth(), hist.len(), "step {step}");
        assert_eq!(
            (p.expected(), p.is_accepting(), p.state_fingerprint()),
            (
                fresh.expected(),
                fresh.is_accepting(),
                fresh.state_fingerprint()
            ),
            "step {step}"
        );
    }
    assert!(
        max_depth > 3 * CHUNK_SETS,
        "stacks crossed chunk boundaries (max depth {max_depth})"
    );
}
