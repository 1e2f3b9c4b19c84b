//! `domino grammar check|convert` end to end (assert_cmd).

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn domino() -> Command {
    Command::cargo_bin("domino").unwrap()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("domino-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn check_shipped_grammars_is_all_ok() {
    let mut cmd = domino();
    cmd.current_dir(root()).args(["grammar", "check"]);
    for f in std::fs::read_dir(root().join("grammars")).unwrap() {
        let p = f.unwrap().path();
        let n = p.to_string_lossy().to_string();
        if n.ends_with(".gbnf") || n.ends_with(".lark") {
            cmd.arg(p);
        }
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("json.gbnf: ok (rules 7, terminals"),
        "{stdout}"
    );
    assert!(
        stdout.contains("8 checked: 8 ok, 0 unsupported, 0 error"),
        "{stdout}"
    );
}

/// `domino grammar check grammars/*` as the shell expands it: every shipped grammar and
/// schema, plus the `examples` directory (which holds no grammar files: a note, no error).
#[test]
fn check_every_entry_of_the_grammars_directory() {
    let mut cmd = domino();
    cmd.current_dir(root()).args(["grammar", "check"]);
    let mut entries: Vec<PathBuf> = std::fs::read_dir(root().join("grammars"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    entries.sort();
    let n_files = entries.iter().filter(|p| p.is_file()).count();
    cmd.args(&entries);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(&format!(
            "{n_files} checked: {n_files} ok, 0 unsupported, 0 error"
        )),
        "{stdout}"
    );
    assert!(stderr.contains("examples: no grammar files"), "{stderr}");
    // The directory itself checks the same files.
    let out = domino()
        .current_dir(root())
        .args(["grammar", "check", "grammars"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains(&format!("{n_files} checked: {n_files} ok"))
    );
}

#[test]
fn check_reports_grammar_errors_with_position_and_exit_2() {
    let d = temp_dir("bad");
    let bad = d.join("bad.gbnf");
    std::fs::write(&bad, "root ::= item\nitem ::= \"a\" missing\n").unwrap();
    let good = d.join("good.lark");
    std::fs::write(&good, "start: \"a\"+\n").unwrap();
    let out = domino()
        .args(["grammar", "check"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("good.lark: ok"), "{stdout}");
    assert!(
        stdout.contains("bad.gbnf: error: 2:14: undefined rule `missing`"),
        "{stdout}"
    );

    // JSON: one object per file plus the summary.
    let out = domino()
        .args(["grammar", "check", "--format", "json"])
        .arg(&good)
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["status"], "ok");
    assert!(lines[0]["terminals"].as_u64().unwrap() >= 1);
    assert_eq!(lines[1]["status"], "error");
    assert!(lines[1]["error"].as_str().unwrap().contains("missing"));
    assert_eq!(lines[2]["summary"]["total"], 2);
    assert_eq!(lines[2]["summary"]["ok"], 1);
    assert_eq!(lines[2]["summary"]["error"], 1);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn check_without_inputs_is_a_usage_error() {
    let out = domino().args(["grammar", "check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let d = temp_dir("ext");
    let p = d.join("g.txt");
    std::fs::write(&p, "x").unwrap();
    let out = domino()
        .args(["grammar", "check"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn schema_jsonl_reports_every_line_and_a_summary() {
    let d = temp_dir("jsonl");
    let p = d.join("schemas.jsonl");
    std::fs::write(
        &p,
        "{\"id\":\"a\",\"schema\":{\"type\":\"string\"}}\nnot json\n{\"id\":\"c\"}\n",
    )
    .unwrap();
    let out = domino()
        .args(["grammar", "check", "--format", "json", "--schema-jsonl"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["id"], "a");
    assert!(["ok", "unsupported", "error"].contains(&lines[0]["status"].as_str().unwrap()));
    assert_eq!(lines[1]["status"], "error");
    assert!(
        lines[1]["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert_eq!(lines[2]["status"], "error");
    let s = &lines[3]["summary"];
    assert_eq!(s["total"], 3);
    assert_eq!(
        s["ok"].as_u64().unwrap()
            + s["unsupported"].as_u64().unwrap()
            + s["error"].as_u64().unwrap(),
        3
    );
    std::fs::remove_dir_all(&d).ok();
}

/// One schema over the compile budget is reported as such, and the report goes on: the
/// schemas before and after it are checked, the command exits 0 within seconds.
#[test]
fn schema_jsonl_reports_a_schema_over_its_budget_and_completes_the_rest() {
    let d = temp_dir("jsonl-bomb");
    let p = d.join("schemas.jsonl");
    // 20,000 values: one trie terminal whose automaton needs more than 24 MB (4,000 fitted
    // once terminal DFAs were built lazily).
    let values: Vec<String> = (0..20_000)
        .map(|i| format!("value-{i:05}-{}", "x".repeat(i % 40)))
        .collect();
    let lines = [
        serde_json::json!({"id": "before", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}),
        serde_json::json!({"id": "items", "schema": {"type": "array", "maxItems": 1_000_000_000u64, "items": {"type": "integer"}}}),
        serde_json::json!({"id": "bomb", "schema": {"type": "string", "enum": values}}),
        serde_json::json!({"id": "after", "schema": {"type": "array", "items": {"type": "number"}}}),
    ];
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&p, text.join("\n")).unwrap();
    let started = std::time::Instant::now();
    let out = domino()
        .args([
            "grammar",
            "check",
            "--format",
            "json",
            "--compile-memory",
            "24",
            "--schema-jsonl",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert_eq!(lines[0]["status"], "ok");
    assert_eq!(
        lines[1]["status"], "ok",
        "maxItems 1e9 is built by doubling"
    );
    assert_eq!(lines[2]["id"], "bomb");
    assert_eq!(lines[2]["status"], "error");
    assert_eq!(lines[2]["kind"], "limit");
    let e = lines[2]["error"].as_str().unwrap();
    assert!(e.contains("memory budget of 24 MB"), "{e}");
    assert_eq!(lines[3]["status"], "ok");
    assert_eq!(lines[4]["summary"]["total"], 4);
    assert_eq!(lines[4]["summary"]["ok"], 3);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn convert_prints_gbnf_that_reads_back() {
    let out = domino()
        .current_dir(root())
        .args([
            "grammar",
            "convert",
            "--grammar",
            "grammars/rpg_template.lark",
        ])
        .output()
        .unwrap();
    // %ignore has no GBNF form: a clear grammar error.
    assert_eq!(out.status.code(), Some(2));
    let out = domino()
        .current_dir(root())
        .args(["grammar", "convert", "--grammar", "grammars/c.gbnf"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("root ::= "));
    domino::grammar::gbnf::parse(&text, "root").unwrap();
    let out = domino()
        .args([
            "grammar",
            "convert",
            "--regex",
            "[a-c]{2,3}x?",
            "--to",
            "ir",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        "root ::= ([a-c]{2,3} \"x\"?)"
    );
    let out = domino().args(["grammar", "convert"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_time_limit_reports_timeout() {
    let out = domino()
        .current_dir(root())
        .args([
            "grammar",
            "check",
            "--format",
            "json",
            "--timeout-ms",
            "0",
            "grammars/c.gbnf",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    // A zero budget cannot be met: the item is reported as a timeout, not a hang or crash.
    assert_eq!(first["status"], "error", "{stdout}");
    assert_eq!(first["error"], "timeout");
    assert_eq!(out.status.code(), Some(1));
}

/// A schema whose terminals are intersections: GBNF cannot say them (exit 2, named), the IR
/// view shows them with their constraints.
#[test]
fn convert_of_a_constrained_terminal() {
    let d = temp_dir("constrained");
    let schema = d.join("s.json");
    std::fs::write(
        &schema,
        r#"{"type": "string", "pattern": "^[a-z]+:[a-z]+$", "maxLength": 9}"#,
    )
    .unwrap();
    let out = domino()
        .args(["grammar", "convert", "--schema"])
        .arg(&schema)
        .args(["--to", "gbnf"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("GBNF cannot express"), "{stderr}");
    let out = domino()
        .args(["grammar", "convert", "--schema"])
        .arg(&schema)
        .args(["--to", "ir"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("NOT equivalent GBNF")
            && stdout.contains("-constrained ::= ")
            && stdout.contains("#   and: "),
        "{stdout}"
    );
}

/// Scanner states are counted by building them up to 20,000; a larger scanner (built lazily
/// by the engine) is still ok, and says so.
#[test]
fn check_reports_scanner_states_exactly_or_as_built_on_demand() {
    let out = domino()
        .current_dir(root())
        .args([
            "grammar",
            "check",
            "--format",
            "json",
            "grammars/json.gbnf",
            "grammars/person.schema.json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["status"], "ok");
    assert_eq!(lines[0]["scanner_complete"], true);
    assert!(lines[0]["scanner_states"].as_u64().unwrap() > 10);
    assert_eq!(lines[1]["status"], "ok");
    assert_eq!(lines[1]["scanner_complete"], false);
    assert_eq!(lines[1]["scanner_states"], 20_000);
    assert!(lines[1]["scanner_components"].as_u64().unwrap() > 1_000);
    let text = domino()
        .current_dir(root())
        .args(["grammar", "check", "grammars/person.schema.json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(text.stdout).unwrap();
    assert!(
        stdout.contains("scanner states >20000 (built on demand)"),
        "{stdout}"
    );
}
