//! `domino eval` on the command line, for what needs no model: `--show-prompt` prints the exact
//! prompt to stdout, bad flags exit with 2. Needs ../shared/data (fails loudly without it).

use assert_cmd::Command;

#[test]
fn show_prompt_prints_the_few_shot_prompt() {
    let out = Command::cargo_bin("domino")
        .unwrap()
        .args(["eval", "gsm8k", "--show-prompt", "--shots", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prompt = String::from_utf8(out.stdout).unwrap();
    assert!(prompt.starts_with("Solve each math problem"));
    assert_eq!(prompt.matches("\nQ: ").count(), 3);
    assert!(prompt.ends_with("\nA:"));

    let out = Command::cargo_bin("domino")
        .unwrap()
        .args(["eval", "conll", "--show-prompt", "--json-style", "compact"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("A: {\"tokens\":[{\"token\":")
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = Command::cargo_bin("domino")
        .unwrap()
        .args(["eval", "gsm8k", "--methods", "none,bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown method `bogus`"));
}

#[test]
fn missing_data_names_the_path() {
    let out = Command::cargo_bin("domino")
        .unwrap()
        .args([
            "eval",
            "gsm8k",
            "--show-prompt",
            "--data",
            "/nonexistent/test.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/test.jsonl") && err.contains("README"),
        "{err}"
    );
}
