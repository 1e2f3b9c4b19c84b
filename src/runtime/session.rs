//! A llama context over one model: the KV cache of one sequence, batched decoding with
//! logits at chosen positions, and rollback of the cache's tail.
//!
//! Positions are contiguous: a decode of `k` tokens occupies positions
//! `n_past .. n_past + k`. Logits cost an output-layer pass each (the large part of a forward
//! pass for big vocabularies), so callers name the batch positions they need: the last one
//! for plain generation, all of them to verify a speculative draft, none while feeding forced
//! tokens that are followed by more.

use super::{Model, RuntimeError};
use crate::vocab::TokenId;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;

/// Context parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// Context size in tokens (prompt + generated).
    pub n_ctx: u32,
    /// CPU threads for single-token and batch decoding; `None` = physical cores.
    pub threads: Option<u32>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            n_ctx: 4096,
            threads: None,
        }
    }
}

/// The number of physical CPU cores (hyper-threads share one core's arithmetic units, so
/// llama.cpp is fastest with one thread per core). Falls back to the logical count.
pub fn physical_cores() -> u32 {
    let logical = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);
    let Ok(cpuinfo) = std::fs::read_to_string("/proc/cpuinfo") else {
        return logical;
    };
    let mut cores = std::collections::HashSet::new();
    let mut physical = "";
    for line in cpuinfo.lines() {
        let (key, value) = match line.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => continue,
        };
        match key {
            "physical id" => physical = value,
            "core id" => {
                cores.insert((physical.to_string(), value.to_string()));
            }
            _ => {}
        }
    }
    // A container may see fewer CPUs than the host has cores.
    if cores.is_empty() {
        logical
    } else {
        (cores.len() as u32).min(logical)
    }
}

/// Which indices of a batch of `len` tokens get logits; an index outside the batch is an
/// error. Shared by [`Session`] and [`super::SharedSession`].
pub(super) fn wanted(at: LogitsAt<'_>, len: usize) -> Result<Vec<bool>, RuntimeError> {
    let mut v = vec![false; len];
    match at {
        LogitsAt::All => v.iter_mut().for_each(|b| *b = true),
        LogitsAt::Last => {
            if let Some(b) = v.last_mut() {
                *b = true
            }
        }
        LogitsAt::None => {}
        LogitsAt::Positions(ps) => {
            for &p in ps {
                *v.get_mut(p).ok_or(RuntimeError::LogitsPosition {
                    position: p,
                    batch_len: len,
                })? = true;
            }
        }
    }
    Ok(v)
}

/// Keep the first `n` of sequence `seq`'s positions (`tokens`) in `ctx`'s KV cache and remove
/// the rest; `has_logits` (that sequence's readable logits) is cleared. Checks that llama.cpp
/// really removed them. Shared by [`Session`] and a [`super::SharedSession`] slot.
pub(super) fn truncate_seq(
    ctx: &mut LlamaContext<'_>,
    seq: i32,
    tokens: &mut Vec<TokenId>,
    has_logits: &mut Vec<bool>,
    n: usize,
) -> Result<(), RuntimeError> {
    let n_past = tokens.len();
    if n > n_past {
        return Err(RuntimeError::Truncate(format!(
            "cannot keep {n} positions: only {n_past} are in the cache"
        )));
    }
    has_logits.clear();
    if n == n_past {
        return Ok(());
    }
    let removed = ctx
        .clear_kv_cache_seq(Some(seq as u32), Some(n as u32), None)
        .map_err(|e| RuntimeError::Truncate(e.to_string()))?;
    let pos_max = ctx.kv_cache_seq_pos_max(seq);
    if !removed || pos_max != n as i32 - 1 {
        return Err(RuntimeError::Truncate(format!(
            "removing positions {n}.. of sequence {seq} left it ending at position {pos_max} (removed: {removed})"
        )));
    }
    tokens.truncate(n);
    Ok(())
}

/// Create a llama context over `model`, one at a time: llama.cpp may write to the model while
/// creating a context (see llama-cpp-2's `new_context`).
pub(super) fn create_context<'m>(
    model: &'m Model,
    params: LlamaContextParams,
    n_ctx: u32,
) -> Result<LlamaContext<'m>, RuntimeError> {
    // A KV cache larger than the memory the system has left would be refused by llama.cpp
    // with no reason given — or, worse, overcommitted and end in the kernel killing us: say
    // so before trying. (Only for a model on the CPU: an offloaded KV cache lives on the GPU.)
    let kv = kv_cache_bytes(model, n_ctx);
    if model.offload().layers == 0
        && let Some(available) = memory_available()
        && kv > available
    {
        return Err(RuntimeError::ContextFailed(format!(
            "a context of {n_ctx} positions needs about {:.2} GiB for its KV cache, but only {:.2} GiB of memory is available: lower -c/--ctx-size",
            gib(kv),
            gib(available)
        )));
    }
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    model
        .llama()
        .new_context(super::backend()?, params)
        .map_err(|e| {
            // llama.cpp only answers "null": say what the likely cause costs.
            RuntimeError::ContextFailed(format!(
                "llama.cpp refused a context of {n_ctx} positions ({e}); its KV cache alone needs about {:.2} GiB — lower -c/--ctx-size (or free memory), run with -vv to see llama.cpp's log",
                gib(kv)
            ))
        })
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 30) as f64
}

/// The memory the system can still give (Linux `MemAvailable`), if known.
fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// About how many bytes a KV cache of `n_ctx` positions takes for `model` (16-bit keys and
/// values, grouped-query heads counted).
fn kv_cache_bytes(model: &Model, n_ctx: u32) -> u64 {
    let m = model.llama();
    let (layers, embd) = (m.n_layer() as u64, m.n_embd().max(0) as u64);
    let (heads, kv_heads) = (m.n_head().max(1) as u64, m.n_head_kv() as u64);
    let kv_embd = embd * kv_heads.max(1) / heads;
    n_ctx as u64 * layers * kv_embd * 2 * 2
}

/// What the generation loop needs from the context of the one sequence it runs: its
/// positions, the logits of its latest decode (by index within what it decoded), and
/// rollback of its tail. A [`Session`] is one; so is one slot of a
/// [`super::SharedSession`], where several sequences share each forward pass.
pub trait SequenceContext {
    /// Positions this sequence holds in the KV cache.
    fn n_past(&self) -> usize;
    /// Positions available to this sequence.
    fn n_ctx(&self) -> usize;
    /// The logits at index `i` of this sequence's latest decode, if they were requested
    /// (and no truncate ran since).
    fn try_logits(&self, i: usize) -> Option<&[f32]>;
    /// Keep the first `n` positions of this sequence and remove the rest.
    fn truncate(&mut self, n: usize) -> Result<(), RuntimeError>;

    /// The logits at index `i` of the latest decode.
    ///
    /// # Panics
    /// When the latest decode did not ask for logits at `i` (a bug in the caller).
    fn logits(&self, i: usize) -> &[f32] {
        match self.try_logits(i) {
            Some(l) => l,
            None => panic!(
                "no logits at batch index {i}: the latest decode did not request them (or truncate ran since)"
            ),
        }
    }
}

impl SequenceContext for Session<'_> {
    fn n_past(&self) -> usize {
        Session::n_past(self)
    }
    fn n_ctx(&self) -> usize {
        Session::n_ctx(self)
    }
    fn try_logits(&self, i: usize) -> Option<&[f32]> {
        Session::try_logits(self, i)
    }
    fn truncate(&mut self, n: usize) -> Result<(), RuntimeError> {
        Session::truncate(self, n)
    }
}

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitsAt<'a> {
    /// Every position (verifying a speculative draft, scoring a text).
    All,
    /// Only the last position (plain generation).
    Last,
    /// No position (feeding tokens whose successors follow in a later batch).
    None,
    /// These batch indices (0-based within the batch; any order, duplicates ignored).
    Positions(&'a [usize]),
}

/// One context over a [`Model`]: a single sequence in the KV cache.
///
/// The sequence has an id ([`Session::seq`], 0 today) that every KV-cache call passes to
/// llama.cpp: the seam where several sequences of one context (server slots) will differ.
pub struct Session<'m> {
    model: &'m Model,
    /// llama.cpp's sequence id of this session's tokens.
    seq: i32,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    n_ctx: usize,
    n_vocab: usize,
    /// Tokens in the KV cache, in position order (`tokens.len() == n_past`).
    tokens: Vec<TokenId>,
    /// Which indices of the latest batch have logits (cleared by `truncate`).
    has_logits: Vec<bool>,
    threads: u32,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("n_ctx", &self.n_ctx)
            .field("n_past", &self.tokens.len())
            .finish()
    }
}

impl<'m> Session<'m> {
    pub(super) fn new(model: &'m Model, options: SessionOptions) -> Result<Self, RuntimeError> {
        if options.n_ctx == 0 {
            return Err(RuntimeError::ContextFailed(
                "context size must be at least 1".into(),
            ));
        }
        let threads = options.threads.unwrap_or_else(physical_cores).max(1);
        let n_ctx = NonZeroU32::new(options.n_ctx).expect("checked above");
        // n_batch = n_ctx: any decode that fits in the context fits in one batch, so the logits
        // of every requested position stay readable (llama.cpp aborts on a batch > n_batch).
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(options.n_ctx)
            .with_n_ubatch(options.n_ctx.min(512))
            .with_n_threads(threads as i32)
            .with_n_threads_batch(threads as i32);
        let ctx = create_context(model, params, options.n_ctx)?;
        // llama.cpp may round the context size; a batch may never exceed n_batch.
        let n_ctx = ctx.n_ctx().min(ctx.n_batch()) as usize;
        Ok(Session {
            model,
            seq: 0,
            ctx,
            batch: LlamaBatch::new(n_ctx, 1),
            n_ctx,
            n_vocab: model.n_vocab(),
            tokens: Vec::with_capacity(n_ctx),
            has_logits: Vec::new(),
            threads,
        })
    }

    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// llama.cpp's sequence id of this session's tokens.
    pub fn seq(&self) -> i32 {
        self.seq
    }

    /// Positions in the KV cache.
    pub fn n_past(&self) -> usize {
        self.tokens.len()
    }

    /// Context size.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Threads used for decoding.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// The tokens in the KV cache, in order.
    pub fn tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// Append `tokens` at positions `n_past..` and run one forward pass, computing logits
    /// at the batch positions `logits_at` names. Fails (changing nothing) on an empty batch,
    /// a token outside the vocabulary, a position outside the batch, or context overflow.
    pub fn decode(
        &mut self,
        tokens: &[TokenId],
        logits_at: LogitsAt<'_>,
    ) -> Result<(), RuntimeError> {
        if tokens.is_empty() {
            return Err(RuntimeError::EmptyBatch);
        }
        let n_past = self.tokens.len();
        if n_past + tokens.len() > self.n_ctx {
            return Err(RuntimeError::ContextOverflow {
                n_past,
                n_tokens: tokens.len(),
                n_ctx: self.n_ctx,
            });
        }
        if let Some(t) = tokens.iter().find(|t| t.index() >= self.n_vocab) {
            return Err(RuntimeError::TokenOutOfRange {
                token: t.0,
                n_vocab: self.n_vocab,
            });
        }
        self.has_logits = wanted(logits_at, tokens.len())?;
        self.batch.clear();
        for (i, (&t, &logits)) in tokens.iter().zip(&self.has_logits).enumerate() {
            self.batch
                .add(
                    LlamaToken(t.0 as i32),
                    (n_past + i) as i32,
                    &[self.seq],
                    logits,
                )
                .map_err(|e| RuntimeError::Decode(e.to_string()))?;
        }
        if let Err(e) = self.ctx.decode(&mut self.batch) {
            self.has_logits.clear();
            // A failed decode may leave part of the batch in the cache: remove it so that
            // n_past stays the truth.
            let _ = self
                .ctx
                .clear_kv_cache_seq(Some(self.seq as u32), Some(n_past as u32), None);
            return Err(RuntimeError::Decode(e.to_string()));
        }
        self.tokens.extend_from_slice(tokens);
        Ok(())
    }

    /// Whether the latest decode computed logits at batch index `i` (and no truncate since).
    pub fn has_logits(&self, i: usize) -> bool {
        self.has_logits.get(i).copied().unwrap_or(false)
    }

    /// The logits (one per vocabulary entry) at batch index `i` of the latest decode, if
    /// they were requested.
    pub fn try_logits(&self, i: usize) -> Option<&[f32]> {
        if self.has_logits(i) {
            Some(self.ctx.get_logits_ith(i as i32))
        } else {
            None
        }
    }

    /// The logits at batch index `i` of the latest decode.
    ///
    /// # Panics
    /// When the latest decode did not ask for logits at `i` (a bug in the caller, not an
    /// input error); use [`Session::try_logits`] to check.
    pub fn logits(&self, i: usize) -> &[f32] {
        match self.try_logits(i) {
            Some(l) => l,
            None => panic!(
                "no logits at batch index {i}: the latest decode did not request them (or truncate ran since)"
            ),
        }
    }

    /// Keep the first `n` positions of the KV cache and remove the rest. Logits of the
    /// latest decode become unreadable.
    pub fn truncate(&mut self, n: usize) -> Result<(), RuntimeError> {
        truncate_seq(
            &mut self.ctx,
            self.seq,
            &mut self.tokens,
            &mut self.has_logits,
            n,
        )
    }

    /// Empty the KV cache.
    pub fn clear(&mut self) {
        self.ctx.clear_kv_cache();
        self.tokens.clear();
        self.has_logits.clear();
    }
}
