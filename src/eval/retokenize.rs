//! Model-based retokenization (the paper's App. B, Algorithm 3), behind `domino eval retokenize`
//! (whose flags and printing are the command line's).
//!
//! # Overview
//! A tokenizer encodes a text one way; a model generating the same text after a prompt may
//! prefer another segmentation (` "` as one token rather than ` ` + `"`). Template-based
//! constraining inserts text with the tokenizer's segmentation, which the model would not
//! have produced — the paper's Fig. 2 shows the perplexity cost. [`retokenize`] recovers the
//! model-preferred segmentation: argmax decoding where, at each step, only tokens whose bytes
//! are a non-empty prefix of the text still to produce are allowed (a direct byte-alignment
//! mask over the vocabulary), so the output spells exactly the target text.
//!
//! Invariants: the retokenized tokens' bytes concatenate to the target text; log-probabilities
//! are the unmasked model's, so both tokenizations' perplexities are comparable.

use super::backend::{perplexity, score_continuation};
use crate::decode::sequence::{self, ChoiceRule, Sequence};
use crate::decode::{Control, FinishReason, GenerationRequest, SamplingConfig, TokenEvent};
use crate::runtime::Session;
use crate::vocab::TokenId;
use anyhow::bail;

/// One tokenization of the target text, scored.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Tokenization {
    pub tokens: Vec<u32>,
    /// Each token's bytes, lossily as text.
    pub pieces: Vec<String>,
    /// Unmasked log-probability of each token.
    pub logprobs: Vec<f32>,
    pub perplexity: f64,
}

/// The Fig. 2 comparison.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RetokenizeReport {
    pub model: String,
    pub prompt_tokens: usize,
    /// The tokenizer's encoding of the text (what a template inserts).
    pub default: Tokenization,
    /// The model-preferred encoding (Algorithm 3).
    pub naturalized: Tokenization,
}

/// Algorithm 3: greedy model-preferred tokens spelling `text` after `prompt` (which must
/// start with BOS if the model wants one) — decode's loop with the "spell this text" choice
/// rule ([`ChoiceRule::Spell`]). Returns the tokens and their unmasked logprobs.
pub fn retokenize(
    session: &mut Session<'_>,
    prompt: &[TokenId],
    text: &[u8],
) -> anyhow::Result<(Vec<TokenId>, Vec<f32>)> {
    if prompt.is_empty() {
        bail!("retokenization needs a prompt (at least BOS)");
    }
    let vocab = session.model().vocabulary();
    session.clear();
    let request = GenerationRequest {
        prompt: prompt.to_vec(),
        max_tokens: usize::MAX,
        sampling: SamplingConfig::default(),
        logprobs: true,
    };
    let seq = Sequence::new(vocab, &request, ChoiceRule::Spell { text, pos: 0 })?;
    let result = sequence::run(session, seq, &Control::none(), &mut |_: &TokenEvent<'_>| {
        Ok(())
    })?;
    if result.finish_reason != FinishReason::GrammarEnd {
        bail!(
            "retokenization stopped after {} of {} bytes ({}): the context is too small",
            result.bytes.len(),
            text.len(),
            result.finish_reason.as_str()
        );
    }
    Ok((result.tokens, result.logprobs))
}

fn tokenization(session: &Session<'_>, tokens: Vec<TokenId>, logprobs: Vec<f32>) -> Tokenization {
    let vocab = session.model().vocabulary();
    Tokenization {
        pieces: tokens
            .iter()
            .map(|&t| String::from_utf8_lossy(vocab.bytes(t)).into_owned())
            .collect(),
        tokens: tokens.iter().map(|t| t.0).collect(),
        perplexity: perplexity(&logprobs),
        logprobs,
    }
}

/// Score the tokenizer's and the model's tokenization of `text` after `prompt`.
pub fn compare(
    session: &mut Session<'_>,
    prompt: &str,
    text: &str,
) -> anyhow::Result<RetokenizeReport> {
    if text.is_empty() {
        bail!(crate::diag::UsageError(
            "--text is empty: there is nothing to retokenize".into()
        ));
    }
    let model = session.model();
    let prompt_tokens = model.tokenize(prompt, true, false);
    if prompt_tokens.is_empty() {
        bail!(crate::diag::UsageError(
            "the prompt is empty and the model adds no BOS token: nothing to condition on".into()
        ));
    }
    let default_tokens = model.tokenize(text, false, false);
    let default_logprobs = score_continuation(session, &prompt_tokens, &default_tokens)?;
    let (natural_tokens, natural_logprobs) = retokenize(session, &prompt_tokens, text.as_bytes())?;
    Ok(RetokenizeReport {
        model: model
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        prompt_tokens: prompt_tokens.len(),
        default: tokenization(session, default_tokens, default_logprobs),
        naturalized: tokenization(session, natural_tokens, natural_logprobs),
    })
}
