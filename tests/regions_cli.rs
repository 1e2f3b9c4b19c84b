//! Where a constraint begins, end to end on the default model (SmolLM2): `domino mask` over a
//! triggered constraint, reasoning (`--reasoning`), tool calls (`--tools`), and token
//! healing (on by default, `--no-token-healing`).

mod common;

use assert_cmd::Command;
use domino::decode::methods::{Decoder, DecoderConfig, Method};
use domino::decode::{GenerationRequest, SamplingConfig};
use domino::runtime::{Model, ModelOptions, SessionOptions};
use serde_json::Value;

fn domino() -> Command {
    let mut c = Command::cargo_bin("domino").unwrap();
    c.env_remove("DOMINO_MODEL")
        .env("NO_COLOR", "1")
        .current_dir(common::repo_root());
    c
}

fn run_ok(c: &mut Command) -> String {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "exit {:?}; stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn generate_json(args: &[&str]) -> Value {
    let model = common::require_default_model();
    let mut c = domino();
    c.arg("generate")
        .arg("-m")
        .arg(model)
        .args(["--threads", "1", "--format", "json"])
        .args(args);
    serde_json::from_str(&run_ok(&mut c)).unwrap()
}

fn masks(args: &[&str], prefixes: &[&str]) -> Vec<Value> {
    // One file per call: tests run in parallel.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = common::scratch_dir("regions-mask");
    let file = dir.join(format!("prefixes-{}-{n}.jsonl", std::process::id()));
    let lines: Vec<String> = prefixes
        .iter()
        .map(|p| serde_json::to_string(p).unwrap())
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let mut c = domino();
    c.arg("mask")
        .arg("--model")
        .arg(common::require_default_model())
        .args(["--format", "json", "--prefixes"])
        .arg(&file)
        .args(args);
    run_ok(&mut c)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn allowed(v: &Value) -> Vec<u64> {
    v["allowed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn mask_is_free_before_the_trigger_and_the_grammars_right_after_it() {
    let prefixes = ["I think", "I think<answer>", "I think<answer>{\"a\": 1}"];
    let end = masks(
        &["--trigger", "<answer>", "--json", "--after-region", "end"],
        &prefixes,
    );
    let free = masks(&["--trigger", "<answer>", "--json"], &prefixes);
    let plain = masks(&["--json"], &["", "{\"a\": 1}"]);
    let vocab_size = 49152;
    // Before the trigger: every token, end of generation included (no token of this
    // vocabulary completes `<answer>` from `I think`; the exact rule for tokens that do is
    // the next test's).
    for m in [&end[0], &free[0]] {
        assert!(m["eos_allowed"].as_bool().unwrap());
        assert_eq!(allowed(m).len(), vocab_size);
    }
    // Right after the trigger, with only the end after the region: exactly the plain JSON
    // constraint's mask at its start (bridge tokens such as ` {` and `{"` included), and no
    // end of generation.
    let after = allowed(&end[1]);
    assert_eq!(after, allowed(&plain[0]));
    assert!(!end[1]["eos_allowed"].as_bool().unwrap());
    assert!(after.len() < 1000, "{}", after.len());
    // With free text after the region, also the tokens that close a whole JSON value and go
    // on as free text (` {},`): the plain mask plus only such tokens.
    let vocab = domino::runtime::load_vocabulary(common::require_default_model()).unwrap();
    let after_free = allowed(&free[1]);
    assert!(after.iter().all(|t| after_free.contains(t)));
    let extra: Vec<String> = after_free
        .iter()
        .filter(|t| !after.contains(t))
        .map(|&t| {
            String::from_utf8_lossy(vocab.bytes(domino::vocab::TokenId(t as u32))).into_owned()
        })
        .collect();
    assert!(!extra.is_empty());
    for e in &extra {
        let body = e.trim_start();
        assert!(
            body.starts_with("{}") || body.starts_with("[]"),
            "{e:?} leaves the region mid-token"
        );
    }
    // A complete document: the plain constraint allows only the end; the triggered one,
    // with free text after, allows everything again.
    assert_eq!(allowed(&free[2]).len(), vocab_size);
    assert!(allowed(&plain[1]).len() < 10);
}

#[test]
fn mask_counts_tokens_that_straddle_the_trigger_exactly() {
    // `:` is the trigger and the region is one digit: before it, a token containing `:`
    // is allowed exactly when what follows the `:` in it is a prefix of a digit.
    let m = masks(
        &[
            "--trigger",
            ":",
            "--regex",
            "[0-9]",
            "--after-region",
            "end",
        ],
        &["a"],
    );
    let ok = allowed(&m[0]);
    assert!(
        m[0]["eos_allowed"].as_bool().unwrap(),
        "free text alone is a sentence"
    );
    let vocab = domino::runtime::load_vocabulary(common::require_default_model()).unwrap();
    let mut expected = Vec::new();
    for (t, bytes) in vocab.text_tokens() {
        if vocab.is_special(t) || vocab.is_eog(t) {
            continue;
        }
        let ok = match bytes.iter().position(|&b| b == b':') {
            None => true,
            Some(i) => {
                let rest = &bytes[i + 1..];
                rest.is_empty() || (rest.len() == 1 && rest[0].is_ascii_digit())
            }
        };
        if ok {
            expected.push(t.0 as u64);
        }
    }
    expected.sort_unstable();
    let ok_text: Vec<u64> = ok
        .iter()
        .copied()
        .filter(|&t| {
            let t = domino::vocab::TokenId(t as u32);
            !vocab.is_special(t) && !vocab.is_eog(t)
        })
        .collect();
    assert!(expected.len() > 40_000 && expected.len() < vocab.len());
    if ok_text != expected {
        let missing: Vec<_> = expected
            .iter()
            .filter(|t| !ok_text.contains(t))
            .take(10)
            .collect();
        let extra: Vec<_> = ok_text
            .iter()
            .filter(|t| !expected.contains(t))
            .take(10)
            .collect();
        panic!("mask differs: missing {missing:?}, extra {extra:?}");
    }
}

/// Text and tokens of a generation.
fn text(v: &Value) -> String {
    v["text"].as_str().unwrap().to_string()
}

#[test]
fn reasoning_text_before_the_marker_equals_the_unconstrained_run() {
    // SmolLM2 does not write `</think>`; it does continue a numbered list, so the end of
    // reasoning is the third item's number, and the answer must be a lowercase word.
    let prompt = "List three colors:\\n1.";
    for sampling in [
        vec!["--temp", "0"],
        vec!["--temp", "0.8", "--seed", "11"],
        vec![
            "--temp", "0.9", "--seed", "5", "--top-k", "0", "--top-p", "1", "--min-p", "0",
        ],
    ] {
        let mut free_args = vec!["-e", "-n", "24", prompt];
        free_args.extend(&sampling);
        let free = text(&generate_json(&free_args));
        let marker = "\n3.";
        let Some(at) = free.find(marker) else {
            panic!("the unconstrained run has no {marker:?}: {free:?} ({sampling:?})");
        };
        let mut args = vec![
            "-e",
            "-n",
            "24",
            "--reasoning",
            "--reasoning-end",
            "\n3.",
            "--regex",
            " [a-z]+",
            prompt,
        ];
        args.extend(&sampling);
        let out = generate_json(&args);
        let constrained = text(&out);
        assert_eq!(
            &constrained[..at],
            &free[..at],
            "the free part differs ({sampling:?})"
        );
        let answer = &constrained[at + marker.len()..];
        assert!(
            !answer.is_empty()
                && answer.starts_with(' ')
                && answer[1..].bytes().all(|b| b.is_ascii_lowercase()),
            "the answer obeys the regex: {answer:?} (free run: {free:?})"
        );
        assert_ne!(
            &free[at + marker.len()..],
            answer,
            "the constraint changed the answer (the model writes a capital)"
        );
    }
}

#[test]
fn required_tool_choice_returns_a_call_whose_arguments_validate() {
    let dir = common::scratch_dir("regions-tools");
    let tools = dir.join("tools.json");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7}
        },
        "required": ["city", "unit", "days"],
        "additionalProperties": false
    });
    std::fs::write(
        &tools,
        serde_json::json!([{"type": "function", "function": {
            "name": "get_forecast", "description": "Weather forecast for a city",
            "parameters": schema}}])
        .to_string(),
    )
    .unwrap();
    let out = generate_json(&[
        "--tools",
        tools.to_str().unwrap(),
        "--tool-choice",
        "required",
        "--parallel-tool-calls",
        "false",
        "-n",
        "96",
        "What will the weather be in Paris this week?",
    ]);
    assert_eq!(
        out["tool_syntax"], "generic",
        "SmolLM2's template has no tool syntax"
    );
    let calls = out["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{out}");
    assert_eq!(calls[0]["name"], "get_forecast");
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(validator.is_valid(&calls[0]["arguments"]), "{}", calls[0]);
    assert!(out["text"].as_str().unwrap().starts_with("<tool_call>"));
    assert_eq!(out["finish_reason"], "grammar_end", "{out}");
}

#[test]
fn parallel_tool_calls_allow_several_calls_or_at_most_one() {
    let dir = common::scratch_dir("regions-tools-parallel");
    let tools = dir.join("tools.json");
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": false
    });
    std::fs::write(
        &tools,
        serde_json::json!([{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather in a city",
            "parameters": schema}}])
        .to_string(),
    )
    .unwrap();
    let run = |parallel: &str| {
        generate_json(&[
            "--tools",
            tools.to_str().unwrap(),
            "--tool-choice",
            "required",
            "--parallel-tool-calls",
            parallel,
            "-n",
            "120",
            "What is the weather in Paris and in London?",
        ])
    };
    let validator = jsonschema::validator_for(&schema).unwrap();
    // OpenAI's default (true): the model calls once per city, and every call is listed.
    let several = run("true");
    let calls = several["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{several}");
    for call in calls {
        assert_eq!(call["name"], "get_weather");
        assert!(validator.is_valid(&call["arguments"]), "{call}");
    }
    assert_ne!(calls[0]["arguments"], calls[1]["arguments"], "{several}");
    // false: the grammar ends after the first call.
    let one = run("false");
    let calls = one["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{one}");
    assert_eq!(calls[0], several["tool_calls"][0]);
    assert_eq!(one["finish_reason"], "grammar_end", "{one}");
}

#[test]
fn each_trigger_takes_the_constraint_written_after_it() {
    let prefixes = ["x", "x<a>", "x<b>"];
    let paired = masks(
        &[
            "--trigger",
            "<a>",
            "-j",
            r#"{"type": "integer"}"#,
            "--trigger",
            "<b>",
            "--regex",
            "[a-z]+",
            "--after-region",
            "end",
        ],
        &prefixes,
    );
    let integer = masks(&["-j", r#"{"type": "integer"}"#], &[""]);
    let letters = masks(&["--regex", "[a-z]+"], &[""]);
    assert_eq!(allowed(&paired[0]).len(), 49152);
    assert_eq!(allowed(&paired[1]), allowed(&integer[0]));
    assert_eq!(allowed(&paired[2]), allowed(&letters[0]));
    // One constraint after several triggers: shared by all (the meaning it always had).
    let shared = masks(
        &[
            "--trigger",
            "<a>",
            "--trigger",
            "<b>",
            "--regex",
            "[a-z]+",
            "--after-region",
            "end",
        ],
        &prefixes,
    );
    assert_eq!(allowed(&shared[1]), allowed(&letters[0]));
    assert_eq!(allowed(&shared[2]), allowed(&letters[0]));
    // Ambiguous command lines are usage errors that say what to write.
    for (args, says) in [
        (
            &[
                "--trigger",
                "<a>",
                "--regex",
                "x",
                "--json",
                "--trigger",
                "<b>",
            ][..],
            "followed by 2 constraints",
        ),
        (
            &[
                "--regex",
                "x",
                "--trigger",
                "<a>",
                "--json",
                "--trigger",
                "<b>",
            ][..],
            "before the first --trigger",
        ),
        (
            &[
                "--trigger",
                "<a>",
                "--trigger",
                "<b>",
                "--regex",
                "x",
                "--json",
            ][..],
            "no constraint of its own",
        ),
        (&["--regex", "x", "--json"][..], "one constraint at a time"),
    ] {
        let out = domino()
            .arg("mask")
            .arg("--model")
            .arg(common::require_default_model())
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            err.contains("--trigger '<a>' --schema a.json"),
            "{args:?}: {err}"
        );
    }
    // generate pairs the same way. Unconstrained, SmolLM2 answers the spider question with
    // ` <b>1`; the region after `<b>` is letters only, so the digit is refused there.
    let prompt = |question: &str| {
        format!(
            "Q: What color is the sky?\nA: <b>blue\nQ: How many legs has a cat?\nA: <a>4\nQ: {question}\nA:"
        )
    };
    let paired = |question: &str| {
        text(&generate_json(&[
            "--trigger",
            "<a>",
            "-j",
            r#"{"type": "integer"}"#,
            "--trigger",
            "<b>",
            "--regex",
            "[a-z]{1,8}",
            "--after-region",
            "end",
            "-n",
            "24",
            &prompt(question),
        ]))
    };
    let free = text(&generate_json(&[
        "-n",
        "6",
        &prompt("How many legs has a spider?"),
    ]));
    assert!(free.starts_with(" <b>1"), "{free:?}");
    let spider = paired("How many legs has a spider?");
    let region = spider
        .strip_prefix(" <b>")
        .unwrap_or_else(|| panic!("{spider:?}"));
    assert!(
        !region.is_empty() && region.chars().all(|c| c.is_ascii_lowercase()),
        "{spider:?}"
    );
    assert_eq!(paired("What color is grass?"), " <b>green");
}

#[test]
fn unknown_tool_choice_and_bad_tools_are_usage_errors() {
    let dir = common::scratch_dir("regions-tools-bad");
    let tools = dir.join("tools.json");
    std::fs::write(&tools, r#"[{"name": "a"}]"#).unwrap();
    let model = common::require_default_model();
    let out = domino()
        .arg("generate")
        .arg("-m")
        .arg(&model)
        .args([
            "--tools",
            tools.to_str().unwrap(),
            "--tool-choice",
            "b",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`b`, which is not among the tools"));
    std::fs::write(&tools, r#"{"name": "a"}"#).unwrap();
    let out = domino()
        .arg("generate")
        .arg("-m")
        .arg(&model)
        .args(["--tools", tools.to_str().unwrap(), "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("must be a JSON array"));
}

fn load() -> Model {
    Model::load(common::require_default_model(), ModelOptions::default()).unwrap()
}

fn healed_run(model: &Model, prompt: &str, healing: bool) -> domino::decode::GenerationResult {
    let config = DecoderConfig {
        method: Method::None,
        token_healing: healing,
        ..DecoderConfig::default()
    };
    let mut decoder = Decoder::new(&config, model).unwrap();
    let mut session = model
        .session(SessionOptions {
            n_ctx: 512,
            threads: Some(1),
        })
        .unwrap();
    let request = GenerationRequest {
        prompt: model.tokenize(prompt, true, false),
        max_tokens: 6,
        sampling: SamplingConfig::default(),
        logprobs: false,
    };
    decoder
        .generate(&mut session, &request, &mut |_, _| Ok(()))
        .unwrap()
}

#[test]
fn healing_a_prompt_ending_mid_word_tokenizes_as_if_written_together() {
    let model = load();
    let prompt = "The capital of France is Par";
    let healed = healed_run(&model, prompt, true);
    let plain = healed_run(&model, prompt, false);
    let s = &healed.stats;
    assert!(s.healed_tokens >= 1, "healing acted: {s:?}");
    assert!(prompt.ends_with(&s.healed_text), "{:?}", s.healed_text);
    assert_eq!(plain.stats.healed_tokens, 0);
    assert_ne!(healed.tokens[0], plain.tokens[0], "the first token changed");
    // The healed run's tokens are the tokenizer's own for the whole text: the prompt's
    // kept tokens, then the output's.
    let prompt_tokens = model.tokenize(prompt, true, false);
    let kept = &prompt_tokens[..prompt_tokens.len() - s.healed_tokens];
    let whole = format!("{prompt}{}", healed.text());
    let together = model.tokenize(&whole, true, false);
    let n = healed.tokens.len() - 1; // the last token may merge with nothing yet written
    assert_eq!(&together[..kept.len()], kept);
    assert_eq!(
        &together[kept.len()..kept.len() + n],
        &healed.tokens[..n],
        "{whole:?}"
    );
}

#[test]
fn healing_changes_nothing_at_a_word_boundary() {
    // ` is` is a whole word, though longer tokens (` island`) extend it: healing may back
    // it off, but the model re-writes exactly it, so the output is the unhealed one.
    let model = load();
    let prompt = "The capital of France is";
    let healed = healed_run(&model, prompt, true);
    let plain = healed_run(&model, prompt, false);
    // The healed run spent one of its tokens re-writing ` is`: its text is the plain run's,
    // one token shorter.
    assert!(
        plain.text().starts_with(&healed.text()) && !healed.text().is_empty(),
        "{:?} vs {:?} ({:?})",
        healed.text(),
        plain.text(),
        healed.stats
    );
    let skip = usize::from(healed.stats.healed_tokens > 0);
    if skip == 1 {
        let prompt_tokens = model.tokenize(prompt, true, false);
        assert_eq!(healed.stats.healed_tokens, 1);
        assert_eq!(healed.tokens[0], *prompt_tokens.last().unwrap());
    }
    assert_eq!(
        &healed.tokens[skip..],
        &plain.tokens[..plain.tokens.len() - skip]
    );
}
