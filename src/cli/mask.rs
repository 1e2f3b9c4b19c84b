//! `domino mask`: which tokens a grammar allows after a prefix.
//!
//! The grammar comes from the shared constraint flags, the vocabulary from a GGUF model
//! (`--model`, vocabulary only) or a `tokenizer.json` (`--tokenizer`). For each prefix
//! (`--prefix TEXT`, or `--prefixes FILE` with one JSON string per line; none = the empty
//! prefix) the prefix's bytes are committed and the mask is computed with lookahead `--k`.
//! Text output shows the count and a sample of allowed tokens; `--format json` prints one line
//! per prefix: `{"prefix_ok", "allowed" (sorted ids, EOG ids included when allowed), "count",
//! "eos_allowed"}` (plus `"error"` when the prefix is not allowed).
//!
//! With `--reasoning`, `--trigger TEXT` or `--tags FILE` the mask is the triggered
//! constraint's: the whole vocabulary (less the tokens that would complete a trigger into
//! text the region's grammar refuses) before the trigger, the region grammar's mask (bridge
//! tokens included) inside it.

use crate::cli::args::{ConstraintArgs, OutputFormat};
use crate::constraint::parse_lookahead;
use crate::diag::UsageError;
use crate::engine::{CompiledGrammar, Constraint, Options, TokenConstraint};
use crate::vocab::{TokenSet, Vocabulary};
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the vocabulary comes from: `--model` or `--tokenizer` (exactly one).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct VocabArgs {
    /// GGUF model file (only its vocabulary is loaded).
    #[arg(long, value_name = "PATH", group = "vocab_source")]
    pub model: Option<PathBuf>,
    /// Hugging Face tokenizer.json instead of a model.
    #[arg(long, value_name = "FILE", group = "vocab_source")]
    pub tokenizer: Option<PathBuf>,
}

impl VocabArgs {
    pub fn load(&self) -> anyhow::Result<Arc<Vocabulary>> {
        if let Some(p) = &self.tokenizer {
            return Ok(Arc::new(crate::vocab::tokenizer_json::load(p)?));
        }
        if let Some(p) = &self.model {
            return Ok(Arc::new(crate::runtime::load_vocabulary(p).with_context(
                || format!("cannot load the vocabulary of {}", p.display()),
            )?));
        }
        Err(
            UsageError("a vocabulary is needed: pass --model PATH or --tokenizer FILE".into())
                .into(),
        )
    }
}

/// Compile the chosen constraint for the engine (grammar errors exit 2; no constraint is a
/// usage error).
pub fn compile_constraint(args: &ConstraintArgs) -> anyhow::Result<Arc<CompiledGrammar>> {
    args.required_spec()?.compile()
}

/// Parse `--k N|inf`.
pub fn lookahead(k: &str) -> anyhow::Result<Option<u32>> {
    parse_lookahead(k).map_err(|e| UsageError(format!("--k: {e}")).into())
}

/// Read a file of JSON strings, one per line (blank lines skipped).
pub fn read_json_lines(path: &Path) -> anyhow::Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let s: String = serde_json::from_str(line).map_err(|e| {
            UsageError(format!(
                "{}:{}:{}: expected a JSON string per line: {e}",
                path.display(),
                i + 1,
                e.column()
            ))
        })?;
        out.push(s);
    }
    Ok(out)
}

#[derive(clap::Args, Debug)]
pub struct MaskArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    #[command(flatten)]
    pub regions: crate::cli::args::RegionArgs,
    #[command(flatten)]
    pub vocab: VocabArgs,
    /// Text already generated (committed before computing the mask).
    #[arg(long, value_name = "TEXT", conflicts_with = "prefixes")]
    pub prefix: Option<String>,
    /// File with one JSON string per line: one mask per prefix.
    #[arg(long, value_name = "FILE")]
    pub prefixes: Option<PathBuf>,
    /// Lookahead: the most terminal boundaries inside one token (`inf` = minimally invasive).
    #[arg(long, value_name = "N|inf", default_value = "inf")]
    pub k: String,
    /// How many allowed tokens the text output shows.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub sample: usize,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
}

pub fn run(args: MaskArgs) -> anyhow::Result<()> {
    let k = lookahead(&args.k)?;
    let opts = Options {
        lookahead: k,
        ..Default::default()
    };
    let (_, plan) = args.regions.resolve(&args.constraint)?;
    let vocab = args.vocab.load()?;
    // Compiling, the token trees and the first mask run under the compile budget
    // (--compile-timeout, --compile-memory): a grammar over it exits 2 naming the limit.
    let budget = args.constraint.compile_options().budget.enter();
    let base: Box<dyn TokenConstraint> = match plan {
        Some(plan) => {
            let spec = plan.compile(&args.constraint.compile_options(), &vocab)?;
            let c =
                crate::engine::triggered::TriggeredConstraint::new(Arc::new(spec), &vocab, opts)?;
            Box::new(c)
        }
        None => {
            let grammar = args
                .constraint
                .required_spec()?
                .compile_for(&vocab, opts.clone())?;
            Box::new(Constraint::new(&grammar, &vocab, opts)?)
        }
    };
    drop(budget);
    let prefixes = match &args.prefixes {
        Some(p) => read_json_lines(p)?,
        None => vec![args.prefix.clone().unwrap_or_default()],
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut mask = TokenSet::new(vocab.len());
    for prefix in &prefixes {
        let mut c = base.clone();
        let committed = c.commit_bytes(prefix.as_bytes());
        let ok = committed.is_ok();
        if ok {
            c.compute_mask(&mut mask);
        } else {
            mask.clear();
        }
        let eos = vocab.eog_tokens().iter().any(|&e| mask.contains(e));
        match args.format {
            OutputFormat::Json => {
                let ids: Vec<u32> = mask.iter().map(|t| t.0).collect();
                let mut v = serde_json::json!({
                    "prefix_ok": ok,
                    "allowed": ids,
                    "count": ids.len(),
                    "eos_allowed": eos,
                });
                if let Err(e) = &committed {
                    v["error"] = serde_json::Value::String(e.to_string());
                }
                writeln!(out, "{v}")?;
            }
            OutputFormat::Text => {
                if let Err(e) = &committed {
                    writeln!(out, "prefix {prefix:?}: not allowed ({e})")?;
                    continue;
                }
                let count = mask.count();
                writeln!(
                    out,
                    "prefix {prefix:?}: {count} of {} tokens allowed{}",
                    vocab.len(),
                    if eos {
                        " (end of generation allowed)"
                    } else {
                        ""
                    }
                )?;
                let sample: Vec<String> = mask
                    .iter()
                    .filter(|t| !vocab.is_special(*t))
                    .take(args.sample)
                    .map(|t| format!("{}:{:?}", t.0, String::from_utf8_lossy(vocab.bytes(t))))
                    .collect();
                if !sample.is_empty() {
                    writeln!(
                        out,
                        "  {}{}",
                        sample.join(" "),
                        if count > sample.len() { " …" } else { "" }
                    )?;
                }
                let forced = c.forced_bytes();
                if !forced.is_empty() {
                    writeln!(
                        out,
                        "  forced continuation: {:?}",
                        String::from_utf8_lossy(&forced)
                    )?;
                }
            }
        }
    }
    out.flush()?;
    Ok(())
}
