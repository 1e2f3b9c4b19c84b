//! `generate`'s constraint and method flags ([`DecodeArgs`]), and the one-line `--stats`
//! summary.
//!
//! The flags only describe a [`DecoderConfig`]; building and running the method lives in
//! [`crate::decode::methods`].

use crate::cli::args::{ConstraintArgs, parse_k};
use crate::decode::GenerationResult;
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::{DEFAULT_DRAFT, DEFAULT_DRAFT_THRESHOLD, DecoderConfig, Method};
use std::path::PathBuf;

/// Lookahead `k` as a flag value (`inf` = ∞).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookahead(pub Option<u32>);

fn parse_lookahead(s: &str) -> Result<Lookahead, String> {
    parse_k(s).map(Lookahead)
}

/// Constraint and decoding-method flags of `generate`.
#[derive(clap::Args, Debug, Clone)]
pub struct DecodeArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    /// Decoding method [default: domino with a constraint, else none]
    #[arg(long, value_enum)]
    pub method: Option<Method>,
    /// Lookahead k for domino/template: terminal boundaries a token may cross (`inf` = minimally invasive).
    #[arg(long, value_name = "N|inf", default_value = "inf", value_parser = parse_lookahead)]
    pub k: Lookahead,
    /// Sample first and compute the mask only when the model's token is rejected.
    #[arg(long)]
    pub opportunistic: bool,
    /// Speculative draft length S (0 = off): tokens proposed from counts, verified in one pass.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_DRAFT)]
    pub draft: usize,
    /// Draft counts: loaded at start (if the file exists), saved at the end.
    #[arg(long, value_name = "FILE")]
    pub draft_stats: Option<PathBuf>,
    /// Smallest probability (product of count probabilities) for the draft so far to grow.
    #[arg(long, value_name = "P", default_value_t = DEFAULT_DRAFT_THRESHOLD)]
    pub draft_threshold: f32,
    /// How long each draft is: `cost` cuts it where expected tokens per measured millisecond of
    /// forward pass peak (never slower than no drafts by design); `threshold` verifies
    /// everything the counts propose (the paper's rule).
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = DraftPolicy::Cost)]
    pub draft_policy: DraftPolicy,
    /// Print a one-line summary of the statistics to stderr.
    #[arg(long)]
    pub stats: bool,
}

impl DecodeArgs {
    /// The decoder configuration these flags describe.
    pub fn config(&self) -> anyhow::Result<DecoderConfig> {
        let source = self.constraint.source()?;
        let method = self.method.unwrap_or(if source.is_some() {
            Method::Domino
        } else {
            Method::None
        });
        if !(0.0..=1.0).contains(&self.draft_threshold) {
            return Err(crate::diag::UsageError(format!(
                "--draft-threshold must be in [0, 1], got {}",
                self.draft_threshold
            ))
            .into());
        }
        Ok(DecoderConfig {
            method,
            source,
            compile: self.constraint.compile_options(),
            k: self.k.0,
            opportunistic: self.opportunistic,
            draft: self.draft,
            draft_threshold: self.draft_threshold,
            draft_policy: self.draft_policy,
            draft_stats: self.draft_stats.clone(),
        })
    }
}

/// The `--stats` line.
pub fn stats_line(method: Method, r: &GenerationResult) -> String {
    let s = &r.stats;
    let acceptance = if s.draft_proposed > 0 {
        100.0 * s.draft_accepted as f64 / s.draft_proposed as f64
    } else {
        0.0
    };
    format!(
        "{}: {} tokens in {:.0} ms ({:.1} tok/s), {} forward passes, finish {}; masks {} ({:.0} µs), interventions {}, drafts {}/{} accepted ({:.0}%), forced {}",
        method.as_str(),
        s.generated_tokens,
        s.decode_ms,
        s.tokens_per_s,
        s.forward_passes,
        r.finish_reason.as_str(),
        s.masks_computed,
        s.mask_us_total,
        s.interventions,
        s.draft_accepted,
        s.draft_proposed,
        acceptance,
        s.forced_tokens,
    )
}
