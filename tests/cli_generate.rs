//! `domino generate` end to end on the default model: text and JSON output, prompt from
//! stdin, default model resolution, and exit codes (1 runtime error, 2 usage error).

mod common;

use assert_cmd::Command;

fn domino() -> Command {
    let mut c = Command::cargo_bin("domino").unwrap();
    c.env_remove("DOMINO_MODEL")
        .env("NO_COLOR", "1")
        .current_dir(common::repo_root());
    c
}

fn generate() -> Command {
    let model = common::require_default_model();
    let mut c = domino();
    c.arg("generate")
        .arg("-m")
        .arg(model)
        .args(["--threads", "1"]);
    c
}

fn stdout_of(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn prints_a_continuation() {
    let text = stdout_of(generate().args(["The capital of France is", "-n", "16"]));
    assert!(text.contains("Paris"), "{text:?}");
    // Only the generated text goes to stdout: no prompt echo, no logs.
    assert!(!text.contains("The capital of France is"));
}

#[test]
fn json_output_has_text_tokens_finish_reason_and_real_stats() {
    let out =
        stdout_of(generate().args(["--format", "json", "-n", "16", "The capital of France is"]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let tokens = v["tokens"].as_array().unwrap();
    assert_eq!(tokens.len(), 16);
    assert!(v["text"].as_str().unwrap().contains("Paris"));
    assert_eq!(v["finish_reason"], "length");
    let stats = &v["stats"];
    assert_eq!(stats["generated_tokens"], 16);
    assert_eq!(stats["prompt_tokens"], 5);
    assert_eq!(stats["forward_passes"], 16);
    assert!(stats["decode_ms"].as_f64().unwrap() > 0.0);
    assert!(stats["prompt_ms"].as_f64().unwrap() > 0.0);
    let tps = stats["tokens_per_s"].as_f64().unwrap();
    let expected = 16.0 / (stats["decode_ms"].as_f64().unwrap() / 1000.0);
    assert!(
        (tps - expected).abs() < 1e-6 * expected,
        "{tps} vs {expected}"
    );
    let logprobs = v["logprobs"].as_array().unwrap();
    assert_eq!(logprobs.len(), 16);
    assert!(logprobs.iter().all(|l| l.as_f64().unwrap() <= 0.0));
    // The text output of the same greedy run is the same text.
    let text = stdout_of(generate().args(["-n", "16", "The capital of France is"]));
    assert_eq!(text, v["text"].as_str().unwrap());
}

#[test]
fn reads_the_prompt_from_stdin() {
    let from_stdin = stdout_of(
        generate()
            .args(["-n", "8"])
            .write_stdin("The capital of France is"),
    );
    let from_arg = stdout_of(generate().args(["-n", "8", "The capital of France is"]));
    assert_eq!(from_stdin, from_arg);
}

#[test]
fn chat_mode_answers_and_stops_at_eos() {
    let out = stdout_of(generate().args([
        "--chat",
        "--format",
        "json",
        "-n",
        "200",
        "What is 2 + 2? Answer with one word.",
    ]));
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["finish_reason"], "eos", "{v}");
    assert!(!v["text"].as_str().unwrap().contains("<|im_end|>"));
}

#[test]
fn seeded_sampling_is_reproducible_from_the_cli() {
    let args = [
        "--temp",
        "1.0",
        "--top-p",
        "0.9",
        "--seed",
        "11",
        "-n",
        "24",
        "Once upon a time",
    ];
    assert_eq!(
        stdout_of(generate().args(args)),
        stdout_of(generate().args(args))
    );
}

#[test]
fn default_model_is_found_under_models() {
    common::require_default_model();
    let text = stdout_of(domino().args([
        "generate",
        "-n",
        "4",
        "--threads",
        "1",
        "The capital of France is",
    ]));
    assert!(!text.is_empty());
}

#[test]
fn missing_model_exits_1_naming_the_path() {
    let out = domino()
        .args(["generate", "-m", "/no/such/dir/model.gguf", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/no/such/dir/model.gguf"), "{err}");
    assert!(err.contains("scripts/setup"), "{err}");
    assert!(out.stdout.is_empty());
    // The same through $DOMINO_MODEL.
    let out = domino()
        .env("DOMINO_MODEL", "/elsewhere/m.gguf")
        .args(["generate", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/elsewhere/m.gguf"));
}

#[test]
fn a_file_that_is_not_gguf_exits_1() {
    let out = domino()
        .args(["generate", "-m", "Cargo.toml", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Cargo.toml") && err.contains("not a GGUF"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let out = domino()
        .args(["generate", "--no-such-flag", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = domino()
        .args(["generate", "-n", "many", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = generate()
        .args(["--top-p", "1.5", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("top-p"));
    let out = generate()
        .args(["--format", "yaml", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // An empty prompt (SmolLM2 adds no BOS, so there is nothing to condition on).
    let out = generate().arg("").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_prompt_longer_than_the_context_exits_1() {
    let long = "word ".repeat(100);
    let out = generate().args(["--ctx", "32", &long]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("context overflow"));
}

#[test]
fn help_documents_the_flags() {
    let out = domino().args(["generate", "--help"]).output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--model",
        "--max-tokens",
        "--temp",
        "--top-k",
        "--top-p",
        "--min-p",
        "--seed",
        "--chat",
        "--ctx",
        "--threads",
        "--n-gpu-layers",
        "--format",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}
