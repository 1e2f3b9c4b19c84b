//! `domino perplexity`: perplexity of a text (a file, or one field of every JSON Lines record)
//! under the model.
//!
//! A text is tokenized with BOS and split into chunks of at most `--ctx` tokens; each chunk is
//! evaluated from an empty KV cache in one forward pass with logits at every position, and
//! every token but a chunk's first is scored (the first token of a chunk after the first has
//! no context; BOS is never scored). Perplexity is `exp(-Σ log p / n)` over all scored tokens
//! (per record, and over all records for `--jsonl`).

use crate::cli::args::ModelArgs;
use crate::cli::args::OutputFormat;
use crate::decode::log_softmax_at;
use crate::diag::UsageError;
use crate::runtime::{LogitsAt, Session};
use anyhow::{Context, bail};
use std::io::Write;
use std::path::PathBuf;

/// Perplexity of a text under the model.
#[derive(clap::Args, Debug)]
pub struct PerplexityArgs {
    /// A text file (UTF-8).
    #[arg(
        value_name = "FILE",
        required_unless_present = "jsonl",
        conflicts_with = "jsonl"
    )]
    pub file: Option<PathBuf>,
    /// Score one field of every record of this JSON Lines file instead.
    #[arg(long, value_name = "FILE", requires = "field")]
    pub jsonl: Option<PathBuf>,
    /// The (string) field to score with --jsonl.
    #[arg(long, value_name = "NAME")]
    pub field: Option<String>,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Negative log-likelihood of one text.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Likelihood {
    /// Tokens scored.
    pub tokens: usize,
    /// `-Σ log p` over them (nats).
    pub nll: f64,
}

impl Likelihood {
    pub fn perplexity(&self) -> f64 {
        (self.nll / self.tokens as f64).exp()
    }
}

/// Score `text` in chunks of the session's context size (see the module doc).
pub fn text_likelihood(session: &mut Session<'_>, text: &str) -> anyhow::Result<Likelihood> {
    let tokens = session.model().tokenize(text, true, false);
    let chunk_len = session.n_ctx();
    if chunk_len < 2 {
        bail!(UsageError(
            "--ctx must be at least 2 to score a text".into()
        ));
    }
    let mut total = Likelihood::default();
    for chunk in tokens.chunks(chunk_len) {
        if chunk.len() < 2 {
            continue;
        }
        session.clear();
        session.decode(chunk, LogitsAt::All)?;
        for (i, &t) in chunk.iter().enumerate().skip(1) {
            total.nll -= log_softmax_at(session.logits(i - 1), t) as f64;
            total.tokens += 1;
        }
    }
    session.clear();
    Ok(total)
}

pub fn run(args: PerplexityArgs) -> anyhow::Result<()> {
    // Read the input before loading the model: a missing file fails fast.
    let texts: Vec<(String, String)> = match (&args.file, &args.jsonl, &args.field) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            vec![(path.display().to_string(), text)]
        }
        (None, Some(path), Some(field)) => {
            let body = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            let mut texts = Vec::new();
            for (i, line) in body
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
            {
                let record: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                    UsageError(format!(
                        "{}:{}:{}: not JSON: {e}",
                        path.display(),
                        i + 1,
                        e.column()
                    ))
                })?;
                let Some(text) = record.get(field).and_then(|v| v.as_str()) else {
                    bail!(UsageError(format!(
                        "{}:{}: record has no string field `{field}`",
                        path.display(),
                        i + 1
                    )));
                };
                texts.push((format!("line {}", i + 1), text.to_string()));
            }
            texts
        }
        _ => bail!(UsageError(
            "give a text FILE, or --jsonl FILE --field NAME".into()
        )),
    };
    let model = args.model.load()?;
    let mut session = model.session(args.model.session_options())?;
    let mut records = Vec::new();
    let mut total = Likelihood::default();
    for (name, text) in &texts {
        let l = text_likelihood(&mut session, text)?;
        total.tokens += l.tokens;
        total.nll += l.nll;
        records.push((name, l));
    }
    if total.tokens == 0 {
        bail!(UsageError(
            "the input has no tokens to score (each text needs at least one token after BOS)"
                .into()
        ));
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        OutputFormat::Json => {
            let json = serde_json::json!({
                "model": model.path().file_name().map(|n| n.to_string_lossy().into_owned()),
                "context": session.n_ctx(),
                "tokens": total.tokens,
                "nll": total.nll,
                "perplexity": total.perplexity(),
                "records": records.iter().map(|(name, l)| serde_json::json!({
                    "name": name, "tokens": l.tokens, "nll": l.nll,
                    "perplexity": if l.tokens > 0 { Some(l.perplexity()) } else { None },
                })).collect::<Vec<_>>(),
            });
            writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
        }
        OutputFormat::Text => {
            if records.len() > 1 {
                for (name, l) in &records {
                    if l.tokens > 0 {
                        writeln!(out, "{name}: {:.3} ({} tokens)", l.perplexity(), l.tokens)?;
                    }
                }
            }
            writeln!(
                out,
                "perplexity {:.4} over {} tokens",
                total.perplexity(),
                total.tokens
            )?;
        }
    }
    Ok(())
}
