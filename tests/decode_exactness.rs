//! Exactness of constrained decoding on the real SmolLM2 model (not speed):
//! speculation and opportunistic masking never change greedy output, k = ∞ is
//! unconstrained-equivalent where the model already writes a valid document (and `naive`
//! is not), grammar end costs no extra forward pass, outputs are sound.
//!
//! Runs use one thread and short outputs so the suite stays cheap on CI's two cores.

mod common;

use domino::decode::draft_policy::DraftPolicy;
use domino::decode::methods::{Decoder, DecoderConfig, Method};
use domino::decode::{FinishReason, GenerationRequest, GenerationResult, SamplingConfig};
use domino::engine::{CompiledGrammar, Constraint, Options};
use domino::grammar::{CompileOptions, GrammarSource};
use domino::runtime::{Model, ModelOptions, SessionOptions};
use domino::vocab::TokenId;
use std::path::Path;
use std::sync::OnceLock;

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        Model::load(common::require_default_model(), ModelOptions::default()).expect("load SmolLM2")
    })
}

fn grammar(name: &str) -> GrammarSource {
    GrammarSource::from_path(&common::repo_root().join("grammars").join(name))
        .expect("shipped grammar")
}

/// A raw-completion JSON prompt after which SmolLM2's greedy output is a JSON object.
const JSON_PROMPT: &str = "The following is a JSON object for a person:\n{\"name\": \"John\", \"age\": 30}\nThe following is a JSON object for a dog:\n";
const JSON_WARMUP: &str = "The following is a JSON object for a book:\n{\"title\": \"Dune\", \"year\": 1965}\nThe following is a JSON object for a car:\n";
const GSM8K_QUESTION: &str = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May? Answer in JSON.";
const GSM8K_WARMUP: &str = "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn? Answer in JSON.";
const C_PROMPT: &str = "// A C program that sums an array of five numbers and prints the result.\n";
const C_WARMUP: &str = "// A C program that prints the numbers from 1 to 10.\n";

fn config(method: Method, source: GrammarSource) -> DecoderConfig {
    DecoderConfig {
        method,
        source: Some(source),
        ..DecoderConfig::default()
    }
}

fn request(
    prompt: &str,
    chat: bool,
    max_tokens: usize,
    sampling: SamplingConfig,
) -> GenerationRequest {
    GenerationRequest {
        prompt: model().prompt_tokens(prompt, chat).expect("tokenize"),
        max_tokens,
        sampling,
        logprobs: true,
    }
}

fn run(decoder: &mut Decoder, req: &GenerationRequest) -> GenerationResult {
    let mut session = model()
        .session(SessionOptions {
            n_ctx: 1024,
            threads: Some(1),
        })
        .expect("session");
    decoder
        .generate(&mut session, req, &mut |_, _| Ok(()))
        .expect("generate")
}

fn greedy() -> SamplingConfig {
    SamplingConfig::default()
}

/// The three grammars of the speculation/opportunistic tests: (grammar, prompt, warm-up
/// prompt, chat, max tokens).
fn cases() -> Vec<(GrammarSource, &'static str, &'static str, bool, usize)> {
    vec![
        (grammar("json.gbnf"), JSON_PROMPT, JSON_WARMUP, false, 48),
        (
            grammar("gsm8k.schema.json"),
            GSM8K_QUESTION,
            GSM8K_WARMUP,
            true,
            64,
        ),
        (grammar("c.gbnf"), C_PROMPT, C_WARMUP, false, 48),
    ]
}

#[test]
fn speculation_never_changes_greedy_output() {
    let (mut proposed, mut accepted) = (0, 0);
    for (source, prompt, warmup, chat, n) in cases() {
        let mut plain = Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..config(Method::Domino, source.clone())
            },
            model(),
        )
        .unwrap();
        let req = request(prompt, chat, n, greedy());
        let a = run(&mut plain, &req);
        assert_eq!(a.stats.draft_proposed, 0);
        // The threshold policy verifies every proposal (deterministic: the rejection path is
        // surely taken); the cost policy verifies the prefixes its timings choose.
        for policy in [DraftPolicy::Threshold, DraftPolicy::Cost] {
            // A low threshold and counts learned on another prompt: many drafts, some wrong.
            let mut spec = Decoder::new(
                &DecoderConfig {
                    draft: 10,
                    draft_threshold: 0.3,
                    draft_policy: policy,
                    ..config(Method::Domino, source.clone())
                },
                model(),
            )
            .unwrap();
            run(&mut spec, &request(warmup, chat, n, greedy()));
            let b = run(&mut spec, &req);
            assert_eq!(
                a.tokens,
                b.tokens,
                "{source:?}: --draft 10 --draft-policy {policy:?} changed the output:\n{:?}\nvs\n{:?}",
                a.text(),
                b.text()
            );
            assert_eq!(a.finish_reason, b.finish_reason);
            // Same per-token log-probabilities (the verification logits are the same model's).
            for (x, y) in a.logprobs.iter().zip(&b.logprobs) {
                assert!((x - y).abs() < 1e-3, "logprob {x} vs {y}");
            }
            assert!(b.stats.forward_passes <= a.stats.forward_passes);
            if policy == DraftPolicy::Threshold {
                proposed += b.stats.draft_proposed;
                accepted += b.stats.draft_accepted;
            } else {
                assert!(
                    spec.draft_tuner().cost.estimate().is_some(),
                    "the cost policy measured no forward pass"
                );
            }
        }
    }
    assert!(accepted > 0, "no draft was ever accepted");
    assert!(
        proposed > accepted,
        "no draft was ever rejected: the rejection path went untested"
    );
}

/// Under sampling, verification draws each output token exactly once from the same
/// constrained distribution (same logits, same sampler state) as the plain loop, so with
/// the same seed the sampled output is the same token for token — the strongest form of
/// "the output distribution is the constrained model's".
#[test]
fn speculation_never_changes_seeded_sampled_output() {
    let source = grammar("gsm8k.schema.json");
    for (seed, opportunistic) in [(7, false), (8, true)] {
        let sampling = SamplingConfig {
            temperature: 1.0,
            seed,
            ..Default::default()
        };
        let base = DecoderConfig {
            opportunistic,
            ..config(Method::Domino, source.clone())
        };
        let mut plain = Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..base.clone()
            },
            model(),
        )
        .unwrap();
        let req = request(GSM8K_QUESTION, true, 48, sampling.clone());
        let a = run(&mut plain, &req);
        for policy in [DraftPolicy::Threshold, DraftPolicy::Cost] {
            let mut spec = Decoder::new(
                &DecoderConfig {
                    draft: 8,
                    draft_threshold: 0.2,
                    draft_policy: policy,
                    ..base.clone()
                },
                model(),
            )
            .unwrap();
            run(
                &mut spec,
                &request(GSM8K_WARMUP, true, 48, sampling.clone()),
            );
            let b = run(&mut spec, &req);
            assert_eq!(
                a.tokens,
                b.tokens,
                "seed {seed} {policy:?}: {:?}\nvs\n{:?}",
                a.text(),
                b.text()
            );
            if policy == DraftPolicy::Threshold {
                assert!(b.stats.draft_proposed > 0);
            }
        }
    }
}

#[test]
fn opportunistic_masking_never_changes_greedy_output() {
    for (source, prompt, _, chat, n) in cases() {
        let mut full = Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..config(Method::Domino, source.clone())
            },
            model(),
        )
        .unwrap();
        let mut opp = Decoder::new(
            &DecoderConfig {
                draft: 0,
                opportunistic: true,
                ..config(Method::Domino, source.clone())
            },
            model(),
        )
        .unwrap();
        let req = request(prompt, chat, n, greedy());
        let a = run(&mut full, &req);
        let b = run(&mut opp, &req);
        assert_eq!(
            a.tokens, b.tokens,
            "{source:?}: --opportunistic changed the output"
        );
        assert_eq!(a.stats.interventions, b.stats.interventions);
        assert_eq!(
            a.stats.masks_computed,
            a.stats.generated_tokens + (a.finish_reason == FinishReason::Eos) as usize
        );
        assert_eq!(
            b.stats.masks_computed, b.stats.interventions,
            "opportunistic computes a mask only on rejection"
        );
        assert!(b.stats.masks_computed < a.stats.masks_computed);
    }
}

/// Where the complete document ends in `text` (a JSON value, whitespace after it excluded).
fn json_document_end(text: &str) -> Option<usize> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<serde_json::Value>();
    match stream.next() {
        Some(Ok(_)) => Some(stream.byte_offset()),
        _ => None,
    }
}

#[test]
fn k_inf_is_unconstrained_equivalent_and_naive_is_not() {
    let n = 40;
    let req = request(JSON_PROMPT, false, n, greedy());
    let free = run(
        &mut Decoder::new(
            &DecoderConfig {
                method: Method::None,
                ..DecoderConfig::default()
            },
            model(),
        )
        .unwrap(),
        &req,
    );
    let end = json_document_end(&free.text())
        .expect("the unconstrained greedy output starts with a JSON document");
    // The tokens that make up the document (the last one may run past its end).
    let mut covered = 0;
    let doc_tokens = free
        .tokens
        .iter()
        .take_while(|&&t| {
            let before = covered;
            covered += model().vocabulary().bytes(t).len();
            before < end
        })
        .count();
    assert!(
        doc_tokens >= 10,
        "document too short to be a meaningful check"
    );

    let domino = run(
        &mut Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..config(Method::Domino, grammar("json.gbnf"))
            },
            model(),
        )
        .unwrap(),
        &req,
    );
    assert_eq!(
        domino.tokens[..doc_tokens],
        free.tokens[..doc_tokens],
        "k = inf changed the model's own valid document"
    );

    let naive = run(
        &mut Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..config(Method::Naive, grammar("json.gbnf"))
            },
            model(),
        )
        .unwrap(),
        &req,
    );
    let diverge = (0..doc_tokens)
        .find(|&i| naive.tokens.get(i) != Some(&free.tokens[i]))
        .expect("naive (k = 0) reproduced the document");
    // The model's token at the divergence is a bridge token: k = inf allows it, k = 0 blocks it.
    let ir = grammar("json.gbnf")
        .compile(&CompileOptions::default())
        .unwrap();
    let compiled = CompiledGrammar::new(ir).unwrap();
    let vocab = model().vocabulary();
    let mut inf = Constraint::new(&compiled, &vocab, Options::default()).unwrap();
    let mut k0 = Constraint::new(
        &compiled,
        &vocab,
        Options {
            lookahead: Some(0),
            ..Options::default()
        },
    )
    .unwrap();
    for &t in &free.tokens[..diverge] {
        inf.commit(t).unwrap();
        k0.commit(t).unwrap();
    }
    let bridge = free.tokens[diverge];
    assert!(
        inf.allows(bridge),
        "k = inf must allow the model's token {:?}",
        String::from_utf8_lossy(vocab.bytes(bridge))
    );
    assert!(
        !k0.allows(bridge),
        "k = 0 must block the bridge token {:?}",
        String::from_utf8_lossy(vocab.bytes(bridge))
    );
}

#[test]
fn grammar_end_stops_without_an_extra_forward_pass() {
    for draft in [0, 4] {
        for method in [Method::Domino, Method::Template] {
            let source = GrammarSource::Regex("(yes|no), because [a-z]{1,12}\\.".into());
            let mut d = Decoder::new(
                &DecoderConfig {
                    draft,
                    ..config(method, source)
                },
                model(),
            )
            .unwrap();
            let r = run(
                &mut d,
                &request(
                    "Is the sky blue? Answer yes or no with a short reason.",
                    true,
                    40,
                    greedy(),
                ),
            );
            assert_eq!(
                r.finish_reason,
                FinishReason::GrammarEnd,
                "{method:?}: {:?}",
                r.text()
            );
            assert!(r.text().ends_with('.'), "{:?}", r.text());
            if draft == 0 && method == Method::Domino {
                // The prompt's pass plus one per generated token except the last.
                assert_eq!(r.stats.forward_passes, r.stats.generated_tokens);
            }
            assert!(r.stats.forward_passes <= r.stats.generated_tokens);
        }
    }
}

#[test]
fn length_is_reported_and_the_prefix_is_viable() {
    let mut d = Decoder::new(&config(Method::Domino, grammar("json.gbnf")), model()).unwrap();
    let r = run(&mut d, &request(JSON_PROMPT, false, 7, greedy()));
    assert_eq!(r.finish_reason, FinishReason::Length);
    assert_eq!(r.tokens.len(), 7);
    assert_eq!(r.logprobs.len(), 7);
    assert!(r.logprobs.iter().all(|l| l.is_finite() && *l <= 0.0));
}

fn validates(schema: &Path, text: &str) -> Result<(), String> {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema).unwrap()).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let v = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    v.validate(&doc).map_err(|e| e.to_string())
}

/// Seeded sampled runs (temperature 1, several methods, speculation on): every complete
/// output validates against the schema, every output is a viable prefix.
#[test]
fn sampled_outputs_are_sound() {
    let schema = common::repo_root()
        .join("grammars")
        .join("gsm8k.schema.json");
    let source = grammar("gsm8k.schema.json");
    let ir = source.compile(&CompileOptions::default()).unwrap();
    let compiled = CompiledGrammar::new(ir).unwrap();
    let vocab = model().vocabulary();
    let mut complete = 0;
    for (seed, method, opportunistic) in [
        (1, Method::Domino, false),
        (2, Method::Domino, true),
        (3, Method::Template, false),
        (4, Method::Domino, true),
    ] {
        let mut d = Decoder::new(
            &DecoderConfig {
                draft: 4,
                draft_threshold: 0.5,
                opportunistic,
                ..config(method, source.clone())
            },
            model(),
        )
        .unwrap();
        let sampling = SamplingConfig {
            temperature: 1.0,
            seed,
            ..Default::default()
        };
        let r = run(&mut d, &request(GSM8K_QUESTION, true, 120, sampling));
        let mut c = Constraint::new(&compiled, &vocab, Options::default()).unwrap();
        c.commit_bytes(&r.bytes).unwrap_or_else(|e| {
            panic!(
                "seed {seed}: output is not a viable prefix ({e}): {:?}",
                r.text()
            )
        });
        if r.finish_reason != FinishReason::Length {
            validates(&schema, &r.text())
                .unwrap_or_else(|e| panic!("seed {seed} {method:?}: {e}\n{}", r.text()));
            complete += 1;
        }
    }
    eprintln!("{complete} of 4 sampled outputs complete");
}

#[test]
fn llama_grammar_baseline_agrees_with_domino_under_greedy() {
    // llama.cpp's sampler checks every byte of a token, so it is minimally invasive too:
    // both must produce the same greedy tokens.
    let req = request(JSON_PROMPT, false, 32, greedy());
    let a = run(
        &mut Decoder::new(
            &DecoderConfig {
                draft: 0,
                ..config(Method::Domino, grammar("json.gbnf"))
            },
            model(),
        )
        .unwrap(),
        &req,
    );
    let b = run(
        &mut Decoder::new(&config(Method::LlamaGrammar, grammar("json.gbnf")), model()).unwrap(),
        &req,
    );
    assert_eq!(a.tokens, b.tokens, "{:?}\nvs\n{:?}", a.text(), b.text());
    assert!(
        b.stats.interventions > 0,
        "the rejection path of the baseline went untested"
    );
    // A schema goes through the GBNF printer.
    let b = run(
        &mut Decoder::new(
            &config(Method::LlamaGrammar, grammar("gsm8k.schema.json")),
            model(),
        )
        .unwrap(),
        &request(GSM8K_QUESTION, true, 24, greedy()),
    );
    let mut c = Constraint::new(
        &CompiledGrammar::new(
            grammar("gsm8k.schema.json")
                .compile(&CompileOptions::default())
                .unwrap(),
        )
        .unwrap(),
        &model().vocabulary(),
        Options::default(),
    )
    .unwrap();
    c.commit_bytes(&b.bytes).unwrap_or_else(|e| {
        panic!(
            "llama-grammar output is outside the schema's language ({e}): {:?}",
            b.text()
        )
    });
}

#[test]
fn template_appends_forced_text_without_the_model() {
    // After `{"thoughts": [` … the schema forces key names; the template method appends
    // them as the tokenizer splits them.
    let source = GrammarSource::Gbnf("root ::= \"{\\\"answer\\\": \" [0-9]+ \"}\"".into());
    let mut d = Decoder::new(
        &DecoderConfig {
            draft: 0,
            ..config(Method::Template, source)
        },
        model(),
    )
    .unwrap();
    let r = run(
        &mut d,
        &request("What is 6 times 7? Reply in JSON.", true, 20, greedy()),
    );
    assert!(r.text().starts_with("{\"answer\": "), "{:?}", r.text());
    assert!(r.stats.forced_tokens >= 3, "{:?}", r.stats);
    assert_eq!(r.finish_reason, FinishReason::GrammarEnd);
    // The forced prefix went in with the prompt: fewer passes than tokens.
    assert!(r.stats.forward_passes < r.stats.generated_tokens);
    let _ = TokenId(0);
}
