//! The compile budget end to end: a grammar over `--compile-memory` or `--compile-timeout`
//! ends quickly with exit 2 and an error naming the limit and the stage, never a hang or an
//! abort; within the budget the same commands work. Uses SmolLM2's tokenizer.json.

mod common;

use assert_cmd::Command;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// 20,000 distinct literal alternatives, each its own rule (no literal-set trie), with
/// recursion: some tens of MB of terminal DFAs and scanner.
fn bomb(dir: &std::path::Path) -> PathBuf {
    let mut g = String::from("root ::= r0\n");
    for i in 0..20_000 {
        g.push_str(&format!(
            "r{i} ::= \"value-{i:05}-a\" r{} | \"(\" r{i} \")\" | \"v{i}\"\n",
            i + 1
        ));
    }
    g.push_str("r20000 ::= \"end\"\n");
    let p = dir.join("bomb.gbnf");
    std::fs::write(&p, g).unwrap();
    p
}

fn mask(grammar: &std::path::Path, extra: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let out = Command::cargo_bin("domino")
        .unwrap()
        .args(["mask", "--grammar"])
        .arg(grammar)
        .args(["--tokenizer", &common::smollm2_tokenizer(), "--prefix="])
        .args(extra)
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn a_grammar_over_the_memory_budget_exits_2_naming_the_limit() {
    let d = common::scratch_dir("budget-memory");
    let g = bomb(&d);
    let (out, took) = mask(&g, &["--compile-memory", "16"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("memory budget of 16 MB") && stderr.contains("--compile-memory"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(60), "took {took:?}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn a_grammar_over_the_time_budget_exits_2_naming_the_limit() {
    let d = common::scratch_dir("budget-time");
    let g = bomb(&d);
    let (out, took) = mask(&g, &["--compile-timeout", "0.05"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("time budget of 0.1 s") || stderr.contains("time budget of 0.0 s"),
        "{stderr}"
    );
    assert!(stderr.contains("while building"), "{stderr}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn the_same_grammar_within_the_default_budget_reaches_its_first_mask() {
    let d = common::scratch_dir("budget-ok");
    let g = bomb(&d);
    let (out, _) = mask(&g, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tokens allowed"), "{stdout}");
    std::fs::remove_dir_all(&d).ok();
}
