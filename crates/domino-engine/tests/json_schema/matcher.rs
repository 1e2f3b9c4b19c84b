//! The independent matcher the JSON Schema tests check grammars with.

use super::*;

/// A memoising "all end positions" matcher over a `GrammarDef` (no left recursion needed:
/// schema grammars have none).
pub(crate) struct Matcher<'g> {
    def: &'g GrammarDef,
    dfas: HashMap<usize, (DFA, Cache)>,
}

impl<'g> Matcher<'g> {
    pub(crate) fn new(def: &'g GrammarDef) -> Self {
        Matcher {
            def,
            dfas: HashMap::new(),
        }
    }

    pub(crate) fn accepts(&mut self, input: &[u8]) -> bool {
        let mut memo = HashMap::new();
        let ends = self.rule(self.def.start.0 as usize, input, 0, &mut memo);
        ends.contains(&input.len())
    }

    fn rule(
        &mut self,
        r: usize,
        input: &[u8],
        pos: usize,
        memo: &mut HashMap<(usize, usize), Option<BTreeSet<usize>>>,
    ) -> BTreeSet<usize> {
        match memo.get(&(r, pos)) {
            Some(Some(s)) => return s.clone(),
            Some(None) => return BTreeSet::new(), // cycle without progress
            None => {}
        }
        memo.insert((r, pos), None);
        let def = self.def;
        let ends = self.expr(&def.rules[r].expr, input, pos, memo);
        memo.insert((r, pos), Some(ends.clone()));
        ends
    }

    fn expr(
        &mut self,
        e: &Expr,
        input: &[u8],
        pos: usize,
        memo: &mut HashMap<(usize, usize), Option<BTreeSet<usize>>>,
    ) -> BTreeSet<usize> {
        match e {
            Expr::Empty => BTreeSet::from([pos]),
            Expr::Bytes(b) => {
                if input[pos..].starts_with(b) {
                    BTreeSet::from([pos + b.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Expr::Regex(h) => {
                let key = e as *const Expr as usize;
                let (dfa, cache) = self.dfas.entry(key).or_insert_with(|| {
                    let nfa = regex_automata::nfa::thompson::Compiler::new()
                        .configure(regex_automata::nfa::thompson::Config::new().utf8(false))
                        .build_from_hir(h)
                        .expect("regex compiles");
                    let dfa = DFA::builder()
                        .configure(
                            DFA::config()
                                .cache_capacity(64 << 20)
                                .match_kind(regex_automata::MatchKind::All),
                        )
                        .build_from_nfa(nfa)
                        .expect("lazy DFA builds");
                    let cache = dfa.create_cache();
                    (dfa, cache)
                });
                let mut out = BTreeSet::new();
                let mut s = dfa
                    .start_state(cache, &start::Config::new().anchored(Anchored::Yes))
                    .unwrap();
                for (i, &b) in input.iter().enumerate().skip(pos) {
                    s = dfa.next_state(cache, s, b).unwrap();
                    if s.is_match() {
                        out.insert(i);
                    }
                    if s.is_dead() {
                        return out;
                    }
                }
                s = dfa.next_eoi_state(cache, s).unwrap();
                if s.is_match() {
                    out.insert(input.len());
                }
                out
            }
            Expr::Constrained { hir, constraints } => (pos + 1..=input.len())
                .filter(|&q| common::constrained_match(hir, constraints, &input[pos..q]))
                .collect(),
            Expr::Ref(r) => self.rule(r.0 as usize, input, pos, memo),
            Expr::Seq(parts) => {
                let mut cur = BTreeSet::from([pos]);
                for p in parts {
                    let mut next = BTreeSet::new();
                    for &q in &cur {
                        next.extend(self.expr(p, input, q, memo));
                    }
                    cur = next;
                    if cur.is_empty() {
                        break;
                    }
                }
                cur
            }
            Expr::Alt(alts) => {
                let mut out = BTreeSet::new();
                for a in alts {
                    out.extend(self.expr(a, input, pos, memo));
                }
                out
            }
            Expr::RefPairs(pairs) => self.expr(&Expr::ref_pairs_expanded(pairs), input, pos, memo),
            Expr::Repeat { expr, min, max } => {
                let mut out = BTreeSet::new();
                let mut cur = BTreeSet::from([pos]);
                let mut seen = BTreeSet::new();
                if *min == 0 {
                    out.insert(pos);
                }
                let mut count = 0u32;
                while !cur.is_empty() && max.is_none_or(|m| count < m) {
                    count += 1;
                    let mut next = BTreeSet::new();
                    for &q in &cur {
                        next.extend(self.expr(expr, input, q, memo));
                    }
                    if count >= *min {
                        out.extend(next.iter().copied());
                        // Past the minimum, positions already explored add nothing new.
                        next.retain(|p| seen.insert(*p));
                    }
                    cur = next;
                }
                out
            }
        }
    }
}
