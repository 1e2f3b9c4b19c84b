//! `domino grammar test` end to end (assert_cmd): verdicts, positions, inputs, expectations,
//! exit codes, `--format json` and `--validate`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::PathBuf;

fn domino() -> Command {
    Command::cargo_bin("domino").unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("domino-gtest-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Out {
    let o = cmd.output().unwrap();
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn json_lines(s: &str) -> Vec<Value> {
    s.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn verdicts_and_positions() {
    let o = run(domino().args([
        "grammar", "test", "--regex", "ab+", "--format", "json", "ab", "a", "abc", "",
    ]));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let v = json_lines(&o.stdout);
    assert_eq!(v[0]["result"], "accepted");
    assert_eq!(v[1]["result"], "incomplete");
    assert_eq!(v[2]["result"], "rejected");
    assert_eq!(v[2]["byte"], 2);
    assert_eq!(v[2]["line"], 1);
    assert_eq!(v[2]["column"], 3);
    assert_eq!(v[3]["result"], "incomplete");
    assert_eq!(v[4]["summary"]["total"], 4);
    assert_eq!(v[4]["summary"]["accepted"], 1);
    assert_eq!(v[4]["summary"]["rejected"], 1);
    assert_eq!(v[4]["summary"]["incomplete"], 2);
}

#[test]
fn line_and_column_of_a_multiline_rejection() {
    let d = temp_dir("lines");
    let schema = write(
        &d,
        "s.json",
        r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#,
    );
    let o = run(domino()
        .args(["grammar", "test", "--schema"])
        .arg(&schema)
        .write_stdin("{\n  \"a\": x}\n"));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout
            .contains("stdin: rejected at byte 9 (line 2, column 8)"),
        "{}",
        o.stdout
    );
}

#[test]
fn expectations_choose_the_exit_code() {
    let ok = run(domino().args([
        "grammar", "test", "--regex", "[0-9]+", "--expect", "accept", "1", "42",
    ]));
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.contains("2 of 2 expectations held"),
        "{}",
        ok.stdout
    );
    let bad = run(domino().args([
        "grammar", "test", "--regex", "[0-9]+", "--expect", "accept", "1", "x",
    ]));
    assert_eq!(bad.code, 1, "{}{}", bad.stdout, bad.stderr);
    assert!(
        bad.stdout.contains("(expected accept: FAILED)"),
        "{}",
        bad.stdout
    );
    // `reject` holds for rejected and for incomplete strings.
    let rej = run(domino().args([
        "grammar", "test", "--regex", "ab", "--expect", "reject", "x", "a",
    ]));
    assert_eq!(rej.code, 0, "{}{}", rej.stdout, rej.stderr);
    // No expectation: a report, exit 0 whatever the verdicts.
    let none = run(domino().args(["grammar", "test", "--regex", "ab", "x"]));
    assert_eq!(none.code, 0);
}

#[test]
fn grammar_errors_exit_2() {
    let d = temp_dir("bad");
    let g = write(&d, "bad.gbnf", "root ::= \"a\" (\n");
    let o = run(domino()
        .args(["grammar", "test", "--grammar"])
        .arg(&g)
        .arg("a"));
    assert_eq!(o.code, 2, "{}{}", o.stdout, o.stderr);
    let o = run(domino().args(["grammar", "test", "x"]));
    assert_eq!(o.code, 2, "no constraint is a usage error: {}", o.stderr);
}

#[test]
fn file_and_jsonl_inputs() {
    let d = temp_dir("inputs");
    let g = write(&d, "g.gbnf", "root ::= \"yes\" | \"no\"\n");
    let f = write(&d, "strings.txt", "yes\nno\n\nmaybe\n");
    let o = run(domino()
        .args(["grammar", "test", "--grammar"])
        .arg(&g)
        .arg("--file")
        .arg(&f)
        .args(["--format", "json"]));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v = json_lines(&o.stdout);
    assert_eq!(v.len(), 4, "blank lines are skipped: {}", o.stdout);
    assert_eq!(v[2]["result"], "rejected");
    assert_eq!(v[2]["byte"], 0);

    let j = write(
        &d,
        "cases.jsonl",
        concat!(
            "\"yes\"\n",
            "{\"text\": \"no\", \"expect\": \"accept\"}\n",
            "{\"text\": \"nope\", \"expect\": \"reject\"}\n",
            "{\"text\": \"y\", \"expect\": false}\n",
        ),
    );
    let o = run(domino()
        .args(["grammar", "test", "--grammar"])
        .arg(&g)
        .arg("--jsonl")
        .arg(&j)
        .args(["--format", "json"]));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let v = json_lines(&o.stdout);
    assert_eq!(v[0].get("expect"), None);
    assert_eq!(v[1]["ok"], true);
    assert_eq!(v[2]["ok"], true);
    assert_eq!(v[3]["result"], "incomplete");
    assert_eq!(v[4]["summary"]["expectations"], 3);
    assert_eq!(v[4]["summary"]["failed"], 0);

    // A line's own expectation wins over --expect.
    let o = run(domino()
        .args(["grammar", "test", "--grammar"])
        .arg(&g)
        .arg("--jsonl")
        .arg(&j)
        .args(["--expect", "reject"]));
    assert_eq!(
        o.code, 1,
        "\"yes\" takes --expect reject and fails: {}",
        o.stdout
    );

    let bad = write(&d, "bad.jsonl", "{\"txt\": 1}\n");
    let o = run(domino()
        .args(["grammar", "test", "--grammar"])
        .arg(&g)
        .arg("--jsonl")
        .arg(&bad));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("bad.jsonl:1"), "{}", o.stderr);
}

#[test]
fn stdin_is_one_string_without_its_final_newline() {
    let o = run(domino()
        .args(["grammar", "test", "--json", "--expect", "accept"])
        .write_stdin("{\"a\": [1, 2,\n 3]}\n"));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.starts_with("stdin: accepted"), "{}", o.stdout);
}

#[test]
fn validate_reports_schema_validity() {
    let d = temp_dir("validate");
    let schema = write(
        &d,
        "s.json",
        r#"{"type":"object","properties":{"n":{"type":"integer","minimum":3}},"required":["n"]}"#,
    );
    let o = run(domino()
        .args([
            "grammar",
            "test",
            "--validate",
            "--format",
            "json",
            "--schema",
        ])
        .arg(&schema)
        .args([r#"{"n": 5}"#, r#"{"n": 1}"#, r#"{}"#]));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let v = json_lines(&o.stdout);
    assert_eq!(v[0]["result"], "accepted");
    assert_eq!(v[0]["valid"], true);
    assert_eq!(v[1]["valid"], false);
    assert_ne!(v[1]["result"], "accepted");
    assert_eq!(v[2]["valid"], false);
    assert_eq!(v[3]["summary"]["unsound"], 0);
    // --validate needs a schema.
    let o = run(domino().args(["grammar", "test", "--validate", "--regex", "a", "a"]));
    assert_eq!(o.code, 2, "{}", o.stderr);
}

#[test]
fn schema_warnings_go_to_stderr() {
    let d = temp_dir("warn");
    let schema = write(&d, "s.json", r#"{"type":"string","maxLenght":3}"#);
    let o = run(domino()
        .args(["grammar", "test", "--schema"])
        .arg(&schema)
        .arg("\"abcdef\""));
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("maxLenght"), "{}", o.stderr);
}
