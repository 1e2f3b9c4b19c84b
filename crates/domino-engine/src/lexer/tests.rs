//! Tests for the scanner: live and accepting sets, pruning, lazy state construction against
//! an eager subset construction, concurrent building, the state limit, naming by content.

use super::*;
use regex_syntax::hir::Hir;

fn grammar(terms: &[Hir]) -> ir::Grammar {
    ir::Grammar {
        terminals: terms
            .iter()
            .enumerate()
            .map(|(i, h)| ir::Terminal::new(format!("t{i}"), h.clone(), None))
            .collect(),
        nonterminals: vec!["s".into()],
        productions: vec![],
        start: ir::NonterminalId(0),
        warnings: vec![],
        lexing: Default::default(),
    }
}

use crate::grammar::hir_key::parse_bytes as re;

#[test]
fn live_and_accepting_sets_follow_the_terminals() {
    let g = grammar(&[Hir::literal(*b"if"), re("[a-z]+"), re("[0-9]+")]);
    let sc = Scanner::new(&g).unwrap();
    assert!(sc.accepting(Scanner::START).is_empty());
    let i = sc.walk(Scanner::START, b"i").unwrap();
    assert_eq!(
        sc.live_terminals(sc.live_set(i)),
        &[ir::TerminalId(0), ir::TerminalId(1)]
    );
    assert_eq!(sc.accepting(i), &[ir::TerminalId(1)]);
    let iff = sc.walk(Scanner::START, b"if").unwrap();
    assert_eq!(sc.accepting(iff), &[ir::TerminalId(0), ir::TerminalId(1)]);
    let ifx = sc.walk(Scanner::START, b"ifx").unwrap();
    assert_eq!(sc.live_terminals(sc.live_set(ifx)), &[ir::TerminalId(1)]);
    assert!(sc.walk(Scanner::START, b"i1").is_none());
    assert_eq!(
        sc.accepting(sc.walk(Scanner::START, b"42").unwrap()),
        &[ir::TerminalId(2)]
    );
}

#[test]
fn every_match_counts_not_only_the_preferred_alternative() {
    let g = grammar(&[re("[0-9]|[1-9][0-9]*")]);
    let sc = Scanner::new(&g).unwrap();
    let s = sc.walk(Scanner::START, b"10").expect("\"10\" is a prefix");
    assert_eq!(sc.accepting(s), &[ir::TerminalId(0)]);
}

#[test]
fn dead_ends_are_pruned_and_utf8_classes_are_bytes() {
    // "ab" then "c" required: after "ab" only the full "abc" is live.
    let g = grammar(&[re("abc"), re("é")]);
    let sc = Scanner::new(&g).unwrap();
    assert!(sc.walk(Scanner::START, b"abd").is_none());
    let half = sc.walk(Scanner::START, &"é".as_bytes()[..1]).unwrap();
    assert!(sc.accepting(half).is_empty());
    assert_eq!(
        sc.accepting(sc.walk(half, &"é".as_bytes()[1..]).unwrap()),
        &[ir::TerminalId(1)]
    );
}

/// The classic eager subset construction, written independently: the number of states
/// reachable from START and, per state, its (terminal, DFA state) pairs.
fn eager_states(dfas: &[TerminalDfa]) -> Vec<Vec<(u32, u32)>> {
    let start: Vec<(u32, u32)> = (0..dfas.len() as u32).map(|t| (t, 0)).collect();
    let mut seen = std::collections::HashSet::from([start.clone()]);
    let mut order = vec![start];
    let mut i = 0;
    while i < order.len() {
        for b in 0..=255u8 {
            let next: Vec<(u32, u32)> = order[i]
                .iter()
                .filter_map(|&(t, s)| {
                    let n = dfas[t as usize].next(s, b);
                    (n != DEAD).then_some((t, n))
                })
                .collect();
            if !next.is_empty() && seen.insert(next.clone()) {
                order.push(next);
            }
        }
        i += 1;
    }
    order
}

fn dfas_of(terms: &[Hir]) -> Vec<TerminalDfa> {
    terms.iter().map(|h| TerminalDfa::new(h).unwrap()).collect()
}

#[test]
fn lazy_exploration_finds_exactly_the_eager_states() {
    let terms = [
        re("[a-z]{1,6}"),
        re("[a-f0-9]{2,8}"),
        re("0x[0-9a-f]+"),
        Hir::literal(*b"face"),
        re("\"[^\"]{0,5}\""),
    ];
    let dfas = dfas_of(&terms);
    let want = eager_states(&dfas);
    let sc = Scanner::from_dfas(dfas).unwrap();
    assert_eq!(sc.num_states(), 1, "nothing is built before it is needed");
    assert_eq!(sc.explore(usize::MAX), (want.len(), true));
    let mut got: Vec<Vec<(u32, u32)>> = (0..sc.num_states() as u32)
        .map(|q| {
            sc.components(ScanState(q))
                .iter()
                .map(|&c| {
                    let (t, s) = sc.component(c);
                    (t.0, s)
                })
                .collect()
        })
        .collect();
    let mut want = want;
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // A bounded exploration stops early and says so.
    let sc = Scanner::from_dfas(dfas_of(&terms)).unwrap();
    let (n, complete) = sc.explore(10);
    assert!(!complete && n > 10 && n < want.len());
}

#[test]
fn threads_building_states_at_once_agree_with_one_thread() {
    let terms = [
        re("[a-z]{1,12}"),
        re("[a-m0-9]{3,9}"),
        re("[0-9]+(\\.[0-9]{1,4})?"),
    ];
    let shared = Scanner::from_dfas(dfas_of(&terms)).unwrap();
    let texts: Vec<Vec<u8>> = (0..400u32)
        .map(|i| {
            (0..(i % 13 + 1))
                .map(|j| b"abcmz0189.q"[((i * 7 + j * 3) % 11) as usize])
                .collect()
        })
        .collect();
    // Each thread walks every text (in a different order) and records where it lands,
    // as the components of the final state (ids may differ between scanners).
    let run = |sc: &Scanner, order: usize| -> Vec<Option<Vec<ComponentId>>> {
        let mut out = vec![None; texts.len()];
        for k in 0..texts.len() {
            let i = (k * [1, 3, 7, 11][order]) % texts.len(); // coprime to 400: a permutation
            out[i] = sc
                .walk(Scanner::START, &texts[i])
                .map(|q| sc.components(q).to_vec());
        }
        out
    };
    let results: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|o| {
                s.spawn({
                    let shared = &shared;
                    let run = &run;
                    move || run(shared, o)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let alone = Scanner::from_dfas(dfas_of(&terms)).unwrap();
    let want = run(&alone, 0);
    for r in results {
        assert_eq!(r, want);
    }
    assert_eq!(shared.num_states(), alone.num_states());
}

#[test]
fn a_state_beyond_the_limit_reads_as_dead_and_is_reported() {
    let sc = Scanner::build(dfas_of(&[re("[a-z]{1,40}")]), None, 5).unwrap();
    assert!(sc.walk(Scanner::START, b"abcd").is_some());
    assert!(!sc.overflowed());
    assert!(
        sc.walk(Scanner::START, b"abcde").is_none(),
        "the sixth state is refused"
    );
    assert!(sc.overflowed());
    assert_eq!(sc.num_states(), 5);
}

#[test]
fn states_and_live_sets_can_be_named_by_content() {
    let sc = Scanner::from_dfas(dfas_of(&[Hir::literal(*b"if"), re("[a-z]+")])).unwrap();
    let i = sc.walk(Scanner::START, b"i").unwrap();
    let comps = sc.components(i).to_vec();
    assert_eq!(sc.state_of_components(&comps), Some(i));
    // Not a state: unsorted, duplicate terminal, out of range, empty.
    assert_eq!(sc.state_of_components(&[comps[1], comps[0]]), None);
    assert_eq!(sc.state_of_components(&[]), None);
    assert_eq!(sc.state_of_components(&[ComponentId(10_000)]), None);
    assert_eq!(
        sc.live_set_of(sc.live_terminals(sc.live_set(i))),
        Some(sc.live_set(i))
    );
    assert_eq!(
        sc.live_set_of(&[ir::TerminalId(1), ir::TerminalId(0)]),
        None
    );
    assert_eq!(sc.live_set_of(&[ir::TerminalId(2)]), None);
}

/// The byte classes by partition refinement equal the obvious definition — bytes with the
/// same value in every distinguishing row of every terminal DFA share a class (numbered by
/// first byte) — and are sound: bytes of one class have the same target in every state.
#[test]
fn byte_classes_equal_per_byte_signatures() {
    let sets: Vec<Vec<Hir>> = vec![
        vec![
            re("[a-z]{1,6}"),
            re("[0-9]+"),
            re("\"([^\"\\\\]|\\\\.)*\""),
            re("true"),
        ],
        vec![
            re("[ \\t\\n]{1,20}"),
            re("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?"),
        ],
        vec![re("x")],
        vec![re("(?-u:[\\x00-\\xff])"), re("ab|ac|b[c-f]")],
    ];
    for terms in sets {
        // Tables (every state known) and, below, lazy DFAs.
        let dfas: Vec<TerminalDfa> = terms
            .iter()
            .map(|h| TerminalDfa::eager(h).unwrap())
            .collect();
        let mut sigs: Vec<Vec<u32>> = Vec::new();
        let mut want = [0u8; 256];
        for b in 0..=255u8 {
            let sig: Vec<u32> = dfas
                .iter()
                .flat_map(|d| {
                    (0..d.distinguishing_rows() as u32).map(move |r| d.distinguishing(r, b))
                })
                .collect();
            want[b as usize] = match sigs.iter().position(|x| *x == sig) {
                Some(i) => i as u8,
                None => {
                    sigs.push(sig);
                    sigs.len() as u8 - 1
                }
            };
        }
        let (got, reps) = byte_classes(&dfas);
        assert_eq!(got, want, "{terms:?}");
        assert_eq!(reps.len(), sigs.len());
        for (c, &b) in reps.iter().enumerate() {
            assert_eq!(got[b as usize] as usize, c);
        }
        for d in &dfas {
            for st in 0..d.num_states() as u32 {
                for b in 0..=255u8 {
                    let rep = reps[got[b as usize] as usize];
                    assert_eq!(d.next(st, b), d.next(st, rep), "{terms:?}: byte {b}");
                }
            }
        }
        // Lazy DFAs split bytes by their NFAs' classes, which may be finer, never coarser.
        let (lazy, _) = byte_classes(&dfas_of(&terms));
        for a in 0..256 {
            for b in 0..256 {
                if lazy[a] == lazy[b] {
                    assert_eq!(want[a], want[b], "{terms:?}: bytes {a} and {b}");
                }
            }
        }
    }
}
