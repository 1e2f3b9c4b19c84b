//! Oracle tests of triggered constraints (`engine::triggered`): on a toy vocabulary with
//! tokens that straddle triggers (`</think>{`, `k>{"`, `}<`, whole triggers, trigger
//! prefixes), several triggers sharing prefixes or suffixes, `End` and `Free` modes and region
//! count bounds, the mask equals a slow byte-level reference at every step of random walks:
//! reference states are sets of {free text (the bytes since the last region, searched for
//! triggers by brute force) | region i with a `grammar::reference` recognizer state}, with
//! exact region counts. Also: `allows` == mask, commit/rollback round trips, region spans,
//! and the real SmolLM2 vocabulary (reasoning: `</think>` then JSON).

mod common;
use common::rng::Rng;

use domino_engine::engine::{
    AfterRegion, CompiledGrammar, Constraint, Options, Region, TokenConstraint, Trigger,
    TriggerSpec, TriggeredConstraint,
};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::{RefState, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary, tokenizer_json};
use std::sync::Arc;

fn compile(gbnf: &str) -> Arc<CompiledGrammar> {
    let g = GrammarSource::Gbnf(gbnf.into())
        .compile(&Default::default())
        .unwrap();
    CompiledGrammar::new(g).unwrap()
}

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

/// The slow reference: one byte (or opaque special token) at a time, brute-force trigger
/// search, exact region counts.
struct Reference {
    spec: Arc<TriggerSpec>,
    recognizers: Vec<ReferenceRecognizer>,
}

#[derive(Clone)]
enum RState {
    /// The free text since the region (or start, or special token) before it.
    Free {
        text: Vec<u8>,
        n: usize,
    },
    Region {
        i: usize,
        s: RefState,
        n: usize,
    },
}

impl Reference {
    fn new(spec: &Arc<TriggerSpec>) -> Self {
        Reference {
            spec: spec.clone(),
            recognizers: spec
                .regions
                .iter()
                .map(|r| ReferenceRecognizer::new(r.grammar.grammar()).unwrap())
                .collect(),
        }
    }

    fn may_begin(&self, n: usize) -> bool {
        let under_max = self.spec.max_regions.is_none_or(|m| n < m);
        match self.spec.after {
            AfterRegion::Free => under_max,
            AfterRegion::End => n == 0 && under_max,
        }
    }

    /// Enter region `i` (and, where its empty text is a sentence, leave it at once).
    fn enter(&self, i: usize, n: usize, out: &mut Vec<RState>) {
        let s = self.recognizers[i].start();
        out.push(RState::Region { i, s, n: n + 1 });
        self.close(out);
    }

    /// Add the free reading after every region whose text is a sentence (Free mode).
    fn close(&self, out: &mut Vec<RState>) {
        if self.spec.after != AfterRegion::Free {
            return;
        }
        let extra: Vec<RState> = out
            .iter()
            .filter_map(|st| match st {
                RState::Region { i, s, n } if self.recognizers[*i].is_accepting(s) => {
                    Some(RState::Free {
                        text: Vec::new(),
                        n: *n,
                    })
                }
                _ => None,
            })
            .collect();
        out.extend(extra);
    }

    fn start(&self) -> Vec<RState> {
        vec![RState::Free {
            text: Vec::new(),
            n: 0,
        }]
    }

    fn feed_byte(&self, states: &[RState], b: u8) -> Vec<RState> {
        let mut out = Vec::new();
        for st in states {
            match st {
                RState::Free { text, n } => {
                    let mut text = text.clone();
                    text.push(b);
                    let hit = self.spec.regions.iter().position(|r| match &r.trigger {
                        Trigger::Text(t) => text.ends_with(t),
                        Trigger::Token(_) => false,
                    });
                    match hit {
                        Some(i) if self.may_begin(*n) => self.enter(i, *n, &mut out),
                        Some(_) => {}
                        None => out.push(RState::Free { text, n: *n }),
                    }
                }
                RState::Region { i, s, n } => {
                    if let Some(s) = self.recognizers[*i].feed(s, b) {
                        let mut one = vec![RState::Region { i: *i, s, n: *n }];
                        self.close(&mut one);
                        out.extend(one);
                    }
                }
            }
        }
        out
    }

    fn feed_token(&self, v: &Vocabulary, states: &[RState], t: TokenId) -> Vec<RState> {
        if !v.is_special(t) {
            return v
                .bytes(t)
                .iter()
                .fold(states.to_vec(), |s, &b| self.feed_byte(&s, b));
        }
        let mut out = Vec::new();
        for st in states {
            if let RState::Free { n, .. } = st {
                let trig = self
                    .spec
                    .regions
                    .iter()
                    .position(|r| r.trigger == Trigger::Token(t));
                match trig {
                    Some(i) if self.may_begin(*n) => self.enter(i, *n, &mut out),
                    Some(_) => {}
                    None => out.push(RState::Free {
                        text: Vec::new(),
                        n: *n,
                    }),
                }
            }
        }
        out
    }

    fn accepting(&self, states: &[RState]) -> bool {
        states.iter().any(|st| match st {
            RState::Free { n, .. } => *n >= self.spec.min_regions,
            RState::Region { i, s, n } => {
                *n >= self.spec.min_regions && self.recognizers[*i].is_accepting(s)
            }
        })
    }

    fn mask(&self, v: &Vocabulary, states: &[RState]) -> TokenSet {
        let mut m = TokenSet::new(v.len());
        for i in 0..v.len() as u32 {
            let t = TokenId(i);
            let ok = if v.is_eog(t) {
                self.accepting(states)
            } else {
                !self.feed_token(v, states, t).is_empty()
            };
            if ok {
                m.insert(t);
            }
        }
        m
    }
}

fn show(v: &Vocabulary, t: TokenId) -> String {
    format!("{:?}", String::from_utf8_lossy(v.bytes(t)))
}

fn diff(a: &TokenSet, b: &TokenSet, v: &Vocabulary) -> String {
    let only = |x: &TokenSet, y: &TokenSet| -> Vec<String> {
        x.iter()
            .filter(|t| !y.contains(*t))
            .map(|t| show(v, t))
            .collect()
    };
    format!("engine-only {:?}, oracle-only {:?}", only(a, b), only(b, a))
}

fn region(trigger: Trigger, gbnf: &str, name: &str) -> Region {
    Region {
        trigger,
        grammar: compile(gbnf),
        name: name.into(),
    }
}

fn text(s: &str) -> Trigger {
    Trigger::Text(s.as_bytes().to_vec())
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
                    region(text("<tool>"), DIGITS, "digits"),
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

fn smollm2() -> Arc<Vocabulary> {
    Arc::new(
        tokenizer_json::load(&common::shared(
            "tokenizers/SmolLM2-135M-Instruct.tokenizer.json",
        ))
        .unwrap(),
    )
}

/// Reasoning on the real vocabulary: before `</think>` the mask is the whole vocabulary
/// minus exactly the tokens that complete `</think>` into text that cannot begin a JSON
/// document (checked by brute force over every token); right after the trigger it equals a
/// plain JSON constraint's mask.
#[test]
fn smollm2_reasoning_then_json() {
    let vocab = smollm2();
    let json =
        CompiledGrammar::new(GrammarSource::Json.compile(&Default::default()).unwrap()).unwrap();
    let spec = Arc::new(TriggerSpec {
        regions: vec![Region {
            trigger: text("</think>"),
            grammar: json.clone(),
            name: "answer".into(),
        }],
        after: AfterRegion::End,
        min_regions: 0,
        max_regions: None,
    });
    let r = ReferenceRecognizer::new(json.grammar()).unwrap();
    let mut c = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
    let mut mask = TokenSet::new(vocab.len());
    let mut blocked_somewhere = 0;
    // Free text ending in each proper prefix of the trigger.
    for prefix in ["Let me think.", "Let me think.</", "Let me think.</think"] {
        let mut c = c.clone();
        c.commit_bytes(prefix.as_bytes()).unwrap();
        c.compute_mask(&mut mask);
        let mut blocked = 0;
        for (t, b) in vocab.text_tokens() {
            let full = [prefix.as_bytes(), b].concat();
            let want = match full.windows(8).position(|w| w == b"</think>") {
                None => true,
                Some(p) => r.is_viable_prefix(&full[p + 8..]),
            };
            assert_eq!(
                mask.contains(t),
                want,
                "after {prefix:?}: {:?}",
                String::from_utf8_lossy(b)
            );
            blocked += !want as usize;
        }
        for i in 0..vocab.len() as u32 {
            let t = TokenId(i);
            if vocab.is_special(t) {
                assert!(
                    mask.contains(t),
                    "special {i} in free text (EOG: the text is a sentence)"
                );
            }
        }
        blocked_somewhere += blocked;
        if prefix.ends_with("</think") {
            assert!(
                blocked > 10,
                "tokens starting with `>` that are not JSON: {blocked}"
            );
        }
    }
    assert!(blocked_somewhere > 0);
    c.commit_bytes(b"Let me think.</think>").unwrap();
    assert_eq!(c.current_region(), Some(0));
    c.compute_mask(&mut mask);
    let mut plain = Constraint::new(&json, &vocab, Options::default()).unwrap();
    let mut want = TokenSet::new(vocab.len());
    plain.compute_mask(&mut want);
    assert!(mask == want, "right after the trigger: the JSON mask");
}

/// Mask cost in free text vs inside a region on SmolLM2, against a plain JSON-schema
/// constraint over the same tokens (printed; run with
/// `cargo test -p domino-engine --test triggered -- --ignored --nocapture bench`).
#[test]
#[ignore = "a measurement, not a check"]
fn bench_free_vs_region_masks_smollm2() {
    use std::time::{Duration, Instant};
    let vocab = smollm2();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"const": "get_weather"},
            "arguments": {"type": "object", "properties": {
                "city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city", "days"]}
        },
        "required": ["name", "arguments"]
    });
    let thought = "Let me think about the weather in Paris over the next few days, then answer. ";
    let doc = r#"{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}"#;
    let after = "\nI called the weather tool for you.";
    let toks = |s: &str| vocab.tokenize(s).unwrap();
    let us = |d: Duration, n: usize| d.as_secs_f64() * 1e6 / n.max(1) as f64;
    for cache in [64usize << 20, 0] {
        let opts = Options {
            lookahead: None,
            mask_cache_bytes: cache,
        };
        let g = CompiledGrammar::new(
            GrammarSource::JsonSchema(schema.clone())
                .compile(&Default::default())
                .unwrap(),
        )
        .unwrap();
        let mut mask = TokenSet::new(vocab.len());
        // Plain constraint over the document (pass 0 builds trees; pass 1 is timed).
        let mut plain = Duration::ZERO;
        let mut plain_commit = Duration::ZERO;
        for pass in 0..2 {
            let mut c = Constraint::new(&g, &vocab, opts.clone()).unwrap();
            for &t in &toks(doc) {
                let t0 = Instant::now();
                c.compute_mask(&mut mask);
                if pass == 1 {
                    plain += t0.elapsed();
                }
                let t0 = Instant::now();
                c.commit(t).unwrap();
                if pass == 1 {
                    plain_commit += t0.elapsed();
                }
            }
        }
        for (mode, trigger) in [
            (AfterRegion::End, "</think>"),
            (AfterRegion::Free, "<tool_call>"),
        ] {
            let spec = Arc::new(TriggerSpec {
                regions: vec![Region {
                    trigger: Trigger::Text(trigger.as_bytes().to_vec()),
                    grammar: g.clone(),
                    name: "call".into(),
                }],
                after: mode,
                min_regions: 0,
                max_regions: None,
            });
            let (mut free, mut region, mut first) =
                (Duration::ZERO, Duration::ZERO, Duration::ZERO);
            let (mut nf, mut nr) = (0, 0);
            let mut region_commit = Duration::ZERO;
            let mut text = format!("{thought}{trigger}{doc}");
            if mode == AfterRegion::Free {
                text.push_str(after);
            }
            let all = toks(&text);
            // Clones share the free-mask cache: pass 0 fills it (a new spec's one-time cost),
            // pass 1 is a later request over the same spec.
            let template = TriggeredConstraint::new(spec.clone(), &vocab, opts.clone()).unwrap();
            let mut cold_free = Duration::ZERO;
            for pass in 0..2 {
                let mut c = template.clone();
                for (i, &t) in all.iter().enumerate() {
                    let inside = c.current_region().is_some();
                    let t0 = Instant::now();
                    c.compute_mask(&mut mask);
                    let d = t0.elapsed();
                    if i == 0 && pass == 0 {
                        first = d;
                    }
                    if pass == 0 && !inside {
                        cold_free += d;
                    }
                    if pass == 1 {
                        if inside {
                            region += d;
                            nr += 1;
                        } else {
                            free += d;
                            nf += 1;
                        }
                    }
                    let t0 = Instant::now();
                    c.commit(t).unwrap();
                    if pass == 1 && inside {
                        region_commit += t0.elapsed();
                    }
                }
            }
            eprintln!(
                "    commits: plain JSON {:.2} µs, inside the region {:.2} µs",
                us(plain_commit, toks(doc).len()),
                us(region_commit, nr)
            );
            eprintln!(
                "mask cache {:>8} B, {mode:?} mode: plain JSON {:.2} µs/mask; free text {:.2} µs/mask ({nf} masks); inside the region {:.2} µs/mask ({nr} masks); a new spec's free masks: first {:.0} µs, all {:.0} µs",
                cache,
                us(plain, toks(doc).len()),
                us(free, nf),
                us(region, nr),
                us(first, 1),
                us(cold_free, 1),
            );
        }
    }
}

/// The reference mask over a large vocabulary: a walk over its byte trie carrying the
/// reference state set (special tokens one by one).
fn reference_mask_by_trie(
    reference: &Reference,
    v: &Vocabulary,
    trie: &domino_engine::engine::trie::VocabTrie,
    states: &[RState],
) -> TokenSet {
    let mut m = TokenSet::new(v.len());
    let mut stack: Vec<Vec<RState>> = vec![states.to_vec()];
    let mut i = 0;
    while i < trie.nodes.len() {
        let n = trie.nodes[i];
        stack.truncate(n.depth as usize);
        let next = reference.feed_byte(&stack[n.depth as usize - 1], n.byte);
        if next.is_empty() {
            i = n.next as usize;
            continue;
        }
        for &t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
            m.insert(t);
        }
        stack.push(next);
        i += 1;
    }
    for t in (0..v.len() as u32).map(TokenId) {
        if v.is_eog(t) {
            if reference.accepting(states) {
                m.insert(t);
            }
        } else if v.is_special(t) && !reference.feed_token(v, states, t).is_empty() {
            m.insert(t);
        }
    }
    m
}

/// Tool calls on the real vocabulary (`Free` mode, a JSON-schema region, text after it): at
/// every step of a scripted generation the mask equals the trie-walked reference, including
/// the steps where real tokens leave the region inside them (`}\n`-like merges).
#[test]
fn smollm2_tool_call_masks_equal_the_reference() {
    let vocab = smollm2();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]
    });
    let g = CompiledGrammar::new(
        GrammarSource::JsonSchema(schema)
            .compile(&Default::default())
            .unwrap(),
    )
    .unwrap();
    let spec = Arc::new(TriggerSpec {
        regions: vec![Region {
            trigger: text("<tool_call>"),
            grammar: g,
            name: "get_weather".into(),
        }],
        after: AfterRegion::Free,
        min_regions: 1,
        max_regions: Some(2),
    });
    let reference = Reference::new(&spec);
    let trie = domino_engine::engine::trie::VocabTrie::new(&vocab);
    let script = "Sure.<tool_call>{\"city\": \"Paris\", \"days\": 3}\n\nDone.";
    let toks = vocab.tokenize(script).unwrap();
    let mut c = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
    let mut states = reference.start();
    let mut mask = TokenSet::new(vocab.len());
    let mut left_inside = 0;
    let mut closing_checked = false;
    for (k, &t) in toks.iter().enumerate() {
        c.compute_mask(&mut mask);
        let want = reference_mask_by_trie(&reference, &vocab, &trie, &states);
        assert!(
            mask == want,
            "step {k}, before {}: {}",
            show(&vocab, t),
            diff(&mask, &want, &vocab)
        );
        if vocab.bytes(t) == b"}" {
            // Tokens that close the call and go on as free text (`},`, `}\n`, `}.`) are
            // allowed: the bridge out of the region.
            let bridges = mask
                .iter()
                .filter(|&u| vocab.bytes(u).len() > 1 && vocab.bytes(u).starts_with(b"}"))
                .count();
            assert!(
                bridges > 10,
                "only {bridges} bridge tokens out of the region"
            );
            closing_checked = true;
        }
        let inside = c.current_region().is_some();
        c.commit(t).unwrap();
        states = reference.feed_token(&vocab, &states, t);
        if inside && c.current_region().is_none() && vocab.bytes(t).len() > 1 {
            left_inside += 1;
        }
    }
    assert!(closing_checked);
    assert_eq!(c.region_spans().len(), 1);
    let (_, s, e) = c.region_spans()[0];
    assert_eq!(
        &script.as_bytes()[s..e.unwrap()],
        br#"{"city": "Paris", "days": 3}"#
    );
    eprintln!(
        "{} steps, {left_inside} tokens left the region inside them",
        toks.len()
    );
}
