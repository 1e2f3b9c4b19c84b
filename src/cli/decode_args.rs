//! The decoding-method flags, defined once ([`MethodArgs`]: `--method`, `--k`, `--draft`,
//! `--draft-threshold`, `--draft-policy`, flattened into `generate` and `repl`), `generate`'s
//! own extras ([`DecodeArgs`]: the constraint, `--opportunistic`, `--draft-stats`, `--stats`),
//! and the one-line `--stats` summary.
//!
//! The flags only describe a [`DecoderConfig`]; building and running the method lives in
//! [`crate::decode::methods`]. `--opportunistic` and `--draft-stats` are `generate`'s alone:
//! the REPL's heat loop computes every mask (so it can show interventions) and its sessions
//! are interactive experiments whose draft counts are not worth keeping.

use crate::cli::args::{ConstraintArgs, draft_policy_parser, method_parser};
use crate::constraint::parse_lookahead;
use crate::decode::GenerationResult;
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::{DEFAULT_DRAFT, DEFAULT_DRAFT_THRESHOLD, DecoderConfig, Method};
use std::path::PathBuf;

/// Lookahead `k` as a flag value (`inf` = ∞).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lookahead(pub Option<u32>);

fn lookahead_parser(s: &str) -> Result<Lookahead, String> {
    parse_lookahead(s).map(Lookahead)
}

/// How the constraint is applied: the method and its lookahead and drafts.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Decoding method")]
pub struct MethodArgs {
    /// Decoding method [default: domino; `generate` without a constraint: none]
    #[arg(long, value_name = "METHOD", value_parser = method_parser())]
    pub method: Option<Method>,
    /// Lookahead k for domino/template: terminal boundaries a token may cross (`inf` = minimally invasive).
    #[arg(long, value_name = "N|inf", default_value = "inf", value_parser = lookahead_parser)]
    pub k: Lookahead,
    /// Speculative draft length S (0 = off): tokens proposed from counts, verified in one pass
    /// [default: 8; in the repl 0, so that every token shows its heat: with S > 0 decode's
    /// speculative loop runs and streams the text without heat]
    #[arg(long, value_name = "S")]
    pub draft: Option<usize>,
    /// Smallest probability (product of count probabilities) for the draft so far to grow.
    #[arg(long, value_name = "P", default_value_t = DEFAULT_DRAFT_THRESHOLD)]
    pub draft_threshold: f32,
    /// How long each draft is: `cost` cuts it where expected tokens per measured millisecond of
    /// forward pass peak (never slower than no drafts by design); `threshold` verifies
    /// everything the counts propose (the paper's rule).
    #[arg(long, value_name = "POLICY", value_parser = draft_policy_parser(), default_value = "cost")]
    pub draft_policy: DraftPolicy,
}

/// The REPL's starting draft length (see [`MethodArgs::draft`]).
pub const REPL_DEFAULT_DRAFT: usize = 0;

impl MethodArgs {
    /// `--draft-threshold`, checked (a usage error outside [0, 1]).
    pub fn draft_threshold(&self) -> anyhow::Result<f32> {
        if !(0.0..=1.0).contains(&self.draft_threshold) {
            return Err(crate::diag::UsageError(format!(
                "--draft-threshold must be in [0, 1], got {}",
                self.draft_threshold
            ))
            .into());
        }
        Ok(self.draft_threshold)
    }
}

/// Constraint and decoding-method flags of `generate`.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = "Decoding method")]
pub struct DecodeArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    #[command(flatten)]
    pub regions: crate::cli::args::RegionArgs,
    #[command(flatten)]
    pub method: MethodArgs,
    /// Sample first and compute the mask only when the model's token is rejected.
    #[arg(long)]
    pub opportunistic: bool,
    /// Draft counts: loaded at start (if the file exists), saved at the end.
    #[arg(long, value_name = "FILE")]
    pub draft_stats: Option<PathBuf>,
    /// Print a one-line summary of the statistics to stderr.
    #[arg(long)]
    pub stats: bool,
}

impl DecodeArgs {
    /// The decoder configuration these flags describe.
    pub fn config(&self) -> anyhow::Result<DecoderConfig> {
        let (spec, regions) = self.regions.resolve(&self.constraint)?;
        let method = self
            .method
            .method
            .unwrap_or(if spec.is_some() || regions.is_some() {
                Method::Domino
            } else {
                Method::None
            });
        let draft_threshold = self.method.draft_threshold()?;
        Ok(DecoderConfig {
            method,
            source: spec.map(|s| s.source),
            compile: self.constraint.compile_options(),
            k: self.method.k.0,
            opportunistic: self.opportunistic,
            draft: self.method.draft.unwrap_or(DEFAULT_DRAFT),
            draft_threshold,
            draft_policy: self.method.draft_policy,
            draft_stats: self.draft_stats.clone(),
            regions,
            token_healing: self.regions.token_healing(),
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
