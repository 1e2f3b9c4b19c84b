//! Which terminal can immediately follow which ([`Follow`]): the static over-approximation
//! of the parser that tree builds prune splits with (module `tree`, "Pruning"), also handed
//! to the scanner ([`crate::lexer::Scanner::followed_by`]).

use crate::grammar::fixpoint::least_fixpoint;
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
        let nt = g.nonterminals.len();
        let n = g.terminals.len();
        if n > FOLLOW_MAX_TERMINALS
            || crate::budget::would_exceed(((2 * nt + n) * n.div_ceil(64) * 8) as u64)
        {
            return Follow::all(n);
        }
        let words = n.div_ceil(64).max(1);
        // Nullable: the least fixpoint over the productions without a terminal.
        let nullable = least_fixpoint(
            nt,
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
        let is_nullable =
            |s: &ir::Symbol| matches!(s, ir::Symbol::Nonterminal(x) if nullable[x.0 as usize]);
        // FIRST / LAST sets of nonterminals as bitsets over terminals: direct terminals
        // first, then the union along edges `Y ⊆ X` until nothing changes.
        let propagate = |from_end: bool| -> Vec<u64> {
            let mut sets = vec![0u64; nt * words];
            let mut edges: Vec<Vec<u32>> = vec![Vec::new(); nt];
            for p in &g.productions {
                let l = p.lhs.0 as usize;
                let mut visit = |s: &ir::Symbol| match s {
                    ir::Symbol::Terminal(t) => {
                        sets[l * words + t.0 as usize / 64] |= 1 << (t.0 % 64);
                    }
                    ir::Symbol::Nonterminal(x) => edges[x.0 as usize].push(l as u32),
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
            let mut queued = vec![true; nt];
            let mut queue: Vec<usize> = (0..nt).collect();
            while let Some(x) = queue.pop() {
                if crate::budget::over("follow sets") {
                    break;
                }
                queued[x] = false;
                for &y in &edges[x] {
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
        for p in &g.productions {
            if crate::budget::over("follow sets") {
                break;
            }
            for i in 0..p.rhs.len() {
                let lasts = set_of(&last, words, &p.rhs[i]);
                for j in i + 1..p.rhs.len() {
                    let firsts = set_of(&first, words, &p.rhs[j]);
                    match lasts {
                        Set::One(a) => add(&mut bits, a, &firsts),
                        Set::Row(row) => {
                            for (wi, &word) in row.iter().enumerate() {
                                let mut word = word;
                                while word != 0 {
                                    let a = wi * 64 + word.trailing_zeros() as usize;
                                    word &= word - 1;
                                    add(&mut bits, a, &firsts);
                                }
                            }
                        }
                    }
                    if !is_nullable(&p.rhs[j]) {
                        break;
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

    #[inline]
    pub fn can_follow(&self, a: TerminalId, b: TerminalId) -> bool {
        self.n == 0 || self.bits[a.0 as usize * self.n + b.0 as usize / 64] >> (b.0 % 64) & 1 == 1
    }
}
