//! `domino grammar check|convert|test` (`test` lives in [`crate::cli::grammar_test`]): validate grammars and schemas, print their statistics, and
//! convert a schema (or any grammar) to GBNF.
//!
//! `check FILE...` compiles each file (front end by extension: `.gbnf`, `.lark`, `.json` =
//! JSON Schema) and prints `ok` with statistics or the positioned error; any failing file
//! makes the command exit 2. `check --schema-jsonl FILE` compiles every `{"id","schema"}`
//! line (JSONSchemaBench's format) and prints a summary; it is a report, so it exits 0
//! whatever the schemas' status. Every item compiles in a worker thread under a compile budget
//! (`crate::engine::budget`: `--timeout-ms`, `--compile-memory`) that stops the worker itself —
//! an item over it is reported (`timeout`, or the memory limit) and the rest of the report
//! goes on — and a panic is reported as an error for that item, never a crash.
//! `--format json` prints one JSON object per item and a closing `{"summary": …}` line.

use crate::cli::args::{ConstraintArgs, OutputFormat};
use crate::diag::UsageError;
use crate::grammar::{
    CompileOptions, ErrorKind, GrammarError, GrammarSource, WhitespacePolicy, print,
};
use anyhow::Context;
use serde_json::{Value, json};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(clap::Subcommand, Debug)]
pub enum GrammarCommand {
    /// Check grammar files (.gbnf, .lark, .json schema) or a JSONL file of schemas.
    Check(CheckArgs),
    /// Print the GBNF a schema or grammar compiles to.
    Convert(ConvertArgs),
    /// Test strings against a grammar or schema: accepted, rejected at byte N, or incomplete.
    Test(crate::cli::grammar_test::TestArgs),
}

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Grammar files (.gbnf, .lark, or .json for JSON Schema), or directories: the grammar files under them.
    pub files: Vec<PathBuf>,
    /// A JSONL file of `{"id": ..., "schema": {...}}` lines (JSONSchemaBench format).
    #[arg(long, value_name = "FILE")]
    pub schema_jsonl: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    /// Time budget per grammar or schema, in milliseconds: the compilation stops there and
    /// the item is reported as a timeout.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    pub timeout_ms: u64,
    /// Memory budget per grammar or schema, in MB (0 = none), measured by domino's counting
    /// allocator; below a 4 GB cap by default, so one schema cannot abort the batch.
    #[arg(long, value_name = "MB", default_value_t = crate::cli::args::DEFAULT_COMPILE_MB)]
    pub compile_memory: u64,
    /// Start rule (default: `root` for GBNF, `start` for Lark).
    #[arg(long, value_name = "RULE")]
    pub start: Option<String>,
    /// Whitespace between JSON tokens for schemas.
    #[arg(long, value_parser = crate::cli::args::whitespace_parser(), default_value_t = WhitespacePolicy::Flexible)]
    pub whitespace: WhitespacePolicy,
    /// Longest run of whitespace bytes the flexible policy allows.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_whitespace: u32,
    /// Member order of schema objects: `any` (up to 8 named properties) or `schema`.
    #[arg(long, value_parser = crate::cli::args::property_order_parser(), default_value = "any")]
    pub property_order: crate::grammar::PropertyOrder,
    /// Warn about unsupported schema keywords and ignore them instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Unknown schema keywords (typos such as `maxLenght`) are errors, not warnings.
    #[arg(long)]
    pub strict: bool,
}

/// What `convert` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ConvertTarget {
    /// GBNF of the front end's rules (readable, reusable with llama.cpp).
    #[default]
    Gbnf,
    /// GBNF of the lowered IR the engine uses (terminals inlined).
    Ir,
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    /// Output: `gbnf` (the source's rules) or `ir` (the lowered grammar).
    #[arg(long, value_enum, default_value_t = ConvertTarget::Gbnf)]
    pub to: ConvertTarget,
}

pub fn run(cmd: GrammarCommand) -> anyhow::Result<()> {
    match cmd {
        GrammarCommand::Check(args) => check(args),
        GrammarCommand::Convert(args) => convert(args),
        GrammarCommand::Test(args) => crate::cli::grammar_test::run(args),
    }
}

fn convert(args: ConvertArgs) -> anyhow::Result<()> {
    let source = args.constraint.spec()?.map(|s| s.source).ok_or_else(|| {
        UsageError(
            "give the grammar to convert: --schema F, --grammar F, --regex RE or --json".into(),
        )
    })?;
    let opts = args.constraint.compile_options();
    let _budget = opts.budget.enter();
    let def = source.parse(&opts)?;
    for w in &def.warnings {
        eprintln!("warning: {w}");
    }
    let text = match args.to {
        ConvertTarget::Gbnf => print::to_gbnf(&def)?,
        ConvertTarget::Ir => {
            let g = crate::grammar::lower::lower(&def)?;
            for w in g.warnings.iter().skip(def.warnings.len()) {
                eprintln!("warning: {w}");
            }
            print::ir_to_annotated_text(&g)?
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Statistics of one compiled grammar.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub rules: usize,
    pub terminals: usize,
    pub nonterminals: usize,
    pub productions: usize,
    pub warnings: Vec<String>,
    /// Scanner states over all terminals, counted by building them up to
    /// [`SCANNER_STATES_COUNTED`] (the engine builds them lazily, only those tokens reach).
    pub scanner_states: Option<usize>,
    /// Whether `scanner_states` is every state (false: there are more than that).
    pub scanner_complete: bool,
    /// `(terminal, DFA state)` pairs: the most subterminal trees the engine may build.
    pub scanner_components: usize,
}

/// How many scanner states `grammar check` builds to count them.
pub const SCANNER_STATES_COUNTED: usize = 20_000;

/// Outcome of checking one item.
#[derive(Debug, Clone)]
pub enum Outcome {
    Ok(Stats),
    Failed(GrammarError),
    /// Compilation ran past the time limit.
    Timeout,
    /// The compiler panicked (a bug; reported, not fatal).
    Panic(String),
}

/// Parse, lower and build the scanner (the engine's lexer over every terminal), collecting
/// statistics. A grammar whose scanner exceeds its limits is a [`ErrorKind::Limit`] error:
/// the engine could not run it, so it is not "ok".
pub fn compile_stats(source: &GrammarSource, opts: &CompileOptions) -> Result<Stats, GrammarError> {
    let _budget = opts.budget.enter();
    let def = source.parse(opts)?;
    let g = crate::grammar::lower::lower(&def)?;
    let scanner = crate::lexer::Scanner::new(&g).map_err(|e| match e {
        crate::lexer::LexerError::Budget(b) => GrammarError::from(b),
        e => GrammarError::whole(format!(
            "the engine cannot build this grammar's scanner: {e}"
        ))
        .with_kind(ErrorKind::Limit),
    })?;
    let (states, complete) = scanner.explore(SCANNER_STATES_COUNTED);
    crate::engine::budget::status()?;
    Ok(Stats {
        rules: def.rules.len(),
        terminals: g.terminals.len(),
        nonterminals: g.nonterminals.len(),
        productions: g.productions.len(),
        warnings: g.warnings,
        // Beyond the count: "more than SCANNER_STATES_COUNTED".
        scanner_states: Some(if complete {
            states
        } else {
            SCANNER_STATES_COUNTED
        }),
        scanner_complete: complete,
        scanner_components: scanner.num_components(),
    })
}

/// Compile in a worker thread under `opts.budget` with its time set to `timeout`; panics
/// become [`Outcome::Panic`]. The budget stops the worker at its next checkpoint (it is not
/// left running); a worker that has not answered `WORKER_GRACE` after the deadline (stuck
/// between checkpoints) is reported as a timeout and left to finish in the background.
pub fn check_with_timeout(
    source: GrammarSource,
    mut opts: CompileOptions,
    timeout: Duration,
) -> Outcome {
    opts.budget.time = Some(timeout);
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("grammar-check".into())
        .stack_size(64 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let r = compile_stats(&source, &opts);
                // The budget's time limit is this command's timeout.
                if r.as_ref()
                    .is_err_and(|e| e.kind == ErrorKind::Limit && e.message.contains("time budget"))
                {
                    return Err(None);
                }
                r.map_err(Some)
            }));
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Outcome::Panic(format!("cannot start a worker thread: {e}"));
    }
    let started = Instant::now();
    let received = rx.recv_timeout(timeout + WORKER_GRACE);
    if received.is_ok() && started.elapsed() > timeout {
        // Finished, but after the deadline: still a timeout (deterministic for tiny limits).
        return Outcome::Timeout;
    }
    match received {
        Ok(Ok(Ok(stats))) => Outcome::Ok(stats),
        Ok(Ok(Err(Some(e)))) => Outcome::Failed(e),
        Ok(Ok(Err(None))) => Outcome::Timeout,
        Ok(Err(p)) => Outcome::Panic(
            p.downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into()),
        ),
        Err(mpsc::RecvTimeoutError::Timeout) => Outcome::Timeout,
        Err(mpsc::RecvTimeoutError::Disconnected) => Outcome::Panic("worker thread died".into()),
    }
}

fn status(o: &Outcome) -> &'static str {
    match o {
        Outcome::Ok(_) => "ok",
        Outcome::Failed(e) if e.kind == ErrorKind::Unsupported => "unsupported",
        _ => "error",
    }
}

/// The JSON object for one item (`key` is `"file"` or `"id"`).
fn outcome_json(key: &str, name: &str, o: &Outcome, ms: f64) -> Value {
    let mut v = json!({ key: name, "status": status(o), "ms": (ms * 10.0).round() / 10.0 });
    let m = v.as_object_mut().unwrap();
    match o {
        Outcome::Ok(s) => {
            m.insert("rules".into(), json!(s.rules));
            m.insert("terminals".into(), json!(s.terminals));
            m.insert("nonterminals".into(), json!(s.nonterminals));
            m.insert("productions".into(), json!(s.productions));
            m.insert("scanner_states".into(), json!(s.scanner_states));
            m.insert("scanner_complete".into(), json!(s.scanner_complete));
            m.insert("scanner_components".into(), json!(s.scanner_components));
            m.insert("warnings".into(), json!(s.warnings));
        }
        Outcome::Failed(e) => {
            m.insert("error".into(), json!(e.to_string()));
            m.insert("kind".into(), json!(format!("{:?}", e.kind).to_lowercase()));
            if let Some(f) = &e.feature {
                m.insert("feature".into(), json!(f));
            }
        }
        Outcome::Timeout => {
            m.insert("error".into(), json!("timeout"));
        }
        Outcome::Panic(p) => {
            m.insert(
                "error".into(),
                json!(format!("internal error (panic): {p}")),
            );
        }
    }
    v
}

fn outcome_text(name: &str, o: &Outcome) -> String {
    match o {
        Outcome::Ok(s) => {
            let mut line = format!(
                "{name}: ok (rules {}, terminals {}, nonterminals {}, productions {}, warnings {}",
                s.rules,
                s.terminals,
                s.nonterminals,
                s.productions,
                s.warnings.len()
            );
            match s.scanner_states {
                Some(n) if s.scanner_complete => line.push_str(&format!(", scanner states {n}")),
                Some(n) => line.push_str(&format!(", scanner states >{n} (built on demand)")),
                None => {}
            }
            line.push(')');
            for w in &s.warnings {
                line.push_str(&format!("\n  warning: {w}"));
            }
            line
        }
        Outcome::Failed(e) if e.kind == ErrorKind::Unsupported => {
            format!("{name}: unsupported: {e}")
        }
        Outcome::Failed(e) => format!("{name}: error: {e}"),
        Outcome::Timeout => format!("{name}: error: timeout"),
        Outcome::Panic(p) => format!("{name}: error: internal error (panic): {p}"),
    }
}

#[derive(Default)]
struct Summary {
    total: usize,
    ok: usize,
    unsupported: usize,
    error: usize,
}

impl Summary {
    fn add(&mut self, o: &Outcome) {
        self.total += 1;
        match status(o) {
            "ok" => self.ok += 1,
            "unsupported" => self.unsupported += 1,
            _ => self.error += 1,
        }
    }
    fn json(&self) -> Value {
        json!({"summary": {"total": self.total, "ok": self.ok, "unsupported": self.unsupported, "error": self.error}})
    }
}

/// Directory arguments stand for the grammar files under them (`.gbnf`, `.lark`, `.json`,
/// recursively, sorted); other files there (examples, READMEs) are skipped. Files named
/// directly are kept whatever their extension, so a wrong one is reported.
fn expand_directories(paths: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<std::path::PathBuf> =
            entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p
                .extension()
                .is_some_and(|e| e == "gbnf" || e == "lark" || e == "json")
            {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let before = out.len();
            walk(p, &mut out);
            if out.len() == before {
                eprintln!(
                    "note: {}: no grammar files (.gbnf, .lark, .json) in this directory",
                    p.display()
                );
            }
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// How long past its deadline a check worker may take to notice it (checkpoints are far more
/// frequent; this only catches a stage without one).
const WORKER_GRACE: Duration = Duration::from_secs(30);

fn check(args: CheckArgs) -> anyhow::Result<()> {
    if args.files.is_empty() && args.schema_jsonl.is_none() {
        return Err(
            UsageError("give grammar files to check, or --schema-jsonl FILE".into()).into(),
        );
    }
    let opts = CompileOptions {
        start: args.start.clone(),
        whitespace: args.whitespace,
        max_whitespace: args.max_whitespace,
        property_order: args.property_order,
        lenient: args.lenient,
        strict: args.strict,
        budget: crate::cli::args::budget_of(0.0, args.compile_memory),
        ..CompileOptions::default()
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    let json_out = args.format == OutputFormat::Json;
    let mut out = std::io::stdout().lock();
    let mut summary = Summary::default();
    let mut first_failure: Option<anyhow::Error> = None;

    let files = expand_directories(&args.files);
    for path in &files {
        let name = path.display().to_string();
        let started = Instant::now();
        let outcome = match GrammarSource::from_path(path) {
            Ok(source) => check_with_timeout(source, opts.clone(), timeout),
            Err(e) => match e.downcast::<GrammarError>() {
                Ok(ge) => Outcome::Failed(ge),
                Err(e) => {
                    // Unreadable file or unknown extension: a usage problem.
                    let msg = format!("{e:#}");
                    if json_out {
                        writeln!(
                            out,
                            "{}",
                            json!({"file": name, "status": "error", "error": msg})
                        )?;
                    } else {
                        writeln!(out, "{name}: error: {msg}")?;
                    }
                    summary.total += 1;
                    summary.error += 1;
                    first_failure.get_or_insert_with(|| UsageError(msg).into());
                    continue;
                }
            },
        };
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        summary.add(&outcome);
        if json_out {
            writeln!(out, "{}", outcome_json("file", &name, &outcome, ms))?;
        } else {
            writeln!(out, "{}", outcome_text(&name, &outcome))?;
        }
        if first_failure.is_none() && !matches!(outcome, Outcome::Ok(_)) {
            first_failure = Some(match outcome {
                Outcome::Failed(e) => {
                    anyhow::Error::new(e).context(format!("{name} failed the check"))
                }
                _ => anyhow::anyhow!("{name} failed the check"),
            });
        }
    }

    if let Some(jsonl) = &args.schema_jsonl {
        let file = std::fs::File::open(jsonl)
            .with_context(|| format!("cannot read {}", jsonl.display()))?;
        let mut per_file = Summary::default();
        for (lineno, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.with_context(|| format!("cannot read {}", jsonl.display()))?;
            if line.trim().is_empty() {
                continue;
            }
            let started = Instant::now();
            let (id, outcome) = match serde_json::from_str::<Value>(&line) {
                Ok(v) => {
                    let id = match v.get("id") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => format!("line {}", lineno + 1),
                    };
                    match v.get("schema") {
                        Some(schema) => (
                            id,
                            check_with_timeout(
                                GrammarSource::JsonSchema(schema.clone()),
                                opts.clone(),
                                timeout,
                            ),
                        ),
                        None => (
                            id,
                            Outcome::Failed(GrammarError::whole(
                                "the line has no \"schema\" field",
                            )),
                        ),
                    }
                }
                Err(e) => {
                    let column = e.column() as u32;
                    // "nested deeper than N levels" for valid JSON the parser refuses.
                    let message = domino_engine::grammar::json_error(e).message;
                    (
                        format!("line {}", lineno + 1),
                        Outcome::Failed(GrammarError::at(lineno as u32 + 1, column, message)),
                    )
                }
            };
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            per_file.add(&outcome);
            if json_out {
                writeln!(out, "{}", outcome_json("id", &id, &outcome, ms))?;
            } else if !matches!(outcome, Outcome::Ok(_)) || crate::diag::verbosity() > 0 {
                writeln!(out, "{}", outcome_text(&id, &outcome))?;
            }
        }
        if !json_out {
            writeln!(
                out,
                "{}: {} schemas: {} ok, {} unsupported, {} error",
                jsonl.display(),
                per_file.total,
                per_file.ok,
                per_file.unsupported,
                per_file.error
            )?;
        }
        summary.total += per_file.total;
        summary.ok += per_file.ok;
        summary.unsupported += per_file.unsupported;
        summary.error += per_file.error;
    }

    if json_out {
        writeln!(out, "{}", summary.json())?;
    } else if files.len() > 1 || files.len() != args.files.len() {
        writeln!(
            out,
            "{} checked: {} ok, {} unsupported, {} error",
            summary.total, summary.ok, summary.unsupported, summary.error
        )?;
    }
    out.flush()?;
    match first_failure {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
