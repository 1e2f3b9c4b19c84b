//! The one generation loop: a [`Sequence`] (everything one generation owns) stepped over a
//! [`Session`] (the model's context), reporting to an [`Observer`] and obeying a
//! [`Control`]. See the module doc of [`crate::decode`] for the design and its invariants.

use super::constrained::{EngineDecodeOptions, propose_draft, valid_utf8_prefix};
use super::draft_model::DraftModel;
use super::draft_policy::{DraftGuess, DraftTuner};
use super::opportunistic::{ChoiceStats, Chooser};
use super::sampler::argmax;
use super::{
    Control, FinishReason, GenerationRequest, GenerationResult, GenerationStats, Observer, Sampler,
    TokenEvent, TokenSource, log_softmax_at, top_log_softmax,
};
use crate::engine::TokenConstraint;
use crate::runtime::{LlamaGrammar, LogitsAt, SequenceContext, Session};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;
use std::time::Instant;

/// A value a [`ChoiceRule`] uses: borrowed from its caller (who keeps it afterwards — the
/// REPL's constraint, a decoder's draft counts), or owned (a server slot's run, which lives
/// as long as the request and outlives no caller's frame).
pub enum Held<'c, T: ?Sized> {
    Borrowed(&'c mut T),
    Owned(Box<T>),
}

impl<T: ?Sized> std::ops::Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        match self {
            Held::Borrowed(r) => r,
            Held::Owned(b) => b,
        }
    }
}

impl<T: ?Sized> std::ops::DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match self {
            Held::Borrowed(r) => r,
            Held::Owned(b) => b,
        }
    }
}

impl<'c, T: ?Sized> From<&'c mut T> for Held<'c, T> {
    fn from(r: &'c mut T) -> Self {
        Held::Borrowed(r)
    }
}

impl<T> Held<'_, T> {
    /// The value, when owned.
    pub fn into_owned(self) -> Option<T> {
        match self {
            Held::Owned(b) => Some(*b),
            Held::Borrowed(_) => None,
        }
    }
}

/// How a sequence chooses each token from the model's logits.
pub enum ChoiceRule<'c> {
    /// Unconstrained sampling.
    Free(Sampler),
    /// The DOMINO engine ([`Chooser`]: full or opportunistic masking), with its draft counts
    /// and draft policy (`opts.draft`), or forced text appended without the model
    /// (`opts.template`).
    Engine {
        constraint: Held<'c, dyn TokenConstraint + 'c>,
        chooser: Chooser,
        drafts: Held<'c, DraftModel>,
        tuner: Held<'c, DraftTuner>,
        opts: EngineDecodeOptions,
    },
    /// llama.cpp's grammar sampler, used as llama.cpp's tools use it: sample from the raw
    /// logits, check that one token, and only on rejection apply the grammar to the whole
    /// vocabulary and sample again from what is left.
    LlamaGrammar {
        grammar: LlamaGrammar,
        sampler: Sampler,
        mask: TokenSet,
        stats: ChoiceStats,
    },
    /// Spell `text` (Algorithm 3): the allowed tokens are the non-special tokens whose bytes
    /// are a non-empty prefix of the text still to produce; the highest logit wins, the
    /// lower id on ties. Finished when the whole text is spelled.
    Spell { text: &'c [u8], pos: usize },
}

impl ChoiceRule<'_> {
    /// The next token from `logits` and whether the rule intervened (counted in the stats).
    /// `known_allowed` is a verified draft that needs no `allows` check.
    fn choose(
        &mut self,
        logits: &[f32],
        known_allowed: Option<TokenId>,
        vocab: &Vocabulary,
    ) -> anyhow::Result<TokenId> {
        match self {
            ChoiceRule::Free(sampler) => sampler
                .sample(logits, None)
                .ok_or_else(|| anyhow::anyhow!("the model returned no logits")),
            ChoiceRule::Engine {
                constraint,
                chooser,
                ..
            } => {
                let mut c: &mut dyn TokenConstraint = &mut **constraint;
                chooser
                    .choose(logits, &mut c, known_allowed)
                    .ok_or_else(|| {
                        anyhow::anyhow!("internal error: the grammar allows no token here")
                    })
            }
            ChoiceRule::LlamaGrammar {
                grammar,
                sampler,
                mask,
                stats,
            } => {
                let raw = sampler
                    .sample(logits, None)
                    .ok_or_else(|| anyhow::anyhow!("the model returned no logits"))?;
                if grammar.allows(raw, logits[raw.index()]) {
                    return Ok(raw);
                }
                // Rejected: the full grammar pass over the vocabulary, then resample.
                stats.interventions += 1;
                let t0 = Instant::now();
                grammar.allowed(logits, mask);
                stats.masks_computed += 1;
                stats.mask_us_total += t0.elapsed().as_secs_f64() * 1e6;
                sampler.sample(logits, Some(mask)).ok_or_else(|| {
                    anyhow::anyhow!("llama.cpp's grammar sampler allows no token here")
                })
            }
            ChoiceRule::Spell { text, pos } => {
                let rest = &text[*pos..];
                vocab
                    .text_tokens()
                    .filter(|(t, bytes)| {
                        !bytes.is_empty() && rest.starts_with(bytes) && !vocab.is_special(*t)
                    })
                    .max_by(|(a, _), (b, _)| {
                        logits[a.index()]
                            .total_cmp(&logits[b.index()])
                            .then(b.0.cmp(&a.0))
                    })
                    .map(|(t, _)| t)
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "no vocabulary token spells the text at byte {pos} ({:?}…)",
                            String::from_utf8_lossy(&rest[..rest.len().min(8)])
                        )
                    })
            }
        }
    }

    /// Advance the rule's state by an output token.
    fn commit(&mut self, t: TokenId, vocab: &Vocabulary) -> anyhow::Result<()> {
        match self {
            ChoiceRule::Free(_) => Ok(()),
            ChoiceRule::Engine {
                constraint, drafts, ..
            } => {
                let ctx = constraint.draft_context();
                constraint.commit(t).map_err(|e| {
                    anyhow::anyhow!(
                        "internal error: the chosen token was rejected by the constraint: {e}"
                    )
                })?;
                drafts.observe(ctx, t);
                Ok(())
            }
            ChoiceRule::LlamaGrammar { grammar, .. } => grammar.accept(t),
            ChoiceRule::Spell { pos, .. } => {
                *pos += vocab.bytes(t).len();
                Ok(())
            }
        }
    }

    /// Nothing more can be generated (`grammar_end`).
    fn is_finished(&mut self) -> bool {
        match self {
            ChoiceRule::Engine { constraint, .. } => constraint.is_finished(),
            ChoiceRule::Spell { text, pos } => *pos >= text.len(),
            ChoiceRule::Free(_) | ChoiceRule::LlamaGrammar { .. } => false,
        }
    }

    /// Mask computations and interventions so far.
    fn choice_stats(&self) -> ChoiceStats {
        match self {
            ChoiceRule::Engine { chooser, .. } => chooser.stats,
            ChoiceRule::LlamaGrammar { stats, .. } => *stats,
            ChoiceRule::Free(_) | ChoiceRule::Spell { .. } => ChoiceStats::default(),
        }
    }
}

/// Stops generation once the output contains one of the stop strings (searching only the
/// bytes a new token can have completed a match in).
#[derive(Clone, Debug, Default)]
struct StopMatcher {
    stop: Vec<String>,
    longest: usize,
}

impl StopMatcher {
    fn new(stop: &[String]) -> Self {
        StopMatcher {
            longest: stop.iter().map(String::len).max().unwrap_or(0),
            stop: stop.to_vec(),
        }
    }

    /// Whether `bytes`, which grew from `before` bytes, now contains a stop string ending in
    /// the new part.
    fn matched(&self, bytes: &[u8], before: usize) -> bool {
        if self.stop.is_empty() {
            return false;
        }
        let window = &bytes[before.saturating_sub(self.longest)..];
        self.stop
            .iter()
            .any(|s| !s.is_empty() && window.windows(s.len()).any(|w| w == s.as_bytes()))
    }
}

/// One generation's state, apart from the model's context: the choice rule (sampler,
/// constraint, draft state), the output so far, the statistics and the stop-string matcher.
pub struct Sequence<'c> {
    vocab: Arc<Vocabulary>,
    rule: ChoiceRule<'c>,
    prompt: Vec<TokenId>,
    max_tokens: usize,
    want_logprobs: bool,
    stop: StopMatcher,
    stopped: bool,
    tokens: Vec<TokenId>,
    bytes: Vec<u8>,
    logprobs: Vec<f32>,
    /// How many alternatives to list per token ([`Sequence::with_top_logprobs`]).
    top_n: usize,
    top_logprobs: Vec<Vec<(TokenId, f32)>>,
    intervened: Vec<bool>,
    stats: GenerationStats,
    /// Output bytes still to hide: token healing's re-written prompt bytes, which the
    /// output begins with (the constraint makes sure) but the caller already has.
    hidden: usize,
}

impl<'c> Sequence<'c> {
    /// A sequence generating `request` with `rule` over `vocab` (the model's vocabulary).
    pub fn new(
        vocab: Arc<Vocabulary>,
        request: &GenerationRequest,
        rule: ChoiceRule<'c>,
    ) -> anyhow::Result<Self> {
        if request.prompt.is_empty() {
            anyhow::bail!("the prompt is empty: there is nothing to condition the model on");
        }
        request
            .sampling
            .validate()
            .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
        if let ChoiceRule::Engine {
            constraint, opts, ..
        } = &rule
        {
            if !(0.0..=1.0).contains(&opts.draft_threshold) {
                anyhow::bail!(
                    "the draft threshold must be in [0, 1], got {}",
                    opts.draft_threshold
                );
            }
            if vocab.len() != constraint.vocab().len() {
                anyhow::bail!(
                    "the constraint was built for a vocabulary of {} tokens, the model has {}",
                    constraint.vocab().len(),
                    vocab.len()
                );
            }
        }
        Ok(Sequence {
            vocab,
            rule,
            prompt: request.prompt.clone(),
            max_tokens: request.max_tokens,
            want_logprobs: request.logprobs,
            stop: StopMatcher::default(),
            stopped: false,
            tokens: Vec::new(),
            bytes: Vec::new(),
            logprobs: Vec::new(),
            top_n: 0,
            top_logprobs: Vec::new(),
            intervened: Vec::new(),
            stats: GenerationStats {
                prompt_tokens: request.prompt.len(),
                ..Default::default()
            },
            hidden: 0,
        })
    }

    /// Also list, per output token, the `n` most likely tokens of the unmasked model at that
    /// position with their log-probabilities ([`GenerationResult::top_logprobs`]; OpenAI's
    /// `top_logprobs`, llama-server's `n_probs`). Needs the request's `logprobs`.
    pub fn with_top_logprobs(mut self, n: usize) -> Self {
        self.top_n = if self.want_logprobs { n } else { 0 };
        self
    }

    /// Token healing: the prompt's last `tokens` tokens (`healed`, their bytes) were backed
    /// off, and the constraint makes the output begin with `healed`. Those bytes are left
    /// out of the output text and the observer's pieces; the stats record the healing.
    pub fn healed(mut self, tokens: usize, healed: &[u8]) -> Self {
        self.hidden = healed.len();
        // `prompt_tokens` counts the caller's prompt, the backed-off tokens included.
        self.stats.prompt_tokens += tokens;
        self.stats.healed_tokens = tokens;
        self.stats.healed_text = String::from_utf8_lossy(healed).into_owned();
        self
    }

    fn engine_opts(&self) -> EngineDecodeOptions {
        match &self.rule {
            ChoiceRule::Engine { opts, .. } => opts.clone(),
            _ => EngineDecodeOptions::default(),
        }
    }

    fn full(&self) -> bool {
        self.tokens.len() >= self.max_tokens
    }

    /// Why to stop before choosing the next token, if at all.
    fn stop_before_step(&mut self, control: &Control) -> Option<FinishReason> {
        if control.is_cancelled() {
            Some(FinishReason::Cancelled)
        } else if self.stopped {
            Some(FinishReason::Stop)
        } else if self.full() {
            Some(FinishReason::Length)
        } else if self.rule.is_finished() {
            Some(FinishReason::GrammarEnd)
        } else {
            None
        }
    }

    /// Why to stop after an output token, if at all.
    fn stop_after_token(&mut self, control: &Control) -> Option<FinishReason> {
        if self.stopped {
            Some(FinishReason::Stop)
        } else if self.full() {
            Some(FinishReason::Length)
        } else if self.rule.is_finished() {
            Some(FinishReason::GrammarEnd)
        } else if control.is_cancelled() {
            Some(FinishReason::Cancelled)
        } else {
            None
        }
    }

    /// Output `t`: commit it to the rule, record it, report it.
    fn accept(
        &mut self,
        choice: Choice,
        source: TokenSource,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<()> {
        let Choice {
            token: t,
            logprob,
            raw_argmax,
            intervened,
            top,
        } = choice;
        self.rule.commit(t, &self.vocab)?;
        let full = self.vocab.bytes(t);
        let skip = self.hidden.min(full.len());
        self.hidden -= skip;
        let piece = &full[skip..];
        let before = self.bytes.len();
        self.tokens.push(t);
        self.bytes.extend_from_slice(piece);
        self.stopped = self.stop.matched(&self.bytes, before);
        if self.want_logprobs {
            self.logprobs.push(logprob.unwrap_or(f32::NAN));
        }
        if self.top_n > 0 {
            self.top_logprobs.push(top);
        }
        self.intervened.push(intervened);
        observer.on_token(&TokenEvent {
            token: t,
            bytes: piece,
            logprob,
            raw_argmax,
            intervened,
            source,
        })
    }

    /// Choose at `logits` (a step's or a draft position's), report whether the rule
    /// intervened, and the unmasked log-probability and argmax.
    fn choose_at(
        &mut self,
        logits: &[f32],
        known_allowed: Option<TokenId>,
    ) -> anyhow::Result<Choice> {
        let before = self.rule.choice_stats().interventions;
        let token = self.rule.choose(logits, known_allowed, &self.vocab)?;
        Ok(Choice {
            token,
            logprob: self.want_logprobs.then(|| log_softmax_at(logits, token)),
            raw_argmax: argmax(logits),
            intervened: self.rule.choice_stats().interventions > before,
            top: top_log_softmax(logits, self.top_n),
        })
    }

    /// Template mode: output the forced text's tokens (up to `room`) and append them to
    /// `batch`. Returns how many were appended.
    fn append_forced(
        &mut self,
        batch: &mut Vec<TokenId>,
        room: usize,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<usize> {
        let ChoiceRule::Engine { constraint, .. } = &mut self.rule else {
            return Ok(0);
        };
        let forced = constraint.forced_bytes();
        let text = valid_utf8_prefix(&forced);
        if text.is_empty() {
            return Ok(0);
        }
        let Ok(tokens) = self.vocab.tokenize(text) else {
            return Ok(0);
        };
        let mut n = 0;
        for t in tokens {
            let allowed = match &mut self.rule {
                ChoiceRule::Engine { constraint, .. } => constraint.allows(t),
                _ => false,
            };
            if n >= room || self.full() || self.vocab.is_eog(t) || !allowed {
                break;
            }
            self.accept(Choice::forced(t), TokenSource::Forced, observer)?;
            batch.push(t);
            n += 1;
        }
        self.stats.forced_tokens += n;
        Ok(n)
    }

    /// Up to `room` draft tokens after the current state ([`propose_draft`]), cut by the
    /// draft policy.
    fn propose(&mut self, room: usize, out: &mut Vec<TokenId>, guesses: &mut Vec<DraftGuess>) {
        out.clear();
        guesses.clear();
        if let ChoiceRule::Engine {
            constraint,
            drafts,
            tuner,
            opts,
            ..
        } = &mut self.rule
        {
            propose_draft(
                &mut **constraint,
                drafts,
                &self.vocab,
                room,
                opts.draft_threshold,
                out,
                guesses,
            );
            let keep = tuner.draft_len(guesses);
            out.truncate(keep);
            guesses.truncate(keep);
        }
    }

    fn tuner(&mut self) -> Option<&mut DraftTuner> {
        match &mut self.rule {
            ChoiceRule::Engine { tuner, .. } => Some(tuner),
            _ => None,
        }
    }

    /// The result, with the statistics closed at `decode_start`, and the rule (with what it
    /// learned: draft counts, the draft policy's measurements).
    fn finish(
        mut self,
        finish_reason: FinishReason,
        decode_start: Instant,
    ) -> (GenerationResult, ChoiceRule<'c>) {
        let c = self.rule.choice_stats();
        self.stats.finish_decode(self.tokens.len(), decode_start);
        self.stats.masks_computed = c.masks_computed;
        self.stats.mask_us_total = c.mask_us_total;
        self.stats.interventions = c.interventions;
        let result = GenerationResult {
            tokens: self.tokens,
            bytes: self.bytes,
            logprobs: self.logprobs,
            top_logprobs: self.top_logprobs,
            intervened: self.intervened,
            finish_reason,
            stats: self.stats,
        };
        (result, self.rule)
    }
}

/// A chosen token with what the observer is told about it.
struct Choice {
    token: TokenId,
    logprob: Option<f32>,
    raw_argmax: Option<TokenId>,
    intervened: bool,
    /// The unmasked model's most likely tokens there ([`Sequence::with_top_logprobs`]).
    top: Vec<(TokenId, f32)>,
}

impl Choice {
    /// Forced text's token: not chosen from logits (its log-probabilities come from a later
    /// pass).
    fn forced(token: TokenId) -> Choice {
        Choice {
            token,
            logprob: None,
            raw_argmax: None,
            intervened: false,
            top: Vec::new(),
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Which logits a decode of `len` tokens needs: batch indices `need_from..` (at least the
/// last one). `positions` is scratch space for the index list.
pub fn logits_from(need_from: usize, len: usize, positions: &mut Vec<usize>) -> LogitsAt<'_> {
    positions.clear();
    if need_from > 0 && need_from + 1 < len {
        positions.extend(need_from..len);
    }
    logits_at(need_from, len, positions)
}

/// [`logits_from`] with the index list already in `positions` (`need_from..len`), for callers
/// that lay out several batches before one decode (server slots).
pub fn logits_at(need_from: usize, len: usize, positions: &[usize]) -> LogitsAt<'_> {
    let last = len - 1;
    if need_from >= last {
        LogitsAt::Last
    } else if need_from == 0 {
        LogitsAt::All
    } else {
        LogitsAt::Positions(positions)
    }
}

/// Run `seq` to the end in `session`: the prompt (appended to whatever the session holds),
/// then one step per forward pass (see the module doc of [`crate::decode`]).
pub fn run(
    session: &mut Session<'_>,
    seq: Sequence<'_>,
    control: &Control,
    observer: &mut dyn Observer,
) -> anyhow::Result<GenerationResult> {
    let mut run = SequenceRun::new(seq, control);
    let mut positions = Vec::new();
    while let Some(need_from) = run.next(session, control, observer)? {
        let len = run.batch().len();
        let pass_start = Instant::now();
        session.decode(run.batch(), logits_from(need_from, len, &mut positions))?;
        if run.times_passes() {
            // Reading the last logits waits for an asynchronous (GPU) backend.
            let _ = session.try_logits(len - 1);
            run.observe_pass(ms_since(pass_start));
        }
    }
    Ok(run.finish())
}

/// Where a [`SequenceRun`] is between two forward passes.
enum Phase {
    /// Nothing decoded yet: the prompt is next.
    Prompt,
    /// The prompt (of this many tokens, then forced text) was decoded.
    PromptDecoded { n_prompt: usize },
    /// A step's batch (`n_fixed` tokens — the chosen one and forced text — then drafts) was
    /// decoded; the drafts are verified next.
    StepDecoded { n_fixed: usize },
    /// Ended for this reason.
    Done(FinishReason),
}

/// One generation as a state machine over forward passes, so that whoever owns the context
/// decides how passes are made: [`run`] decodes each batch in a [`Session`] of its own; the
/// server decodes the batches of several runs together in one pass of a shared context
/// (continuous batching). Between two passes, [`SequenceRun::next`] does exactly what one
/// iteration of the loop does: verify the drafts of the last pass, choose and output a
/// token, and lay out the next batch (the token, forced text, drafts).
pub struct SequenceRun<'c> {
    seq: Sequence<'c>,
    opts: EngineDecodeOptions,
    phase: Phase,
    /// The batch of the next (or latest) pass.
    batch: Vec<TokenId>,
    draft: Vec<TokenId>,
    guesses: Vec<DraftGuess>,
    /// Index of the first output token the latest batch's forced text produced.
    first_forced_out: usize,
    /// Batch index of the logits for the next position.
    logits_at: usize,
    /// A token already chosen (at a rejected draft position) but not yet output.
    pending: Option<Choice>,
    prompt_start: Instant,
    decode_start: Instant,
}

impl<'c> SequenceRun<'c> {
    /// A run of `seq` under `control`'s stop strings.
    pub fn new(mut seq: Sequence<'c>, control: &Control) -> Self {
        let opts = seq.engine_opts();
        seq.stop = StopMatcher::new(control.stop_strings());
        SequenceRun {
            seq,
            draft: Vec::with_capacity(opts.draft),
            guesses: Vec::with_capacity(opts.draft),
            opts,
            phase: Phase::Prompt,
            batch: Vec::new(),
            first_forced_out: 0,
            logits_at: 0,
            pending: None,
            prompt_start: Instant::now(),
            decode_start: Instant::now(),
        }
    }

    /// The tokens of the pass [`SequenceRun::next`] asked for.
    pub fn batch(&self) -> &[TokenId] {
        &self.batch
    }

    /// Whether the latest batch is a pass whose duration the draft policy's cost model
    /// learns from (`[token, drafts…]`); report it with [`SequenceRun::observe_pass`].
    pub fn times_passes(&mut self) -> bool {
        matches!(self.phase, Phase::StepDecoded { n_fixed: 1 }) && self.seq.tuner().is_some()
    }

    /// The duration of the latest pass, when it ran for this sequence alone.
    pub fn observe_pass(&mut self, ms: f64) {
        let len = self.batch.len();
        if let Some(tuner) = self.seq.tuner() {
            tuner.cost.observe(len, ms);
        }
    }

    /// Advance to the next forward pass: `Some(need_from)` when [`SequenceRun::batch`] is to be
    /// decoded in `ctx` with logits at batch indices `need_from..`; `None` when the
    /// generation has ended ([`SequenceRun::finish`]). `ctx` holds the logits of the
    /// previous pass and is truncated where drafts were rejected.
    pub fn next(
        &mut self,
        ctx: &mut dyn SequenceContext,
        control: &Control,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<Option<usize>> {
        let seq = &mut self.seq;
        match self.phase {
            Phase::Done(_) => return Ok(None),
            Phase::Prompt => {
                // The prompt, plus (template) the forced text the output starts with.
                self.prompt_start = Instant::now();
                self.batch = std::mem::take(&mut seq.prompt);
                let n_prompt = self.batch.len();
                if self.opts.template {
                    let room = ctx.n_ctx().saturating_sub(ctx.n_past() + self.batch.len());
                    seq.append_forced(&mut self.batch, room, observer)?;
                }
                self.phase = Phase::PromptDecoded { n_prompt };
                let need_from = if seq.want_logprobs {
                    n_prompt - 1
                } else {
                    self.batch.len() - 1
                };
                return Ok(Some(need_from));
            }
            Phase::PromptDecoded { n_prompt } => {
                seq.stats.forward_passes += 1;
                for i in 0..seq.logprobs.len() {
                    let logits = ctx.logits(n_prompt - 1 + i);
                    seq.logprobs[i] = log_softmax_at(logits, self.batch[n_prompt + i]);
                    if seq.top_n > 0 {
                        seq.top_logprobs[i] = top_log_softmax(logits, seq.top_n);
                    }
                }
                seq.stats.prompt_ms = ms_since(self.prompt_start);
                self.decode_start = Instant::now();
                self.logits_at = self.batch.len() - 1;
                self.pending = None;
            }
            Phase::StepDecoded { n_fixed } => {
                seq.stats.forward_passes += 1;
                if seq.want_logprobs {
                    for (i, &t) in self.batch.iter().enumerate().take(n_fixed).skip(1) {
                        let logits = ctx.logits(i - 1);
                        seq.logprobs[self.first_forced_out + i - 1] = log_softmax_at(logits, t);
                        if seq.top_n > 0 {
                            seq.top_logprobs[self.first_forced_out + i - 1] =
                                top_log_softmax(logits, seq.top_n);
                        }
                    }
                }
                seq.stats.draft_proposed += self.draft.len();
                self.logits_at = self.batch.len() - 1;
                // Verify the drafts in order.
                for (j, &d) in self.draft.iter().enumerate() {
                    let unverified = self.draft.len() - j;
                    if let Some(reason) = seq.stop_after_token(control) {
                        ctx.truncate(ctx.n_past() - unverified)?;
                        self.phase = Phase::Done(reason);
                        return Ok(None);
                    }
                    let choice = seq.choose_at(ctx.logits(n_fixed - 1 + j), Some(d))?;
                    let accepted = choice.token == d;
                    if let Some(tuner) = seq.tuner() {
                        tuner.observe_outcome(j, self.guesses[j], accepted);
                    }
                    if accepted {
                        seq.accept(choice, TokenSource::Draft, observer)?;
                        seq.stats.draft_accepted += 1;
                    } else {
                        // The model's own token at the first disagreement; drop the rest.
                        crate::log!(
                            2,
                            "draft rejected: proposed {:?}, chose {:?}",
                            String::from_utf8_lossy(seq.vocab.bytes(d)),
                            String::from_utf8_lossy(seq.vocab.bytes(choice.token))
                        );
                        ctx.truncate(ctx.n_past() - unverified)?;
                        self.pending = Some(choice);
                        break;
                    }
                }
            }
        }
        match self.step(ctx, control, observer)? {
            Ok(need_from) => Ok(Some(need_from)),
            Err(reason) => {
                self.phase = Phase::Done(reason);
                Ok(None)
            }
        }
    }

    /// Choose and output a token, then lay out the next batch: `Ok(need_from)`, or
    /// `Err(reason)` when the generation ends here.
    fn step(
        &mut self,
        ctx: &mut dyn SequenceContext,
        control: &Control,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<Result<usize, FinishReason>> {
        let seq = &mut self.seq;
        if let Some(reason) = seq.stop_before_step(control) {
            return Ok(Err(reason));
        }
        let choice = match self.pending.take() {
            Some(p) => p,
            None => seq.choose_at(ctx.logits(self.logits_at), None)?,
        };
        if seq.vocab.is_eog(choice.token) {
            return Ok(Err(FinishReason::Eos));
        }
        let token = choice.token;
        seq.accept(choice, TokenSource::Sampled, observer)?;
        if let Some(reason) = seq.stop_after_token(control) {
            return Ok(Err(reason));
        }

        // The next batch: the token, forced text (template), drafts.
        let n_ctx = ctx.n_ctx();
        self.batch.clear();
        self.batch.push(token);
        self.first_forced_out = seq.tokens.len();
        if self.opts.template {
            let room = n_ctx.saturating_sub(ctx.n_past() + self.batch.len());
            seq.append_forced(&mut self.batch, room, observer)?;
            if let Some(reason) = seq.stop_after_token(control) {
                return Ok(Err(reason));
            }
        }
        let n_fixed = self.batch.len();
        if ctx.n_past() + n_fixed > n_ctx {
            crate::log!(1, "context full ({n_ctx} positions): stopping");
            return Ok(Err(FinishReason::Length));
        }
        let room = self
            .opts
            .draft
            .min(seq.max_tokens - seq.tokens.len())
            .min(n_ctx - ctx.n_past() - n_fixed);
        if room > 0 {
            seq.propose(room, &mut self.draft, &mut self.guesses);
        } else {
            self.draft.clear();
            self.guesses.clear();
        }
        self.batch.extend_from_slice(&self.draft);
        self.phase = Phase::StepDecoded { n_fixed };
        Ok(Ok(if seq.want_logprobs && n_fixed > 1 {
            0
        } else if !self.draft.is_empty() {
            n_fixed - 1
        } else {
            self.batch.len() - 1
        }))
    }

    /// Whether the generation has ended.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done(_))
    }

    /// The result (call once [`SequenceRun::next`] returned `None`; a run stopped early —
    /// an error in its context — ends as cancelled).
    pub fn finish(self) -> GenerationResult {
        self.finish_with_rule().0
    }

    /// [`SequenceRun::finish`], handing back the choice rule too (an owned rule's draft counts
    /// outlive the run).
    pub fn finish_with_rule(self) -> (GenerationResult, ChoiceRule<'c>) {
        let reason = match self.phase {
            Phase::Done(r) => r,
            _ => FinishReason::Cancelled,
        };
        self.seq.finish(reason, self.decode_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_match_across_token_boundaries_and_only_in_new_bytes() {
        let m = StopMatcher::new(&["\nQ:".to_string()]);
        assert!(m.matched(b"answer 4\nQ:", 9), "split over two tokens");
        assert!(!m.matched(b"answer 4\nQ", 8));
        assert!(!StopMatcher::new(&[]).matched(b"\nQ:", 0));
        assert!(!StopMatcher::new(&[String::new()]).matched(b"abc", 0));
    }
}
