//! Generation: the one loop that feeds tokens to the model and samples, for every method,
//! the REPL and the evaluation harness.
//!
//! # The loop ([`sequence::run`])
//! A [`Sequence`] holds everything one generation owns — its [`ChoiceRule`] (a sampler, and
//! the constraint with its draft counts and draft policy, llama.cpp's grammar sampler, or a
//! text to spell), the prompt, the output so far, the statistics and the stop-string matcher
//! — apart from the [`Session`] (the model's context and KV cache), which the loop borrows.
//! The loop evaluates the prompt in one batch (logits at its last position only, or at every
//! position of forced text), then repeats: choose a token from the latest logits with the
//! rule, stop on an end-of-generation token (`eos`), commit the token to the rule, report it,
//! stop if a stop condition holds, and run the next forward pass on a batch
//! `[token, forced…, draft…]`:
//! - **forced** (`template` only, [`EngineDecodeOptions::template`]): the text every
//!   continuation starts with, tokenized and appended without consulting the model;
//! - **drafts** (`--draft S`, DOMINO §3.6): tokens proposed by the count model and the
//!   grammar (`constrained::propose_draft`), cut by the draft policy, verified in order
//!   against the logits of one batched pass ([`constrained`] explains why this is exact).
//!
//! It never decodes a token it will not use: stopping on length after `n` tokens costs `n`
//! forward passes (the prompt's and `n - 1` tokens'), and `grammar_end` is detected before
//! the next pass. Choice rules: unconstrained sampling, the DOMINO engine (full or
//! opportunistic masking, [`opportunistic`]), llama.cpp's grammar ("sample, check, resample
//! on rejection", [`crate::runtime::LlamaGrammar`]), and Algorithm 3's "spell this text"
//! (allowed: non-special tokens whose bytes are a prefix of the rest; ties → lower id).
//! [`methods::Decoder`] builds the rule of each `--method`.
//!
//! # Observer and control
//! Every output token is reported, as it is committed, to an [`Observer`] with a
//! [`TokenEvent`]: its id and bytes, its log-probability under the unmasked model (when the
//! request asks for them and the logits exist: a forced token's comes with the result, after
//! the pass that computes it), the unmasked argmax, whether the constraint intervened (the
//! model's own favourite was not allowed) and where the token came from ([`TokenSource`]).
//! An error from the observer stops generation and is returned. The [`Control`] is the cancel
//! flag (Ctrl-C; a closed connection), checked before every step and after every token.
//!
//! # Stopping ([`FinishReason`])
//! `eos` (an end-of-generation token, not output), `length` (`max_tokens`, or a full
//! context), `grammar_end` (the rule admits nothing more), `stop` (the output contains a stop
//! string; the tokens that spelled it are kept), `cancelled`. Before a step they are checked
//! in the order cancelled, stop, length, grammar_end; after a token in the order stop,
//! length, grammar_end, cancelled.
//!
//! # Sequences and sessions
//! A sequence never names the context it runs in: the session is passed to [`sequence::run`],
//! and the session carries llama.cpp's sequence id ([`Session::seq`]). Several sequences of
//! one context (a server's slots) are several `Sequence` values over sessions that differ in
//! that id; nothing here assumes one process-wide sequence.
//!
//! # Invariants
//! - Every committed token is allowed by the rule (the constraint, llama.cpp's grammar, the
//!   text to spell); an end-of-generation token is never committed.
//! - Drafts never change the output: a draft token is output only when the rule, choosing at
//!   its position exactly as the non-speculative loop would, chooses it; draft counts learn
//!   only from output tokens.
//! - `tokens`, `bytes`, `logprobs` (when asked for), `intervened` and observer calls
//!   correspond one to one, in order.
//! - KV cache: the session ends up holding what it held before, the prompt, and every output
//!   token that a later step conditioned on — never a rejected draft; the last output token is
//!   decoded only if another step follows.

pub mod constrained;
pub mod draft_model;
pub mod draft_policy;
pub mod methods;
pub mod opportunistic;
pub mod regions;
pub mod sampler;
pub mod sequence;
pub mod tools;

pub use constrained::{AsDynConstraint, EngineDecodeOptions};
pub use sampler::{Sampler, SamplingConfig, log_softmax_at, top_log_softmax};
pub use sequence::{ChoiceRule, Held, Sequence, SequenceRun};

use crate::runtime::Session;
use crate::vocab::TokenId;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The output contains a stop string.
    Stop,
    /// The [`Control`]'s cancel flag was raised (Ctrl-C).
    Cancelled,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Eos => "eos",
            FinishReason::Length => "length",
            FinishReason::GrammarEnd => "grammar_end",
            FinishReason::Stop => "stop",
            FinishReason::Cancelled => "cancelled",
        }
    }
}

/// Counters and timings of one generation.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    /// Prompt tokens already in the KV cache from an earlier generation (not evaluated
    /// again; the REPL's turns).
    pub reused_prompt_tokens: usize,
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
    /// Token healing: prompt tokens backed off (0 when healing did not act) and their text,
    /// which the output re-wrote (and which is not repeated in the output text).
    pub healed_tokens: usize,
    pub healed_text: String,
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
    /// Per token, the unmasked model's most likely tokens there with their log-probabilities
    /// (empty unless [`Sequence::with_top_logprobs`] asked for them).
    pub top_logprobs: Vec<Vec<(TokenId, f32)>>,
    /// Per token: the constraint blocked the model's favourite (the unmasked argmax).
    pub intervened: Vec<bool>,
    pub finish_reason: FinishReason,
    pub stats: GenerationStats,
}

impl GenerationResult {
    /// The text, invalid UTF-8 replaced by U+FFFD.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Where an output token came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenSource {
    /// Chosen from the model's logits by the choice rule.
    Sampled,
    /// A speculative draft the rule confirmed at its position.
    Draft,
    /// Forced text appended without consulting the model (`template`).
    Forced,
}

/// One output token, as reported to the [`Observer`].
#[derive(Clone, Copy, Debug)]
pub struct TokenEvent<'a> {
    pub token: TokenId,
    pub bytes: &'a [u8],
    /// Log-probability under the unmasked model: `None` when the request did not ask for
    /// them, or for a forced token (its logits come later; the result has it).
    pub logprob: Option<f32>,
    /// The unmasked model's favourite at this position (`None` for a forced token).
    pub raw_argmax: Option<TokenId>,
    /// The constraint blocked the model's favourite here.
    pub intervened: bool,
    pub source: TokenSource,
}

/// Told about every output token as it is committed; an error stops generation.
pub trait Observer {
    fn on_token(&mut self, event: &TokenEvent<'_>) -> anyhow::Result<()>;
}

impl<F: FnMut(&TokenEvent<'_>) -> anyhow::Result<()>> Observer for F {
    fn on_token(&mut self, event: &TokenEvent<'_>) -> anyhow::Result<()> {
        self(event)
    }
}

/// What stops a generation besides the token limit and the grammar's end: the cancel flag
/// (Ctrl-C, a closed connection), checked before every step and after every token, and stop
/// strings, checked after every token.
#[derive(Clone, Debug, Default)]
pub struct Control<'a> {
    cancel: Option<&'a AtomicBool>,
    stop: Vec<String>,
}

impl<'a> Control<'a> {
    /// Nothing but the token limit and the grammar's end.
    pub fn none() -> Control<'a> {
        Control::default()
    }

    /// Stop (`cancelled`) once `flag` is raised.
    pub fn cancelled_by(flag: &'a AtomicBool) -> Control<'a> {
        Control {
            cancel: Some(flag),
            stop: Vec::new(),
        }
    }

    /// Also stop (`stop`) once the output contains one of `stop` (the tokens that spelled it
    /// are kept).
    pub fn with_stop_strings(mut self, stop: &[String]) -> Control<'a> {
        self.stop = stop.to_vec();
        self
    }

    pub fn stop_strings(&self) -> &[String] {
        &self.stop
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Unconstrained generation from `request.prompt`, calling `on_token(id, bytes)` for each
/// generated token as soon as it is chosen. An error from the callback stops generation and
/// is returned.
pub fn generate(
    session: &mut Session<'_>,
    request: &GenerationRequest,
    on_token: &mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<GenerationResult> {
    let rule = ChoiceRule::Free(Sampler::new(request.sampling.clone()));
    let seq = Sequence::new(session.model().vocabulary(), request, rule)?;
    sequence::run(session, seq, &Control::none(), &mut |e: &TokenEvent<'_>| {
        on_token(e.token, e.bytes)
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
        for reason in [
            FinishReason::Eos,
            FinishReason::Length,
            FinishReason::GrammarEnd,
            FinishReason::Stop,
            FinishReason::Cancelled,
        ] {
            assert_eq!(
                serde_json::to_string(&reason).unwrap(),
                format!("\"{}\"", reason.as_str())
            );
        }
    }
}
