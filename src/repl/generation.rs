//! The REPL's generation: decode's loop with per-token facts for the heat view, KV-cache
//! reuse between prompts, and cancellation.
//!
//! Each step takes the model's own favourite token (unmasked argmax) and decides:
//! - no constraint (or `:method none`): sample from the raw logits;
//! - greedy with a constraint: if the grammar allows the favourite it is the answer (one
//!   token check instead of a mask — *opportunistic masking*, exactly the masked argmax);
//!   otherwise compute the mask and take the masked argmax;
//! - sampling with a constraint: compute the mask and sample from the masked distribution
//!   (the sampler's order: mask → temperature → top-k → top-p → min-p).
//!
//! A token *intervened* when the grammar blocked the model's favourite. Every token's
//! log-probability is taken under the unmasked model (the heat). The loop stops as decode's
//! does ([`FinishReason`]), and when the cancel flag is raised (`cancelled`, checked once per
//! token).
//!
//! Invariants: the KV cache ends up holding the prompt plus every generated token except the
//! last one when generation stopped without another decode; [`feed`] reuses the longest
//! common prefix of the cache and a new prompt ([`reuse_prefix`]), so asking again costs only the new tokens.

use crate::decode::AsDynConstraint;
use crate::decode::draft_model::DraftModel;
use crate::decode::draft_policy::DraftTuner;
use crate::decode::opportunistic::Chooser;
use crate::decode::sequence::{self, ChoiceRule, Sequence};
use crate::decode::{
    Control, EngineDecodeOptions, FinishReason, GenerationRequest, GenerationResult,
    GenerationStats, Sampler, SamplingConfig, TokenEvent,
};
use crate::runtime::{LogitsAt, Session};
use crate::vocab::TokenId;
use std::sync::atomic::AtomicBool;

/// The outcome of [`generate`]: one turn's record.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub tokens: Vec<TokenId>,
    pub bytes: Vec<u8>,
    pub logprobs: Vec<f32>,
    /// Per token: the grammar blocked the model's favourite.
    pub intervened: Vec<bool>,
    pub finish: FinishReason,
    pub stats: GenerationStats,
}

impl Outcome {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    /// The output is a whole sentence of the constraint (or free text that ended on its own).
    pub fn complete(&self) -> bool {
        matches!(self.finish, FinishReason::Eos | FinishReason::GrammarEnd)
    }
}

impl From<GenerationResult> for Outcome {
    fn from(r: GenerationResult) -> Outcome {
        Outcome {
            tokens: r.tokens,
            bytes: r.bytes,
            logprobs: r.logprobs,
            intervened: r.intervened,
            finish: r.finish_reason,
            stats: r.stats,
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
    let keep = reuse_prefix(session, tokens)?;
    session.decode(&tokens[keep..], LogitsAt::Last)?;
    Ok((tokens.len() - keep - 1, keep))
}

/// Cut the KV cache back to its longest common prefix with `tokens`, short of the last token
/// (whose logits must be computed again). Returns how many tokens were kept: `tokens[kept..]`
/// is what remains to decode.
pub fn reuse_prefix(session: &mut Session<'_>, tokens: &[TokenId]) -> anyhow::Result<usize> {
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
    Ok(keep)
}

/// Generate after `prompt`, constrained by `constraint` when given (it is advanced by every
/// generated token; a caller that wants to keep its start state passes a clone).
pub fn generate<C: AsDynConstraint + ?Sized>(
    session: &mut Session<'_>,
    prompt: &[TokenId],
    constraint: Option<&mut C>,
    config: &GenConfig,
    cancel: &AtomicBool,
    on_token: &mut dyn FnMut(&TokenEvent<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<Outcome> {
    config
        .sampling
        .validate()
        .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
    let vocab = session.model().vocabulary();
    let reused = reuse_prefix(session, prompt)?;
    let request = GenerationRequest {
        prompt: prompt[reused..].to_vec(),
        max_tokens: config.max_tokens,
        sampling: config.sampling.clone(),
        logprobs: true,
    };
    // The heat loop never drafts: its counts and policy live only for this generation.
    let mut drafts = DraftModel::new(0);
    let mut tuner = DraftTuner::new(Default::default());
    let rule = match constraint {
        None => ChoiceRule::Free(Sampler::new(config.sampling.clone())),
        Some(constraint) => ChoiceRule::Engine {
            constraint: constraint.as_dyn(),
            chooser: Chooser::new(
                config.sampling.clone(),
                vocab.len(),
                config.sampling.is_greedy(),
            ),
            drafts: &mut drafts,
            tuner: &mut tuner,
            opts: EngineDecodeOptions::default(),
        },
    };
    let seq = Sequence::new(vocab, &request, rule)?;
    let control = Control::cancelled_by(cancel);
    let result = sequence::run(session, seq, &control, &mut |e: &TokenEvent<'_>| {
        on_token(e)
    })?;
    let mut outcome = Outcome::from(result);
    outcome.stats.prompt_tokens = prompt.len();
    outcome.stats.reused_prompt_tokens = reused;
    Ok(outcome)
}
