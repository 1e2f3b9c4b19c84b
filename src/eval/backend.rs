//! The real [`EvalBackend`]: every evaluated method through one llama.cpp session.
//!
//! # Overview
//! [`LlamaEvalBackend`] borrows a loaded [`Model`] and owns one [`Session`] that is reused for
//! every sample and method. Each eval method maps to a [`Decoder`] of the decode module
//! (built once per (task, grammar file, method) and cached, so grammars compile once and draft
//! counts keep learning across samples):
//!
//! | eval method | decoder |
//! |---|---|
//! | `none` | `Method::None`, with the request's stop strings (such as `\nQ:`) |
//! | `domino`, `domino-kN` | `Method::Domino`, lookahead k, opportunistic masking |
//! | `domino-sN` / `domino-kN-sN` | the same with count-based speculative drafts of up to N tokens, cut by measured cost |
//! | `domino-sN-threshold` | drafts verified whole (`DraftPolicy::Threshold`, the paper's rule) |
//! | `naive` | `Method::Naive` (k = 0), full masks |
//! | `template` | `Method::Template` (forced text appended without the model) |
//! | `llama-grammar` | llama.cpp's GBNF sampler |
//!
//! # Reasoning and token healing
//! With a request's `reasoning_end` (`domino eval … --reasoning`), every engine method gets
//! [`TagPlan::reasoning`]: free text until the marker, the task schema after it, then the
//! end; the free text stops at the request's stop strings (`\nQ:`) as `none` does.
//! `token_healing` (on unless `--no-token-healing`: the few-shot prompts are raw text
//! ending in `A:`, a token other tokens extend) backs off the prompt's last token(s) for
//! every method but `llama-grammar`, whose sampler cannot start inside a token.
//!
//! # The KV cache between requests
//! The few-shot prefix (`shared_prefix_len` bytes of the prompt) is evaluated once and kept:
//! a request truncates the cache back to the prefix's tokens and evaluates only the rest.
//! The prefix is always decoded as a batch of its own, starting from an empty cache, so the
//! numbers a sample sees do not depend on which sample came before it — a run resumed after a
//! kill computes exactly what an uninterrupted run computes (batch boundaries change
//! floating-point sums, and greedy outputs with them).
//!
//! # Invariants (the [`EvalBackend`] contract)
//! - `logprobs[i]` is the unmasked log-probability of `tokens[i]` for every method.
//! - `interventions` is the decoder's count of steps whose raw argmax was blocked (0 for `none`).
//! - `prompt_ms` covers the part of the prompt evaluated for this request (not a cached prefix).

use super::method::Method;
use super::metrics::FinishReason;
use super::runner::{EvalBackend, GenerationOutcome, GenerationRequest};
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::{Decoder, DecoderConfig, Method as DecodeMethod};
use crate::decode::regions::TagPlan;
use crate::decode::{
    Control, FinishReason as DecodeFinish, GenerationRequest as DecodeRequest, SamplingConfig,
    TokenEvent, log_softmax_at,
};
use crate::grammar::{CompileOptions, GrammarSource, PropertyOrder};
use crate::runtime::{LogitsAt, Model, Session, SessionOptions};
use crate::vocab::TokenId;
use anyhow::{Context, bail};
use std::collections::HashMap;
use std::path::PathBuf;

/// The decoder configuration an eval method stands for (`None` for `none`, which needs no
/// grammar).
pub fn decoder_config(
    method: Method,
    source: GrammarSource,
) -> anyhow::Result<Option<DecoderConfig>> {
    let base = DecoderConfig {
        source: Some(source),
        // The paper's task grammars fix the member order (GSM8K: reasoning steps before the
        // answer); the committed reports were measured so. `domino generate`'s default is any
        // order, as JSON Schema allows.
        compile: CompileOptions {
            property_order: PropertyOrder::Schema,
            ..CompileOptions::default()
        },
        ..DecoderConfig::default()
    };
    Ok(Some(match method {
        Method::None => return Ok(None),
        Method::Domino {
            lookahead,
            speculative,
            threshold,
        } => DecoderConfig {
            method: DecodeMethod::Domino,
            k: lookahead,
            opportunistic: true,
            draft: speculative.map_or(0, |s| s as usize),
            draft_policy: if threshold {
                DraftPolicy::Threshold
            } else {
                DraftPolicy::Cost
            },
            ..base
        },
        Method::Naive => DecoderConfig {
            method: DecodeMethod::Naive,
            k: Some(0),
            draft: 0,
            ..base
        },
        Method::Template => DecoderConfig {
            method: DecodeMethod::Template,
            k: None,
            draft: 0,
            ..base
        },
        Method::LlamaGrammar => DecoderConfig {
            method: DecodeMethod::LlamaGrammar,
            draft: 0,
            ..base
        },
        Method::Llguidance => {
            bail!(crate::diag::UsageError("method `llguidance` is not available: this build of domino has no llguidance engine".into()))
        }
    }))
}

/// Map the decode loop's finish reason to the harness's record (`results.jsonl` writes
/// `length` as `max_tokens`; a cancelled generation, which the harness never asks for, is
/// recorded as an error).
pub fn finish_reason(reason: DecodeFinish) -> FinishReason {
    match reason {
        DecodeFinish::Eos => FinishReason::Eos,
        DecodeFinish::Length => FinishReason::MaxTokens,
        DecodeFinish::GrammarEnd => FinishReason::GrammarEnd,
        DecodeFinish::Stop => FinishReason::Stop,
        DecodeFinish::Cancelled => FinishReason::Error,
    }
}

/// The shared prefix currently in the KV cache.
struct CachedPrefix {
    text: String,
    tokens: Vec<TokenId>,
}

/// What a cached decoder was built for: task, grammar file, method, reasoning marker,
/// token healing.
type DecoderKey = (String, PathBuf, Method, Option<String>, bool);

fn decoder_key(request: &GenerationRequest<'_>) -> DecoderKey {
    (
        request.task.to_string(),
        request.grammar.to_path_buf(),
        request.method,
        request.reasoning_end.map(str::to_string),
        request.token_healing,
    )
}

/// See the module doc.
pub struct LlamaEvalBackend<'m> {
    model: &'m Model,
    session: Session<'m>,
    decoders: HashMap<DecoderKey, Decoder>,
    prefix: Option<CachedPrefix>,
    /// The current throughput workload's warm-up is over: decoders built from now on start
    /// frozen too (so `--warmup 0` measures methods without learned priors).
    drafts_frozen: bool,
    /// The compile budget of each method's grammar (`--compile-timeout`, `--compile-memory`).
    budget: crate::engine::budget::Budget,
}

impl<'m> LlamaEvalBackend<'m> {
    /// Compile every method's grammar under `budget` instead of the default one.
    pub fn with_budget(mut self, budget: crate::engine::budget::Budget) -> Self {
        self.budget = budget;
        self
    }

    pub fn new(model: &'m Model, options: SessionOptions) -> anyhow::Result<Self> {
        let session = model.session(options)?;
        Ok(LlamaEvalBackend {
            model,
            session,
            decoders: HashMap::new(),
            prefix: None,
            drafts_frozen: false,
            budget: crate::engine::budget::Budget::DEFAULT,
        })
    }

    /// The session's context size in tokens.
    pub fn n_ctx(&self) -> usize {
        self.session.n_ctx()
    }

    fn decoder(&mut self, request: &GenerationRequest<'_>) -> anyhow::Result<Option<&mut Decoder>> {
        let (grammar, method) = (request.grammar, request.method);
        if method == Method::None {
            return Ok(None);
        }
        let key = decoder_key(request);
        if !self.decoders.contains_key(&key) {
            let source = GrammarSource::from_path(grammar)?;
            let mut config = decoder_config(method, source.clone())?.expect("constrained method");
            config.regions = request
                .reasoning_end
                .map(|end| TagPlan::reasoning(end, source));
            config.token_healing = request.token_healing;
            config.compile.budget = self.budget;
            let mut decoder = Decoder::new(&config, self.model).with_context(|| {
                format!("cannot build method {method} for {}", grammar.display())
            })?;
            if self.drafts_frozen {
                decoder.freeze_drafts();
            }
            self.decoders.insert(key.clone(), decoder);
        }
        Ok(self.decoders.get_mut(&key))
    }

    /// Bring the KV cache to the tokens of `prompt[..shared_prefix_len]` and return the
    /// tokens still to evaluate (never empty: at least the prompt's last token).
    fn prepare_prompt(
        &mut self,
        prompt: &str,
        shared_prefix_len: usize,
    ) -> anyhow::Result<Vec<TokenId>> {
        let tokens = self.model.tokenize(prompt, true, false);
        if tokens.is_empty() {
            bail!("the prompt is empty");
        }
        let prefix_text = prompt.get(..shared_prefix_len).unwrap_or("");
        if prefix_text.is_empty() {
            self.session.clear();
            self.prefix = None;
            return Ok(tokens);
        }
        if self.prefix.as_ref().is_none_or(|p| p.text != prefix_text) {
            // The prefix's own tokens, cut where the full prompt's tokenization stops agreeing
            // with them (a merge across the boundary), so they are always a prefix of `tokens`.
            let own = self.model.tokenize(prefix_text, true, false);
            let agree = own.iter().zip(&tokens).take_while(|(a, b)| a == b).count();
            self.session.clear();
            self.prefix = None;
            if agree > 0 {
                self.session.decode(&own[..agree], LogitsAt::None)?;
            }
            self.prefix = Some(CachedPrefix {
                text: prefix_text.to_string(),
                tokens: own[..agree].to_vec(),
            });
        }
        let cached = &self.prefix.as_ref().expect("set above").tokens;
        let keep = if tokens.starts_with(cached) && cached.len() < tokens.len() {
            cached.len()
        } else {
            0
        };
        self.session.truncate(keep.min(self.session.n_past()))?;
        if keep == 0 {
            self.session.clear();
            self.prefix = None;
        }
        Ok(tokens[keep..].to_vec())
    }
}

impl EvalBackend for LlamaEvalBackend<'_> {
    fn model_name(&self) -> String {
        self.model
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.model.name())
    }

    fn model_path(&self) -> Option<std::path::PathBuf> {
        Some(self.model.path().to_path_buf())
    }

    fn run(&mut self, request: &GenerationRequest<'_>) -> anyhow::Result<GenerationOutcome> {
        // Build (or fetch) the decoder first: a grammar error must not disturb the cache.
        self.decoder(request)?;
        let tail = self.prepare_prompt(request.prompt, request.shared_prefix_len)?;
        let prompt_end = self.session.n_past() + tail.len();
        let decode_request = DecodeRequest {
            prompt: tail,
            max_tokens: request.max_tokens,
            sampling: SamplingConfig {
                temperature: request.temperature,
                seed: request.seed,
                ..SamplingConfig::default()
            },
            logprobs: true,
        };
        let mut result = if request.method == Method::None {
            // Free text needs the stop strings (`\nQ:`); a grammar ends the output itself.
            let control = Control::none().with_stop_strings(request.stop);
            let mut decoder = Decoder::new(
                &DecoderConfig {
                    method: DecodeMethod::None,
                    token_healing: request.token_healing,
                    ..DecoderConfig::default()
                },
                self.model,
            )?;
            decoder.run(
                &mut self.session,
                &decode_request,
                &control,
                &mut |_: &TokenEvent<'_>| Ok(()),
            )?
        } else {
            let decoder = self
                .decoders
                .get_mut(&decoder_key(request))
                .expect("built above");
            // A grammar ends the output itself; the free reasoning before the marker needs
            // the stop strings, as `none` does.
            let control = match request.reasoning_end {
                Some(_) => Control::none().with_stop_strings(request.stop),
                None => Control::none(),
            };
            decoder.run(
                &mut self.session,
                &decode_request,
                &control,
                &mut |_: &TokenEvent<'_>| Ok(()),
            )?
        };
        fill_missing_logprobs(
            &mut self.session,
            // Healed prompt tokens were backed off: the output starts that much earlier.
            prompt_end - result.stats.healed_tokens,
            &result.tokens,
            &mut result.logprobs,
        )?;
        Ok(GenerationOutcome {
            text: result.text(),
            tokens: result.tokens.iter().map(|t| t.0).collect(),
            logprobs: result.logprobs,
            interventions: result.stats.interventions as u32,
            prompt_tokens: result.stats.prompt_tokens,
            prompt_ms: result.stats.prompt_ms,
            decode_ms: result.stats.decode_ms,
            finish_reason: Some(finish_reason(result.finish_reason)),
            forward_passes: result.stats.forward_passes,
            draft_proposed: result.stats.draft_proposed,
            draft_accepted: result.stats.draft_accepted,
        })
    }

    /// A new throughput workload: drop the decoders (and their draft counts) of the others.
    fn begin_workload(&mut self, workload: &str) {
        self.decoders.retain(|(task, ..), _| task == workload);
        self.drafts_frozen = false;
    }

    /// Warm-up of the current workload is over: its decoders' draft counts stay as learned.
    fn end_warmup(&mut self) {
        self.drafts_frozen = true;
        for decoder in self.decoders.values_mut() {
            decoder.freeze_drafts();
        }
    }
}

/// The decode loop leaves NaN for the log-probability of tokens whose logits it never
/// computed (`template`'s forced tokens at the very end, when the token budget runs out
/// before the next forward pass). Score them with one extra pass over the output, after the
/// timed generation, so every record has a log-probability per token. `prompt_end` is the
/// cache length after the prompt (the output follows it).
fn fill_missing_logprobs(
    session: &mut Session<'_>,
    prompt_end: usize,
    tokens: &[TokenId],
    logprobs: &mut [f32],
) -> anyhow::Result<()> {
    if !logprobs.iter().any(|l| l.is_nan()) {
        return Ok(());
    }
    if prompt_end == 0 || logprobs.len() != tokens.len() || session.tokens().len() < prompt_end {
        bail!(
            "internal error: cannot rescore the output ({} logprobs for {} tokens)",
            logprobs.len(),
            tokens.len()
        );
    }
    let last_prompt_token = session.tokens()[prompt_end - 1];
    session.truncate(prompt_end - 1)?;
    let mut batch = vec![last_prompt_token];
    batch.extend_from_slice(tokens);
    // Logits at batch index i predict tokens[i].
    let positions: Vec<usize> = (0..tokens.len())
        .filter(|&i| logprobs[i].is_nan())
        .collect();
    session.decode(&batch, LogitsAt::Positions(&positions))?;
    for &i in &positions {
        logprobs[i] = log_softmax_at(session.logits(i), tokens[i]);
    }
    Ok(())
}

/// Log-probabilities of `continuation` after `context` under the model, unmasked: element i
/// is `log p(continuation[i] | context, continuation[..i])`. `context` must not be empty
/// (start it with BOS). Clears the session first; both must fit in its context.
pub fn score_continuation(
    session: &mut Session<'_>,
    context: &[TokenId],
    continuation: &[TokenId],
) -> anyhow::Result<Vec<f32>> {
    if context.is_empty() {
        bail!("scoring needs at least one context token (BOS)");
    }
    session.clear();
    if continuation.is_empty() {
        return Ok(Vec::new());
    }
    let mut all = context.to_vec();
    all.extend_from_slice(continuation);
    // Logits at the last context position and every continuation position but the last.
    let positions: Vec<usize> = (context.len() - 1..all.len() - 1).collect();
    session.decode(&all, LogitsAt::Positions(&positions))?;
    Ok(positions
        .iter()
        .zip(continuation)
        .map(|(&p, &t)| log_softmax_at(session.logits(p), t))
        .collect())
}

/// `exp(-mean(logprobs))`; NaN for an empty slice.
pub fn perplexity(logprobs: &[f32]) -> f64 {
    let total: f64 = logprobs.iter().map(|&l| l as f64).sum();
    (-total / logprobs.len() as f64).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(method: &str) -> anyhow::Result<Option<DecoderConfig>> {
        decoder_config(method.parse().unwrap(), GrammarSource::Json)
    }

    #[test]
    fn eval_methods_map_to_decoder_configurations() {
        assert!(config("none").unwrap().is_none());
        let d = config("domino").unwrap().unwrap();
        assert_eq!(
            (d.method, d.k, d.opportunistic, d.draft),
            (DecodeMethod::Domino, None, true, 0)
        );
        let d = config("domino-k1-s4").unwrap().unwrap();
        assert_eq!(
            (d.method, d.k, d.opportunistic, d.draft),
            (DecodeMethod::Domino, Some(1), true, 4)
        );
        assert_eq!(d.draft_policy, DraftPolicy::Cost);
        let d = config("domino-s10-threshold").unwrap().unwrap();
        assert_eq!((d.draft, d.draft_policy), (10, DraftPolicy::Threshold));
        let d = config("naive").unwrap().unwrap();
        assert_eq!((d.method, d.k, d.draft), (DecodeMethod::Naive, Some(0), 0));
        assert_eq!(
            config("template").unwrap().unwrap().method,
            DecodeMethod::Template
        );
        assert_eq!(
            config("llama-grammar").unwrap().unwrap().method,
            DecodeMethod::LlamaGrammar
        );
        let err = config("llguidance").unwrap_err();
        assert_eq!(crate::diag::exit_code_for(&err), 2, "{err:#}");
    }

    #[test]
    fn finish_reasons_map_to_the_harness_names() {
        assert_eq!(finish_reason(DecodeFinish::Eos), FinishReason::Eos);
        assert_eq!(finish_reason(DecodeFinish::Length), FinishReason::MaxTokens);
        assert_eq!(
            finish_reason(DecodeFinish::GrammarEnd),
            FinishReason::GrammarEnd
        );
        assert_eq!(finish_reason(DecodeFinish::Stop), FinishReason::Stop);
    }

    #[test]
    fn perplexity_is_exp_of_the_mean_negative_logprob() {
        assert!((perplexity(&[-1.0, -3.0]) - 2f64.exp()).abs() < 1e-9);
        assert!(perplexity(&[]).is_nan());
    }
}
