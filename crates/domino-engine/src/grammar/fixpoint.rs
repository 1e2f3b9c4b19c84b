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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::Rng;

    /// The definition: add every rule's left-hand side whose nonterminals are all in, until
    /// nothing changes.
    fn naive(n: usize, rules: &[(u32, Vec<u32>)]) -> Vec<bool> {
        let mut x = vec![false; n];
        loop {
            let mut changed = false;
            for (lhs, nts) in rules {
                if !x[*lhs as usize] && nts.iter().all(|&b| x[b as usize]) {
                    x[*lhs as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                return x;
            }
        }
    }

    fn check(n: usize, rules: &[(u32, Vec<u32>)]) {
        let got = least_fixpoint(n, rules.iter().map(|(l, v)| (*l, v.iter().copied())));
        assert_eq!(got, naive(n, rules), "rules {rules:?}");
    }

    #[test]
    fn the_least_fixpoint_is_the_definition_on_random_rule_sets() {
        let mut rng = Rng(0x5eed_f1c5);
        for case in 0..3000 {
            let n = 1 + rng.below(40);
            let count = rng.below(3 * n + 1);
            let rules: Vec<(u32, Vec<u32>)> = (0..count)
                .map(|_| {
                    let len = rng.below(4);
                    (
                        rng.below(n) as u32,
                        (0..len).map(|_| rng.below(n) as u32).collect(),
                    )
                })
                .collect();
            check(n, &rules);
            if case % 10 == 0 {
                check(n, &[]);
            }
        }
    }

    #[test]
    fn chains_numbered_against_any_order_reach_the_same_answer() {
        // A chain whose links alternate between the front and the back of the rule list (an
        // order in which repeated passes over the rules would settle one link per pass).
        let n = 64;
        let mut rules: Vec<(u32, Vec<u32>)> = vec![(0, vec![])];
        let (mut front, mut back) = (Vec::new(), Vec::new());
        for a in 1..n as u32 {
            let rule = (a, vec![a - 1, a - 1]);
            if a % 2 == 0 {
                front.push(rule)
            } else {
                back.push(rule)
            }
        }
        front.reverse();
        let rules_all: Vec<_> = front
            .into_iter()
            .chain(rules.drain(..))
            .chain(back.into_iter().rev())
            .collect();
        check(n, &rules_all);
        // And one nonterminal that can never be in: it needs itself.
        let mut with_loop = rules_all.clone();
        with_loop.push((5, vec![63]));
        with_loop.push((63, vec![63]));
        check(n, &with_loop);
    }
}
