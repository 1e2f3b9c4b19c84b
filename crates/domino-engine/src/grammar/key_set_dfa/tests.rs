use super::*;
use crate::grammar::dfa::tests::assert_equivalent;
use crate::grammar::dfa::{KEY_SET_STATE, TerminalDfa};
use crate::grammar::json_schema::keys::except_hir;
use crate::grammar::regex_hir::RegexHir;
use crate::test_rng::Rng;
use std::sync::Arc;

/// Whether the trie's DFA and the eager DFA of `except_hir(names)` accept the same strings
/// (`dfa::tests::assert_equivalent`), and the trie DFA's byte classes are sound: bytes of one
/// class step alike from every state.
fn assert_same_language(names: &[Vec<char>]) {
    let dfa = Arc::new(KeySetDfa::new(names).expect("ordinary names"));
    let reference = TerminalDfa::eager(&except_hir(names)).expect("the HIR's DFA");
    assert_equivalent(
        &TerminalDfa::key_set(dfa.clone()),
        &reference,
        &format!("{names:?}"),
    );
    let mut representative = [None::<u8>; 256];
    for b in 0..=255u8 {
        representative[dfa.class(b) as usize].get_or_insert(b);
    }
    for s in 0..dfa.num_states() as u32 {
        for b in 0..=255u8 {
            let rep = representative[dfa.class(b) as usize].unwrap();
            assert_eq!(
                dfa.next(s, rep),
                dfa.next(s, b),
                "{names:?}: bytes {b:#04x} and {rep:#04x} share a class but not a transition"
            );
        }
    }
    assert!(dfa.num_classes() <= 256);
}

/// `names` as a key set takes them: characters, sorted, deduplicated.
pub(crate) fn sorted(names: &[&str]) -> Vec<Vec<char>> {
    let mut v: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn equals_the_hir_on_hand_picked_sets() {
    for names in [
        vec![],
        vec![""],
        vec!["a"],
        vec!["", "a"],
        vec!["a", "ab", "abc"],
        vec!["name", "namespace", "labels", "annotations"],
        vec!["$schema", "x-kubernetes-int-or-string", " ", "~\u{7f}"],
        vec!["0", "1", "u", "b", "f", "n", "r", "t", "d"],
    ] {
        assert_same_language(&sorted(&names));
    }
}

#[test]
fn equals_the_hir_on_random_sets() {
    // Letters that matter to the fixed states (escape letters, hex digits) and others.
    let alphabet: Vec<char> = "abdfnrtuAF019 -_.$~\u{7f}".chars().collect();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..200 {
        let n = rng.below(6);
        let names: Vec<String> = (0..n)
            .map(|_| {
                let len = rng.below(5);
                (0..len)
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect()
            })
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_same_language(&sorted(&names));
    }
}

#[test]
fn names_with_other_characters_keep_the_hir() {
    for name in ["a/b", "é", "a\"", "a\\", "tab\t", "\u{1f}"] {
        assert!(
            KeySetDfa::new(&sorted(&[name])).is_none(),
            "{name:?} has a character the HIR spells specially"
        );
    }
}

#[test]
fn a_key_set_terminal_gets_the_trie_dfa() {
    let names = sorted(&["alpha", "beta"]);
    let keys = RegexHir::key_set(names.clone()).expect("ordinary names");
    let t = crate::grammar::ir::Terminal::new("key".into(), keys.clone(), None);
    let dfa = TerminalDfa::for_terminal(&t).unwrap();
    let is_trie = |d: &TerminalDfa| d.state_key(0).is_some_and(|k| k[0] == KEY_SET_STATE);
    assert!(is_trie(&dfa), "the trie's DFA");
    // `"gamma"` is not a name, `"alpha"` is.
    let run = |s: &str| {
        s.bytes()
            .try_fold(0u32, |q, b| Some(dfa.next(q, b)).filter(|&t| t != DEAD))
            .is_some_and(|q| dfa.is_accepting(q))
    };
    assert!(run("\"gamma\""));
    assert!(run("\"alph\""));
    assert!(!run("\"alpha\""));
    // The same language as the HIR's own DFA (which reading the HIR builds).
    let reference = TerminalDfa::eager(&except_hir(&names)).unwrap();
    assert_equivalent(&dfa, &reference, "alpha, beta");
    // A HIR that is not a key set gets its lazy DFA, even when it is the same HIR.
    let built = crate::grammar::ir::Terminal::new("key".into(), except_hir(&names), None);
    let lazy = TerminalDfa::for_terminal(&built).unwrap();
    assert!(!is_trie(&lazy));
}
