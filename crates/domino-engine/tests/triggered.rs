//! Oracle tests of triggered constraints (`engine::triggered`): on a toy vocabulary with
//! tokens that straddle triggers (`</think>{`, `k>{"`, `}<`, whole triggers, trigger
//! prefixes), several triggers sharing prefixes or suffixes, `End` and `Free` modes and region
//! count bounds, the mask equals a slow byte-level reference at every step of random walks:
//! reference states are sets of {free text (the bytes since the last region, searched for
//! triggers by brute force) | region i with a `grammar::reference` recognizer state}, with
//! exact region counts (`tests/triggered/reference.rs`). Also: `allows` == mask,
//! commit/rollback round trips, region spans. The real vocabulary: `triggered_smollm2.rs`.

mod common;
use common::rng::Rng;
#[path = "triggered/reference.rs"]
mod reference;
use reference::{Reference, diff, region, show, text};

use domino_engine::engine::{
    AfterRegion, Options, Region, TokenConstraint, Trigger, TriggerSpec, TriggeredConstraint,
};
use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;

const JSON: &str = r#"
root   ::= object
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
value  ::= object | string | number | "true"
string ::= "\"" [a-z<>/]* "\""
number ::= [0-9]+
ws     ::= [ \n]?
"#;
/// Accepting and able to go on: leaving it mid-token is possible.
const DIGITS: &str = r#"root ::= [0-9]+"#;
/// A sentence (`12`) that goes on into a non-sentence (`12.`): the tail twin cannot help
/// there, the trie walk does.
const DECIMAL: &str = r#"root ::= [0-9]+ ( "." [0-9]+ )?"#;
const LETTERS: &str = r#"root ::= [a-z]+ ( "<" [a-z]* )?"#;
/// Accepts the empty text: a region may end right at its trigger.
const MAYBE_X: &str = r#"root ::= "x"*"#;

/// Toy vocabulary: single bytes, trigger pieces and bridges; two special tokens (`<call>`,
/// `<sep>`) and one EOG (last).
fn toy_vocab() -> Arc<Vocabulary> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    for b in b"abcdehiklnotxy<>/{}\":, \n0123456789" {
        words.push(vec![*b]);
    }
    for w in [
        "</think>{",
        "k>{\"",
        "}<",
        "</think>",
        "</",
        "<th",
        "think",
        "ink>",
        ">{",
        ">{\"",
        "\"a\"",
        "<tool>",
        "<to",
        "ol>",
        "ol>1",
        "<tag>",
        "ag>{",
        "}\n",
        "12",
        "3<",
        "9<t",
        "x<",
        "xx",
        "ab",
        "<a>",
        "a>x",
        "}</",
        "\"}",
        "{\"",
        "\": ",
        ", \"",
        "tool",
        "k>",
        "1<tool>2",
        ">12",
        "ab<",
        "<c",
        "xy<a>",
        "a><tool>",
        "1.",
        ".5",
        "2.3<",
        "5.x",
        ".",
        "3.4",
        "7>",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    words.push(b"<call>".to_vec());
    words.push(b"<sep>".to_vec());
    words.push(Vec::new());
    let n = words.len();
    let mut special = vec![false; n];
    special[n - 3] = true;
    special[n - 2] = true;
    Arc::new(Vocabulary::new(words, special, vec![TokenId(n as u32 - 1)]))
}

fn call_token(v: &Vocabulary) -> TokenId {
    TokenId(v.len() as u32 - 3)
}

/// The specs under test: (name, spec).
fn specs(v: &Vocabulary) -> Vec<(&'static str, Arc<TriggerSpec>)> {
    let spec = |regions, after, min_regions, max_regions| {
        Arc::new(TriggerSpec {
            regions,
            after,
            min_regions,
            max_regions,
        })
    };
    vec![
        (
            "reasoning-end",
            spec(
                vec![region(text("</think>"), JSON, "answer")],
                AfterRegion::End,
                0,
                None,
            ),
        ),
        (
            "reasoning-required",
            spec(
                vec![region(text("</think>"), JSON, "answer")],
                AfterRegion::End,
                1,
                None,
            ),
        ),
        (
            // "<tool>" and "ol>" end at the same byte (the first listed wins); "<to" shares a
            // prefix with "<tool>" and "<tag>".
            "tools-shared-prefixes",
            spec(
                vec![
                    region(text("<tool>"), DECIMAL, "decimal"),
                    region(text("<tag>"), JSON, "json"),
                    region(text("ol>"), LETTERS, "letters"),
                ],
                AfterRegion::Free,
                0,
                None,
            ),
        ),
        (
            "required-bounded",
            spec(
                vec![
                    region(text("<a>"), MAYBE_X, "xs"),
                    region(Trigger::Token(call_token(v)), JSON, "call"),
                    region(text("<c"), LETTERS, "letters"),
                ],
                AfterRegion::Free,
                1,
                Some(2),
            ),
        ),
        (
            // A number region that passes a sentence (`12`) and goes on (`12.`) while `.`
            // itself triggers a letters region: exits from such states need the trie walk.
            "number-then-dot-trigger",
            spec(
                vec![
                    region(text("<tool>"), DECIMAL, "decimal"),
                    region(text("."), LETTERS, "letters"),
                ],
                AfterRegion::Free,
                0,
                None,
            ),
        ),
        (
            "token-trigger-end",
            spec(
                vec![
                    region(Trigger::Token(call_token(v)), DIGITS, "call"),
                    region(text("k>"), JSON, "json"),
                ],
                AfterRegion::End,
                1,
                Some(1),
            ),
        ),
    ]
}

/// Tokens the walks prefer (trigger pieces and bridges), so walks reach regions often.
fn preferred(v: &Vocabulary) -> Vec<TokenId> {
    (0..v.len() as u32)
        .map(TokenId)
        .filter(|&t| {
            v.bytes(t).len() > 1 || v.bytes(t).iter().any(|b| b"<>{}\"0123456789x".contains(b))
        })
        .collect()
}

#[test]
fn masks_equal_the_reference_on_random_walks() {
    let vocab = toy_vocab();
    let mut rng = Rng::new(0x5EED_7216);
    let pref = preferred(&vocab);
    let mut checked = 0;
    let mut in_region = 0;
    let mut boundary_tokens = 0;
    let mut left_mid_token = 0;
    for (name, spec) in specs(&vocab) {
        let reference = Reference::new(&spec);
        for walk in 0..60 {
            let mut c = TriggeredConstraint::new(spec.clone(), &vocab, Options::default()).unwrap();
            let mut states = reference.start();
            let mut committed: Vec<TokenId> = Vec::new();
            let mut masks: Vec<(TokenSet, u64)> = Vec::new();
            let mut mask = TokenSet::new(vocab.len());
            for _step in 0..30 {
                c.compute_mask(&mut mask);
                let want = reference.mask(&vocab, &states);
                let txt: Vec<String> = committed.iter().map(|&t| show(&vocab, t)).collect();
                assert!(
                    mask == want,
                    "{name} walk {walk} after {txt:?}: {}",
                    diff(&mask, &want, &vocab)
                );
                checked += 1;
                assert_eq!(
                    c.is_accepting(),
                    reference.accepting(&states),
                    "{name} {txt:?}"
                );
                for t in (0..vocab.len() as u32).map(TokenId) {
                    assert_eq!(
                        c.allows(t),
                        mask.contains(t),
                        "{name} allows({}) after {txt:?}",
                        show(&vocab, t)
                    );
                }
                masks.push((mask.clone(), c.draft_context()));
                in_region += c.current_region().is_some() as usize;
                let allowed: Vec<TokenId> = mask.iter().collect();
                if allowed.is_empty() {
                    break;
                }
                let good: Vec<TokenId> = allowed
                    .iter()
                    .copied()
                    .filter(|t| pref.contains(t))
                    .collect();
                let t = if !good.is_empty() && rng.below(4) != 0 {
                    good[rng.below(good.len())]
                } else {
                    allowed[rng.below(allowed.len())]
                };
                if vocab.is_eog(t) && rng.below(3) != 0 && allowed.len() > 1 {
                    masks.pop(); // the same state comes round again
                    continue;
                }
                let before = c.current_region();
                c.commit(t)
                    .unwrap_or_else(|e| panic!("{name}: commit {}: {e}", show(&vocab, t)));
                if before != c.current_region() && vocab.bytes(t).len() > 1 {
                    boundary_tokens += 1;
                    if before.is_some() && c.num_configurations() == 1 {
                        left_mid_token += 1;
                    }
                }
                committed.push(t);
                if vocab.is_eog(t) {
                    assert!(c.is_finished());
                    check_spans(&c, &vocab, &committed, &spec);
                    break;
                }
                states = reference.feed_token(&vocab, &states, t);
                assert!(!states.is_empty());
                // Occasionally roll back and check the earlier mask and key come back.
                if rng.below(5) == 0 && !committed.is_empty() {
                    let k = 1 + rng.below(committed.len().min(4));
                    c.rollback(k);
                    committed.truncate(committed.len() - k);
                    states = committed.iter().fold(reference.start(), |s, &t| {
                        reference.feed_token(&vocab, &s, t)
                    });
                    masks.truncate(committed.len() + 1);
                    let (old, key) = masks.pop().unwrap();
                    c.compute_mask(&mut mask);
                    assert!(
                        mask == old,
                        "{name}: mask after rollback: {}",
                        diff(&mask, &old, &vocab)
                    );
                    assert_eq!(
                        c.draft_context(),
                        key,
                        "{name}: draft context after rollback"
                    );
                    assert_eq!(c.num_committed(), committed.len());
                }
            }
        }
    }
    assert!(checked > 3000, "only {checked} masks checked");
    assert!(in_region > 500, "only {in_region} in-region steps");
    eprintln!(
        "{checked} masks, {in_region} in regions, {boundary_tokens} boundary tokens, {left_mid_token} leaving a region"
    );
    assert!(
        left_mid_token > 10,
        "only {left_mid_token} tokens left a region inside them"
    );
    assert!(
        boundary_tokens > 50,
        "only {boundary_tokens} multi-byte boundary tokens"
    );
}

/// After the end: each span's text is a sentence of its region's grammar, and a text
/// trigger ends right before it.
fn check_spans(c: &TriggeredConstraint, v: &Vocabulary, committed: &[TokenId], spec: &TriggerSpec) {
    let text: Vec<u8> = committed
        .iter()
        .filter(|t| !v.is_eog(**t))
        .flat_map(|&t| v.bytes(t).to_vec())
        .collect();
    let spans = c.region_spans();
    assert!(spans.len() >= spec.min_regions);
    for (i, s, e) in spans {
        let e = e.expect("closed after the end");
        let r = ReferenceRecognizer::new(spec.regions[i].grammar.grammar()).unwrap();
        assert!(
            r.accepts(&text[s..e]),
            "span {:?} of {:?}",
            &text[s..e],
            String::from_utf8_lossy(&text)
        );
        if let Trigger::Text(t) = &spec.regions[i].trigger {
            assert!(text[..s].ends_with(t));
        }
    }
}

#[test]
fn bridge_tokens_over_the_trigger_are_exact() {
    let vocab = toy_vocab();
    let id = |s: &str| {
        TokenId(
            (0..vocab.len())
                .find(|&i| vocab.bytes(TokenId(i as u32)) == s.as_bytes())
                .unwrap() as u32,
        )
    };
    let spec = Arc::new(TriggerSpec {
        regions: vec![region(text("</think>"), JSON, "answer")],
        after: AfterRegion::End,
        min_regions: 0,
        max_regions: None,
    });
    let mut c = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
    c.commit(id("<th")).unwrap();
    c.commit(id("ink>")).unwrap(); // "<think>": not the trigger
    assert_eq!(c.current_region(), None);
    c.commit(id("</")).unwrap();
    c.commit(id("think")).unwrap();
    // `k>{"` ends the free text, completes the trigger and begins the JSON object.
    assert!(c.allows(id("k>{\"")));
    assert!(c.allows(id(">{")));
    assert!(!c.allows(id(">12")), "a number is not a JSON object");
    assert!(!c.allows(vocab.eog_tokens()[0]) || c.is_accepting());
    c.commit(id(">{")).unwrap();
    assert_eq!(c.current_region(), Some(0));
    assert_eq!(c.region_spans(), vec![(0, 15, None)]);
    assert!(
        !c.allows(call_token(&vocab)),
        "special tokens never inside a region"
    );
    c.commit(id("}")).unwrap();
    assert!(c.is_accepting());
    assert!(
        c.is_finished(),
        "End mode: only end-of-generation after the region"
    );
}

#[test]
fn bad_specs_are_clear_errors() {
    let vocab = toy_vocab();
    let mk = |regions: Vec<Region>, after, min_regions, max_regions| {
        TriggeredConstraint::new(
            Arc::new(TriggerSpec {
                regions,
                after,
                min_regions,
                max_regions,
            }),
            &vocab,
            Options::default(),
        )
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    assert!(
        mk(
            vec![region(text(""), JSON, "x")],
            AfterRegion::Free,
            0,
            None
        )
        .contains("empty trigger")
    );
    assert!(
        mk(
            vec![region(Trigger::Token(TokenId(9999)), JSON, "x")],
            AfterRegion::Free,
            0,
            None
        )
        .contains("outside")
    );
    assert!(
        mk(
            vec![region(Trigger::Token(vocab.eog_tokens()[0]), JSON, "x")],
            AfterRegion::Free,
            0,
            None
        )
        .contains("ends generation")
    );
    assert!(
        mk(
            vec![region(text("<a>"), JSON, "x")],
            AfterRegion::End,
            2,
            None
        )
        .contains("min_regions")
    );
    assert!(
        mk(
            vec![region(text("<a>"), JSON, "x")],
            AfterRegion::Free,
            3,
            Some(2)
        )
        .contains("min_regions")
    );
    assert!(mk(vec![], AfterRegion::Free, 1, None).contains("no regions"));
}

/// A region whose text was a sentence and is not any more (`12.`), while the other reading
/// (the number ended at `12`, then `.` began a letters region) refuses digits: `5.x` is
/// allowed only by completing the number, leaving it inside the token, and going on freely
/// (`.` then begins the letters region, `x`).
#[test]
fn leaving_a_region_after_passing_a_sentence() {
    let vocab = toy_vocab();
    let id = |s: &str| {
        TokenId(
            (0..vocab.len())
                .find(|&i| vocab.bytes(TokenId(i as u32)) == s.as_bytes())
                .unwrap() as u32,
        )
    };
    let spec = Arc::new(TriggerSpec {
        regions: vec![
            region(text("<tool>"), DECIMAL, "decimal"),
            region(text("."), LETTERS, "letters"),
        ],
        after: AfterRegion::Free,
        min_regions: 0,
        max_regions: None,
    });
    let mut c = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
    c.commit(id("<tool>")).unwrap();
    c.commit(id("12")).unwrap();
    assert_eq!(c.num_configurations(), 2, "in the number, or after it");
    c.commit(id(".")).unwrap();
    assert_eq!(
        c.num_configurations(),
        2,
        "`12.` in the number, or `.` a trigger"
    );
    let mut mask = TokenSet::new(vocab.len());
    c.compute_mask(&mut mask);
    assert!(
        mask.contains(id("5.x")),
        "`5` ends the number, `.x` is free text"
    );
    assert!(mask.contains(id("3")) && mask.contains(id("ab")));
    assert!(
        !mask.contains(id("3.4")),
        "`12.3` then `.4`: letters refuse `4`"
    );
    assert!(!mask.contains(id(".")) && mask.contains(id("1.")));
    let reference = Reference::new(c.spec());
    let states = ["<tool>", "12", "."]
        .iter()
        .fold(reference.start(), |st, w| {
            reference.feed_token(&vocab, &st, id(w))
        });
    let want = reference.mask(&vocab, &states);
    assert!(mask == want, "{}", diff(&mask, &want, &vocab));
    c.commit(id("5.x")).unwrap();
    assert_eq!(c.region_spans(), vec![(0, 6, Some(10)), (1, 11, None)]);
}
