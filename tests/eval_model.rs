//! `domino eval`, `domino perplexity` and `domino eval retokenize` with the real SmolLM2 model
//! (fails loudly when the model or ../shared/data is missing). Kept tiny — a few tokens per
//! generation — because CI has 2 cores: these check wiring and resume, not accuracy or speed.

mod common;

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

const METHODS: &str = "none,domino,naive,llama-grammar,template";

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("domino-eval-model-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn domino(args: &[&str]) -> std::process::Output {
    Command::cargo_bin("domino")
        .unwrap()
        .args(args)
        .output()
        .unwrap()
}

/// Runs `domino ARGS`, asserts it succeeded and parses its stdout (`--format json`).
fn domino_json(args: &[&str]) -> Value {
    let out = domino(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("--format json prints one JSON document")
}

/// `domino eval gsm8k` over the first two samples, tiny budget.
fn eval_gsm8k(out: &Path, resume: bool) -> std::process::Output {
    let model = common::require_default_model();
    let out = out.to_str().unwrap();
    let mut args = vec![
        "eval",
        "gsm8k",
        "--limit",
        "2",
        "--shots",
        "1",
        "--max-tokens",
        "6",
        "--methods",
        METHODS,
        "--out",
        out,
        "--quiet",
        "--format",
        "json",
        "-m",
        model.to_str().unwrap(),
        "--ctx",
        "2048",
        "--threads",
        "2",
    ];
    if resume {
        args.push("--resume");
    }
    domino(&args)
}

/// `v` without timing fields (wall-clock measurements differ between any two runs).
fn without_timings(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| {
                    !(k.ends_with("_ms")
                        || k.ends_with("_seconds")
                        || k.contains("per_second")
                        || k.contains("performance")
                        || *k == "command")
                })
                .map(|(k, v)| (k.clone(), without_timings(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timings).collect()),
        // Claims about speed compare timings.
        Value::String(s) if s.contains('×') => Value::Null,
        other => other.clone(),
    }
}

fn results(dir: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap();
    let mut rows: Vec<Value> = text
        .lines()
        .map(|l| without_timings(&serde_json::from_str(l).unwrap()))
        .collect();
    rows.sort_by_key(|r| {
        (
            r["sample_id"].as_u64(),
            r["method"].as_str().map(String::from),
        )
    });
    rows
}

fn report(dir: &Path) -> Value {
    let mut v = without_timings(
        &serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap(),
    );
    // Speed claims hold or not depending on the machine's load.
    if let Some(claims) = v["claims"].as_array_mut() {
        claims.retain(|c| {
            !c.to_string().to_lowercase().contains("slow")
                && !c.to_string().to_lowercase().contains("fast")
        });
    }
    v
}

#[test]
fn resume_after_a_kill_matches_an_uninterrupted_run() {
    let full = fresh_dir("full");
    let out = eval_gsm8k(&full, false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout: Value =
        serde_json::from_slice(&out.stdout).expect("--format json prints the report");
    let methods: Vec<&str> = stdout["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, METHODS.split(',').collect::<Vec<_>>());

    // Every generation ran: 2 samples × 5 methods, with tokens, unmasked logprobs and a reason.
    let rows = results(&full);
    assert_eq!(rows.len(), 10);
    for r in &rows {
        assert!(r["error"].is_null(), "{r}");
        let n = r["tokens"].as_array().unwrap().len();
        assert!(n > 0 && n <= 6, "{r}");
        assert_eq!(r["logprobs"].as_array().unwrap().len(), n, "{r}");
        assert!(
            r["logprobs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|l| l.as_f64().is_some_and(|l| l <= 0.0)),
            "{r}"
        );
        assert!(r["finish_reason"].is_string(), "{r}");
        assert!(!r["output_text"].as_str().unwrap().is_empty());
    }
    // Report files name every method.
    let md = std::fs::read_to_string(full.join("report.md")).unwrap();
    let svg = std::fs::read_to_string(full.join("accuracy.svg")).unwrap();
    for m in METHODS.split(',') {
        assert!(md.contains(&format!("| {m} |")), "report.md lacks {m}");
        assert!(
            svg.contains(&format!(">{m}</text>")),
            "accuracy.svg lacks {m}"
        );
    }
    assert!(md.contains("SmolLM2-135M-Instruct.Q4_1.gguf"));
    // run.json records where the numbers came from: the commit, llama.cpp, the model's hash.
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(full.join("run.json")).unwrap()).unwrap();
    let provenance = &run["provenance"];
    let sha = provenance["model_sha256"].as_str().unwrap();
    assert_eq!(sha.len(), 64, "{provenance}");
    assert!(sha.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(
        provenance["llama_cpp"]
            .as_str()
            .unwrap()
            .contains("llama-cpp")
    );
    assert!(!provenance["domino_commit"].as_str().unwrap().is_empty());

    // A run killed after its first record, then resumed.
    let killed = fresh_dir("killed");
    std::fs::copy(full.join("run.json"), killed.join("run.json")).unwrap();
    let first = std::fs::read_to_string(full.join("results.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    std::fs::write(killed.join("results.jsonl"), first + "\n").unwrap();
    let out = eval_gsm8k(&killed, true);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        results(&killed),
        rows,
        "resumed outputs differ from the uninterrupted run's"
    );
    assert_eq!(
        report(&killed),
        report(&full),
        "resumed report differs from the uninterrupted run's"
    );

    // Without --resume an existing run is refused.
    let out = eval_gsm8k(&killed, false);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--resume"));
    let _ = std::fs::remove_dir_all(&full);
    let _ = std::fs::remove_dir_all(&killed);
}

#[test]
fn perplexity_of_a_file_and_of_a_jsonl_field_agree() {
    let model = common::require_default_model();
    let dir = fresh_dir("ppl");
    let text = "The cat sat on the mat. The dog sat on the log.";
    std::fs::write(dir.join("a.txt"), text).unwrap();
    std::fs::write(
        dir.join("a.jsonl"),
        format!(
            "{}\n{}\n",
            serde_json::json!({"t": text}),
            serde_json::json!({"t": text})
        ),
    )
    .unwrap();
    let m = model.to_str().unwrap();
    let file = dir.join("a.txt");
    let single = domino_json(&[
        "perplexity",
        file.to_str().unwrap(),
        "--format",
        "json",
        "-m",
        m,
        "--threads",
        "2",
    ]);
    let ppl = single["perplexity"].as_f64().unwrap();
    assert!(ppl.is_finite() && ppl > 1.0, "{single}");
    let n = single["tokens"].as_u64().unwrap();
    assert!(n >= 10, "{single}");

    let jsonl = dir.join("a.jsonl");
    let both = domino_json(&[
        "perplexity",
        "--jsonl",
        jsonl.to_str().unwrap(),
        "--field",
        "t",
        "--format",
        "json",
        "-m",
        m,
        "--threads",
        "2",
    ]);
    assert_eq!(both["tokens"].as_u64().unwrap(), 2 * n);
    assert!(
        (both["perplexity"].as_f64().unwrap() - ppl).abs() < 1e-3 * ppl,
        "{both} vs {single}"
    );

    // Chunked to a tiny context: the first token of each chunk has no context and is not
    // scored, so fewer tokens are scored and the text is still covered.
    let chunked = domino_json(&[
        "perplexity",
        file.to_str().unwrap(),
        "--format",
        "json",
        "-m",
        m,
        "--threads",
        "2",
        "--ctx",
        "16",
    ]);
    let chunks = (n + 1).div_ceil(16);
    assert_eq!(
        chunked["tokens"].as_u64().unwrap() + chunks,
        n + 1,
        "{chunked}"
    );

    // A record without the field is an error naming the line.
    std::fs::write(&jsonl, "{\"t\": \"x\"}\n{\"u\": 1}\n").unwrap();
    let out = domino(&[
        "perplexity",
        "--jsonl",
        jsonl.to_str().unwrap(),
        "--field",
        "t",
        "-m",
        m,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(":2: record has no string field `t`"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retokenize_spells_the_text_and_starts_with_the_model_preferred_token() {
    let model = common::require_default_model();
    let text = "{\n    \"name\" : \"Alice\" }";
    let r = domino_json(&[
        "eval",
        "retokenize",
        "--prompt",
        "Q: Give a person as JSON.\nA:",
        "--text",
        text,
        "--format",
        "json",
        "-m",
        model.to_str().unwrap(),
        "--threads",
        "2",
    ]);
    for key in ["default", "naturalized"] {
        let t = &r[key];
        let pieces: String = t["pieces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert_eq!(pieces, text, "{key} tokens do not spell the text");
        assert_eq!(
            t["logprobs"].as_array().unwrap().len(),
            t["tokens"].as_array().unwrap().len()
        );
        assert!(t["perplexity"].as_f64().unwrap() >= 1.0);
    }
    // Greedy: the first chosen token is the most likely of all aligned tokens, the
    // tokenizer's first token among them.
    let first = |key: &str| r[key]["logprobs"][0].as_f64().unwrap();
    assert!(first("naturalized") >= first("default"), "{r}");

    let out = domino(&[
        "eval",
        "retokenize",
        "--prompt",
        "x",
        "--text",
        "",
        "-m",
        model.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `domino eval gsm8k --reasoning` on a two-example data file: the text before the marker is
/// the unconstrained model's, the task schema constrains what follows it, run.json records
/// the setting, and resuming with another one stops with exit 2.
#[test]
fn eval_reasoning_constrains_only_what_follows_the_marker() {
    let model = common::require_default_model();
    let dir = fresh_dir("reasoning");
    let test = std::fs::read_to_string(common::repo_root().join("../shared/data/gsm8k/test.jsonl"))
        .expect("../shared/data is required");
    let data = dir.join("two.jsonl");
    std::fs::write(
        &data,
        test.split_inclusive('\n').take(2).collect::<String>(),
    )
    .unwrap();
    let out = dir.join("run");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "gsm8k",
            "--data",
            data.to_str().unwrap(),
            "--shots",
            "1",
            "--max-tokens",
            "24",
            "--methods",
            "none,domino",
            "--out",
            out.to_str().unwrap(),
            "--quiet",
            "--format",
            "json",
            "-m",
            model.to_str().unwrap(),
            "--ctx",
            "2048",
            "--threads",
            "1",
        ];
        args.extend_from_slice(extra);
        domino(&args)
    };
    // SmolLM2 writes ` {` and a newline first: the newline ends its "reasoning" here.
    let first = run(&["--reasoning", "--reasoning-end", "\n"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let rows = results(&out);
    assert_eq!(rows.len(), 4);
    for sample in rows.chunks(2) {
        let (domino_row, none_row) = (&sample[0], &sample[1]);
        assert_eq!(domino_row["method"], "domino");
        let free = none_row["output_text"].as_str().unwrap();
        let constrained = domino_row["output_text"].as_str().unwrap();
        let (before, after) = constrained
            .split_once('\n')
            .unwrap_or_else(|| panic!("no marker in {constrained:?}"));
        // The reasoning is the unconstrained model's text, byte for byte.
        assert!(
            free.starts_with(&format!("{before}\n")),
            "{free:?} vs {constrained:?}"
        );
        // After the marker the answer starts as the task schema demands (an object), where
        // the unconstrained model goes on with a member name.
        assert!(after.trim_start().starts_with('{'), "{constrained:?}");
        let free_after = free.split_once('\n').unwrap().1;
        assert!(!free_after.trim_start().starts_with('{'), "{free:?}");
        // The answer is read after the marker: the truncated object there, not a missing one.
        let note = domino_row["score_note"].as_str().unwrap_or("");
        assert!(!note.contains("marker"), "{domino_row}");
    }
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(config["provenance"]["reasoning_end"], "\n");
    assert_eq!(config["provenance"]["token_healing"], true);

    // Resuming without --reasoning (or with another marker) is another run: exit 2.
    for extra in [
        &["--resume"][..],
        &["--resume", "--reasoning", "--reasoning-end", "}"],
    ] {
        let again = run(extra);
        assert_eq!(again.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&again.stderr);
        assert!(err.contains("reasoning setting"), "{err}");
    }
    // llama.cpp's sampler cannot leave the reasoning free: a usage error before any run.
    let bad = domino(&[
        "eval",
        "gsm8k",
        "--data",
        data.to_str().unwrap(),
        "--methods",
        "domino,llama-grammar",
        "--reasoning",
        "--out",
        dir.join("bad").to_str().unwrap(),
        "-m",
        model.to_str().unwrap(),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("llama-grammar"));
    let _ = std::fs::remove_dir_all(&dir);
}
