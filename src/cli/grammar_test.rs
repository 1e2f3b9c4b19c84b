//! `domino grammar test`: does a grammar or schema accept these strings?
//!
//! The constraint comes from the shared flags (`--grammar`, `--schema`, `--regex`, `--json`);
//! the strings from the positional arguments, `--file` (one string per line, taken
//! literally), `--jsonl` (one JSON value per line: a string, or an object with `"text"` and an
//! optional `"expect": "accept"|"reject"` (or `true`/`false`)), or, when none of these is
//! given, standard input read whole as one string (one final newline dropped, as `echo`
//! adds it). No model or tokenizer is needed: strings are run byte by byte through the
//! reference recognizer ([`crate::grammar::reference::ReferenceRecognizer`]; for Lark grammars
//! [`crate::grammar::reference::GreedyReference`], Lark's greedy lexing), the exact,
//! slow Earley oracle the engine's masks are tested against.
//!
//! Each string is one of: `accepted` (a sentence of the grammar), `rejected at byte N
//! (line L, column C)` (bytes `0..N` are a viable prefix and byte `N` cannot follow them;
//! line and column count from 1, the column in bytes), or `incomplete` (the whole string is a
//! viable prefix but not a sentence). An expectation (`--expect accept|reject` for every
//! string, or a JSON line's own `"expect"`) holds when the string is accepted (`accept`) or
//! not accepted (`reject`: rejected or incomplete).
//!
//! `--validate` (schemas only) also validates every string with the `jsonschema` crate
//! (formats asserted) and reports it: a string the grammar accepts but the validator rejects
//! is a soundness bug of the schema compiler and counts as a failed expectation; a valid
//! document the grammar does not accept is reported (`schema-valid`) but fails nothing
//! unless `--expect accept` said so.
//!
//! Exit codes: 0 when every expectation holds (and, with `--validate`, no accepted string is
//! invalid), 1 otherwise, 2 for grammar errors and bad flags. `--format json` prints one
//! object per string and a closing `{"summary": …}` line.

use crate::cli::args::{ConstraintArgs, OutputFormat};
use crate::diag::UsageError;
use crate::grammar::GrammarSource;
use crate::grammar::ir::Lexing;
use crate::grammar::reference::{GreedyReference, ReferenceRecognizer};
use anyhow::Context;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::PathBuf;

/// What a string is expected to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Expect {
    /// The grammar accepts the whole string.
    Accept,
    /// The grammar does not accept it (rejected, or only a prefix of a sentence).
    Reject,
}

impl Expect {
    fn as_str(self) -> &'static str {
        match self {
            Expect::Accept => "accept",
            Expect::Reject => "reject",
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct TestArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    /// Strings to test (none, no --file and no --jsonl: standard input, whole, as one string).
    pub strings: Vec<String>,
    /// A file of strings to test, one per line (taken literally; blank lines skipped).
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// A JSON Lines file: each line a JSON string, or `{"text": ..., "expect": "accept"|"reject"}`.
    #[arg(long, value_name = "FILE")]
    pub jsonl: Option<PathBuf>,
    /// What every string is expected to be (a JSON line's own "expect" takes precedence).
    #[arg(long, value_enum)]
    pub expect: Option<Expect>,
    /// Schemas: also validate each string with the jsonschema crate; an accepted string the
    /// validator rejects is a failure.
    #[arg(long)]
    pub validate: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

/// One string to test and what it is expected to be.
#[derive(Debug, Clone)]
struct Item {
    text: String,
    expect: Option<Expect>,
    /// Where it came from, for messages (`arg 1`, `FILE:3`).
    origin: String,
}

/// What the recognizer says about one string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    /// Byte offset of the first byte that cannot follow the bytes before it.
    Rejected {
        byte: usize,
        line: usize,
        column: usize,
    },
    /// A viable prefix, not a sentence.
    Incomplete,
}

impl Verdict {
    fn name(self) -> &'static str {
        match self {
            Verdict::Accepted => "accepted",
            Verdict::Rejected { .. } => "rejected",
            Verdict::Incomplete => "incomplete",
        }
    }
}

/// The reference for a grammar's semantics: byte-level for GBNF, regex and JSON Schema; the
/// greedy-lexing reference for Lark grammars (see `domino_engine::lexer::greedy`).
pub enum Oracle {
    Characters(ReferenceRecognizer),
    Greedy(GreedyReference),
}

impl Oracle {
    pub fn new(ir: &crate::grammar::ir::Grammar) -> Result<Self, crate::grammar::GrammarError> {
        Ok(match ir.lexing {
            Lexing::Characters => Oracle::Characters(ReferenceRecognizer::new(ir)?),
            Lexing::Greedy => Oracle::Greedy(GreedyReference::new(ir)?),
        })
    }
}

/// Run `bytes` through the oracle.
pub fn verdict(rec: &Oracle, bytes: &[u8]) -> Verdict {
    match rec {
        Oracle::Characters(r) => verdict_bytes(r, bytes),
        Oracle::Greedy(g) => verdict_greedy(g, bytes),
    }
}

/// Greedy lexing: whole-text questions only, so the rejected byte is found by bisection
/// (viability is prefix-closed: a prefix of a viable prefix is viable).
fn verdict_greedy(g: &GreedyReference, bytes: &[u8]) -> Verdict {
    if g.accepts(bytes) {
        return Verdict::Accepted;
    }
    if g.is_viable_prefix(bytes) {
        return Verdict::Incomplete;
    }
    // Smallest k with bytes[..k] not viable; byte k - 1 is the one refused.
    let (mut lo, mut hi) = (0usize, bytes.len());
    if !g.is_viable_prefix(&[]) {
        return rejected_at(bytes, 0);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if g.is_viable_prefix(&bytes[..mid]) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    rejected_at(bytes, hi - 1)
}

/// The verdict "rejected at byte `n`" with its line and column.
fn rejected_at(bytes: &[u8], n: usize) -> Verdict {
    let before = &bytes[..n];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |p| p + 1);
    Verdict::Rejected {
        byte: n,
        line,
        column: n - line_start + 1,
    }
}

/// Run `bytes` through the byte-level recognizer.
fn verdict_bytes(rec: &ReferenceRecognizer, bytes: &[u8]) -> Verdict {
    let mut s = rec.start();
    let rejected_at = |n: usize| {
        let before = &bytes[..n];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        Verdict::Rejected {
            byte: n,
            line,
            column: n - line_start + 1,
        }
    };
    if !rec.is_viable(&s) {
        return rejected_at(0);
    }
    for (i, &b) in bytes.iter().enumerate() {
        match rec.feed(&s, b) {
            Some(next) => s = next,
            None => return rejected_at(i),
        }
    }
    if rec.is_accepting(&s) {
        Verdict::Accepted
    } else {
        Verdict::Incomplete
    }
}

fn items(args: &TestArgs) -> anyhow::Result<Vec<Item>> {
    let mut out: Vec<Item> = args
        .strings
        .iter()
        .enumerate()
        .map(|(i, s)| Item {
            text: s.clone(),
            expect: args.expect,
            origin: format!("arg {}", i + 1),
        })
        .collect();
    if let Some(p) = &args.file {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.is_empty() {
                continue;
            }
            out.push(Item {
                text: line.to_string(),
                expect: args.expect,
                origin: format!("{}:{}", p.display(), i + 1),
            });
        }
    }
    if let Some(p) = &args.jsonl {
        let text =
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let origin = format!("{}:{}", p.display(), i + 1);
            let bad = |msg: String| UsageError(format!("{origin}: {msg}"));
            let v: Value = serde_json::from_str(line).map_err(|e| bad(format!("not JSON: {e}")))?;
            let (text, expect) = match v {
                Value::String(s) => (s, args.expect),
                Value::Object(m) => {
                    let text = match m.get("text") {
                        Some(Value::String(s)) => s.clone(),
                        _ => {
                            return Err(bad("an object line needs a \"text\" string".into()).into());
                        }
                    };
                    let expect = match m.get("expect") {
                        None | Some(Value::Null) => args.expect,
                        Some(Value::Bool(true)) => Some(Expect::Accept),
                        Some(Value::Bool(false)) => Some(Expect::Reject),
                        Some(Value::String(s)) if s == "accept" => Some(Expect::Accept),
                        Some(Value::String(s)) if s == "reject" => Some(Expect::Reject),
                        Some(other) => {
                            return Err(bad(format!(
                                "\"expect\" must be \"accept\", \"reject\", true or false, not {other}"
                            ))
                            .into());
                        }
                    };
                    (text, expect)
                }
                _ => {
                    return Err(
                        bad("expected a JSON string or an object with \"text\"".into()).into(),
                    );
                }
            };
            out.push(Item {
                text,
                expect,
                origin,
            });
        }
    }
    if args.strings.is_empty() && args.file.is_none() && args.jsonl.is_none() {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read standard input")?;
        if text.ends_with('\n') {
            text.pop();
            if text.ends_with('\r') {
                text.pop();
            }
        }
        out.push(Item {
            text,
            expect: args.expect,
            origin: "stdin".into(),
        });
    }
    Ok(out)
}

/// The `jsonschema` validator's opinion of one string: `Ok(())` valid, `Err(reason)` not.
fn validate(v: &jsonschema::Validator, text: &str) -> Result<(), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    match v.iter_errors(&doc).next() {
        None => Ok(()),
        Some(e) => Err(format!("{} (at {})", e, e.instance_path())),
    }
}

pub fn run(args: TestArgs) -> anyhow::Result<()> {
    let spec = args.constraint.required_spec()?;
    let validator = if args.validate {
        match &spec.source {
            GrammarSource::JsonSchema(schema) => Some(
                jsonschema::options()
                    .should_validate_formats(true)
                    .build(schema)
                    .map_err(|e| {
                        UsageError(format!(
                            "--validate: the jsonschema crate rejects the schema: {e}"
                        ))
                    })?,
            ),
            GrammarSource::Json => None,
            _ => {
                return Err(UsageError("--validate needs --schema (or --json)".into()).into());
            }
        }
    } else {
        None
    };
    let json_validate = args.validate && matches!(spec.source, GrammarSource::Json);
    let items = items(&args)?;
    let ir = spec.source.compile(&spec.compile)?;
    for w in &ir.warnings {
        eprintln!("warning: {w}");
    }
    let rec = Oracle::new(&ir)?;

    let json_out = args.format == OutputFormat::Json;
    let mut out = std::io::stdout().lock();
    let (mut accepted, mut rejected, mut incomplete) = (0usize, 0usize, 0usize);
    let (mut expectations, mut failed, mut unsound) = (0usize, 0usize, 0usize);
    for item in &items {
        let v = verdict(&rec, item.text.as_bytes());
        match v {
            Verdict::Accepted => accepted += 1,
            Verdict::Rejected { .. } => rejected += 1,
            Verdict::Incomplete => incomplete += 1,
        }
        let holds = item.expect.map(|e| match e {
            Expect::Accept => v == Verdict::Accepted,
            Expect::Reject => v != Verdict::Accepted,
        });
        if let Some(h) = holds {
            expectations += 1;
            if !h {
                failed += 1;
            }
        }
        let validity: Option<Result<(), String>> = if let Some(val) = &validator {
            Some(validate(val, &item.text))
        } else if json_validate {
            Some(
                serde_json::from_str::<Value>(&item.text)
                    .map(|_| ())
                    .map_err(|e| format!("not JSON: {e}")),
            )
        } else {
            None
        };
        let is_unsound = v == Verdict::Accepted && matches!(validity, Some(Err(_)));
        if is_unsound {
            unsound += 1;
        }
        if json_out {
            let mut o = json!({"text": item.text, "result": v.name()});
            let m = o.as_object_mut().unwrap();
            if let Verdict::Rejected { byte, line, column } = v {
                m.insert("byte".into(), json!(byte));
                m.insert("line".into(), json!(line));
                m.insert("column".into(), json!(column));
            }
            if let Some(e) = item.expect {
                m.insert("expect".into(), json!(e.as_str()));
            }
            if let Some(h) = holds {
                m.insert("ok".into(), json!(h));
            }
            if let Some(val) = &validity {
                m.insert("valid".into(), json!(val.is_ok()));
                if let Err(e) = val {
                    m.insert("validation_error".into(), json!(e));
                }
                if is_unsound {
                    m.insert("unsound".into(), json!(true));
                }
            }
            writeln!(out, "{o}")?;
        } else {
            let mut line = format!("{}: {}", item.origin, describe(v));
            if let Some(val) = &validity {
                match (v, val) {
                    (Verdict::Accepted, Err(e)) => {
                        line.push_str(&format!(" but INVALID (grammar unsound): {e}"))
                    }
                    (Verdict::Accepted, Ok(())) => line.push_str(", valid"),
                    (_, Ok(())) => line.push_str(", schema-valid"),
                    (_, Err(_)) => line.push_str(", invalid"),
                }
            }
            match (item.expect, holds) {
                (Some(e), Some(true)) => line.push_str(&format!(" (expected {}: ok)", e.as_str())),
                (Some(e), Some(false)) => {
                    line.push_str(&format!(" (expected {}: FAILED)", e.as_str()))
                }
                _ => {}
            }
            if item.origin == "stdin" || item.text.len() > 60 || item.text.contains('\n') {
                writeln!(out, "{line}")?;
            } else {
                writeln!(out, "{line}  {}", serde_json::to_string(&item.text)?)?;
            }
        }
    }
    if json_out {
        let mut s = json!({
            "total": items.len(), "accepted": accepted, "rejected": rejected,
            "incomplete": incomplete, "expectations": expectations, "failed": failed,
        });
        if args.validate {
            s["unsound"] = json!(unsound);
        }
        writeln!(out, "{}", json!({ "summary": s }))?;
    } else if items.len() > 1 || expectations > 0 {
        let mut line = format!(
            "{} strings: {accepted} accepted, {rejected} rejected, {incomplete} incomplete",
            items.len()
        );
        if expectations > 0 {
            line.push_str(&format!(
                "; {} of {expectations} expectations held",
                expectations - failed
            ));
        }
        if args.validate {
            line.push_str(&format!("; {unsound} accepted but invalid"));
        }
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    if failed > 0 || unsound > 0 {
        let mut parts = Vec::new();
        if failed > 0 {
            parts.push(format!("{failed} of {expectations} expectations failed"));
        }
        if unsound > 0 {
            parts.push(format!(
                "{unsound} accepted strings are invalid under the schema"
            ));
        }
        return Err(anyhow::anyhow!(parts.join("; ")));
    }
    Ok(())
}

fn describe(v: Verdict) -> String {
    match v {
        Verdict::Accepted => "accepted".into(),
        Verdict::Rejected { byte, line, column } => {
            format!("rejected at byte {byte} (line {line}, column {column})")
        }
        Verdict::Incomplete => "incomplete (a viable prefix)".into(),
    }
}
