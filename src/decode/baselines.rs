//! The `llama-grammar` baseline: llama.cpp's own GBNF sampler, used the way llama.cpp's
//! command-line tools use it.
//!
//! # How it runs
//! Each step samples from the raw logits with the same [`Sampler`] as every other method
//! (greedy: the argmax), asks the grammar sampler about *that one token* (a one-element
//! candidate array through `llama_sampler_apply`), and only when it is rejected applies the
//! grammar to the whole vocabulary and samples again from what is left — llama.cpp's
//! `common_sampler_sample` "sample, then check, resample on rejection". The chosen token is
//! accepted with `try_accept`, which turns llama.cpp's grammar exceptions into errors
//! instead of aborting the process; a token is only accepted after the grammar allowed it,
//! and an end-of-generation token is never accepted (generation stops there).
//!
//! llama.cpp's grammar has no "nothing more can follow" query, so this method stops at the
//! grammar's forced end-of-generation token (one forward pass later than DOMINO's
//! `grammar_end`), or at `max_tokens`.

use super::{
    FinishReason, GenerationRequest, GenerationResult, GenerationStats, Sampler, log_softmax_at,
};
use crate::runtime::{LogitsAt, Session};
use crate::vocab::{TokenId, TokenSet};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use std::time::Instant;

/// Build llama.cpp's grammar sampler, turning its refusal into a grammar error (exit 2).
pub fn llama_grammar_sampler(
    session: &Session<'_>,
    gbnf: &str,
    root: &str,
) -> anyhow::Result<LlamaSampler> {
    LlamaSampler::grammar(session.model().llama(), gbnf, root).map_err(|e| {
        anyhow::Error::new(crate::grammar::GrammarError::whole(format!(
            "llama.cpp could not parse the grammar (root rule `{root}`): {e}"
        )))
    })
}

/// Generate with llama.cpp's grammar sampler (see the module doc).
pub fn generate_llama_grammar(
    session: &mut Session<'_>,
    request: &GenerationRequest,
    gbnf: &str,
    root: &str,
    on_token: &mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<GenerationResult> {
    if request.prompt.is_empty() {
        anyhow::bail!("the prompt is empty: there is nothing to condition the model on");
    }
    request
        .sampling
        .validate()
        .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
    let mut grammar = llama_grammar_sampler(session, gbnf, root)?;
    let vocab = session.model().vocabulary();
    let mut sampler = Sampler::new(request.sampling.clone());
    let mut mask = TokenSet::new(vocab.len());
    let mut candidates: Vec<LlamaTokenData> = Vec::with_capacity(vocab.len());
    let mut stats = GenerationStats {
        prompt_tokens: request.prompt.len(),
        ..Default::default()
    };

    let start = Instant::now();
    session.decode(&request.prompt, LogitsAt::Last)?;
    stats.forward_passes += 1;
    stats.prompt_ms = start.elapsed().as_secs_f64() * 1000.0;

    let decode_start = Instant::now();
    let mut logits_index = request.prompt.len() - 1;
    let (mut tokens, mut bytes, mut logprobs) = (Vec::new(), Vec::new(), Vec::new());
    let finish_reason = loop {
        if tokens.len() >= request.max_tokens {
            break FinishReason::Length;
        }
        let logits = session.logits(logits_index);
        let raw = sampler
            .sample(logits, None)
            .ok_or_else(|| anyhow::anyhow!("the model returned no logits"))?;
        // Check the one sampled token.
        let mut one = LlamaTokenDataArray::new(
            vec![LlamaTokenData::new(
                LlamaToken(raw.0 as i32),
                logits[raw.index()],
                0.0,
            )],
            false,
        );
        grammar.apply(&mut one);
        let token = if one.data[0].logit() != f32::NEG_INFINITY {
            raw
        } else {
            // Rejected: the full grammar pass over the vocabulary, then resample.
            stats.interventions += 1;
            let t0 = Instant::now();
            candidates.clear();
            candidates.extend(
                logits
                    .iter()
                    .enumerate()
                    .map(|(i, &l)| LlamaTokenData::new(LlamaToken(i as i32), l, 0.0)),
            );
            let mut all = LlamaTokenDataArray::new(std::mem::take(&mut candidates), false);
            grammar.apply(&mut all);
            mask.clear();
            for d in &all.data {
                if d.logit() != f32::NEG_INFINITY {
                    mask.insert(TokenId(d.id().0 as u32));
                }
            }
            candidates = all.data;
            stats.masks_computed += 1;
            stats.mask_us_total += t0.elapsed().as_secs_f64() * 1e6;
            sampler.sample(logits, Some(&mask)).ok_or_else(|| {
                anyhow::anyhow!("llama.cpp's grammar sampler allows no token here")
            })?
        };
        if vocab.is_eog(token) {
            break FinishReason::Eos;
        }
        if request.logprobs {
            logprobs.push(log_softmax_at(logits, token));
        }
        grammar
            .try_accept(LlamaToken(token.0 as i32))
            .map_err(|e| {
                anyhow::anyhow!(
                    "llama.cpp's grammar sampler failed to accept token {}: {e:?}",
                    token.0
                )
            })?;
        let piece = vocab.bytes(token);
        tokens.push(token);
        bytes.extend_from_slice(piece);
        on_token(token, piece)?;
        if tokens.len() >= request.max_tokens {
            break FinishReason::Length;
        }
        if session.n_past() + 1 > session.n_ctx() {
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
