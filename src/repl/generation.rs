//! The REPL's generation loop: constrained sampling with per-token facts for the heat view,
//! KV-cache reuse between prompts, and cancellation.
//!
//! Each step reads the logits, takes the model's own favourite token (unmasked argmax) and
//! decides:
//! - no constraint (or `:method none`): sample from the raw logits;
//! - greedy with a constraint: if the grammar allows the favourite it is the answer (one
//!   token check instead of a mask — *opportunistic masking*, exactly the masked argmax);
//!   otherwise compute the mask and take the masked argmax;
//! - sampling with a constraint: compute the mask and sample from the masked distribution
//!   (the sampler's order: mask → temperature → top-k → top-p → min-p).
//!
//! A token *intervened* when the grammar blocked the model's favourite. Every token's
//! log-probability is taken under the unmasked model (the heat). The loop stops on an
//! end-of-generation token (`eos`), when the grammar allows nothing but the end
//! (`grammar_end`, without another forward pass), after `max_tokens` or a full context
//! (`length`), or when the cancel flag is raised (`cancelled`, checked once per token).
//!
//! Invariants: the KV cache ends up holding the prompt plus every generated token except the
//! last one when generation stopped without another decode; [`feed`] reuses the longest
//! common prefix of the cache and a new prompt, so asking again costs only the new tokens.

use crate::decode::{Sampler, SamplingConfig, log_softmax_at, sampler::argmax};
use crate::engine::Constraint;
use crate::runtime::{LogitsAt, Session};
use crate::vocab::{TokenId, TokenSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Why a generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Finish {
    Eos,
    Length,
    GrammarEnd,
    /// Ctrl-C.
    Cancelled,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Eos => "eos",
            Finish::Length => "length",
            Finish::GrammarEnd => "grammar_end",
            Finish::Cancelled => "cancelled",
        }
    }
}

/// Counters and timings of one generation (the fields of `generate --format json`'s `stats`,
/// plus the constraint's).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Stats {
    pub prompt_tokens: usize,
    /// Prompt tokens already in the KV cache from the previous turn (not evaluated again).
    pub reused_prompt_tokens: usize,
    pub generated_tokens: usize,
    /// `llama_decode` calls, the prompt's included.
    pub forward_passes: usize,
    pub prompt_ms: f64,
    pub decode_ms: f64,
    pub tokens_per_s: f64,
    /// Full masks computed (greedy steps whose favourite token was allowed need none).
    pub masks_computed: usize,
    pub mask_us_total: f64,
    /// Tokens where the grammar blocked the model's favourite.
    pub interventions: usize,
    /// Speculative draft tokens proposed and accepted (`:draft S`, decode's loop).
    pub draft_proposed: usize,
    pub draft_accepted: usize,
    /// Tokens appended without consulting the model (`:method template`).
    pub forced_tokens: usize,
}

impl Stats {
    /// The stats of a generation run by [`crate::decode`]'s loops.
    pub fn from_decode(s: &crate::decode::GenerationStats) -> Stats {
        Stats {
            prompt_tokens: s.prompt_tokens,
            reused_prompt_tokens: 0,
            generated_tokens: s.generated_tokens,
            forward_passes: s.forward_passes,
            prompt_ms: s.prompt_ms,
            decode_ms: s.decode_ms,
            tokens_per_s: s.tokens_per_s,
            masks_computed: s.masks_computed,
            mask_us_total: s.mask_us_total,
            interventions: s.interventions,
            draft_proposed: s.draft_proposed,
            draft_accepted: s.draft_accepted,
            forced_tokens: s.forced_tokens,
        }
    }
}

/// One generated token, as handed to the caller.
#[derive(Clone, Copy, Debug)]
pub struct TokenEvent<'a> {
    pub token: TokenId,
    pub bytes: &'a [u8],
    /// Log-probability under the unmasked model.
    pub logprob: f32,
    pub intervened: bool,
}

/// The outcome of [`generate`].
#[derive(Clone, Debug)]
pub struct Outcome {
    pub tokens: Vec<TokenId>,
    pub bytes: Vec<u8>,
    pub logprobs: Vec<f32>,
    /// Per token: the grammar blocked the model's favourite. Empty when the loop that ran
    /// does not report it per token (decode's speculative and baseline loops).
    pub intervened: Vec<bool>,
    pub finish: Finish,
    pub stats: Stats,
}

impl Outcome {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The output is a whole sentence of the constraint (or free text that ended on its own).
    pub fn complete(&self) -> bool {
        matches!(self.finish, Finish::Eos | Finish::GrammarEnd)
    }
}

impl From<crate::decode::FinishReason> for Finish {
    fn from(f: crate::decode::FinishReason) -> Finish {
        match f {
            crate::decode::FinishReason::Eos => Finish::Eos,
            crate::decode::FinishReason::Length => Finish::Length,
            crate::decode::FinishReason::GrammarEnd => Finish::GrammarEnd,
        }
    }
}

/// Generation parameters.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub max_tokens: usize,
    pub sampling: SamplingConfig,
}

/// Bring the KV cache to exactly `tokens` (reusing its longest common prefix) and leave the
/// logits of the last one readable. Returns (batch index of those logits, reused tokens).
pub fn feed(session: &mut Session<'_>, tokens: &[TokenId]) -> anyhow::Result<(usize, usize)> {
    anyhow::ensure!(
        !tokens.is_empty(),
        "nothing to condition the model on (empty prompt)"
    );
    let common = session
        .tokens()
        .iter()
        .zip(tokens)
        .take_while(|(a, b)| a == b)
        .count();
    // The last token must be decoded again for its logits to be readable.
    let keep = common.min(tokens.len() - 1);
    session.truncate(keep)?;
    session.decode(&tokens[keep..], LogitsAt::Last)?;
    Ok((tokens.len() - keep - 1, keep))
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Generate after `prompt`, constrained by `constraint` when given (it is advanced by every
/// generated token; a caller that wants to keep its start state passes a clone).
pub fn generate(
    session: &mut Session<'_>,
    prompt: &[TokenId],
    mut constraint: Option<&mut Constraint>,
    config: &GenConfig,
    cancel: &AtomicBool,
    on_token: &mut dyn FnMut(TokenEvent<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Outcome> {
    config
        .sampling
        .validate()
        .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
    let vocab = session.model().vocabulary();
    let mut sampler = Sampler::new(config.sampling.clone());
    let greedy = config.sampling.is_greedy();
    let mut mask = TokenSet::new(vocab.len());
    let mut stats = Stats {
        prompt_tokens: prompt.len(),
        ..Default::default()
    };

    let start = Instant::now();
    let (mut logits_index, reused) = feed(session, prompt)?;
    stats.reused_prompt_tokens = reused;
    stats.forward_passes += 1;
    stats.prompt_ms = ms_since(start);

    let decode_start = Instant::now();
    let mut out = Outcome {
        tokens: Vec::new(),
        bytes: Vec::new(),
        logprobs: Vec::new(),
        intervened: Vec::new(),
        finish: Finish::Length,
        stats: Stats::default(),
    };
    out.finish = loop {
        if cancel.load(Ordering::Relaxed) {
            break Finish::Cancelled;
        }
        if out.tokens.len() >= config.max_tokens {
            break Finish::Length;
        }
        let logits = session.logits(logits_index);
        let favourite =
            argmax(logits).ok_or_else(|| anyhow::anyhow!("the model returned no logits"))?;
        let favourite_allowed = greedy
            && constraint
                .as_deref_mut()
                .is_some_and(|c| c.allows(favourite));
        let (token, intervened) = match constraint.as_deref_mut() {
            None => (
                sampler.sample(logits, None).expect("logits are not empty"),
                false,
            ),
            Some(_) if favourite_allowed => (favourite, false),
            Some(c) => {
                let t0 = Instant::now();
                c.compute_mask(&mut mask);
                stats.masks_computed += 1;
                stats.mask_us_total += t0.elapsed().as_secs_f64() * 1e6;
                let token = sampler.sample(logits, Some(&mask)).ok_or_else(|| {
                    anyhow::anyhow!("the grammar allows no token of this model's vocabulary here")
                })?;
                (token, !mask.contains(favourite))
            }
        };
        stats.interventions += intervened as usize;
        if vocab.is_eog(token) {
            break Finish::Eos;
        }
        if let Some(c) = constraint.as_deref_mut() {
            c.commit(token)
                .map_err(|e| anyhow::anyhow!("internal error: a masked token was rejected: {e}"))?;
        }
        let logprob = log_softmax_at(logits, token);
        let piece = vocab.bytes(token);
        out.tokens.push(token);
        out.bytes.extend_from_slice(piece);
        out.logprobs.push(logprob);
        out.intervened.push(intervened);
        on_token(TokenEvent {
            token,
            bytes: piece,
            logprob,
            intervened,
        })?;
        if constraint.as_deref().is_some_and(|c| c.is_finished()) {
            break Finish::GrammarEnd;
        }
        if out.tokens.len() >= config.max_tokens {
            break Finish::Length;
        }
        if cancel.load(Ordering::Relaxed) {
            break Finish::Cancelled;
        }
        if session.n_past() + 1 > session.n_ctx() {
            break Finish::Length;
        }
        session.decode(&[token], LogitsAt::Last)?;
        stats.forward_passes += 1;
        logits_index = 0;
    };
    stats.generated_tokens = out.tokens.len();
    stats.decode_ms = ms_since(decode_start);
    stats.tokens_per_s = if stats.decode_ms > 0.0 {
        out.tokens.len() as f64 / (stats.decode_ms / 1000.0)
    } else {
        0.0
    };
    out.stats = stats;
    Ok(out)
}
