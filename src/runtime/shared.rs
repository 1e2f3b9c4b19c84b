//! One llama context shared by several sequences (server slots): one KV cache, one sequence
//! id per slot, and one forward pass per step over the tokens of every slot that has some
//! (continuous batching).
//!
//! llama.cpp splits the context's positions evenly between sequences (`n_ctx / n_seq` each,
//! as llama-server does with `--parallel`). A decode takes one *part* per sequence — its
//! tokens, at that sequence's next positions, and which of them need logits — and lays the
//! parts out one after another in a single batch; [`SharedSession::slot`] then reads a
//! sequence's logits by the index within its own part, so a sequence never sees where the
//! others were placed. Rolling back one sequence's tail leaves the others (and the latest
//! logits of the others) untouched.

use super::session::{SequenceContext, physical_cores, truncate_seq, wanted};
use super::{LogitsAt, Model, RuntimeError, SessionOptions};
use crate::vocab::TokenId;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

/// The state of one sequence of a [`SharedSession`].
#[derive(Debug, Default)]
struct SeqState {
    /// Tokens in the KV cache, in position order.
    tokens: Vec<TokenId>,
    /// Offset of this sequence's part in the latest batch.
    offset: usize,
    /// Which indices of its part have logits (cleared by a truncate of this sequence).
    has_logits: Vec<bool>,
}

/// One part of a shared decode: `tokens` appended to sequence `seq`, logits at `logits`.
#[derive(Clone, Copy, Debug)]
pub struct BatchPart<'a> {
    pub seq: usize,
    pub tokens: &'a [TokenId],
    pub logits: LogitsAt<'a>,
}

/// A context whose KV cache holds `n_seq` independent sequences (see the module doc).
pub struct SharedSession<'m> {
    model: &'m Model,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    /// Positions available to each sequence.
    n_ctx_seq: usize,
    /// The most tokens one batch may hold (all parts together).
    n_batch: usize,
    n_vocab: usize,
    seqs: Vec<SeqState>,
}

impl std::fmt::Debug for SharedSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSession")
            .field("n_seq", &self.seqs.len())
            .field("n_ctx_seq", &self.n_ctx_seq)
            .finish()
    }
}

impl<'m> SharedSession<'m> {
    pub(super) fn new(
        model: &'m Model,
        options: SessionOptions,
        n_seq: usize,
    ) -> Result<Self, RuntimeError> {
        let n_seq = n_seq.max(1);
        if (options.n_ctx as usize) < n_seq {
            return Err(RuntimeError::ContextFailed(format!(
                "a context of {} positions cannot hold {n_seq} sequences (at least one position each)",
                options.n_ctx
            )));
        }
        let threads = options.threads.unwrap_or_else(physical_cores).max(1);
        let n_ctx = NonZeroU32::new(options.n_ctx).expect("checked above");
        // n_batch = n_ctx: every part of every sequence fits in one batch.
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(options.n_ctx)
            .with_n_ubatch(options.n_ctx.min(512))
            .with_n_seq_max(n_seq as u32)
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32);
        let ctx = super::session::create_context(model, params, options.n_ctx)?;
        let n_batch = (ctx.n_batch() as usize).min(ctx.n_ctx() as usize);
        let n_ctx_seq = ctx.n_ctx() as usize / n_seq;
        Ok(SharedSession {
            model,
            ctx,
            batch: LlamaBatch::new(n_batch, 1),
            n_ctx_seq,
            n_batch,
            n_vocab: model.n_vocab(),
            seqs: (0..n_seq).map(|_| SeqState::default()).collect(),
        })
    }

    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Number of sequences.
    pub fn n_seq(&self) -> usize {
        self.seqs.len()
    }

    /// Positions available to each sequence.
    pub fn n_ctx_seq(&self) -> usize {
        self.n_ctx_seq
    }

    /// The most tokens one decode may carry, all parts together.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Positions sequence `seq` holds.
    pub fn n_past(&self, seq: usize) -> usize {
        self.seqs[seq].tokens.len()
    }

    /// One forward pass over every part (at most one part per sequence). Fails, changing
    /// nothing, on an empty part, a repeated or unknown sequence, a token outside the
    /// vocabulary, a logits index outside its part, a sequence's context overflow, or more
    /// tokens than one batch holds.
    pub fn decode(&mut self, parts: &[BatchPart<'_>]) -> Result<(), RuntimeError> {
        let total: usize = parts.iter().map(|p| p.tokens.len()).sum();
        if parts.is_empty() || parts.iter().any(|p| p.tokens.is_empty()) {
            return Err(RuntimeError::EmptyBatch);
        }
        if total > self.n_batch {
            return Err(RuntimeError::Decode(format!(
                "{total} tokens in one batch, more than its {} positions",
                self.n_batch
            )));
        }
        let mut seen = vec![false; self.seqs.len()];
        for p in parts {
            if p.seq >= self.seqs.len() || std::mem::replace(&mut seen[p.seq], true) {
                return Err(RuntimeError::Decode(format!(
                    "sequence {} is unknown or appears twice in one batch",
                    p.seq
                )));
            }
            let n_past = self.seqs[p.seq].tokens.len();
            if n_past + p.tokens.len() > self.n_ctx_seq {
                return Err(RuntimeError::ContextOverflow {
                    n_past,
                    n_tokens: p.tokens.len(),
                    n_ctx: self.n_ctx_seq,
                });
            }
            if let Some(t) = p.tokens.iter().find(|t| t.index() >= self.n_vocab) {
                return Err(RuntimeError::TokenOutOfRange {
                    token: t.0,
                    n_vocab: self.n_vocab,
                });
            }
            wanted(p.logits, p.tokens.len())?;
        }
        for s in &mut self.seqs {
            s.has_logits.clear();
        }
        self.batch.clear();
        let mut offset = 0;
        for p in parts {
            let state = &mut self.seqs[p.seq];
            state.offset = offset;
            state.has_logits = wanted(p.logits, p.tokens.len())?;
            let n_past = state.tokens.len();
            for (i, (&t, &logits)) in p.tokens.iter().zip(&state.has_logits).enumerate() {
                self.batch
                    .add(
                        LlamaToken(t.0 as i32),
                        (n_past + i) as i32,
                        &[p.seq as i32],
                        logits,
                    )
                    .map_err(|e| RuntimeError::Decode(e.to_string()))?;
            }
            offset += p.tokens.len();
        }
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            // A failed decode may leave part of the batch in the cache: remove it so that
            // every sequence's n_past stays the truth.
            for p in parts {
                let state = &mut self.seqs[p.seq];
                state.has_logits.clear();
                let _ = self.ctx.clear_kv_cache_seq(
                    Some(p.seq as u32),
                    Some(state.tokens.len() as u32),
                    None,
                );
            }
            return Err(RuntimeError::Decode(e.to_string()));
        }
        for p in parts {
            self.seqs[p.seq].tokens.extend_from_slice(p.tokens);
        }
        Ok(())
    }

    /// Sequence `seq` seen as a context of its own (its logits, its positions, its rollback).
    pub fn slot(&mut self, seq: usize) -> Slot<'_, 'm> {
        Slot { shared: self, seq }
    }

    /// Empty sequence `seq`'s part of the KV cache.
    pub fn clear_seq(&mut self, seq: usize) {
        let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
        let state = &mut self.seqs[seq];
        state.tokens.clear();
        state.has_logits.clear();
    }
}

/// One sequence of a [`SharedSession`] (see [`SharedSession::slot`]).
pub struct Slot<'s, 'm> {
    shared: &'s mut SharedSession<'m>,
    seq: usize,
}

impl SequenceContext for Slot<'_, '_> {
    fn n_past(&self) -> usize {
        self.shared.seqs[self.seq].tokens.len()
    }

    fn n_ctx(&self) -> usize {
        self.shared.n_ctx_seq
    }

    fn try_logits(&self, i: usize) -> Option<&[f32]> {
        let state = &self.shared.seqs[self.seq];
        if state.has_logits.get(i).copied().unwrap_or(false) {
            Some(self.shared.ctx.get_logits_ith((state.offset + i) as i32))
        } else {
            None
        }
    }

    fn truncate(&mut self, n: usize) -> Result<(), RuntimeError> {
        let shared = &mut *self.shared;
        let state = &mut shared.seqs[self.seq];
        truncate_seq(
            &mut shared.ctx,
            self.seq as i32,
            &mut state.tokens,
            &mut state.has_logits,
            n,
        )
    }
}
