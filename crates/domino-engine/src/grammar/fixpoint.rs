//! Flat adjacency lists and the least fixpoint over grammar rules, shared by lowering's
//! cleanup (productive nonterminals) and the parser tables (productive and nullable ones).
//!
//! A big schema's grammar has tens of thousands of nonterminals and productions: a `Vec` per
//! rule and per nonterminal was most of computing these sets, so both live in flat arrays.

/// Rows of `u32`s in one array (compressed sparse rows): `row(i)` is what `pairs` gave for
/// `i`, in order.
pub(crate) struct Csr {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Csr {
    /// Rows `0..rows` from `(row, item)` pairs (read twice: sizes, then items).
    pub(crate) fn new(rows: usize, pairs: impl Iterator<Item = (usize, u32)> + Clone) -> Self {
        let mut start = vec![0u32; rows + 1];
        for (r, _) in pairs.clone() {
            start[r + 1] += 1;
        }
        for i in 0..rows {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut items = vec![0u32; start[rows] as usize];
        for (r, x) in pairs {
            items[fill[r] as usize] = x;
            fill[r] += 1;
        }
        Csr { start, items }
    }

    pub(crate) fn row(&self, i: usize) -> &[u32] {
        &self.items[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// The least set `X` of the nonterminals `0..n` such that `lhs ∈ X` whenever all of a rule's
/// listed nonterminals are in `X` (rules given as `(lhs, nonterminals of the rhs)`, a
/// nonterminal listed once per occurrence). Worklist with per-rule counters: linear in the
/// grammar size, whatever the dependency order.
pub(crate) fn least_fixpoint<I, J>(n: usize, rules: I) -> Vec<bool>
where
    I: Iterator<Item = (u32, J)>,
    J: Iterator<Item = u32>,
{
    // One pass over the rules (each pass ran their filters over every right-hand side
    // again: three of them were 8 % of compiling the slowest schemas, four fixpoints a
    // compile): each rule's left-hand side, how many nonterminals it waits on, and every
    // use as (nonterminal, rule), grouped by nonterminal afterwards.
    // (Sized from the rule count: growing these was a quarter of the cost.)
    let rules_hint = rules.size_hint().0;
    let mut lhs_of: Vec<u32> = Vec::with_capacity(rules_hint);
    let mut waiting: Vec<u32> = Vec::with_capacity(rules_hint);
    let mut used: Vec<(u32, u32)> = Vec::with_capacity(2 * rules_hint);
    for (r, (lhs, nts)) in rules.enumerate() {
        let before = used.len();
        used.extend(nts.map(|b| (b, r as u32)));
        lhs_of.push(lhs);
        waiting.push((used.len() - before) as u32);
    }
    let uses = Csr::new(n, used.iter().map(|&(b, r)| (b as usize, r)));
    drop(used);
    let mut marked = vec![false; n];
    let mut work = Vec::new();
    for (r, &lhs) in lhs_of.iter().enumerate() {
        if waiting[r] == 0 && !marked[lhs as usize] {
            marked[lhs as usize] = true;
            work.push(lhs);
        }
    }
    while let Some(b) = work.pop() {
        for &r in uses.row(b as usize) {
            waiting[r as usize] -= 1;
            let lhs = lhs_of[r as usize] as usize;
            if waiting[r as usize] == 0 && !marked[lhs] {
                marked[lhs] = true;
                work.push(lhs as u32);
            }
        }
    }
    marked
}
