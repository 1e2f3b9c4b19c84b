//! `domino bench masks --schema-jsonl FILE|DIR`: the breadth benchmark — the first request's
//! cost over many schemas, one thread.
//!
//! Each input line is `{"id", "schema", "instances"?}` (the JSONSchemaBench format of
//! `../shared/data/jsonschemabench`; a directory means every `*.jsonl` in it, in name order).
//! Per schema, in a process where only the vocabulary is already loaded (its trie and
//! other per-vocabulary structures are built once, before the first schema, as a server
//! would):
//! - **compile** (`compile_ms`): schema → IR (front end and lowering, `ir_ms`) → engine
//!   grammar (follow relation, scanner, parser tables, `engine_ms`);
//! - **time to first mask** (`ttfm_ms`): compile + a constraint + the first mask;
//! - documents: the line's `instances` when it has them, else `--instances N` documents from
//!   the engine's instance generator (`grammar::json_schema::instances`), kept only when the
//!   `jsonschema` crate says they are valid; written compactly and tokenised. A valid
//!   document the engine does not accept token by token is counted (`valid_rejected`) and
//!   not timed. Each document also gets one random mutation; when that is invalid, whether
//!   the engine accepts it is counted (`invalid_accepted`, must be 0);
//! - **cold masks**: every mask of the first pass over the documents on the freshly compiled
//!   grammar (trees are built as states are first visited: what a server's first request
//!   with that schema sees);
//! - **warm masks**: a second pass with the trees built and the finished-mask cache emptied.
//!
//! With `--vs llguidance` the same documents go through llguidance in the same run (its
//! parser factory built once per vocabulary; per schema its compile, time to first mask, and
//! every mask of one pass — llguidance has no separate cold path).
//!
//! Summaries pool **all samples** of all schemas (not percentiles of percentiles):
//! p50/p90/p99/max and the share over 1 ms and 10 ms. Text or `--format json` (one object
//! with `summary` and one row per schema under `schemas`) on stdout; progress on stderr.

use super::{MasksArgs, Stats};
use crate::cli::args::OutputFormat;
use crate::engine::{CompiledGrammar, Constraint, Options};
use crate::grammar::GrammarSource;
use crate::grammar::json_schema::instances::Generator;
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use anyhow::Context;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// One schema of the input.
struct Item {
    name: String,
    schema: Value,
    instances: Option<Vec<Value>>,
}

/// Every input file (a directory's `*.jsonl` sorted by name), each cut to `limit` lines
/// spread evenly over the file.
fn read_items(paths: &[PathBuf], limit: Option<usize>) -> anyhow::Result<Vec<Item>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut inner: Vec<PathBuf> = std::fs::read_dir(p)
                .with_context(|| format!("cannot read {}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            inner.sort();
            anyhow::ensure!(!inner.is_empty(), "{}: no .jsonl files", p.display());
            files.extend(inner);
        } else {
            files.push(p.clone());
        }
    }
    let mut items = Vec::new();
    for f in &files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?;
        let stem = f.file_stem().unwrap_or_default().to_string_lossy();
        let mut here = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line).map_err(|e| {
                crate::diag::UsageError(format!(
                    "{}:{}: expected a JSON object per line: {e}",
                    f.display(),
                    i + 1
                ))
            })?;
            let Some(schema) = v.get("schema") else {
                return Err(crate::diag::UsageError(format!(
                    "{}:{}: the line has no \"schema\"",
                    f.display(),
                    i + 1
                ))
                .into());
            };
            let id = match v.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => format!("{}", i + 1),
            };
            let instances = v
                .get("instances")
                .or_else(|| v.get("valid"))
                .and_then(|x| x.as_array())
                .cloned();
            here.push(Item {
                name: format!("{stem}/{id}"),
                schema: schema.clone(),
                instances,
            });
        }
        if let Some(n) = limit {
            if here.len() > n {
                let step = here.len() as f64 / n as f64;
                let picks: Vec<usize> = (0..n).map(|i| (i as f64 * step) as usize).collect();
                let mut all: Vec<Option<Item>> = here.into_iter().map(Some).collect();
                here = picks.into_iter().filter_map(|i| all[i].take()).collect();
            }
        }
        items.extend(here);
    }
    anyhow::ensure!(!items.is_empty(), "no schemas in the input");
    Ok(items)
}

/// Pooled samples of one measurement (µs or ms, as named by the caller).
#[derive(Default)]
struct Pool(Vec<f64>);

impl Pool {
    /// Stats plus the share of samples over 1 ms and over 10 ms (`unit_ms`: samples are
    /// milliseconds, else microseconds).
    fn summary(&self, unit_ms: bool) -> Value {
        let s = Stats::of(self.0.clone());
        let scale = if unit_ms { 1.0 } else { 1e3 };
        let share = |limit_ms: f64| {
            if self.0.is_empty() {
                0.0
            } else {
                self.0.iter().filter(|&&x| x > limit_ms * scale).count() as f64
                    / self.0.len() as f64
            }
        };
        let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
        v["over_1ms"] = json!(share(1.0));
        v["over_10ms"] = json!(share(10.0));
        v
    }
}

/// Documents for one schema: the line's own instances or generated ones (valid only),
/// compactly written, each with a mutated (usually invalid) twin when the generator could
/// make one.
struct Docs {
    valid: Vec<String>,
    invalid: Vec<String>,
}

fn documents(item: &Item, n: usize, seed: u64) -> Docs {
    let validator = std::panic::catch_unwind(|| jsonschema::validator_for(&item.schema))
        .ok()
        .and_then(|r| r.ok());
    let is_valid = |v: &Value| match &validator {
        Some(val) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| val.is_valid(v)))
            .unwrap_or(false),
        None => false,
    };
    let mut docs = Docs {
        valid: Vec::new(),
        invalid: Vec::new(),
    };
    let mut values: Vec<Value> = match &item.instances {
        Some(v) => v.clone(),
        None => Vec::new(),
    };
    if item.instances.is_none() {
        // A few tries per wanted document: the generator is best effort.
        for i in 0..(n * 4) as u64 {
            if values.len() >= n {
                break;
            }
            let mut g = Generator::new(&item.schema, seed.wrapping_mul(1000).wrapping_add(i));
            let v =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.instance(&item.schema)))
                    .ok()
                    .flatten();
            if let Some(v) = v.filter(|v| is_valid(v)) {
                values.push(v);
            }
        }
    }
    for (i, v) in values.iter().enumerate() {
        docs.valid.push(v.to_string());
        let mut g = Generator::new(&item.schema, seed ^ 0x5eed ^ i as u64);
        let m = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.mutate(v)));
        if let Ok(m) = m {
            if validator.is_some() && !is_valid(&m) {
                docs.invalid.push(m.to_string());
            }
        }
    }
    docs
}

/// Whether the constraint takes the whole token sequence and can end there.
fn accepts(base: &Constraint, toks: &[TokenId]) -> bool {
    let mut c = base.clone();
    toks.iter().all(|&t| c.allows(t) && c.commit(t).is_ok()) && c.is_accepting()
}

/// One pass over the documents: every mask timed (µs).
fn pass(base: &Constraint, docs: &[Vec<TokenId>], out: &mut Vec<f64>) {
    let mut mask = TokenSet::new(base.vocab().len());
    for doc in docs {
        let mut c = base.clone();
        for &t in doc {
            let t0 = Instant::now();
            c.compute_mask(&mut mask);
            out.push(t0.elapsed().as_secs_f64() * 1e6);
            if !mask.contains(t) || c.commit(t).is_err() {
                break; // checked before timing; defensive only
            }
        }
    }
}

/// What one schema gave (domino).
#[derive(Default)]
struct Row {
    ir_ms: f64,
    engine_ms: f64,
    ttfm_ms: f64,
    first_mask_us: f64,
    error: Option<String>,
    docs: usize,
    valid_rejected: usize,
    invalid_tested: usize,
    invalid_accepted: usize,
    cold: Vec<f64>,
    warm: Vec<f64>,
    memory_bytes: usize,
    /// The vocabulary's shared root walks after this schema (process totals): walks, bytes,
    /// replays, times the store was emptied.
    shared_walks: (usize, usize, u64, u64),
    scanner_states: usize,
    terminals: usize,
    tokens: Vec<Vec<TokenId>>,
}

fn run_domino(
    item: &Item,
    vocab: &Arc<Vocabulary>,
    opts: &Options,
    compile: &crate::grammar::CompileOptions,
    texts: &Docs,
) -> Row {
    let mut row = Row::default();
    let source = GrammarSource::JsonSchema(item.schema.clone());
    let t0 = Instant::now();
    let ir = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| source.compile(compile)));
    let t1 = Instant::now();
    let ir = match ir {
        Ok(Ok(ir)) => ir,
        Ok(Err(e)) => {
            row.error = Some(e.to_string());
            return row;
        }
        Err(_) => {
            row.error = Some("PANIC in the schema compiler".into());
            return row;
        }
    };
    row.terminals = ir.terminals.len();
    let grammar = match std::panic::catch_unwind(|| CompiledGrammar::new(ir)) {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => {
            row.error = Some(e.to_string());
            return row;
        }
        Err(_) => {
            row.error = Some("PANIC in CompiledGrammar::new".into());
            return row;
        }
    };
    let t2 = Instant::now();
    let base = match Constraint::new(&grammar, vocab, opts.clone()) {
        Ok(c) => c,
        Err(e) => {
            row.error = Some(e.to_string());
            return row;
        }
    };
    let mut mask = TokenSet::new(vocab.len());
    let t3 = Instant::now();
    base.clone().compute_mask(&mut mask);
    let t4 = Instant::now();
    row.ir_ms = (t1 - t0).as_secs_f64() * 1e3;
    row.engine_ms = (t2 - t1).as_secs_f64() * 1e3;
    row.first_mask_us = (t4 - t3).as_secs_f64() * 1e6;
    row.ttfm_ms = (t4 - t0).as_secs_f64() * 1e3;

    // Documents: valid ones must be accepted (else counted, not timed); invalid ones must not.
    for text in &texts.valid {
        let Ok(toks) = vocab.tokenize(text) else {
            continue;
        };
        if accepts(&base, &toks) {
            row.tokens.push(toks);
        } else {
            row.valid_rejected += 1;
            crate::log!(1, "{}: valid document rejected: {text}", item.name);
        }
    }
    for text in &texts.invalid {
        let Ok(toks) = vocab.tokenize(text) else {
            continue;
        };
        row.invalid_tested += 1;
        if accepts(&base, &toks) {
            row.invalid_accepted += 1;
            eprintln!("{}: INVALID document accepted: {text}", item.name);
        }
    }
    row.docs = row.tokens.len();
    pass(&base, &row.tokens, &mut row.cold);
    base.tree_cache().clear_mask_cache();
    pass(&base, &row.tokens, &mut row.warm);
    let stats = base.tree_cache().stats();
    row.memory_bytes = stats.memory_bytes + grammar.scanner().memory_bytes();
    row.shared_walks = (
        stats.shared_root_walks,
        stats.shared_root_walk_bytes,
        stats.root_walk_replays,
        stats.root_walk_store_emptied,
    );
    row.scanner_states = grammar.scanner_states();
    row
}

/// What one schema gave (llguidance).
#[cfg(feature = "bench-llguidance")]
#[derive(Default)]
struct LlgRow {
    compile_ms: f64,
    ttfm_ms: f64,
    error: Option<String>,
    diverged: usize,
    masks: Vec<f64>,
}

#[cfg(feature = "bench-llguidance")]
fn run_llguidance(
    item: &Item,
    factory: &llguidance::ParserFactory,
    vocab: &Arc<Vocabulary>,
    compile: &crate::grammar::CompileOptions,
    docs: &[Vec<TokenId>],
) -> LlgRow {
    use crate::constraint::llguidance as llg;
    let mut row = LlgRow::default();
    let source = GrammarSource::JsonSchema(item.schema.clone());
    let t0 = Instant::now();
    let g = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        llg::grammar_for_source(&source, compile)
            .and_then(|tg| llg::LlgGrammar::with_factory(factory, vocab, tg))
    }));
    let t1 = Instant::now();
    let g = match g {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => {
            row.error = Some(e.to_string());
            return row;
        }
        Err(_) => {
            row.error = Some("PANIC in llguidance".into());
            return row;
        }
    };
    let first = g.matcher().and_then(|mut m| m.compute_mask().map(|_| ()));
    let t2 = Instant::now();
    if let Err(e) = first {
        row.error = Some(e.to_string());
        return row;
    }
    row.compile_ms = (t1 - t0).as_secs_f64() * 1e3;
    row.ttfm_ms = (t2 - t0).as_secs_f64() * 1e3;
    match llg::time_documents(&g, docs, 1) {
        Ok((times, _, diverged)) => {
            row.masks = times;
            row.diverged = diverged;
        }
        Err(e) => row.error = Some(e.to_string()),
    }
    row
}

pub fn run(args: &MasksArgs, k: Option<u32>) -> anyhow::Result<()> {
    let items = read_items(&args.schema_jsonl, args.limit)?;
    let vocab = args.vocab.load()?;
    let compile = args.constraint.compile_options();
    let opts = Options {
        lookahead: k,
        ..Default::default()
    };
    // Per-vocabulary set-up, once (not part of any schema's time).
    let t0 = Instant::now();
    crate::engine::warm_vocabulary(&vocab);
    let vocab_setup_ms = t0.elapsed().as_secs_f64() * 1e3;
    #[cfg(feature = "bench-llguidance")]
    let factory = match &args.vs {
        Some(_) => Some(crate::constraint::llguidance::factory(&vocab)?),
        None => None,
    };

    let (mut ir, mut engine, mut ttfm, mut first, mut cold, mut warm, mut mem) = (
        Pool::default(),
        Pool::default(),
        Pool::default(),
        Pool::default(),
        Pool::default(),
        Pool::default(),
        Pool::default(),
    );
    // Filled only in builds with llguidance.
    #[cfg_attr(not(feature = "bench-llguidance"), allow(unused_mut))]
    let (mut l_compile, mut l_ttfm, mut l_masks) =
        (Pool::default(), Pool::default(), Pool::default());
    let mut shared_walks: Option<(usize, usize, u64, u64)> = None;
    let (mut failed, mut docs_n, mut valid_rejected, mut invalid_tested, mut invalid_accepted) =
        (0, 0, 0, 0, 0);
    #[cfg_attr(not(feature = "bench-llguidance"), allow(unused_mut))]
    let (mut l_failed, mut l_diverged, mut l_ran) = (0, 0, 0);
    let mut rows = Vec::new();
    let started = Instant::now();
    for (i, item) in items.iter().enumerate() {
        let texts = documents(item, args.instances, args.seed);
        let r = run_domino(item, &vocab, &opts, &compile, &texts);
        #[allow(unused_mut)]
        let mut row = json!({
            "schema": item.name,
            "error": r.error,
            "ir_ms": r.ir_ms,
            "engine_ms": r.engine_ms,
            "ttfm_ms": r.ttfm_ms,
            "first_mask_us": r.first_mask_us,
            "terminals": r.terminals,
            "scanner_states": r.scanner_states,
            "memory_bytes": r.memory_bytes,
            "docs": r.docs,
            "valid_rejected": r.valid_rejected,
            "invalid_tested": r.invalid_tested,
            "invalid_accepted": r.invalid_accepted,
            "cold_max_us": r.cold.iter().cloned().fold(0.0, f64::max),
            "cold_over_1ms": r.cold.iter().filter(|&&us| us > 1000.0).count(),
            "masks": r.cold.len(),
        });
        if r.error.is_some() {
            failed += 1;
        } else {
            ir.0.push(r.ir_ms);
            engine.0.push(r.engine_ms);
            ttfm.0.push(r.ttfm_ms);
            first.0.push(r.first_mask_us);
            mem.0.push(r.memory_bytes as f64);
            shared_walks = Some(r.shared_walks);
            cold.0.extend(&r.cold);
            warm.0.extend(&r.warm);
            docs_n += r.docs;
            valid_rejected += r.valid_rejected;
            invalid_tested += r.invalid_tested;
            invalid_accepted += r.invalid_accepted;
        }
        #[cfg(feature = "bench-llguidance")]
        if let Some(f) = &factory {
            // The documents domino accepted (so both engines see the same ones).
            let l = run_llguidance(item, f, &vocab, &compile, &r.tokens);
            l_ran += 1;
            row["llguidance"] = json!({
                "error": l.error,
                "compile_ms": l.compile_ms,
                "ttfm_ms": l.ttfm_ms,
                "diverged": l.diverged,
                "masks_max_us": l.masks.iter().cloned().fold(0.0, f64::max),
            });
            if l.error.is_some() {
                l_failed += 1;
            } else {
                l_compile.0.push(l.compile_ms);
                l_ttfm.0.push(l.ttfm_ms);
                l_masks.0.extend(&l.masks);
                l_diverged += l.diverged;
            }
        }
        crate::log!(
            1,
            "[{}/{}] {}: ttfm {:.2} ms, {} docs{}",
            i + 1,
            items.len(),
            item.name,
            r.ttfm_ms,
            r.docs,
            r.error
                .as_ref()
                .map(|e| format!(" (error: {e})"))
                .unwrap_or_default()
        );
        if (i + 1) % 50 == 0 || i + 1 == items.len() {
            eprintln!(
                "{}/{} schemas ({:.0} s)",
                i + 1,
                items.len(),
                started.elapsed().as_secs_f64()
            );
        }
        rows.push(row);
    }
    let llg = if args.vs.is_some() {
        json!({
            "schemas_failed": l_failed,
            "schemas_compiled": l_ran - l_failed,
            "diverged_docs": l_diverged,
            "compile_ms": l_compile.summary(true),
            "ttfm_ms": l_ttfm.summary(true),
            "mask_us": l_masks.summary(false),
        })
    } else {
        Value::Null
    };
    let summary = json!({
        "schemas": items.len(),
        "schemas_compiled": items.len() - failed,
        "schemas_failed": failed,
        "docs": docs_n,
        "valid_rejected": valid_rejected,
        "invalid_tested": invalid_tested,
        "invalid_accepted": invalid_accepted,
        "vocab_size": vocab.len(),
        "vocab_setup_ms": vocab_setup_ms,
        "ir_ms": ir.summary(true),
        "engine_ms": engine.summary(true),
        "ttfm_ms": ttfm.summary(true),
        "first_mask_us": first.summary(false),
        "cold_mask_us": cold.summary(false),
        "warm_mask_us": warm.summary(false),
        "memory_bytes": Stats::of(mem.0.clone()),
        "shared_root_walks": shared_walks.map(|(walks, bytes, replays, emptied)| json!({
            "walks": walks, "bytes": bytes, "replays": replays, "store_emptied": emptied,
        })),
        "llguidance": llg,
    });
    match args.format {
        OutputFormat::Json => {
            println!("{}", json!({"summary": summary, "schemas": rows}));
        }
        OutputFormat::Text => print_text(&summary),
    }
    Ok(())
}

fn print_text(s: &Value) {
    println!(
        "{} schemas: {} compiled, {} failed; {} documents ({} valid rejected; {} invalid tested, {} accepted); vocab {} (set-up once {:.1} ms)",
        s["schemas"],
        s["schemas_compiled"],
        s["schemas_failed"],
        s["docs"],
        s["valid_rejected"],
        s["invalid_tested"],
        s["invalid_accepted"],
        s["vocab_size"],
        s["vocab_setup_ms"].as_f64().unwrap_or(0.0)
    );
    println!(
        "{:<24} {:>8} {:>10} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "pooled", "n", "p50", "p90", "p99", "max", ">1ms", ">10ms"
    );
    let line = |name: &str, v: &Value| {
        if v.is_null() {
            return;
        }
        println!(
            "{:<24} {:>8} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>7.3}% {:>7.3}%",
            name,
            v["n"],
            v["p50"].as_f64().unwrap_or(0.0),
            v["p90"].as_f64().unwrap_or(0.0),
            v["p99"].as_f64().unwrap_or(0.0),
            v["max"].as_f64().unwrap_or(0.0),
            100.0 * v["over_1ms"].as_f64().unwrap_or(0.0),
            100.0 * v["over_10ms"].as_f64().unwrap_or(0.0)
        );
    };
    line("domino ir (ms)", &s["ir_ms"]);
    line("domino engine (ms)", &s["engine_ms"]);
    line("domino first mask (µs)", &s["first_mask_us"]);
    line("domino ttfm (ms)", &s["ttfm_ms"]);
    line("domino cold mask (µs)", &s["cold_mask_us"]);
    line("domino warm mask (µs)", &s["warm_mask_us"]);
    let l = &s["llguidance"];
    if !l.is_null() {
        line("llguidance compile (ms)", &l["compile_ms"]);
        line("llguidance ttfm (ms)", &l["ttfm_ms"]);
        line("llguidance mask (µs)", &l["mask_us"]);
        println!(
            "llguidance: {} compiled, {} failed, {} documents diverged",
            l["schemas_compiled"], l["schemas_failed"], l["diverged_docs"]
        );
    }
    let m = &s["memory_bytes"];
    println!(
        "memory per grammar (trees + scanner): p50 {:.1} KiB, p99 {:.1} KiB, max {:.1} KiB",
        m["p50"].as_f64().unwrap_or(0.0) / 1024.0,
        m["p99"].as_f64().unwrap_or(0.0) / 1024.0,
        m["max"].as_f64().unwrap_or(0.0) / 1024.0
    );
    let w = &s["shared_root_walks"];
    if !w.is_null() {
        println!(
            "root walks shared by every grammar (per vocabulary): {} held in {:.1} KiB, {} builds replayed one, store emptied {} times",
            w["walks"],
            w["bytes"].as_f64().unwrap_or(0.0) / 1024.0,
            w["replays"],
            w["store_emptied"]
        );
    }
}
