//! The Vulkan build against the CPU, on the default model (compiled only with `--features
//! vulkan`; run with `scripts/cargo-vulkan test --test vulkan`).
//!
//! One process cannot hold both a CPU build and a Vulkan build of llama.cpp, so the model is
//! loaded twice in the Vulkan build: with `n_gpu_layers = 0` (no device at all: weights, KV
//! cache and compute on llama.cpp's CPU backend) and fully offloaded to the first Vulkan
//! device. Without a GPU that is Mesa's software device (lavapipe), which llama.cpp skips
//! unless `GGML_VK_VISIBLE_DEVICES` names it: this test sets `GGML_VK_VISIBLE_DEVICES=0`
//! when the variable is unset (set it yourself to pick another device). lavapipe in Mesa 22.3
//! (Debian 12) crashes when a pipeline is created while its queue thread executes earlier work,
//! which ggml-vulkan's lazy pipeline compilation does unless each submission is waited for
//! (docs/vulkan-lavapipe-crash.md): the runtime sets `GGML_VK_SERIALIZE_SUBMISSIONS=1` itself
//! when it offloads to lavapipe, and this test relies on that (it sets nothing of the kind).
//!
//! What "the same" means here — the two backends run different kernels (the Vulkan ones
//! accumulate in fp16 in places), so outputs agree only up to rounding:
//! - logits over a whole prompt (batched, `LogitsAt::All`): the log-probabilities of the
//!   CPU's [`TOP`] most likely tokens within [`LOGIT_TOLERANCE`] of the device's at every
//!   position, and the same top-1 token wherever the CPU's top two are further apart than that;
//! - greedy generation: the same first [`PREFIX`] tokens, unconstrained and constrained
//!   (DOMINO on a GBNF grammar and on a JSON Schema), with speculative drafts off and on
//!   (drafts on: verification is a batched decode on the device), their log-probabilities
//!   within [`LOGPROB_TOLERANCE`] plus 5% of their size. Later tokens may differ where the model is near a tie.
//! - constrained output generated on the device is valid: a viable prefix of the grammar,
//!   and, when complete, a document the schema accepts.

#![cfg(feature = "vulkan")]

mod common;

use domino::decode::draft_policy::DraftPolicy;
use domino::decode::methods::{Decoder, DecoderConfig, Method};
use domino::decode::{FinishReason, GenerationRequest, GenerationResult, SamplingConfig};
use domino::engine::{CompiledGrammar, Constraint, Options};
use domino::grammar::{CompileOptions, GrammarSource};
use domino::runtime::{LogitsAt, Model, ModelOptions, Session, SessionOptions};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Largest difference allowed between the CPU's log-probability (log-softmax of the logits,
/// so a shift of all logits does not count) and the device's, for each of the CPU's
/// [`TOP`] most likely tokens at every position. Measured on lavapipe over a 52-token chat
/// prompt, in two runs (the device's results vary run to run): log-probabilities up to 1.01
/// and 1.46 apart, raw logits up to 1.64 and 1.85; `logits_match_the_cpu` prints both worsts.
const LOGIT_TOLERANCE: f32 = 2.0;
/// Tokens per position whose log-probabilities are compared.
const TOP: usize = 10;
/// Largest difference allowed between the log-probabilities of the same chosen token:
/// this much, plus 5% of the log-probability's size (a token the constraint forces can be
/// very unlikely to the model, e.g. -14.03 on the CPU vs -13.85 on lavapipe).
const LOGPROB_TOLERANCE: f32 = 0.1;
/// Greedy tokens that must be identical on both backends.
const PREFIX: usize = 5;

const JSON_PROMPT: &str = "The following is a JSON object for a person:\n{\"name\": \"John\", \"age\": 30}\nThe following is a JSON object for a dog:\n";
const JSON_WARMUP: &str = "The following is a JSON object for a book:\n{\"title\": \"Dune\", \"year\": 1965}\nThe following is a JSON object for a car:\n";
const GSM8K_QUESTION: &str = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May? Answer in JSON.";
const GSM8K_WARMUP: &str = "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn? Answer in JSON.";
const CHAT_PROMPT: &str = "What is the capital of France?";
/// A prompt the default model answers with a short, complete person.schema.json document
/// (greedy on the CPU: `{"name": "Ada Lovelace", "age": 36, "birthday": "1788-01-01"}`, 39
/// tokens). The GSM8K prompt is no good for a complete document: greedy, the 135M model
/// repeats `thoughts` entries until any token limit.
const PERSON_PROMPT: &str =
    "Return a JSON object with only the name and age of Ada Lovelace (age 36).";
const PERSON_WARMUP: &str =
    "Return a JSON object with only the name and age of Alan Turing (age 41).";
/// Tokens allowed for the complete document: room for the device to word it differently.
const DOCUMENT_TOKENS: usize = 96;

struct Models {
    cpu: Model,
    gpu: Model,
}

/// Both models, and a lock: the tests take turns on the (software) device, which already
/// uses every core.
fn models() -> (&'static Models, MutexGuard<'static, ()>) {
    static MODELS: OnceLock<Models> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let models = MODELS.get_or_init(|| {
        // Only the device choice: the Mesa 22.3 lavapipe workaround is the runtime's own
        // (see the module doc).
        for (var, value) in [("GGML_VK_VISIBLE_DEVICES", "0")] {
            if std::env::var_os(var).is_none() {
                // SAFETY: the first llama.cpp call follows (nothing reads the environment
                // concurrently: every test holds TURN before touching llama.cpp).
                unsafe { std::env::set_var(var, value) };
            }
        }
        let path = common::require_default_model();
        let cpu = Model::load(&path, ModelOptions { n_gpu_layers: 0 }).expect("load on the CPU");
        let gpu = Model::load(&path, ModelOptions::default()).expect("load offloaded");
        Models { cpu, gpu }
    });
    (models, turn)
}

fn session(model: &Model) -> Session<'_> {
    model
        .session(SessionOptions {
            n_ctx: 1024,
            threads: Some(1),
        })
        .expect("session")
}

#[test]
fn every_layer_is_on_a_vulkan_device_and_none_on_the_cpu_model() {
    let (m, _turn) = models();
    let gpu = m.gpu.offload();
    eprintln!("offloaded model: {gpu}");
    assert_eq!(gpu.total, m.gpu.n_layer() + 1);
    assert_eq!(gpu.layers, gpu.total, "{gpu}");
    assert!(
        gpu.devices.iter().any(|d| d.backend == "Vulkan"),
        "{:?}",
        gpu.devices
    );
    let cpu = m.cpu.offload();
    eprintln!("CPU model: {cpu}");
    assert_eq!(cpu.layers, 0);
    assert!(cpu.devices.is_empty());
}

fn argmax(logits: &[f32]) -> (usize, f32) {
    logits
        .iter()
        .copied()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, l)| {
            if l > best.1 { (i, l) } else { best }
        })
}

fn log_softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
    logits.iter().map(|l| l - lse).collect()
}

/// The gap between the best and the second-best logit.
fn margin(logits: &[f32]) -> f32 {
    let (best, top) = argmax(logits);
    let second = logits
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != best)
        .map(|(_, &l)| l)
        .fold(f32::NEG_INFINITY, f32::max);
    top - second
}

#[test]
fn logits_match_the_cpu() {
    let (m, _turn) = models();
    let (mut worst, mut worst_raw) = (0f32, 0f32);
    let mut compared = 0;
    for (text, chat) in [
        (JSON_PROMPT, false),
        (GSM8K_QUESTION, true),
        (CHAT_PROMPT, true),
    ] {
        let tokens = m.cpu.prompt_tokens(text, chat).unwrap();
        assert_eq!(tokens, m.gpu.prompt_tokens(text, chat).unwrap());
        let mut cpu = session(&m.cpu);
        let mut gpu = session(&m.gpu);
        cpu.decode(&tokens, LogitsAt::All).unwrap();
        gpu.decode(&tokens, LogitsAt::All).unwrap();
        for i in 0..tokens.len() {
            let (a, b) = (cpu.logits(i), gpu.logits(i));
            assert_eq!(a.len(), b.len());
            assert!(b.iter().all(|l| l.is_finite()), "non-finite logits at {i}");
            let diff = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            worst_raw = worst_raw.max(diff);
            let (la, lb) = (log_softmax(a), log_softmax(b));
            let mut order: Vec<usize> = (0..a.len()).collect();
            order.sort_by(|&x, &y| a[y].total_cmp(&a[x]));
            for &t in &order[..TOP] {
                let d = (la[t] - lb[t]).abs();
                worst = worst.max(d);
                assert!(
                    d <= LOGIT_TOLERANCE,
                    "{text:?} position {i}: token {t}'s log-probability differs by {d} (> {LOGIT_TOLERANCE})"
                );
            }
            if margin(a) > LOGIT_TOLERANCE {
                assert_eq!(
                    argmax(a).0,
                    argmax(b).0,
                    "{text:?} position {i}: top-1 differs"
                );
            }
            compared += 1;
        }
    }
    eprintln!(
        "logits at {compared} positions: largest |cpu - vulkan| log-probability among the top {TOP} = {worst:.4} (tolerance {LOGIT_TOLERANCE}); largest raw logit difference {worst_raw:.4}"
    );
}

fn grammar(name: &str) -> GrammarSource {
    GrammarSource::from_path(&common::repo_root().join("grammars").join(name))
        .expect("shipped grammar")
}

/// (name, method, grammar, prompt, warm-up prompt, chat).
type Case = (
    &'static str,
    Method,
    Option<GrammarSource>,
    &'static str,
    &'static str,
    bool,
);

fn cases() -> Vec<Case> {
    vec![
        (
            "unconstrained",
            Method::None,
            None,
            CHAT_PROMPT,
            GSM8K_WARMUP,
            true,
        ),
        (
            "json.gbnf",
            Method::Domino,
            Some(grammar("json.gbnf")),
            JSON_PROMPT,
            JSON_WARMUP,
            false,
        ),
        (
            "gsm8k.schema.json",
            Method::Domino,
            Some(grammar("gsm8k.schema.json")),
            GSM8K_QUESTION,
            GSM8K_WARMUP,
            true,
        ),
    ]
}

fn request(model: &Model, text: &str, chat: bool, max_tokens: usize) -> GenerationRequest {
    GenerationRequest {
        prompt: model.prompt_tokens(text, chat).expect("tokenize"),
        max_tokens,
        sampling: SamplingConfig::default(),
        logprobs: true,
    }
}

/// Generate on `model` with `decoder` (built over either model: the vocabularies are the same).
fn generate(
    decoder: &mut Decoder,
    model: &Model,
    prompt: &str,
    chat: bool,
    max_tokens: usize,
) -> GenerationResult {
    let mut s = session(model);
    decoder
        .generate(
            &mut s,
            &request(model, prompt, chat, max_tokens),
            &mut |_, _| Ok(()),
        )
        .expect("generate")
}

/// The software device is slow (about a token per second, less on a busy machine), so the
/// device generates only short outputs: draft counts are learned on the CPU (a warm-up on
/// another prompt, then the CPU's own run), and the device then verifies drafts with them.
#[test]
fn greedy_prefixes_match_the_cpu_with_drafts_off_and_on() {
    let (m, _turn) = models();
    let mut drafted = 0;
    for (name, method, source, prompt, warmup, chat) in cases() {
        // Unconstrained decoding has no grammar to draft from.
        let drafts: &[usize] = if source.is_some() { &[0, 10] } else { &[0] };
        for &draft in drafts {
            let config = DecoderConfig {
                method,
                source: source.clone(),
                draft,
                draft_threshold: 0.3,
                draft_policy: DraftPolicy::Threshold,
                ..DecoderConfig::default()
            };
            let mut decoder = Decoder::new(&config, &m.cpu).expect("decoder");
            if draft > 0 {
                generate(&mut decoder, &m.cpu, warmup, chat, 32);
            }
            let cpu = generate(&mut decoder, &m.cpu, prompt, chat, PREFIX + 3);
            let gpu = generate(&mut decoder, &m.gpu, prompt, chat, PREFIX + 3);
            eprintln!(
                "{name} --draft {draft}: cpu {:?} | vulkan {:?} (vulkan: {} forward passes, drafts {}/{} accepted)",
                cpu.text(),
                gpu.text(),
                gpu.stats.forward_passes,
                gpu.stats.draft_accepted,
                gpu.stats.draft_proposed
            );
            assert!(cpu.tokens.len() >= PREFIX && gpu.tokens.len() >= PREFIX);
            assert_eq!(
                cpu.tokens[..PREFIX],
                gpu.tokens[..PREFIX],
                "{name} --draft {draft}: the first {PREFIX} greedy tokens differ: {:?} vs {:?}",
                cpu.text(),
                gpu.text()
            );
            for (i, (a, b)) in cpu
                .logprobs
                .iter()
                .zip(&gpu.logprobs)
                .take(PREFIX)
                .enumerate()
            {
                assert!(
                    (a - b).abs() <= LOGPROB_TOLERANCE + 0.05 * a.abs(),
                    "{name} --draft {draft}: token {i} log-probability {a} (cpu) vs {b} (vulkan)"
                );
            }
            if let Some(source) = &source {
                // Constrained output from the device is a viable prefix of the grammar.
                viable(source, &m.gpu, &gpu);
            }
            drafted += gpu.stats.draft_proposed;
        }
    }
    assert!(drafted > 0, "no draft was verified on the device");
}

fn viable(source: &GrammarSource, model: &Model, r: &GenerationResult) {
    let compiled =
        CompiledGrammar::new(source.compile(&CompileOptions::default()).unwrap()).unwrap();
    let vocab = model.vocabulary();
    let mut c = Constraint::new(&compiled, &vocab, Options::default()).unwrap();
    c.commit_bytes(&r.bytes)
        .unwrap_or_else(|e| panic!("{source:?}: not a viable prefix ({e}): {:?}", r.text()));
}

fn validates(schema: &std::path::Path, text: &str) -> Result<(), String> {
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(schema).unwrap()).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let v = jsonschema::validator_for(&schema).map_err(|e| e.to_string())?;
    v.validate(&doc).map_err(|e| e.to_string())
}

/// A whole constrained document generated on the device (drafts on) is valid.
///
/// On lavapipe this is the test that met Mesa 22.3's pipeline-creation race (SIGSEGV in the
/// queue thread, `lp_csctx_set_cs_ssbos`, while the test's thread was in
/// `lvp_compute_pipeline_create`); `GGML_VK_SERIALIZE_SUBMISSIONS=1`, which the runtime sets
/// when it offloads to lavapipe, avoids it. docs/vulkan-lavapipe-crash.md has the backtraces.
#[test]
fn a_complete_constrained_document_from_the_device_is_valid() {
    let (m, _turn) = models();
    let name = "person.schema.json";
    let source = grammar(name);
    let config = DecoderConfig {
        method: Method::Domino,
        source: Some(source.clone()),
        draft: 10,
        draft_threshold: 0.3,
        draft_policy: DraftPolicy::Threshold,
        ..DecoderConfig::default()
    };
    let mut decoder = Decoder::new(&config, &m.cpu).expect("decoder");
    generate(&mut decoder, &m.cpu, PERSON_WARMUP, true, DOCUMENT_TOKENS);
    let r = generate(&mut decoder, &m.gpu, PERSON_PROMPT, true, DOCUMENT_TOKENS);
    eprintln!(
        "{name} on vulkan ({:?}, drafts {}/{} accepted): {}",
        r.finish_reason,
        r.stats.draft_accepted,
        r.stats.draft_proposed,
        r.text()
    );
    viable(&source, &m.gpu, &r);
    assert_ne!(r.finish_reason, FinishReason::Length, "{}", r.text());
    let schema = common::repo_root().join("grammars").join(name);
    validates(&schema, &r.text()).unwrap_or_else(|e| panic!("{e}\n{}", r.text()));
}
