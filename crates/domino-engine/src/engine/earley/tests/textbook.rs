//! Long random walks against a textbook Earley recogniser, and random interleavings of
//! clone, push, pop and truncate.

use std::sync::Arc;

use super::*;

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
