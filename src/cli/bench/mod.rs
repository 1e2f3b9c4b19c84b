//! `domino bench masks`: time mask computation on real documents, one thread.
//!
//! Each document (`--docs FILE`, JSON Lines of strings) is tokenised with the vocabulary's
//! tokenizer and stepped through token by token; at every step the full mask is computed and
//! timed. Three passes over the same documents:
//! - **cold** (`cold_mask_us`): a freshly compiled grammar; subterminal trees are built lazily
//!   as scanner states are first visited (what the first request to a server sees). Its first
//!   mask is `first_mask_us`.
//! - **warm** (`mask_us`): again, with the trees built and the finished-mask cache emptied
//!   first (it refills during the pass: the engine's normal operation).
//! - **uncached** (`uncached_mask_us`): the tree walk alone, mask cache bypassed.
//!
//! `--repeat N` runs the warm and uncached passes N times and keeps each step's fastest time
//! (the mask cache is emptied before every warm pass), to filter scheduler noise.
//! `--precompute` also times building every scanner state's tree on another fresh compile
//! (`precompute_ms`, the paper's offline setting). `tree_nodes` / `memory_bytes` are the trees
//! built by the end (all of them with `--precompute`). Results go to stdout (a table, or one
//! JSON object with `--format json`); progress to stderr. `--tree-cache FILE` saves the trees
//! and times loading them back into a fresh compile (`load_ms`).
//!
//! `--schema-jsonl FILE|DIR` instead of `--docs` runs the *breadth* benchmark over many
//! schemas (see the `breadth` module): the first request's cost (compile, time to first mask) and
//! cold and warm masks per schema, pooled.

use crate::cli::args::{ConstraintArgs, OutputFormat};
use crate::cli::mask::{VocabArgs, compile_constraint, lookahead, read_json_lines};
use crate::engine::{Constraint, Options};
use crate::vocab::{TokenId, TokenSet};
use std::path::PathBuf;
use std::time::Instant;

mod breadth;

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Time mask computation over documents (cold, warm and uncached passes).
    Masks(MasksArgs),
}

#[derive(clap::Args, Debug)]
pub struct MasksArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    #[command(flatten)]
    pub vocab: VocabArgs,
    /// Documents: JSON Lines, each line a JSON string holding one document.
    #[arg(long, value_name = "FILE", required_unless_present = "schema_jsonl")]
    pub docs: Option<PathBuf>,
    /// Breadth benchmark: JSON Lines of `{"id", "schema", "instances"?}` (the
    /// JSONSchemaBench format; a directory = every `*.jsonl` in it). Schemas without
    /// instances get documents from the engine's instance generator, kept when valid.
    #[arg(long, value_name = "FILE|DIR", conflicts_with_all = ["docs", "precompute", "tree_cache"])]
    pub schema_jsonl: Vec<PathBuf>,
    /// Breadth: at most N schemas from each file (taken evenly spread over the file).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Breadth: generated instances per schema (when the line has none).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub instances: usize,
    /// Breadth: seed of the instance generator.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Lookahead (`inf` = minimally invasive).
    #[arg(long, value_name = "N|inf", default_value = "inf")]
    pub k: String,
    /// Also time building every scanner state's tree up front.
    #[arg(long)]
    pub precompute: bool,
    /// Run the warm and uncached passes this many times and keep, per step, the fastest
    /// time (filters out scheduler noise on a busy machine; 1 = a single pass).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: usize,
    /// Save the trees built to FILE, then time loading them into a fresh compile
    /// (`load_ms`): the on-disk cache keyed by (grammar hash, vocabulary fingerprint).
    #[arg(long, value_name = "FILE")]
    pub tree_cache: Option<PathBuf>,
    /// Use at most this many documents.
    #[arg(long, value_name = "N")]
    pub max_docs: Option<usize>,
    /// Also time another engine on the same vocabulary, grammar and documents, in this
    /// process, and print its row and the ratio (`llguidance`; needs a build with
    /// `--features bench-llguidance`).
    #[arg(long, value_name = "ENGINE")]
    pub vs: Option<String>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Masks(args) => masks(args),
    }
}

/// Summary statistics in microseconds.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

impl Stats {
    pub fn of(mut us: Vec<f64>) -> Stats {
        if us.is_empty() {
            return Stats::default();
        }
        us.sort_by(|a, b| a.total_cmp(b));
        let q = |p: f64| us[((us.len() - 1) as f64 * p).round() as usize];
        Stats {
            n: us.len(),
            mean: us.iter().sum::<f64>() / us.len() as f64,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            max: *us.last().unwrap(),
        }
    }
}

/// Step every document through `c` (a fresh clone per document), timing each mask.
fn pass(
    base: &Constraint,
    docs: &[Vec<TokenId>],
    uncached: bool,
    first: &mut Option<f64>,
) -> Vec<f64> {
    let mut times = Vec::new();
    let mut mask = TokenSet::new(base.vocab().len());
    for (di, doc) in docs.iter().enumerate() {
        let mut c = base.clone();
        for (step, &t) in doc.iter().enumerate() {
            let t0 = Instant::now();
            if uncached {
                c.compute_mask_uncached(&mut mask);
            } else {
                c.compute_mask(&mut mask);
            }
            let us = t0.elapsed().as_secs_f64() * 1e6;
            if first.is_none() {
                *first = Some(us);
            }
            times.push(us);
            if us > 500.0 {
                crate::log!(
                    2,
                    "slow mask: {us:.0} µs at document {} token {step} ({} configurations)",
                    di + 1,
                    c.num_configurations()
                );
            }
            if !mask.contains(t) || c.commit(t).is_err() {
                break; // documents are checked before timing; defensive only
            }
        }
    }
    times
}

/// llguidance's grammar for the constraint chosen on the command line.
#[cfg(feature = "bench-llguidance")]
fn llguidance_grammar(args: &ConstraintArgs) -> anyhow::Result<llguidance::api::TopLevelGrammar> {
    let spec = args.required_spec()?;
    crate::constraint::llguidance::grammar_for_source(&spec.source, &spec.compile)
}

fn check_vs(args: &MasksArgs) -> anyhow::Result<()> {
    if let Some(other) = &args.vs {
        if other != "llguidance" {
            return Err(crate::diag::UsageError(format!(
                "--vs: unknown engine `{other}` (expected `llguidance`)"
            ))
            .into());
        }
        if !cfg!(feature = "bench-llguidance") {
            return Err(crate::diag::UsageError(
                "--vs llguidance: this domino was built without llguidance; rebuild with `cargo build --features bench-llguidance`".into(),
            )
            .into());
        }
    }
    Ok(())
}

fn masks(args: MasksArgs) -> anyhow::Result<()> {
    let k = lookahead(&args.k)?;
    check_vs(&args)?;
    if !args.schema_jsonl.is_empty() {
        return breadth::run(&args, k);
    }
    // Refuse grammars llguidance cannot take (GBNF, pretty JSON) before the long passes.
    #[cfg(feature = "bench-llguidance")]
    if args.vs.is_some() {
        llguidance_grammar(&args.constraint)?;
    }
    let Some(docs_path) = &args.docs else {
        return Err(crate::diag::UsageError(
            "bench masks: --docs FILE or --schema-jsonl FILE".into(),
        )
        .into());
    };
    let vocab = args.vocab.load()?;
    let mut texts = read_json_lines(docs_path)?;
    if let Some(m) = args.max_docs {
        texts.truncate(m);
    }
    anyhow::ensure!(!texts.is_empty(), "{}: no documents", docs_path.display());

    let t0 = Instant::now();
    let grammar = compile_constraint(&args.constraint)?;
    let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
    let opts = Options {
        lookahead: k,
        ..Default::default()
    };
    let t0 = Instant::now();
    let base = Constraint::new(&grammar, &vocab, opts.clone())?;
    let trie_ms = t0.elapsed().as_secs_f64() * 1e3;

    // Tokenise and keep only documents the grammar accepts token by token (checked with
    // `allows`, so checking builds no trees).
    let mut docs = Vec::new();
    let mut rejected = 0;
    for (i, text) in texts.iter().enumerate() {
        let toks = vocab.tokenize(text)?;
        let mut c = base.clone();
        let ok = toks.iter().all(|&t| c.allows(t) && c.commit(t).is_ok());
        if ok {
            docs.push(toks);
        } else {
            rejected += 1;
            eprintln!(
                "warning: document {} is not accepted token by token under this grammar; skipped",
                i + 1
            );
        }
    }
    anyhow::ensure!(!docs.is_empty(), "no document is accepted by the grammar");
    crate::log!(
        1,
        "{} documents, {} tokens",
        docs.len(),
        docs.iter().map(|d| d.len()).sum::<usize>()
    );

    let mut first = None;
    let cold = pass(&base, &docs, false, &mut first);
    let best_of = |uncached: bool| -> Vec<f64> {
        let mut best: Vec<f64> = Vec::new();
        for _ in 0..args.repeat.max(1) {
            if !uncached {
                base.tree_cache().clear_mask_cache();
            }
            let times = pass(&base, &docs, uncached, &mut None);
            if best.is_empty() {
                best = times;
            } else {
                best.iter_mut().zip(times).for_each(|(b, t)| *b = b.min(t));
            }
        }
        best
    };
    let warm = best_of(false);
    let uncached = best_of(true);
    let mut stats = base.tree_cache().stats();

    let mut precomputed = None;
    let precompute_ms = if args.precompute {
        let g2 = compile_constraint(&args.constraint)?;
        let c2 = Constraint::new(&g2, &vocab, opts)?;
        let t0 = Instant::now();
        c2.tree_cache().precompute_all(&g2);
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        stats = c2.tree_cache().stats();
        precomputed = Some((g2, c2));
        Some(ms)
    } else {
        None
    };

    let load_ms = match &args.tree_cache {
        Some(file) => {
            // Save the most complete cache we have (all trees after --precompute).
            let (g_src, c_src) = match &precomputed {
                Some((g2, c2)) => (g2.clone(), c2.clone()),
                None => (grammar.clone(), base.clone()),
            };
            c_src.tree_cache().save(&g_src, &vocab, file)?;
            let g3 = compile_constraint(&args.constraint)?;
            let c3 = Constraint::new(
                &g3,
                &vocab,
                Options {
                    lookahead: k,
                    ..Default::default()
                },
            )?;
            let t0 = Instant::now();
            c3.tree_cache().load(&g3, &vocab, file)?;
            Some(t0.elapsed().as_secs_f64() * 1e3)
        }
        None => None,
    };

    #[cfg(feature = "bench-llguidance")]
    let vs = match &args.vs {
        Some(_) => {
            use crate::constraint::llguidance as llg;
            let t0 = Instant::now();
            let g = llg::LlgGrammar::new(&vocab, llguidance_grammar(&args.constraint)?)?;
            let llg_compile_ms = t0.elapsed().as_secs_f64() * 1e3;
            let (times, llg_first, diverged) = llg::time_documents(&g, &docs, args.repeat)?;
            let theirs = Stats::of(times);
            let ours = Stats::of(warm.clone());
            let ours_uncached = Stats::of(uncached.clone());
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
            serde_json::json!({
                "engine": "llguidance",
                "compile_ms": llg_compile_ms,
                "first_mask_us": llg_first,
                "diverged_docs": diverged,
                "mask_us": theirs,
                "ratio_p50": ratio(theirs.p50, ours.p50),
                "ratio_p99": ratio(theirs.p99, ours.p99),
                "ratio_mean": ratio(theirs.mean, ours.mean),
                "ratio_p50_uncached": ratio(theirs.p50, ours_uncached.p50),
                "ratio_p99_uncached": ratio(theirs.p99, ours_uncached.p99),
            })
        }
        None => serde_json::Value::Null,
    };
    #[cfg(not(feature = "bench-llguidance"))]
    let vs = serde_json::Value::Null;

    let report = serde_json::json!({
        "docs": docs.len(),
        "rejected_docs": rejected,
        "vocab_size": vocab.len(),
        "k": k,
        "repeat": args.repeat.max(1),
        "scanner_states": grammar.scanner_states(),
        "terminals": grammar.grammar().terminals.len(),
        "compile_ms": compile_ms,
        "trie_ms": trie_ms,
        "precompute_ms": precompute_ms,
        "load_ms": load_ms,
        "first_mask_us": first,
        "cold_mask_us": Stats::of(cold),
        "mask_us": Stats::of(warm),
        "uncached_mask_us": Stats::of(uncached),
        "trees": stats.trees,
        "tree_nodes": stats.tree_nodes,
        "memory_bytes": stats.memory_bytes + stats.trie_bytes,
        "tree_bytes": stats.memory_bytes,
        "trie_bytes": stats.trie_bytes,
        "vs": vs,
    });
    match args.format {
        OutputFormat::Json => println!("{report}"),
        OutputFormat::Text => {
            let r = &report;
            println!(
                "{} docs ({} rejected), vocab {}, k {}, {} terminals, {} scanner states",
                r["docs"],
                r["rejected_docs"],
                r["vocab_size"],
                args.k,
                r["terminals"],
                r["scanner_states"]
            );
            println!("compile {:.2} ms, vocab trie {:.2} ms", compile_ms, trie_ms);
            if let Some(p) = precompute_ms {
                println!("precompute all trees {p:.2} ms");
            }
            if let Some(l) = load_ms {
                println!("load trees from disk {l:.2} ms");
            }
            println!("first mask {:.1} µs", first.unwrap_or(0.0));
            println!(
                "{:<10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10}",
                "pass (µs)", "n", "mean", "p50", "p90", "p99", "max"
            );
            for (name, key) in [
                ("cold", "cold_mask_us"),
                ("warm", "mask_us"),
                ("uncached", "uncached_mask_us"),
            ] {
                let s = &r[key];
                println!(
                    "{:<10} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                    name,
                    s["n"],
                    s["mean"].as_f64().unwrap_or(0.0),
                    s["p50"].as_f64().unwrap_or(0.0),
                    s["p90"].as_f64().unwrap_or(0.0),
                    s["p99"].as_f64().unwrap_or(0.0),
                    s["max"].as_f64().unwrap_or(0.0)
                );
            }
            if let Some(v) = r["vs"].as_object() {
                let s = &v["mask_us"];
                println!(
                    "{:<10} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
                    "llguidance",
                    s["n"],
                    s["mean"].as_f64().unwrap_or(0.0),
                    s["p50"].as_f64().unwrap_or(0.0),
                    s["p90"].as_f64().unwrap_or(0.0),
                    s["p99"].as_f64().unwrap_or(0.0),
                    s["max"].as_f64().unwrap_or(0.0)
                );
                println!(
                    "llguidance/warm: mean {:.2}x, p50 {:.2}x, p99 {:.2}x (llguidance compile {:.2} ms, first mask {:.1} µs, {} docs diverged)",
                    v["ratio_mean"].as_f64().unwrap_or(f64::NAN),
                    v["ratio_p50"].as_f64().unwrap_or(f64::NAN),
                    v["ratio_p99"].as_f64().unwrap_or(f64::NAN),
                    v["compile_ms"].as_f64().unwrap_or(0.0),
                    v["first_mask_us"].as_f64().unwrap_or(0.0),
                    v["diverged_docs"]
                );
                println!(
                    "llguidance/uncached: p50 {:.2}x, p99 {:.2}x",
                    v["ratio_p50_uncached"].as_f64().unwrap_or(f64::NAN),
                    v["ratio_p99_uncached"].as_f64().unwrap_or(f64::NAN)
                );
            }
            println!(
                "trees {} ({} nodes), memory {:.2} MiB (trees {:.2} MiB, trie {:.2} MiB)",
                stats.trees,
                stats.tree_nodes,
                (stats.memory_bytes + stats.trie_bytes) as f64 / (1 << 20) as f64,
                stats.memory_bytes as f64 / (1 << 20) as f64,
                stats.trie_bytes as f64 / (1 << 20) as f64
            );
        }
    }
    Ok(())
}
