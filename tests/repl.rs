//! `domino repl` driven through piped stdin on the default model: a schema-constrained
//! session whose outputs are checked against the schema, errors that keep the session
//! alive, token boundaries, `:mask`, `:save`, and Ctrl-C stopping a generation.
//!
//! With stdin not a terminal the REPL reads plain lines (no prompt, no line editor) and,
//! stdout not being a terminal, writes no colour: stdout holds exactly the generated texts
//! (one line each here) and the answers to commands.

mod common;

use assert_cmd::Command;
use domino::engine::{CompiledGrammar, Constraint, Options};
use domino::grammar::{CompileOptions, GrammarSource, WhitespacePolicy};
use std::io::{Read, Write};
use std::sync::Arc;

fn repl() -> Command {
    let model = common::require_default_model();
    let mut c = Command::cargo_bin("domino").unwrap();
    c.env_remove("DOMINO_MODEL")
        .env_remove("NO_COLOR")
        // Keep the user's history file out of it (stdin is not a terminal anyway).
        .env("XDG_DATA_HOME", common::scratch_dir("repl-data"))
        .current_dir(common::repo_root())
        .arg("repl")
        .arg("-m")
        .arg(model)
        .args(["--threads", "1"]);
    c
}

struct Session {
    stdout: String,
    stderr: String,
}

fn run(c: &mut Command, input: &str) -> Session {
    let out = c.write_stdin(input.to_string()).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    Session { stdout, stderr }
}

fn gsm8k_schema() -> serde_json::Value {
    let text =
        std::fs::read_to_string(common::repo_root().join("grammars/gsm8k.schema.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A constraint for the GSM8K schema (compact whitespace, as the session uses) over the
/// model's vocabulary: checks that incomplete outputs are still viable prefixes.
fn gsm8k_constraint() -> Constraint {
    let opts = CompileOptions {
        whitespace: WhitespacePolicy::Compact,
        ..Default::default()
    };
    let ir = GrammarSource::JsonSchema(gsm8k_schema())
        .compile(&opts)
        .unwrap();
    let grammar = CompiledGrammar::new(ir).unwrap();
    let vocab =
        Arc::new(domino::runtime::load_vocabulary(common::require_default_model()).unwrap());
    Constraint::new(&grammar, &vocab, Options::default()).unwrap()
}

const FEW_SHOT: &str = "Q: What is 1+1?\\\nA: {\"thoughts\":[{\"step\":\"add\",\"calculation\":\"1+1\",\"result\":2}],\"answer\":2}\\\nQ: What is 2+2?\\\nA: \n";

#[test]
fn schema_session_streams_valid_json_and_reports_stats() {
    // First a greedy chat prompt; then, since greedy SmolLM2 often repeats array items until
    // the limit, sampled few-shot runs with several seeds. Every run is checked; at least one
    // must close its document.
    let mut input = String::from(
        ":schema grammars/gsm8k.schema.json\n:chat on\n:max 120\nWhat is 12 times 3? Reply with JSON: one step, then the answer.\n:stats\n:chat off\n:temp 0.8\n:max 80\n",
    );
    let seeds = 1..=6;
    for seed in seeds.clone() {
        input.push_str(&format!(":seed {seed}\n{FEW_SHOT}:stats\n"));
    }
    input.push_str(":quit\n");
    let max_tokens: Vec<u64> = std::iter::once(120).chain(seeds.map(|_| 80)).collect();
    let s = run(repl().args(["--whitespace", "compact"]), &input);
    assert!(
        !s.stdout.contains('\x1b'),
        "colour on a pipe: {:?}",
        s.stdout
    );
    let lines: Vec<&str> = s.stdout.lines().collect();
    assert!(
        lines[0].starts_with("constraint: schema grammars/gsm8k.schema.json"),
        "{}",
        s.stdout
    );
    let schema = gsm8k_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let base = gsm8k_constraint();
    let mut complete = 0;
    let mut stats_lines = 0;
    for (i, line) in lines.iter().enumerate() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(stats) = v.get("stats") else {
            continue;
        };
        stats_lines += 1;
        // The stats line follows the generated text, which is one line (compact JSON).
        let text = lines[i - 1];
        assert!(stats["generated_tokens"].as_u64().unwrap() > 0, "{line}");
        assert!(stats["forward_passes"].as_u64().unwrap() >= 1, "{line}");
        assert!(stats["tokens_per_s"].as_f64().unwrap() > 0.0, "{line}");
        assert!(stats["prompt_tokens"].as_u64().unwrap() > 20, "{line}");
        let finish = v["finish_reason"].as_str().unwrap();
        if v["complete"] == true {
            complete += 1;
            assert!(finish == "grammar_end" || finish == "eos", "{line}");
            let doc: serde_json::Value =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
            assert!(validator.is_valid(&doc), "does not validate: {text}");
        } else {
            assert_eq!(finish, "length", "{line}");
            assert_eq!(
                stats["generated_tokens"],
                max_tokens[stats_lines - 1],
                "{line}"
            );
            let mut c = base.clone();
            c.commit_bytes(text.as_bytes())
                .unwrap_or_else(|e| panic!("not a schema prefix ({e}): {text}"));
        }
    }
    assert_eq!(stats_lines, max_tokens.len(), "stdout: {}", s.stdout);
    assert!(complete >= 1, "no run closed its document:\n{}", s.stdout);
    // One status line per generation on stderr.
    assert_eq!(
        s.stderr.matches(" tokens · ").count(),
        stats_lines,
        "{}",
        s.stderr
    );
}

#[test]
fn errors_keep_the_session_alive() {
    let dir = common::scratch_dir("repl-errors");
    let bad_gbnf = dir.join("bad.gbnf");
    std::fs::write(&bad_gbnf, "root ::= \"a\" (\n").unwrap();
    let bad_schema = dir.join("bad.schema.json");
    std::fs::write(&bad_schema, "{\"type\": \"object\",\n  \"properties\": }").unwrap();
    let input = format!(
        ":grammar does/not/exist.gbnf\n:show\n:grammar {}\n:schema {}\n:frobnicate\n:k many\n:stats\n:mask\n:help\n:quit\n",
        bad_gbnf.display(),
        bad_schema.display()
    );
    let s = run(repl().arg("--json"), &input);
    // Every bad command was answered with an error on stderr …
    assert!(s.stderr.contains("does/not/exist.gbnf"), "{}", s.stderr);
    assert!(s.stderr.contains("bad.gbnf"), "{}", s.stderr);
    assert!(
        s.stderr.contains("bad.schema.json") || s.stderr.contains("2:"),
        "{}",
        s.stderr
    );
    assert!(
        s.stderr.contains("unknown command :frobnicate"),
        "{}",
        s.stderr
    );
    assert!(s.stderr.contains(":k"), "{}", s.stderr);
    assert!(s.stderr.contains("no generation yet"), "{}", s.stderr);
    assert!(s.stderr.matches("error: ").count() >= 6, "{}", s.stderr);
    // … and the next commands were still answered, with the constraint unchanged.
    assert!(s.stdout.contains("constraint  json"), "{}", s.stdout);
    assert!(
        s.stdout.contains("at the start (no prompt yet)"),
        "{}",
        s.stdout
    );
    assert!(s.stdout.contains("of 49152 tokens allowed"), "{}", s.stdout);
    assert!(s.stdout.contains("model's favourite: "), "{}", s.stdout);
    for c in domino::repl::command::COMMANDS {
        assert!(
            s.stdout.contains(&format!(":{}", c.name)),
            ":help lacks :{}",
            c.name
        );
    }
}

#[test]
fn token_boundaries_regex_and_transcript() {
    let dir = common::scratch_dir("repl-save");
    let transcript = dir.join("t.jsonl");
    let input = format!(
        ":regex [a-z]+ [0-9]+\n:tokens on\n:max 12\nThe year is\n:tokens off\nThe year is\n:none\n:max 3\nWrite a long poem about the sea.\n:save {}\n:quit\n",
        transcript.display()
    );
    let s = run(repl().arg("--chat"), &input);
    let lines: Vec<&str> = s.stdout.lines().collect();
    let re = regex_automata::meta::Regex::new(r"^[a-z]+ [0-9]+$").unwrap();
    let with_bars = lines
        .iter()
        .find(|l| l.contains('|'))
        .unwrap_or_else(|| panic!("no boundaries: {}", s.stdout));
    let joined = with_bars.replace('|', "");
    assert!(re.is_match(&joined), "{with_bars:?}");
    // The same greedy generation without boundaries is the same text.
    assert!(lines.contains(&joined.as_str()), "{}", s.stdout);
    let saved = std::fs::read_to_string(&transcript).unwrap();
    let turns: Vec<serde_json::Value> = saved
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 3, "{saved}");
    assert_eq!(turns[0]["constraint"], "regex [a-z]+ [0-9]+");
    assert_eq!(turns[0]["text"], joined);
    assert_eq!(turns[0]["text"], turns[1]["text"]);
    let n = turns[0]["tokens"].as_array().unwrap().len();
    assert_eq!(turns[0]["logprobs"].as_array().unwrap().len(), n);
    assert_eq!(turns[0]["intervened"].as_array().unwrap().len(), n);
    assert!(
        turns[0]["logprobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l.as_f64().unwrap() <= 0.0)
    );
    assert_eq!(turns[2]["constraint"], serde_json::Value::Null);
    assert_eq!(turns[2]["stats"]["generated_tokens"], 3);
    assert_eq!(turns[2]["stats"]["interventions"], 0);
    assert_eq!(turns[2]["finish_reason"], "length");
    // The second, identical prompt reused the KV cache of the first.
    assert!(
        turns[1]["stats"]["reused_prompt_tokens"].as_u64().unwrap() > 0,
        "{saved}"
    );
}

#[test]
fn ctrl_c_stops_a_generation_and_the_session_goes_on() {
    let model = common::require_default_model();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_domino"))
        .current_dir(common::repo_root())
        .env("XDG_DATA_HOME", common::scratch_dir("repl-data"))
        .args(["repl", "--threads", "1", "-n", "3000", "-m"])
        .arg(model)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    stdin.write_all(b"Once upon a time\n").unwrap();
    stdin.flush().unwrap();
    // Wait for the stream to start, then interrupt.
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    stdin.write_all(b":stats\n:quit\n").unwrap();
    drop(stdin);
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stats = rest
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v.get("stats").is_some())
        .unwrap_or_else(|| panic!("no stats line after Ctrl-C: {rest}"));
    assert_eq!(stats["finish_reason"], "cancelled", "{stats}");
    assert!(stats["stats"]["generated_tokens"].as_u64().unwrap() < 3000);
}

#[test]
fn drafts_and_baselines_run_through_decode_and_keep_greedy_output() {
    let dir = common::scratch_dir("repl-decoder");
    let transcript = dir.join("t.jsonl");
    let prompt = "Give me a JSON object describing a cat with name, age and colour.";
    let input = format!(
        ":json\n:max 40\n{prompt}\n:draft 4\n{prompt}\n{prompt}\n:draft 0\n:method template\n{prompt}\n:save {}\n:quit\n",
        transcript.display()
    );
    // The threshold policy verifies every proposal, so whether the second drafted turn drafts
    // depends on the counts alone; the cost policy (the default) may rightly decide that drafts
    // do not pay on this machine (tests/decode_cli.rs covers it).
    let s = run(
        repl().args(["--chat", "--draft-policy", "threshold"]),
        &input,
    );
    let saved = std::fs::read_to_string(&transcript).unwrap();
    let turns: Vec<serde_json::Value> = saved
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(turns.len(), 4, "{saved}");
    // Speculation changes speed, never greedy output; template output is a JSON prefix too.
    assert_eq!(turns[0]["text"], turns[1]["text"], "{saved}");
    assert_eq!(turns[0]["text"], turns[2]["text"], "{saved}");
    assert_eq!(turns[0]["tokens"], turns[2]["tokens"], "{saved}");
    // The heat loop reports interventions per token; so does decode's loop (whose tokens
    // stream without heat), one per output token.
    for t in &turns[..3] {
        assert_eq!(
            t["intervened"].as_array().map(Vec::len),
            t["tokens"].as_array().map(Vec::len),
            "{saved}"
        );
    }
    assert_eq!(turns[3]["method"], "template");
    // Draft counts learn across generations: the second drafted turn proposes something.
    assert!(
        turns[2]["stats"]["draft_proposed"].as_u64().unwrap() > 0,
        "{saved}"
    );
    for t in &turns {
        if t["complete"] == true {
            serde_json::from_str::<serde_json::Value>(t["text"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("{e}: {}", t["text"]));
        }
        assert_eq!(
            t["logprobs"].as_array().unwrap().len(),
            t["tokens"].as_array().unwrap().len(),
            "{t}"
        );
    }
    assert!(s.stderr.contains("drafts "), "{}", s.stderr);
}

#[test]
fn a_bad_starting_constraint_is_a_usage_error_before_the_model_loads() {
    let dir = common::scratch_dir("repl-start");
    let bad = dir.join("bad.gbnf");
    std::fs::write(&bad, "root ::= \"a\" (\n").unwrap();
    let out = repl()
        .arg("--grammar")
        .arg(&bad)
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1:"), "no position in: {stderr}");
    assert!(out.stdout.is_empty());
    // A bad flag value is a usage error too.
    let out = repl()
        .args(["--k", "many"])
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn conversation_keeps_history_until_reset() {
    // Turn 2 answers in the context of turn 1 only in conversation mode; `:reset` forgets it,
    // so the prompt after it costs what it cost as a first turn.
    let input = ":max 8\nMy name is Zed.\nWhat is my name?\n:stats\n:reset\nWhat is my name?\n:stats\n:quit\n";
    let s = run(
        repl().args(["--conversation", "-sys", "Answer briefly."]),
        input,
    );
    let stats: Vec<serde_json::Value> = s
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stats.len(), 2, "{}", s.stdout);
    let prompt_tokens = |v: &serde_json::Value| v["stats"]["prompt_tokens"].as_u64().unwrap();
    assert!(
        prompt_tokens(&stats[0]) > prompt_tokens(&stats[1]) + 8,
        "with history {} vs after :reset {}",
        prompt_tokens(&stats[0]),
        prompt_tokens(&stats[1])
    );
    assert!(
        s.stdout.contains("conversation reset (2 turns forgotten)"),
        "{}",
        s.stdout
    );
    // Without --conversation, the same second question is an independent turn.
    let s = run(
        repl().args(["--chat", "-sys", "Answer briefly."]),
        ":max 8\nMy name is Zed.\nWhat is my name?\n:stats\n:quit\n",
    );
    let single: serde_json::Value =
        serde_json::from_str(s.stdout.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!(
        single["stats"]["prompt_tokens"],
        stats[1]["stats"]["prompt_tokens"]
    );
}

#[test]
fn tools_command_offers_tools_and_prints_validated_calls() {
    let dir = common::scratch_dir("repl-tools");
    let tools = dir.join("tools.json");
    std::fs::write(
        &tools,
        r#"[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}}}]"#,
    )
    .unwrap();
    let s = run(
        repl().args(["-n", "64"]),
        &format!(
            ":tools {} required\nWhat is the weather in Paris?\n:tools nowhere.json\n:tools off\n",
            tools.display()
        ),
    );
    assert!(
        s.stdout.contains("tools: get_weather (generic syntax"),
        "{}",
        s.stdout
    );
    let line = s
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("tool call: "))
        .unwrap_or_else(|| panic!("no call printed: {}", s.stdout));
    let call: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(call["name"], "get_weather");
    assert!(call["arguments"]["city"].is_string(), "{call}");
    assert!(
        s.stderr.contains("cannot read nowhere.json"),
        "{}",
        s.stderr
    );
    assert!(s.stdout.contains("tools: off"));
}
