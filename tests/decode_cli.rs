//! `domino generate` with constraints, end to end: the schema acceptance command, JSON
//! stats, `--stats`, draft statistics files, incomplete output, and usage errors.

mod common;

use assert_cmd::Command;

fn generate() -> Command {
    let model = common::require_default_model();
    let mut c = Command::cargo_bin("domino").unwrap();
    c.env_remove("DOMINO_MODEL")
        .env("NO_COLOR", "1")
        .current_dir(common::repo_root())
        .arg("generate")
        .arg("-m")
        .arg(model)
        .args(["--threads", "1"]);
    c
}

fn json_of(c: &mut Command) -> (serde_json::Value, String) {
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {stderr}",
        out.status
    );
    (
        serde_json::from_slice(&out.stdout).expect("one JSON object on stdout"),
        stderr,
    )
}

const QUESTION: &str = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?";

#[test]
fn gsm8k_schema_output_validates_and_reports_stats() {
    // Schema order: the reasoning steps before the answer, as the schema lists them (in any
    // order this small model answers first and then loops on steps).
    let (v, stderr) = json_of(generate().args([
        "--schema",
        "grammars/gsm8k.schema.json",
        "--property-order",
        "schema",
        "--chat",
        QUESTION,
        "-n",
        "300",
        "--format",
        "json",
        "--stats",
    ]));
    assert_eq!(v["complete"], true, "{v}");
    let text = v["text"].as_str().unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("grammars/gsm8k.schema.json")).unwrap(),
    )
    .unwrap();
    assert!(
        jsonschema::validator_for(&schema).unwrap().is_valid(&doc),
        "{text}"
    );
    let stats = &v["stats"];
    for key in [
        "prompt_tokens",
        "generated_tokens",
        "forward_passes",
        "decode_ms",
        "tokens_per_s",
        "masks_computed",
        "mask_us_total",
        "interventions",
        "draft_proposed",
        "draft_accepted",
    ] {
        assert!(
            stats.get(key).is_some_and(|x| x.is_number()),
            "stats.{key} missing: {stats}"
        );
    }
    let n = stats["generated_tokens"].as_u64().unwrap() as usize;
    assert_eq!(v["logprobs"].as_array().unwrap().len(), n);
    assert_eq!(v["tokens"].as_array().unwrap().len(), n);
    assert!(
        stderr.contains("domino:") && stderr.contains("tok/s"),
        "--stats line missing: {stderr}"
    );
}

#[test]
fn length_is_flagged_incomplete() {
    let (v, _) = json_of(generate().args([
        "--json",
        "--chat",
        "Describe a cat as JSON.",
        "-n",
        "4",
        "--format",
        "json",
    ]));
    assert_eq!(v["finish_reason"], "length");
    assert_eq!(v["complete"], false);
    let (v, _) = json_of(generate().args([
        "--regex",
        "(yes|no)",
        "--chat",
        "Is water wet?",
        "-n",
        "20",
        "--format",
        "json",
    ]));
    assert_eq!(v["finish_reason"], "grammar_end");
    assert_eq!(v["complete"], true);
}

#[test]
fn draft_stats_are_saved_and_reloaded() {
    let dir = common::scratch_dir("draft-stats");
    let file = dir.join("gsm8k.draft.json");
    let args = |c: &mut Command| {
        c.args([
            "--grammar",
            "grammars/gsm8k.gbnf",
            "--chat",
            QUESTION,
            "-n",
            "40",
            "--format",
            "json",
            "--draft",
            "6",
            // Every proposal verified: how many drafts the warm counts get accepted does not
            // then depend on this machine's timings.
            "--draft-policy",
            "threshold",
        ])
        .arg("--draft-stats")
        .arg(&file);
    };
    let mut first = generate();
    args(&mut first);
    let (a, _) = json_of(&mut first);
    assert!(file.is_file(), "--draft-stats file not written");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(!saved["contexts"].as_array().unwrap().is_empty());
    let mut second = generate();
    args(&mut second);
    let (b, _) = json_of(&mut second);
    // Same greedy output; the warm counts draft (and get accepted) more.
    assert_eq!(a["tokens"], b["tokens"]);
    let acc = |v: &serde_json::Value| v["stats"]["draft_accepted"].as_u64().unwrap();
    assert!(
        acc(&b) > acc(&a),
        "warm stats did not help: {} vs {}",
        acc(&b),
        acc(&a)
    );
    assert!(b["stats"]["forward_passes"].as_u64() < a["stats"]["forward_passes"].as_u64());
}

#[test]
fn methods_need_a_constraint_and_bad_values_are_usage_errors() {
    let out = generate()
        .args(["--method", "naive", "hello", "-n", "2"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a constraint"));
    let out = generate()
        .args(["--json", "--draft-threshold", "1.5", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = generate()
        .args(["--json", "--k", "many", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = generate()
        .args(["--json", "--draft-policy", "fastest", "hello"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cost"),
        "the error lists the policies"
    );
}

#[test]
fn every_method_runs_from_the_cli() {
    for method in ["none", "domino", "naive", "template", "llama-grammar"] {
        let (v, _) = json_of(generate().args([
            "--grammar",
            "grammars/json.gbnf",
            "--method",
            method,
            "-n",
            "12",
            "--format",
            "json",
            "The following is a JSON object for a dog:\n",
        ]));
        assert_eq!(v["stats"]["generated_tokens"], 12, "{method}: {v}");
        if method != "none" {
            assert!(
                v["text"].as_str().unwrap().starts_with('{'),
                "{method}: {v}"
            );
        }
    }
}

#[test]
fn the_cost_draft_policy_keeps_the_output_and_reports_its_measurements() {
    let run = |extra: &[&str]| {
        let mut c = generate();
        c.args([
            "--grammar",
            "grammars/gsm8k.gbnf",
            "--chat",
            QUESTION,
            "-n",
            "48",
            "--format",
            "json",
            "-v",
        ])
        .args(extra);
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (plain, _) = run(&["--draft", "0"]);
    let (cost, log) = run(&["--draft", "8", "--draft-policy", "cost"]);
    assert_eq!(
        plain["tokens"], cost["tokens"],
        "the draft policy changed greedy output"
    );
    assert!(
        cost["stats"]["forward_passes"].as_u64() <= plain["stats"]["forward_passes"].as_u64(),
        "drafts never add forward passes"
    );
    assert!(log.contains("drafts (cost policy): forward pass"), "{log}");
}
