//! The generation loop: prompt → forward passes → sampled tokens, streamed as they come.
//!
//! [`generate`] evaluates the prompt in one batch (logits at its last position only), then
//! repeats: sample a token from the latest logits ([`sampler`]), stop on an end-of-generation
//! token (`"eos"`) or after `max_tokens` (`"length"`), hand the token's bytes to the
//! caller's callback, and decode it. It never decodes a token it will not use: stopping on
//! length after `n` tokens costs `n` forward passes (the prompt's and `n - 1` tokens').
//!
//! Extension points: a constraint supplies a mask per step (the sampler already takes one)
//! and may end generation with `"grammar_end"`; speculation decodes several tokens per pass
//! with [`LogitsAt::All`](crate::runtime::LogitsAt) and rolls back with
//! [`Session::truncate`](crate::runtime::Session::truncate).
//!
//! Invariants: the prompt and every generated token except an end-of-generation one end up
//! in the session's KV cache (the last sampled token is decoded only if another step
//! follows); `tokens`, `logprobs` and the callback calls correspond one to one.

pub mod baselines;
pub mod constrained;
pub mod draft_model;
pub mod draft_policy;
pub mod methods;
pub mod opportunistic;
pub mod sampler;

pub use sampler::{Sampler, SamplingConfig, log_softmax_at};

use crate::runtime::{LogitsAt, Session};
use crate::vocab::TokenId;
use std::time::Instant;

/// What to generate.
#[derive(Clone, Debug, Default)]
pub struct GenerationRequest {
    /// Prompt tokens, appended to whatever the session already holds.
    pub prompt: Vec<TokenId>,
    /// Stop after this many generated tokens.
    pub max_tokens: usize,
    pub sampling: SamplingConfig,
    /// Compute each generated token's log-probability under the unmasked model (one extra
    /// pass over the logits per token).
    pub logprobs: bool,
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model produced an end-of-generation token.
    Eos,
    /// `max_tokens` reached, or the context is full.
    Length,
    /// A constraint's grammar reached a state with nothing more to generate.
    GrammarEnd,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Eos => "eos",
            FinishReason::Length => "length",
            FinishReason::GrammarEnd => "grammar_end",
        }
    }
}

/// Counters and timings of one generation.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    /// `llama_decode` calls, the prompt's included.
    pub forward_passes: usize,
    /// Prompt evaluation time.
    pub prompt_ms: f64,
    /// Time from the prompt's logits to the end (sampling and forward passes).
    pub decode_ms: f64,
    /// `generated_tokens / decode time`.
    pub tokens_per_s: f64,
    /// Full mask computations (constrained methods).
    pub masks_computed: usize,
    /// Time spent computing them, in microseconds.
    pub mask_us_total: f64,
    /// Steps where the model's own top choice (raw argmax) was not allowed.
    pub interventions: usize,
    /// Speculative draft tokens proposed and accepted.
    pub draft_proposed: usize,
    pub draft_accepted: usize,
    /// Tokens appended without consulting the model (`template`).
    pub forced_tokens: usize,
}

impl GenerationStats {
    /// Close the decode phase: `generated` tokens were produced since `decode_start`.
    pub fn finish_decode(&mut self, generated: usize, decode_start: Instant) {
        self.generated_tokens = generated;
        self.decode_ms = decode_start.elapsed().as_secs_f64() * 1000.0;
        self.tokens_per_s = if self.decode_ms > 0.0 {
            generated as f64 / (self.decode_ms / 1000.0)
        } else {
            0.0
        };
    }
}

/// The outcome of [`generate`].
#[derive(Clone, Debug)]
pub struct GenerationResult {
    /// Generated tokens (an end-of-generation token is not included).
    pub tokens: Vec<TokenId>,
    /// Their bytes, concatenated (may end in a partial UTF-8 sequence).
    pub bytes: Vec<u8>,
    /// Per-token log-probabilities (empty unless the request asked for them).
    pub logprobs: Vec<f32>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
}

impl GenerationResult {
    /// The text, invalid UTF-8 replaced by U+FFFD.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Generate from `request.prompt`, calling `on_token(id, bytes)` for each generated token
/// as soon as it is chosen. An error from the callback stops generation and is returned.
pub fn generate(
    session: &mut Session<'_>,
    request: &GenerationRequest,
    on_token: &mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<GenerationResult> {
    if request.prompt.is_empty() {
        anyhow::bail!("the prompt is empty: there is nothing to condition the model on");
    }
    request
        .sampling
        .validate()
        .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
    let vocab = session.model().vocabulary();
    let mut sampler = Sampler::new(request.sampling.clone());
    let mut stats = GenerationStats {
        prompt_tokens: request.prompt.len(),
        ..Default::default()
    };

    let start = Instant::now();
    session.decode(&request.prompt, LogitsAt::Last)?;
    stats.forward_passes += 1;
    stats.prompt_ms = ms_since(start);

    let decode_start = Instant::now();
    let mut logits_index = request.prompt.len() - 1;
    let mut tokens = Vec::new();
    let mut bytes = Vec::new();
    let mut logprobs = Vec::new();
    let finish_reason = loop {
        if tokens.len() >= request.max_tokens {
            break FinishReason::Length;
        }
        let logits = session.logits(logits_index);
        let token = sampler
            .sample(logits, None)
            .ok_or_else(|| anyhow::anyhow!("the model returned no logits"))?;
        if vocab.is_eog(token) {
            break FinishReason::Eos;
        }
        if request.logprobs {
            logprobs.push(log_softmax_at(logits, token));
        }
        let piece = vocab.bytes(token);
        tokens.push(token);
        bytes.extend_from_slice(piece);
        on_token(token, piece)?;
        if tokens.len() >= request.max_tokens {
            break FinishReason::Length;
        }
        if session.n_past() + 1 > session.n_ctx() {
            crate::log!(1, "context full ({} positions): stopping", session.n_ctx());
            break FinishReason::Length;
        }
        session.decode(&[token], LogitsAt::Last)?;
        stats.forward_passes += 1;
        logits_index = 0;
    };
    stats.finish_decode(tokens.len(), decode_start);
    Ok(GenerationResult {
        tokens,
        bytes,
        logprobs,
        finish_reason,
        stats,
    })
}

/// Turns a stream of byte pieces into text without splitting a UTF-8 character: an
/// incomplete sequence at the end of a piece waits for the next one; invalid bytes become
/// U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append `bytes`; push every complete character to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(s) => {
                    out.push_str(s);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(
                        std::str::from_utf8(&self.pending[start..start + valid])
                            .expect("valid prefix"),
                    );
                    match e.error_len() {
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            start += valid + n;
                        }
                        None => {
                            start += valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
    }

    /// End of stream: flush an incomplete trailing sequence as U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(pieces: &[&[u8]]) -> Vec<String> {
        let mut s = Utf8Stream::new();
        let mut outs = Vec::new();
        for p in pieces {
            let mut out = String::new();
            s.push(p, &mut out);
            outs.push(out);
        }
        let mut out = String::new();
        s.finish(&mut out);
        outs.push(out);
        outs
    }

    #[test]
    fn utf8_stream_holds_back_partial_characters() {
        let cat = "é🐈".as_bytes(); // c3 a9 f0 9f 90 88
        assert_eq!(
            stream(&[&cat[..1], &cat[1..3], &cat[3..5], &cat[5..]]),
            vec!["", "é", "", "🐈", ""]
        );
        assert_eq!(stream(&[b"ab", b"c"]), vec!["ab", "c", ""]);
    }

    #[test]
    fn utf8_stream_replaces_invalid_bytes() {
        assert_eq!(stream(&[b"a\xffb"]), vec!["a\u{FFFD}b", ""]);
        // A sequence cut off at the end of the stream.
        assert_eq!(stream(&[b"x\xf0\x9f"]), vec!["x", "\u{FFFD}"]);
    }

    #[test]
    fn finish_reasons_serialise_as_the_cli_documents() {
        assert_eq!(
            serde_json::to_string(&FinishReason::GrammarEnd).unwrap(),
            "\"grammar_end\""
        );
        assert_eq!(FinishReason::Eos.as_str(), "eos");
    }
}
