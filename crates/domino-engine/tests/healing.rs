//! Token healing (`engine::healing`): on a toy vocabulary the healed mask equals a brute-force
//! reference at every step of random walks — `{t : bytes(t) is a prefix of the remaining
//! healed bytes, or starts with them and the rest is a viable prefix for the inner grammar}`,
//! then exactly the inner constraint's mask — with the inner constraint a grammar, a
//! triggered constraint, or none; commit/rollback round trips; `healing_plan` on toy and
//! real (SmolLM2) vocabularies.

mod common;
use common::rng::Rng;

use domino_engine::engine::{
    AfterRegion, CompiledGrammar, Constraint, HealedConstraint, Options, Region, TokenConstraint,
    Trigger, TriggerSpec, TriggeredConstraint, healing_plan,
};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary, tokenizer_json};
use std::sync::Arc;

fn compile(gbnf: &str) -> Arc<CompiledGrammar> {
    let g = GrammarSource::Gbnf(gbnf.into())
        .compile(&Default::default())
        .unwrap();
    CompiledGrammar::new(g).unwrap()
}

const GRAMMAR: &str = r#"root ::= "://" [a-z]+ ( "." [a-z]+ )* | [0-9]+ " " [a-z]*"#;

fn toy_vocab() -> Arc<Vocabulary> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    for b in b"abcehlmoprstwx:/. 0123456789" {
        words.push(vec![*b]);
    }
    for w in [
        "http", "ht", "tp", "http:", "://", ":/", "//", "://www", "www", ".com", "co", "com",
        "hel", "hello", "lo", "llo", "12", "1 ", "2 a", ": ", "p:", "p://", "s://", "https", "<s>",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    let special = words.len() - 1; // "<s>"
    common::vocab_with_eog(words, &[special])
}

fn id(v: &Vocabulary, s: &str) -> TokenId {
    TokenId(
        (0..v.len())
            .find(|&i| {
                !v.is_special(TokenId(i as u32)) && v.bytes(TokenId(i as u32)) == s.as_bytes()
            })
            .unwrap() as u32,
    )
}

/// The reference: after committed text `text`, is `text·bytes` still a prefix of
/// `healed · L(inner)` (inner: `None` = any text)?
fn viable(healed: &[u8], r: Option<&ReferenceRecognizer>, text: &[u8]) -> bool {
    let k = healed.len().min(text.len());
    if healed[..k] != text[..k] {
        return false;
    }
    match r {
        None => true,
        Some(r) => r.is_viable_prefix(&text[k..]),
    }
}

fn reference_mask(
    v: &Vocabulary,
    healed: &[u8],
    r: Option<&ReferenceRecognizer>,
    text: &[u8],
) -> TokenSet {
    let mut m = TokenSet::new(v.len());
    for i in 0..v.len() as u32 {
        let t = TokenId(i);
        let done = text.len() >= healed.len();
        let ok = if v.is_eog(t) {
            done && r.is_none_or(|r| r.accepts(&text[healed.len()..]))
        } else if v.is_special(t) {
            done && r.is_none()
        } else {
            viable(healed, r, &[text, v.bytes(t)].concat())
        };
        if ok {
            m.insert(t);
        }
    }
    m
}

#[test]
fn healed_masks_equal_the_reference_on_random_walks() {
    let vocab = toy_vocab();
    let grammar = compile(GRAMMAR);
    let r = ReferenceRecognizer::new(grammar.grammar()).unwrap();
    let mut rng = Rng::new(0x4EA1);
    let mut checked = 0;
    let mut bridged = 0;
    for healed in ["http", "http:", "h", "1", ":", "hel"] {
        for with_inner in [true, false] {
            for walk in 0..25 {
                let inner: Option<Box<dyn TokenConstraint>> = with_inner.then(|| {
                    Box::new(Constraint::new(&grammar, &vocab, Options::default()).unwrap())
                        as Box<dyn TokenConstraint>
                });
                let mut c = HealedConstraint::new(healed.as_bytes().to_vec(), inner, &vocab);
                let rr = with_inner.then_some(&r);
                let mut text: Vec<u8> = Vec::new();
                let mut history: Vec<(Vec<u8>, TokenSet)> = Vec::new();
                let mut mask = TokenSet::new(vocab.len());
                for _ in 0..12 {
                    c.compute_mask(&mut mask);
                    let want = reference_mask(&vocab, healed.as_bytes(), rr, &text);
                    assert!(
                        mask == want,
                        "healed {healed:?} inner {with_inner} walk {walk} after {:?}: engine {:?} want {:?}",
                        String::from_utf8_lossy(&text),
                        mask.iter()
                            .map(|t| String::from_utf8_lossy(vocab.bytes(t)).to_string())
                            .collect::<Vec<_>>(),
                        want.iter()
                            .map(|t| String::from_utf8_lossy(vocab.bytes(t)).to_string())
                            .collect::<Vec<_>>(),
                    );
                    checked += 1;
                    for t in (0..vocab.len() as u32).map(TokenId) {
                        assert_eq!(c.allows(t), mask.contains(t));
                    }
                    history.push((text.clone(), mask.clone()));
                    let allowed: Vec<TokenId> = mask.iter().collect();
                    if allowed.is_empty() {
                        break;
                    }
                    let t = allowed[rng.below(allowed.len())];
                    c.commit(t).unwrap();
                    if vocab.is_eog(t) {
                        assert!(c.is_finished());
                        break;
                    }
                    if text.len() < healed.len() && text.len() + vocab.bytes(t).len() > healed.len()
                    {
                        bridged += 1;
                    }
                    text.extend_from_slice(vocab.bytes(t));
                    if rng.below(4) == 0 {
                        let k = 1 + rng.below(history.len().min(3));
                        c.rollback(k);
                        history.truncate(history.len() + 1 - k);
                        let (old_text, old_mask) = history.pop().unwrap();
                        text = old_text;
                        c.compute_mask(&mut mask);
                        assert!(mask == old_mask, "mask after rollback");
                        assert_eq!(c.num_committed(), history.len());
                    }
                }
            }
        }
    }
    assert!(checked > 500, "{checked}");
    assert!(bridged > 20, "{bridged} tokens ran past the healed bytes");
}

#[test]
fn healing_composes_with_a_triggered_constraint() {
    let vocab = toy_vocab();
    let spec = Arc::new(TriggerSpec {
        regions: vec![Region {
            trigger: Trigger::Text(b"tp".to_vec()),
            grammar: compile(GRAMMAR),
            name: "url".into(),
        }],
        after: AfterRegion::End,
        min_regions: 1,
        max_regions: None,
    });
    let inner = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
    let mut c = HealedConstraint::new(b"ht".to_vec(), Some(Box::new(inner)), &vocab);
    assert!(c.allows(id(&vocab, "h")));
    // The inner constraint sees the text after the healed bytes only.
    assert!(
        c.allows(id(&vocab, "http")),
        "`http` heals `ht` and writes the trigger `tp`"
    );
    assert!(c.allows(id(&vocab, "http:")), "then `:` begins the region");
    assert!(!c.allows(id(&vocab, "hel")));
    c.commit(id(&vocab, "http:")).unwrap();
    assert!(c.remaining().is_empty());
    assert!(c.allows(id(&vocab, "//")));
    assert!(!c.allows(id(&vocab, "1 ")));
    c.rollback(1);
    assert_eq!(c.remaining(), b"ht");
}

#[test]
fn healing_plan_backs_off_extendable_tokens() {
    let v = toy_vocab();
    let prompt = [id(&v, "ht"), id(&v, "tp"), id(&v, ":")];
    // ":" is extended by "://"; nothing strictly extends "tp:" or "http:": one token.
    assert_eq!(healing_plan(&v, &prompt, 3), (1, b":".to_vec()));
    // "ht"+"tp" = "http" is extended by "http:", "https": two tokens.
    assert_eq!(healing_plan(&v, &prompt[..2], 3), (2, b"http".to_vec()));
    // Alone, "tp" is extended by nothing.
    assert_eq!(healing_plan(&v, &prompt[..2], 1), (0, vec![]));
    // No token strictly extends "x".
    assert_eq!(healing_plan(&v, &[id(&v, "x")], 4), (0, vec![]));
    assert_eq!(healing_plan(&v, &[], 4), (0, vec![]));
    // A special token stops the back-off.
    let special = TokenId(v.len() as u32 - 2);
    assert_eq!(healing_plan(&v, &[id(&v, "ht"), special], 4), (0, vec![]));
}

#[test]
fn healing_plan_on_smollm2() {
    let v = Arc::new(
        tokenizer_json::load(&common::shared(
            "tokenizers/SmolLM2-135M-Instruct.tokenizer.json",
        ))
        .unwrap(),
    );
    let toks = v.tokenize("Visit https:").unwrap();
    let (k, bytes) = healing_plan(&v, &toks, 2);
    assert!(
        k >= 1 && bytes.ends_with(b":"),
        "{k} {:?}",
        String::from_utf8_lossy(&bytes)
    );
    let toks = v.tokenize("The capital of Fra").unwrap();
    let (k, bytes) = healing_plan(&v, &toks, 1);
    assert_eq!((k, bytes.as_slice()), (1, v.bytes(*toks.last().unwrap())));
    // Mid-word: healing allows the token the unhealed prompt would have used together with
    // the continuation (" France" tokenized whole).
    let whole = v.tokenize("The capital of France").unwrap();
    let first = whole[toks.len() - 1];
    let mut c = HealedConstraint::new(bytes, None, &v);
    assert!(
        c.allows(first),
        "{:?}",
        String::from_utf8_lossy(v.bytes(first))
    );
}
