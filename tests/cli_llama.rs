//! issue 19 from outside, on the default model: llama-cli's flags work with llama-cli's
//! meanings; a JSON document ends where its root value ends (`finish_reason: grammar_end`);
//! a constrained output cut by the token limit warns, and `--strict` makes it exit 3;
//! `--batch` writes one NDJSON line per prompt and resumes.

mod common;

use assert_cmd::Command;
use serde_json::Value;

fn domino() -> Command {
    let mut c = Command::cargo_bin("domino").unwrap();
    c.env_remove("DOMINO_MODEL")
        .env("NO_COLOR", "1")
        .current_dir(common::repo_root());
    c
}

/// `generate` on the default model, one thread (`-t`, llama-cli's spelling).
fn generate() -> Command {
    let model = common::require_default_model();
    let mut c = domino();
    c.arg("generate").arg("-m").arg(model).args(["-t", "1"]);
    c
}

/// Run, require success, return (stdout, stderr).
fn run_ok(c: &mut Command) -> (String, String) {
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {stderr}",
        out.status
    );
    (String::from_utf8(out.stdout).unwrap(), stderr)
}

fn json_of(c: &mut Command) -> (Value, String) {
    let (out, err) = run_ok(c.args(["--format", "json"]));
    (serde_json::from_str(out.trim()).unwrap(), err)
}

const DOG: &str = "Give a JSON object with a name and an age of a dog.";

#[test]
fn json_ends_with_the_closing_brace_by_grammar_end() {
    let (v, err) = json_of(generate().args(["--json", "--chat", "-p", DOG, "-n", "200"]));
    let text = v["text"].as_str().unwrap();
    assert!(text.ends_with('}'), "{text:?}");
    assert_eq!(v["finish_reason"], "grammar_end", "{v}");
    assert_eq!(v["complete"], true);
    let doc: Value = serde_json::from_str(text).unwrap();
    assert!(doc.is_object());
    assert!(!err.contains("warning"), "{err}");
    // --trailing-whitespace keeps the old grammar: whitespace after the root value is
    // allowed, and on this prompt the model spends 20 tokens on newlines after the brace.
    // No extra members: with properties in any order (the default) and extra members allowed,
    // this small model fills 150 tokens with `"A dog": -1` pairs instead of ending.
    let dog = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}"#;
    let flags = ["-j", dog, "--chat", "-p", "A dog:", "-n", "150"];
    let (v, _) = json_of(generate().args(flags));
    let ended = v["text"].as_str().unwrap().to_string();
    assert!(ended.ends_with('}'), "{ended:?}");
    assert_eq!(v["finish_reason"], "grammar_end");
    let (v, _) = json_of(generate().args(flags).arg("--trailing-whitespace"));
    let old = v["text"].as_str().unwrap();
    assert!(old.starts_with(&ended), "{old:?}");
    assert!(old[ended.len()..].starts_with("\n\n"), "{old:?}");
}

#[test]
fn json_means_an_object_or_array_and_json_value_any_value() {
    let prompt = "The number of legs of a dog, as JSON:";
    let (v, _) = json_of(generate().args(["--json", "-p", prompt, "-n", "40"]));
    let text = v["text"].as_str().unwrap().trim_start();
    assert!(text.starts_with('{') || text.starts_with('['), "{text:?}");
    let (v, _) = json_of(generate().args(["--json-value", "-p", prompt, "-n", "40"]));
    assert_eq!(v["complete"], true, "{v}");
    let text = v["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text.trim()).unwrap();
}

#[test]
fn truncation_warns_and_strict_exits_3() {
    let args = [
        "--json",
        "--chat",
        "-p",
        "Describe a cat as JSON.",
        "-n",
        "6",
    ];
    let (v, err) = json_of(generate().args(args));
    assert_eq!(v["complete"], false);
    assert_eq!(v["finish_reason"], "length");
    assert!(
        err.contains("warning") && err.contains("token limit") && err.contains("-n"),
        "{err}"
    );
    let out = generate().args(args).arg("--strict").output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error: the token limit"));
    // Unconstrained text cut by -n is not a truncated document: no warning.
    let (_, err) = run_ok(generate().args(["-p", "Hello", "-n", "3", "--strict"]));
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn n_minus_one_means_no_limit_but_the_context() {
    // -1 (llama-cli): the grammar or the context ends it. A full context is named as such.
    let (v, _) = json_of(generate().args(["--regex", "[a-z]{3}", "-p", "Word:", "-n", "-1"]));
    assert_eq!(v["finish_reason"], "grammar_end", "{v}");
    let out = generate()
        .args([
            "--json", "-p", "JSON:", "-n", "-1", "-c", "24", "--format", "json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Greedy on the default model: 23 tokens fill the 24-position context mid-object.
    assert_eq!(v["complete"], false, "{v}");
    assert!(err.contains("the context filled up"), "{err}");
}

#[test]
fn llama_cli_prompt_context_and_prediction_flags() {
    let (v, _) = json_of(generate().args([
        "-p",
        "The capital of France is",
        "-c",
        "256",
        "-ngl",
        "0",
        "--n-predict",
        "5",
    ]));
    assert_eq!(v["tokens"].as_array().unwrap().len(), 5);
    assert!(v["text"].as_str().unwrap().contains("Paris"), "{v}");
    // -c is the context: a prompt longer than it fails as --ctx does.
    let out = generate()
        .args(["-c", "32", "-p", &"word ".repeat(100)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // -f reads the prompt from a file; -e turns \n into a newline.
    let dir = common::scratch_dir("llama-flags");
    let file = dir.join("prompt.txt");
    std::fs::write(&file, "The capital of France is").unwrap();
    let (from_file, _) = run_ok(generate().arg("-f").arg(&file).args(["-n", "5"]));
    let (from_arg, _) = run_ok(generate().args(["The capital of France is", "-n", "5"]));
    assert_eq!(from_file, from_arg);
    let (v_escaped, _) = json_of(generate().args(["-e", "-p", "Line one.\\nLine", "-n", "1"]));
    let (v_plain, _) = json_of(generate().args(["-p", "Line one.\nLine", "-n", "1"]));
    assert_eq!(
        v_escaped["stats"]["prompt_tokens"],
        v_plain["stats"]["prompt_tokens"]
    );
    assert_eq!(v_escaped["tokens"], v_plain["tokens"]);
    // -p and a positional prompt together are a usage error.
    let out = generate().args(["-p", "a", "b"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn system_prompt_goes_through_the_chat_template() {
    let (with, _) = json_of(generate().args([
        "-sys",
        "You are a pirate. Always answer like a pirate.",
        "-p",
        "Hi",
        "-n",
        "4",
    ]));
    let (without, _) = json_of(generate().args(["--chat", "-p", "Hi", "-n", "4"]));
    let with_n = with["stats"]["prompt_tokens"].as_u64().unwrap();
    let without_n = without["stats"]["prompt_tokens"].as_u64().unwrap();
    assert!(with_n > without_n + 5, "{with_n} vs {without_n}");
}

#[test]
fn sampling_flags_have_llama_cli_meanings() {
    let base = ["-p", "Once upon a time", "-n", "12"];
    // --temp 0 is greedy whatever the seed; top-k 1 is greedy at any temperature.
    let (a, _) = run_ok(generate().args(base).args(["--temp", "0", "--seed", "1"]));
    let (b, _) = run_ok(generate().args(base).args(["--temp", "0", "--seed", "2"]));
    assert_eq!(a, b);
    let (c, _) = run_ok(
        generate()
            .args(base)
            .args(["--temp", "1.5", "--top-k", "1", "--seed", "3"]),
    );
    assert_eq!(a, c);
    // --seed N is reproducible; --seed -1 is accepted (a random seed).
    let sampled = [
        "--temp", "1.0", "--top-p", "0.95", "--min-p", "0.05", "--seed", "7",
    ];
    let (d, _) = run_ok(generate().args(base).args(sampled));
    let (e, _) = run_ok(generate().args(base).args(sampled));
    assert_eq!(d, e);
    run_ok(
        generate()
            .args(base)
            .args(["--temp", "1.0", "--seed", "-1"]),
    );
}

const PERSON: &str = r#"{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}"#;

fn assert_person(v: &Value) {
    let doc: Value = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    assert!(doc["name"].is_string() && doc["age"].is_i64(), "{doc}");
    assert_eq!(v["finish_reason"], "grammar_end");
}

#[test]
fn schemas_inline_from_stdin_and_by_flag_not_extension() {
    let chat = ["--chat", "-p", "A person:", "-n", "80"];
    let (inline, _) = json_of(generate().args(["-j", PERSON]).args(chat));
    assert_person(&inline);
    let (stdin, _) = json_of(
        generate()
            .args(["--schema", "-"])
            .args(chat)
            .write_stdin(PERSON),
    );
    assert_eq!(stdin["text"], inline["text"]);
    let dir = common::scratch_dir("schema-ext");
    let txt = dir.join("person.txt");
    std::fs::write(&txt, PERSON).unwrap();
    let (file, _) = json_of(generate().arg("--json-schema-file").arg(&txt).args(chat));
    assert_eq!(file["text"], inline["text"]);
    // A GBNF grammar on stdin.
    let (v, _) = json_of(
        generate()
            .args([
                "--grammar-file",
                "-",
                "-p",
                "Is water wet? Answer:",
                "-n",
                "10",
            ])
            .write_stdin("root ::= \" yes\" | \" no\""),
    );
    assert!(
        ["yes", "no"].contains(&v["text"].as_str().unwrap().trim()),
        "{v}"
    );
    // stdin cannot hold both the schema and the prompt; a bad inline schema is exit 2.
    let out = generate()
        .args(["--schema", "-"])
        .write_stdin(PERSON)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = generate()
        .args(["-j", "{not json", "-p", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn batch_writes_one_line_per_prompt_and_resumes() {
    let dir = common::scratch_dir("batch");
    let input = dir.join("prompts.jsonl");
    let output = dir.join("out.jsonl");
    std::fs::write(
        &input,
        "{\"id\": \"a\", \"prompt\": \"A person:\"}\n{\"id\": \"b\", \"prompt\": \"Another person:\"}\n",
    )
    .unwrap();
    let flags = ["-j", PERSON, "--chat", "-n", "80"];
    let (stdout, _) = run_ok(generate().arg("--batch").arg(&input).args(flags));
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["id"], "a");
    assert_eq!(lines[1]["id"], "b");
    lines.iter().for_each(assert_person);

    // Resume: the first result is there (plus a torn line from a killed run); only b runs.
    std::fs::write(&output, format!("{}\n{{\"id\": \"b\", \"te", lines[0])).unwrap();
    let (_, err) = run_ok(
        generate()
            .arg("--batch")
            .arg(&input)
            .arg("-o")
            .arg(&output)
            .arg("--resume")
            .args(flags),
    );
    assert!(err.contains("2/2"), "progress: {err}");
    let written = std::fs::read_to_string(&output).unwrap();
    let ids: Vec<Value> = written
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["id"].clone())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    let resumed = serde_json::from_str::<Value>(written.lines().last().unwrap()).unwrap();
    for field in ["text", "tokens", "finish_reason"] {
        assert_eq!(resumed[field], lines[1][field], "{field}");
    }
    // --resume without -o is a usage error.
    let out = generate()
        .arg("--batch")
        .arg(&input)
        .arg("--resume")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_has_headings_and_llama_spellings() {
    let out = domino().args(["generate", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for s in [
        "Prompt:",
        "Constraint:",
        "Sampling:",
        "Model:",
        "Output:",
        "--ctx-size",
        "--n-predict",
        "--json-schema",
        "--grammar-file",
        "--json-schema-file",
        "--system-prompt",
        "--batch",
        "--strict",
    ] {
        assert!(help.contains(s), "--help lacks {s}:\n{help}");
    }
}

/// A context whose KV cache cannot fit in memory is refused with the reason and what to
/// change, before llama.cpp tries (and before the kernel kills the process).
#[test]
fn a_context_too_large_for_memory_is_a_clear_error() {
    let out = generate()
        .args(["-c", "2000000000", "-n", "2", "Hi"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("KV cache") && stderr.contains("lower -c/--ctx-size"),
        "{stderr}"
    );
}
