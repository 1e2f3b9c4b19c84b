//! The `Constraint` API beyond masks: thread safety, cheap independent clones, draft
//! contexts, precomputation, errors, and a Gemma (262k SentencePiece vocabulary) oracle check.

mod common;

use domino_engine::engine::trie::VocabTrie;
use domino_engine::engine::{CompiledGrammar, Constraint, EngineError, Options};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary, tokenizer_json};
use std::sync::Arc;

fn json_grammar() -> Arc<CompiledGrammar> {
    let text =
        std::fs::read_to_string(common::workspace_root().join("grammars/json.gbnf")).unwrap();
    CompiledGrammar::new(
        GrammarSource::Gbnf(text)
            .compile(&Default::default())
            .unwrap(),
    )
    .unwrap()
}

fn smollm2() -> Arc<Vocabulary> {
    Arc::new(
        tokenizer_json::load(&common::shared(
            "tokenizers/SmolLM2-135M-Instruct.tokenizer.json",
        ))
        .unwrap(),
    )
}

#[test]
fn shared_types_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<CompiledGrammar>();
    check::<Constraint>();
    check::<Vocabulary>();
}

#[test]
fn clones_are_independent_and_share_trees() {
    let (g, v) = (json_grammar(), smollm2());
    let mut a = Constraint::new(&g, &v, Options::default()).unwrap();
    a.commit_bytes(b"{\"a\": [1").unwrap();
    let mut b = a.clone();
    b.commit_bytes(b"]}").unwrap();
    assert!(b.is_accepting() && !a.is_accepting());
    assert_eq!(a.num_committed(), 1);
    assert!(Arc::ptr_eq(a.tree_cache(), b.tree_cache()));
    // A second constraint of the same (grammar, vocabulary) pair reuses the cache too.
    let c = Constraint::new(&g, &v, Options::default()).unwrap();
    assert!(Arc::ptr_eq(a.tree_cache(), c.tree_cache()));
}

#[test]
fn draft_context_ignores_history_that_does_not_matter() {
    let (g, v) = (json_grammar(), smollm2());
    let ctx = |text: &str| {
        let mut c = Constraint::new(&g, &v, Options::default()).unwrap();
        c.commit_bytes(text.as_bytes()).unwrap();
        c.draft_context()
    };
    assert_eq!(ctx("{\"a\": [1, 2, "), ctx("{\"a\": [1, 2, 3, "));
    assert_ne!(ctx("{\"a\": [1, 2, "), ctx("{\"a\": "));
}

#[test]
fn precompute_builds_every_tree_masks_need() {
    let (g, v) = (json_grammar(), smollm2());
    let mut c = Constraint::new(&g, &v, Options::default()).unwrap();
    let n = c.tree_cache().precompute_all(&g);
    assert!(n > 0);
    let before = c.tree_cache().stats();
    let mut mask = TokenSet::new(v.len());
    for t in v
        .tokenize("{\"name\": [1.5e3, true, null, \"x\\ny\"], \"b\": {}}")
        .unwrap()
    {
        c.compute_mask(&mut mask);
        assert!(mask.contains(t));
        c.commit(t).unwrap();
    }
    let after = c.tree_cache().stats();
    assert_eq!(before.trees, after.trees, "no tree built after precompute");
}

#[test]
fn errors_are_values() {
    let (g, v) = (json_grammar(), smollm2());
    let mut c = Constraint::new(&g, &v, Options::default()).unwrap();
    assert_eq!(
        c.commit(TokenId(u32::MAX)),
        Err(EngineError::TokenOutOfRange(TokenId(u32::MAX)))
    );
    let close = v.tokenize("}").unwrap()[0];
    assert!(matches!(
        c.commit(close),
        Err(EngineError::TokenNotAllowed { .. })
    ));
    assert_eq!(c.num_committed(), 0, "a failed commit changes nothing");
    c.commit_bytes(b"{}").unwrap();
    let eog = v.eog_tokens()[0];
    c.commit(eog).unwrap();
    assert_eq!(c.commit(close), Err(EngineError::Finished));
    let mut mask = TokenSet::new(v.len());
    c.compute_mask(&mut mask);
    assert!(mask.is_empty() && c.is_finished());
    c.rollback(1);
    assert!(c.is_accepting());
}

/// The oracle over all 262k Gemma tokens on a couple of JSON walks.
#[test]
fn gemma_json_masks_equal_the_oracle() {
    let v = Arc::new(
        tokenizer_json::load(&common::shared("tokenizers/gemma-3-270m.tokenizer.json")).unwrap(),
    );
    let g = json_grammar();
    let r = ReferenceRecognizer::new(g.grammar()).unwrap();
    let trie = VocabTrie::new(&v);
    let mut mask = TokenSet::new(v.len());
    for doc in [
        "{\"k\": [1, -2.5, \"é ü\"], \"t\": true}",
        "{\"a\":{}, \"b\": [\"\\u00e9\", 10, -0.5e-3]}",
    ] {
        let mut c = Constraint::new(&g, &v, Options::default()).unwrap();
        let mut state = r.start();
        let mut text = Vec::new();
        for t in v.tokenize(doc).unwrap() {
            c.compute_mask(&mut mask);
            let mut uncached = TokenSet::new(v.len());
            c.compute_mask_uncached(&mut uncached);
            assert!(
                uncached == mask,
                "cached mask differs from a fresh walk after {:?}",
                String::from_utf8_lossy(&text)
            );
            let mut want = TokenSet::new(v.len());
            let mut stack = vec![state.clone()];
            let mut i = 0;
            while i < trie.nodes.len() {
                let n = trie.nodes[i];
                stack.truncate(n.depth as usize);
                match r.feed(&stack[n.depth as usize - 1], n.byte) {
                    None => {
                        i = n.next as usize;
                        continue;
                    }
                    Some(s) => {
                        if r.is_viable(&s) {
                            trie.tokens[n.tok_start as usize..n.tok_end as usize]
                                .iter()
                                .for_each(|&t| want.insert(t));
                        }
                        stack.push(s);
                    }
                }
                i += 1;
            }
            if r.is_accepting(&state) {
                v.eog_tokens().iter().for_each(|&e| want.insert(e));
            }
            if mask != want {
                let show = |a: &TokenSet, b: &TokenSet| -> Vec<String> {
                    a.iter()
                        .filter(|t| !b.contains(*t))
                        .take(12)
                        .map(|t| format!("{}:{:?}", t.0, String::from_utf8_lossy(v.bytes(t))))
                        .collect()
                };
                panic!(
                    "mask differs from the oracle after {:?}: engine-only {:?} oracle-only {:?}",
                    String::from_utf8_lossy(&text),
                    show(&mask, &want),
                    show(&want, &mask)
                );
            }
            c.commit(t).unwrap();
            text.extend_from_slice(v.bytes(t));
            for &b in v.bytes(t) {
                state = r.feed(&state, b).unwrap();
            }
        }
        assert!(c.is_accepting());
    }
}

#[test]
fn trees_survive_a_round_trip_through_disk() {
    use domino_engine::engine::persist::PersistError;
    let (g, v) = (json_grammar(), smollm2());
    let c = Constraint::new(&g, &v, Options::default()).unwrap();
    let built = c.tree_cache().precompute_all(&g);
    let dir = std::env::temp_dir().join(format!("domino-trees-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("json.trees");
    assert_eq!(c.tree_cache().save(&g, &v, &file).unwrap(), built);

    // A fresh compile of the same grammar loads them and computes identical masks without
    // building any tree, even though its lazy scanner numbered its states in another order
    // (the file names states and live sets by content, not by id).
    let g2 = json_grammar();
    use domino_engine::lexer::Scanner;
    for text in ["-0.5e+12", "\"\\u00e9 x\"", "nul", "tru", "  \n\t"] {
        g2.scanner().walk(Scanner::START, text.as_bytes()).unwrap();
    }
    assert_ne!(
        g.scanner().walk(Scanner::START, b"-0"),
        g2.scanner().walk(Scanner::START, b"-0"),
        "the two scanners should number states differently for this test to mean anything"
    );
    let mut c2 = Constraint::new(&g2, &v, Options::default()).unwrap();
    assert_eq!(c2.tree_cache().load(&g2, &v, &file).unwrap(), built);
    let mut c1 = c.clone();
    let (mut m1, mut m2) = (TokenSet::new(v.len()), TokenSet::new(v.len()));
    for t in v
        .tokenize("{\"a\": [1, 2.5, \"x y\", {\"b\": null}], \"c\": true}")
        .unwrap()
    {
        c1.compute_mask_uncached(&mut m1);
        c2.compute_mask_uncached(&mut m2);
        assert_eq!(m1, m2);
        c1.commit(t).unwrap();
        c2.commit(t).unwrap();
    }
    assert_eq!(c2.tree_cache().stats().trees, built);

    // Another grammar: the key does not match.
    let other = CompiledGrammar::new(
        GrammarSource::Regex("[0-9]+".into())
            .compile(&Default::default())
            .unwrap(),
    )
    .unwrap();
    let c3 = Constraint::new(&other, &v, Options::default()).unwrap();
    assert!(matches!(
        c3.tree_cache().load(&other, &v, &file),
        Err(PersistError::KeyMismatch)
    ));
    // Truncated and garbled files are errors, not panics.
    let bytes = std::fs::read(&file).unwrap();
    for cut in [10, 30, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&file, &bytes[..cut]).unwrap();
        let g4 = json_grammar();
        let c4 = Constraint::new(&g4, &v, Options::default()).unwrap();
        assert!(
            c4.tree_cache().load(&g4, &v, &file).is_err(),
            "cut at {cut}"
        );
    }
    let mut garbled = bytes.clone();
    for i in (40..garbled.len()).step_by(97) {
        garbled[i] ^= 0x5a;
    }
    std::fs::write(&file, &garbled).unwrap();
    let g5 = json_grammar();
    let c5 = Constraint::new(&g5, &v, Options::default()).unwrap();
    assert!(matches!(
        c5.tree_cache().load(&g5, &v, &file),
        Err(PersistError::Corrupt(_))
    ));
}
