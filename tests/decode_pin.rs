//! Behaviour pin of every generation path on the real SmolLM2 model: the exact token ids and
//! finish reasons of `generate` for every method (greedy and seeded sampling), the REPL's
//! loop (with KV-cache reuse), Algorithm 3 (retokenization), one Table 2 sample and one
//! Table 3 repetition, compared with `tests/golden/decode_pin.json`.
//!
//! The golden file was written by the code *before* the generation loops were merged into
//! one (issue 14); this test is the proof that the merge changed no output. Regenerate it
//! only for a deliberate behaviour change: `DOMINO_BLESS=1 cargo test --test decode_pin`.
//!
//! Kept cheap for CI's two cores: one model load, two threads, about 32 tokens per run.

mod common;

use domino::decode::draft_policy::DraftPolicy;
use domino::decode::methods::{Decoder, DecoderConfig, Method};
use domino::decode::{GenerationRequest, SamplingConfig};
use domino::eval::backend::LlamaEvalBackend;
use domino::eval::throughput::{Manifest, ThroughputOptions, run_throughput};
use domino::eval::{Method as EvalMethod, RunOptions, Task, run_task};
use domino::grammar::GrammarSource;
use domino::repl::generation::{GenConfig, generate as repl_generate};
use domino::runtime::{Model, ModelOptions, Session, SessionOptions};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

/// A chat prompt after which SmolLM2 writes a short JSON object and stops.
const PROMPT: &str = "Write a JSON object for a person named Ada who is 36 years old.";
const MAX_TOKENS: usize = 24;

fn session_options() -> SessionOptions {
    SessionOptions {
        n_ctx: 2048,
        threads: Some(2),
    }
}

fn schema() -> GrammarSource {
    GrammarSource::from_path(&common::repo_root().join("grammars/person.schema.json"))
        .expect("shipped schema")
}

fn sampling(sampled: bool) -> SamplingConfig {
    if sampled {
        SamplingConfig {
            temperature: 0.8,
            seed: 7,
            ..SamplingConfig::default()
        }
    } else {
        SamplingConfig::default()
    }
}

fn ids(tokens: &[domino::vocab::TokenId]) -> Vec<u32> {
    tokens.iter().map(|t| t.0).collect()
}

/// Every decode method: (name, config).
fn methods() -> Vec<(&'static str, DecoderConfig)> {
    let base = |method| DecoderConfig {
        method,
        source: Some(schema()),
        ..DecoderConfig::default()
    };
    vec![
        ("none", base(Method::None)),
        ("domino", base(Method::Domino)),
        (
            "domino-opportunistic",
            DecoderConfig {
                opportunistic: true,
                ..base(Method::Domino)
            },
        ),
        (
            "domino-draft8-cost",
            DecoderConfig {
                opportunistic: true,
                draft: 8,
                draft_policy: DraftPolicy::Cost,
                ..base(Method::Domino)
            },
        ),
        (
            "domino-draft8-threshold",
            DecoderConfig {
                draft: 8,
                draft_policy: DraftPolicy::Threshold,
                ..base(Method::Domino)
            },
        ),
        ("naive", base(Method::Naive)),
        ("template", base(Method::Template)),
        ("llama-grammar", base(Method::LlamaGrammar)),
    ]
}

fn decode_runs(model: &Model, session: &mut Session<'_>, out: &mut BTreeMap<String, Value>) {
    for (name, config) in methods() {
        for sampled in [false, true] {
            let mut decoder = Decoder::new(&config, model).expect("build decoder");
            // Draft methods run twice with one decoder: the second run drafts from learned
            // counts.
            let runs: Vec<Value> = (0..1 + (config.draft > 0) as usize)
                .map(|_| {
                    session.clear();
                    let request = GenerationRequest {
                        prompt: model.prompt_tokens(PROMPT, true).unwrap(),
                        max_tokens: MAX_TOKENS,
                        sampling: sampling(sampled),
                        logprobs: true,
                    };
                    let mut streamed = Vec::new();
                    let r = decoder
                        .generate(session, &request, &mut |t, _| {
                            streamed.push(t.0);
                            Ok(())
                        })
                        .expect("generate");
                    assert_eq!(streamed, ids(&r.tokens), "{name}: callback calls = tokens");
                    assert_eq!(r.logprobs.len(), r.tokens.len(), "{name}");
                    json!({
                        "tokens": ids(&r.tokens),
                        "finish": r.finish_reason.as_str(),
                        "interventions": r.stats.interventions,
                    })
                })
                .collect();
            let mode = if sampled { "sampled" } else { "greedy" };
            out.insert(format!("generate/{name}/{mode}"), Value::Array(runs));
        }
    }
}

fn repl_runs(model: &Model, session: &mut Session<'_>, out: &mut BTreeMap<String, Value>) {
    let decoder = Decoder::new(
        &DecoderConfig {
            method: Method::Domino,
            source: Some(schema()),
            ..DecoderConfig::default()
        },
        model,
    )
    .unwrap();
    let cancel = AtomicBool::new(false);
    session.clear();
    for (name, constrained, sampled) in [
        ("domino-greedy", true, false),
        ("domino-sampled", true, true),
        ("none-sampled", false, true),
        // The same prompt again: the KV cache is reused.
        ("domino-greedy-again", true, false),
    ] {
        let mut constraint = decoder.constraint(model).unwrap().filter(|_| constrained);
        let prompt = model.prompt_tokens(PROMPT, true).unwrap();
        let config = GenConfig {
            max_tokens: MAX_TOKENS,
            sampling: sampling(sampled),
        };
        let mut heat = Vec::new();
        let o = repl_generate(
            session,
            &prompt,
            constraint.as_mut(),
            &config,
            &cancel,
            &mut |e| {
                heat.push((e.token.0, e.intervened));
                Ok(())
            },
        )
        .expect("repl generate");
        assert_eq!(heat.len(), o.tokens.len());
        out.insert(
            format!("repl/{name}"),
            json!({
                "tokens": ids(&o.tokens),
                "intervened": o.intervened,
                "finish": o.finish.as_str(),
                "reused_prompt_tokens": o.stats.reused_prompt_tokens,
                "interventions": o.stats.interventions,
            }),
        );
    }
}

fn retokenize_run(model: &Model, session: &mut Session<'_>, out: &mut BTreeMap<String, Value>) {
    let prompt = model.tokenize("Write a JSON object for a person:\n", true, false);
    let text = "{\"name\": \"Ada Lovelace\", \"age\": 36}";
    let (tokens, _) = domino::eval::retokenize::retokenize(session, &prompt, text.as_bytes())
        .expect("retokenize");
    out.insert("retokenize".into(), json!(ids(&tokens)));
}

fn table2_run(model: &Model, out: &mut BTreeMap<String, Value>) {
    let dir = common::scratch_dir("decode-pin-table2");
    let _ = std::fs::remove_dir_all(&dir);
    let mut backend = LlamaEvalBackend::new(model, session_options()).unwrap();
    let opts = RunOptions {
        limit: Some(1),
        shots: 1,
        methods: vec![
            EvalMethod::None,
            "domino".parse().unwrap(),
            "template".parse().unwrap(),
        ],
        max_tokens: Some(24),
        ..RunOptions::default()
    };
    run_task(Task::Gsm8k, &mut backend, &opts, &dir).expect("eval gsm8k");
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        out.insert(
            format!("table2/gsm8k/{}", v["method"].as_str().unwrap()),
            json!({
                "tokens": v["tokens"],
                "finish": v["finish_reason"],
                "interventions": v["interventions"],
                "output_text": v["output_text"],
            }),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn table3_run(model: &Model, out: &mut BTreeMap<String, Value>) {
    let dir = common::scratch_dir("decode-pin-table3");
    let _ = std::fs::remove_dir_all(&dir);
    let mut backend = LlamaEvalBackend::new(model, session_options()).unwrap();
    let opts = ThroughputOptions {
        methods: vec![
            EvalMethod::None,
            "domino-s8".parse().unwrap(),
            "llama-grammar".parse().unwrap(),
        ],
        reps: Some(1),
        warmup: Some(0),
        max_tokens: Some(24),
        workloads: vec!["xml".into()],
        ..ThroughputOptions::default()
    };
    let manifest = Manifest::load_default().unwrap();
    run_throughput(&manifest, &mut backend, &opts, &dir).expect("throughput");
    let text = std::fs::read_to_string(dir.join("throughput.jsonl")).unwrap();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        out.insert(
            format!("table3/xml/{}", v["method"].as_str().unwrap()),
            json!({
                "output_text": v["output_text"],
                "finish": v["finish_reason"],
                "interventions": v["interventions"],
                "generated_tokens": v["generated_tokens"],
            }),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_generation_path_matches_the_golden_file() {
    let model = Model::load(common::require_default_model(), ModelOptions::default())
        .expect("load SmolLM2");
    let mut session = model.session(session_options()).unwrap();
    let mut out = BTreeMap::new();
    decode_runs(&model, &mut session, &mut out);
    repl_runs(&model, &mut session, &mut out);
    retokenize_run(&model, &mut session, &mut out);
    drop(session);
    table2_run(&model, &mut out);
    table3_run(&model, &mut out);

    let golden_path = common::repo_root().join("tests/golden/decode_pin.json");
    let actual = Value::Object(out.into_iter().collect());
    if std::env::var_os("DOMINO_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(golden_path.parent().unwrap()).unwrap();
        let mut text = serde_json::to_string_pretty(&actual).unwrap();
        text.push('\n');
        std::fs::write(&golden_path, text).unwrap();
        return;
    }
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(&golden_path)
            .expect("tests/golden/decode_pin.json is missing: DOMINO_BLESS=1 writes it"),
    )
    .expect("golden file is JSON");
    let (Value::Object(want), Value::Object(got)) = (&golden, &actual) else {
        unreachable!()
    };
    let mut diffs = Vec::new();
    for (key, w) in want {
        match got.get(key) {
            None => diffs.push(format!("{key}: missing from this run")),
            Some(g) if g != w => diffs.push(format!("{key}:\n  golden: {w}\n  now:    {g}")),
            Some(_) => {}
        }
    }
    for key in got.keys().filter(|k| !want.contains_key(*k)) {
        diffs.push(format!("{key}: not in the golden file"));
    }
    assert!(
        diffs.is_empty(),
        "{} generation path(s) differ from tests/golden/decode_pin.json \
         (DOMINO_BLESS=1 rewrites it, for deliberate changes only):\n{}",
        diffs.len(),
        diffs.join("\n")
    );
}
