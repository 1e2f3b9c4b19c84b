//! The grammar tables the parser reads: dotted items with their skip chains and the
//! per-nonterminal prediction slices, computed once per grammar and shared by every parser.

use crate::grammar::fixpoint::least_fixpoint;
use crate::grammar::ir::{self, Symbol};

/// Key of a "complete" dotted item (nothing after the dot).
pub(super) const END: u32 = u32::MAX;

/// What the tables know about one dotted item.
#[derive(Clone, Copy, Debug)]
pub(super) struct DotInfo {
    /// Symbol after the dot as a bucket key: terminal `t` → `t`, nonterminal `A` →
    /// `num_terminals + A`, nothing (complete) → [`END`].
    pub(super) key: u32,
    /// The production's left-hand side (nonterminal index, the synthetic start included).
    pub(super) lhs: u32,
    /// Last dotted id of this production reachable from here by skipping nullable
    /// nonterminals (the Aycock–Horspool skip chain is `self..=chain_end`).
    pub(super) chain_end: u32,
    /// The symbol after the dot is the production's last symbol (Leo candidate).
    pub(super) last: bool,
}

/// Grammar analysis shared by all parsers of one grammar.
#[derive(Debug)]
pub struct ParserTables {
    pub(super) num_terminals: usize,
    /// Nonterminals of the grammar plus the synthetic start `S'` (the last one).
    pub(super) num_nonterminals: usize,
    /// Index of `S' → S`'s left-hand side.
    pub(super) accept_nt: u32,
    /// Bitset words per terminal set.
    pub(super) words: usize,
    pub(super) dots: Vec<DotInfo>,
    /// Per nonterminal: `own_items[own_ranges[A]]` are the dotted ids (skip chains expanded,
    /// complete ones left out) that predicting `A` adds.
    own_items: Vec<u32>,
    own_ranges: Vec<(u32, u32)>,
    /// Per nonterminal: the distinct nonterminals its predicted items wait on (what predicting
    /// it predicts next). Direct links only, so the tables stay linear in the grammar size.
    left_nts: Vec<u32>,
    left_ranges: Vec<(u32, u32)>,
    pub(super) nullable: Vec<bool>,
    /// Productions dropped because they use an unproductive nonterminal.
    dropped_productions: usize,
}

impl ParserTables {
    /// Analyse `grammar`: drop productions over unproductive nonterminals, compute nullable
    /// symbols, flatten (production, dot) pairs, skip chains and prediction links.
    ///
    /// # Panics
    /// If the grammar violates the IR's ID invariant (a symbol or `start` out of range); the
    /// front ends never produce such a grammar.
    pub fn new(grammar: &ir::Grammar) -> Self {
        let num_terminals = grammar.terminals.len();
        let n0 = grammar.nonterminals.len();
        assert!(
            (grammar.start.0 as usize) < n0,
            "grammar start {:?} out of range",
            grammar.start
        );
        let accept_nt = n0 as u32;
        let num_nonterminals = n0 + 1;
        let check = |s: &Symbol| match *s {
            Symbol::Terminal(t) => assert!(
                (t.0 as usize) < num_terminals,
                "terminal {t:?} out of range"
            ),
            Symbol::Nonterminal(a) => {
                assert!((a.0 as usize) < n0, "nonterminal {a:?} out of range")
            }
        };
        for p in &grammar.productions {
            assert!(
                (p.lhs.0 as usize) < n0,
                "production lhs {:?} out of range",
                p.lhs
            );
            p.rhs.iter().for_each(check);
        }

        // Productive nonterminals (least fixpoint), then keep only productions over them.
        let productive = least_fixpoint(
            n0,
            grammar.productions.iter().map(|p| {
                let nts = p.rhs.iter().filter_map(|s| match *s {
                    Symbol::Terminal(_) => None,
                    Symbol::Nonterminal(a) => Some(a.0),
                });
                (p.lhs.0, nts)
            }),
        );
        let sym_ok = |s: &Symbol| match *s {
            Symbol::Terminal(_) => true,
            Symbol::Nonterminal(a) => productive[a.0 as usize],
        };
        // Productions as (lhs, rhs keys); the synthetic `S' → S` last.
        let nt_key = |a: u32| num_terminals as u32 + a;
        let sym_key = |s: &Symbol| match *s {
            Symbol::Terminal(t) => t.0,
            Symbol::Nonterminal(a) => nt_key(a.0),
        };
        // Kept productions as (lhs, range of `keys`), the right-hand sides' keys in one flat
        // array (a vector per production was thousands of small allocations on big schemas).
        let mut prods: Vec<(u32, std::ops::Range<usize>)> =
            Vec::with_capacity(grammar.productions.len() + 1);
        let mut keys: Vec<u32> = Vec::with_capacity(
            grammar
                .productions
                .iter()
                .map(|p| p.rhs.len())
                .sum::<usize>()
                + 1,
        );
        let mut dropped_productions = 0;
        for p in &grammar.productions {
            if productive[p.lhs.0 as usize] && p.rhs.iter().all(sym_ok) {
                let start = keys.len();
                keys.extend(p.rhs.iter().map(sym_key));
                prods.push((p.lhs.0, start..keys.len()));
            } else {
                dropped_productions += 1;
            }
        }
        if productive[grammar.start.0 as usize] {
            keys.push(nt_key(grammar.start.0));
            prods.push((accept_nt, keys.len() - 1..keys.len()));
        }
        let rhs_of = |r: &std::ops::Range<usize>| &keys[r.clone()];

        // Nullable nonterminals (least fixpoint).
        // (Productions with a terminal can never derive ε.)
        let nullable = least_fixpoint(
            num_nonterminals,
            prods
                .iter()
                .filter(|(_, r)| rhs_of(r).iter().all(|&k| k >= num_terminals as u32))
                .map(|(lhs, r)| (*lhs, rhs_of(r).iter().map(|&k| k - num_terminals as u32))),
        );
        let key_nullable = |k: u32| {
            k != END && k >= num_terminals as u32 && nullable[(k - num_terminals as u32) as usize]
        };

        // Flatten dotted items; skip chains computed right to left.
        // (Sized up front: growing it was ~3 % of compiling a large schema.)
        let mut dots: Vec<DotInfo> = Vec::with_capacity(keys.len() + prods.len());
        let mut prod_base: Vec<u32> = Vec::with_capacity(prods.len());
        for (lhs, r) in &prods {
            let rhs = rhs_of(r);
            let base = dots.len() as u32;
            prod_base.push(base);
            let n = rhs.len();
            for (dot, key) in rhs.iter().copied().chain([END]).enumerate() {
                dots.push(DotInfo {
                    key,
                    lhs: *lhs,
                    chain_end: base + dot as u32,
                    last: dot + 1 == n,
                });
            }
            for dot in (0..n).rev() {
                let i = (base as usize) + dot;
                if key_nullable(dots[i].key) {
                    dots[i].chain_end = dots[i + 1].chain_end;
                }
            }
        }

        // Per-nonterminal predicted items. The productions of each nonterminal, in order, as
        // one array by counting sort (one vector per nonterminal was thousands of small
        // allocations).
        let mut first = vec![0usize; num_nonterminals + 1];
        for (lhs, _) in &prods {
            first[*lhs as usize + 1] += 1;
        }
        for a in 0..num_nonterminals {
            first[a + 1] += first[a];
        }
        let mut prods_by_lhs = vec![0usize; prods.len()];
        let mut fill = first.clone();
        for (i, (lhs, _)) in prods.iter().enumerate() {
            prods_by_lhs[fill[*lhs as usize]] = i;
            fill[*lhs as usize] += 1;
        }
        let mut own_items = Vec::with_capacity(dots.len());
        let mut own_ranges = Vec::with_capacity(num_nonterminals);
        for a in 0..num_nonterminals {
            let start = own_items.len() as u32;
            for &p in &prods_by_lhs[first[a]..first[a + 1]] {
                let base = prod_base[p];
                for d in base..=dots[base as usize].chain_end {
                    if dots[d as usize].key != END {
                        own_items.push(d);
                    }
                }
            }
            own_ranges.push((start, own_items.len() as u32));
        }

        // Prediction links: the nonterminals each nonterminal's predicted items wait on.
        let mut left_nts = Vec::new();
        let mut left_ranges = Vec::with_capacity(num_nonterminals);
        let mut mark = vec![u32::MAX; num_nonterminals];
        for (a, &(s, e)) in own_ranges.iter().enumerate() {
            let start = left_nts.len() as u32;
            for &d in &own_items[s as usize..e as usize] {
                let k = dots[d as usize].key;
                if k >= num_terminals as u32 {
                    let b = (k - num_terminals as u32) as usize;
                    if b != a && mark[b] != a as u32 {
                        mark[b] = a as u32;
                        left_nts.push(b as u32);
                    }
                }
            }
            left_ranges.push((start, left_nts.len() as u32));
        }

        ParserTables {
            num_terminals,
            num_nonterminals,
            accept_nt,
            words: num_terminals.div_ceil(64).max(1),
            dots,
            own_items,
            own_ranges,
            left_nts,
            left_ranges,
            nullable,
            dropped_productions,
        }
    }

    pub fn num_terminals(&self) -> usize {
        self.num_terminals
    }

    /// Nonterminals of the grammar, not counting the synthetic start.
    pub fn num_nonterminals(&self) -> usize {
        self.num_nonterminals - 1
    }

    /// Number of flattened (production, dot) items.
    pub fn num_dotted(&self) -> usize {
        self.dots.len()
    }

    /// Per nonterminal of the grammar (then the synthetic start): whether it derives the
    /// empty string.
    pub(crate) fn nullable(&self) -> &[bool] {
        &self.nullable
    }

    /// Whether the grammar's nonterminal `a` derives the empty string.
    pub fn is_nullable(&self, a: ir::NonterminalId) -> bool {
        self.nullable.get(a.0 as usize).copied().unwrap_or(false)
    }

    /// Productions ignored because they use a nonterminal that derives no terminal string.
    pub fn dropped_productions(&self) -> usize {
        self.dropped_productions
    }

    pub(super) fn own(&self, a: u32) -> &[u32] {
        let (s, e) = self.own_ranges[a as usize];
        &self.own_items[s as usize..e as usize]
    }

    pub(super) fn left_of(&self, a: u32) -> &[u32] {
        let (s, e) = self.left_ranges[a as usize];
        &self.left_nts[s as usize..e as usize]
    }
}
