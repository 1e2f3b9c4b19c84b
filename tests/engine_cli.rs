//! `domino mask` and `domino bench masks` end to end (assert_cmd), with SmolLM2's
//! tokenizer.json (fails loudly when missing).

mod common;

use assert_cmd::Command;
use std::path::PathBuf;

fn domino() -> Command {
    Command::cargo_bin("domino").unwrap()
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn mask_json_lines_per_prefix() {
    let dir = std::env::temp_dir().join(format!("domino-mask-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefixes = dir.join("prefixes.jsonl");
    std::fs::write(
        &prefixes,
        "\"\"\n\"{\\\"a\\\": 1\"\n\"{\\\"a\\\": 1}\"\n\"}\"\n",
    )
    .unwrap();
    let out = domino()
        .args([
            "mask",
            "--json",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--format",
            "json",
            "--prefixes",
        ])
        .arg(&prefixes)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 4);
    // Empty prefix: not accepting, something allowed.
    assert_eq!(lines[0]["prefix_ok"], true);
    assert_eq!(lines[0]["eos_allowed"], false);
    assert!(lines[0]["count"].as_u64().unwrap() > 0);
    // After `{"a": 1` a digit, `,`, `}` and bridges like `},` … no EOS.
    let ids: Vec<u64> = lines[1]["allowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids sorted");
    assert_eq!(ids.len() as u64, lines[1]["count"].as_u64().unwrap());
    assert_eq!(lines[1]["eos_allowed"], false);
    // A complete document: EOS allowed (SmolLM2's EOG ids 0 and 2 are in the list).
    assert_eq!(lines[2]["eos_allowed"], true);
    let ids2: Vec<u64> = lines[2]["allowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(ids2.contains(&0) && ids2.contains(&2));
    // Not a prefix of any document.
    assert_eq!(lines[3]["prefix_ok"], false);
    assert_eq!(lines[3]["count"], 0);
}

#[test]
fn mask_k0_is_smaller_than_k_inf_on_bridge_tokens() {
    let count = |k: &str| -> u64 {
        let out = domino()
            .args([
                "mask",
                "--json",
                "--tokenizer",
                &common::smollm2_tokenizer(),
                "--format",
                "json",
                "--prefix",
                "{\"a\": \"x",
                "--k",
                k,
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        json_lines(&out)[0]["count"].as_u64().unwrap()
    };
    assert!(count("0") < count("inf"));
}

#[test]
fn mask_text_output_and_errors() {
    let out = domino()
        .args([
            "mask",
            "--regex",
            "[0-9]{3}-[0-9]{4}",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--prefix",
            "555-",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("tokens allowed"), "{text}");
    // Usage errors exit 2: no vocabulary, bad k, no constraint.
    domino().args(["mask", "--json"]).assert().code(2);
    domino()
        .args([
            "mask",
            "--json",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--k",
            "lots",
        ])
        .assert()
        .code(2);
    domino()
        .args(["mask", "--tokenizer", &common::smollm2_tokenizer()])
        .assert()
        .code(2);
    // A grammar error exits 2 with a position.
    let dir = std::env::temp_dir().join(format!("domino-mask-err-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.gbnf");
    std::fs::write(&bad, "root ::= \"a\" undefined-rule\n").unwrap();
    let err = domino()
        .args([
            "mask",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--grammar",
        ])
        .arg(&bad)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(
        String::from_utf8_lossy(&err).contains("1:"),
        "{}",
        String::from_utf8_lossy(&err)
    );
    // A bad prefixes file is a usage error naming the line.
    let bad_lines = dir.join("bad.jsonl");
    std::fs::write(&bad_lines, "\"ok\"\nnot json\n").unwrap();
    let err = domino()
        .args([
            "mask",
            "--json",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--prefixes",
        ])
        .arg(&bad_lines)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(
        String::from_utf8_lossy(&err).contains(":2:"),
        "{}",
        String::from_utf8_lossy(&err)
    );
}

#[test]
fn bench_masks_reports_json() {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("eval/bench/json.jsonl");
    let cache = std::env::temp_dir().join(format!("domino-bench-{}.trees", std::process::id()));
    let out = domino()
        .args([
            "bench",
            "masks",
            "--json",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--max-docs",
            "3",
            "--precompute",
            "--repeat",
            "2",
        ])
        .args(["--format", "json", "--tree-cache"])
        .arg(&cache)
        .arg("--docs")
        .arg(&docs)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let r = &json_lines(&out)[0];
    for key in [
        "compile_ms",
        "precompute_ms",
        "load_ms",
        "first_mask_us",
        "tree_nodes",
        "memory_bytes",
    ] {
        assert!(r[key].as_f64().is_some(), "{key} missing in {r}");
    }
    for key in ["n", "mean", "p50", "p90", "p99", "max"] {
        assert!(r["mask_us"][key].as_f64().is_some(), "mask_us.{key}");
        assert!(
            r["cold_mask_us"][key].as_f64().is_some(),
            "cold_mask_us.{key}"
        );
    }
    assert_eq!(r["rejected_docs"], 0);
    assert!(r["mask_us"]["n"].as_u64().unwrap() > 20);
}

#[test]
fn bench_masks_breadth_pools_samples_over_schemas() {
    let dir = std::env::temp_dir().join(format!("domino-breadth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("schemas.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"id":"person","schema":{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]},"instances":[{"name":"Ada","age":36},{"name":"Bob"}]}"#,
            "\n",
            r#"{"id":"tags","schema":{"type":"array","items":{"type":"string","maxLength":5}}}"#,
            "\n",
            r##"{"id":"broken","schema":{"type":"object","properties":{"x":{"$ref":"#/nowhere"}}}}"##,
            "\n"
        ),
    )
    .unwrap();
    let out = domino()
        .args([
            "bench",
            "masks",
            "--tokenizer",
            &common::smollm2_tokenizer(),
            "--format",
            "json",
        ])
        .args(["--instances", "2", "--schema-jsonl"])
        .arg(&dir)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let r = &json_lines(&out)[0];
    let s = &r["summary"];
    assert_eq!(s["schemas"], 3, "{s}");
    assert_eq!(s["schemas_failed"], 1, "the unresolvable $ref fails: {s}");
    assert_eq!(s["invalid_accepted"], 0);
    assert_eq!(s["valid_rejected"], 0);
    // The person schema's own two instances, plus generated ones for `tags`.
    assert!(s["docs"].as_u64().unwrap() >= 3, "{s}");
    let rows = r["schemas"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    // Pooled: the sample count is the sum over schemas.
    let masks: u64 = rows.iter().map(|x| x["masks"].as_u64().unwrap()).sum();
    assert_eq!(s["cold_mask_us"]["n"].as_u64().unwrap(), masks);
    assert_eq!(s["ttfm_ms"]["n"], 2);
    for key in ["p50", "p90", "p99", "max", "over_1ms", "over_10ms"] {
        assert!(s["ttfm_ms"][key].as_f64().is_some(), "ttfm_ms.{key}");
        assert!(s["warm_mask_us"][key].as_f64().is_some(), "warm.{key}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
