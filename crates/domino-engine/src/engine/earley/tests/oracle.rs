//! A set-semantics oracle over random grammars: every prefix's expected set and acceptance,
//! and fingerprint soundness (equal fingerprints, equal futures).

use std::collections::{BTreeSet, HashMap};

use super::*;

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
