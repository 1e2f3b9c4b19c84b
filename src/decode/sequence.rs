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
    TokenEvent, TokenSource, log_softmax_at,
};
use crate::engine::TokenConstraint;
use crate::runtime::{LlamaGrammar, LogitsAt, Session};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;
use std::time::Instant;

/// How a sequence chooses each token from the model's logits.
pub enum ChoiceRule<'c> {
    /// Unconstrained sampling.
    Free(Sampler),
    /// The DOMINO engine ([`Chooser`]: full or opportunistic masking), with its draft counts
    /// and draft policy (`opts.draft`), or forced text appended without the model
    /// (`opts.template`).
    Engine {
        constraint: &'c mut dyn TokenConstraint,
        chooser: Chooser,
        drafts: &'c mut DraftModel,
        tuner: &'c mut DraftTuner,
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
            } => chooser
                .choose(logits, constraint, known_allowed)
                .ok_or_else(|| anyhow::anyhow!("internal error: the grammar allows no token here")),
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
            intervened: Vec::new(),
            stats: GenerationStats {
                prompt_tokens: request.prompt.len(),
                ..Default::default()
            },
            hidden: 0,
        })
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
        t: TokenId,
        logprob: Option<f32>,
        raw_argmax: Option<TokenId>,
        intervened: bool,
        source: TokenSource,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<()> {
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
            self.accept(t, None, None, false, TokenSource::Forced, observer)?;
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

    /// The result, with the statistics closed at `decode_start`.
    fn finish(mut self, finish_reason: FinishReason, decode_start: Instant) -> GenerationResult {
        let c = self.rule.choice_stats();
        self.stats.finish_decode(self.tokens.len(), decode_start);
        self.stats.masks_computed = c.masks_computed;
        self.stats.mask_us_total = c.mask_us_total;
        self.stats.interventions = c.interventions;
        GenerationResult {
            tokens: self.tokens,
            bytes: self.bytes,
            logprobs: self.logprobs,
            intervened: self.intervened,
            finish_reason,
            stats: self.stats,
        }
    }
}

/// A chosen token with what the observer is told about it.
struct Choice {
    token: TokenId,
    logprob: Option<f32>,
    raw_argmax: Option<TokenId>,
    intervened: bool,
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// Decode `batch`, with logits at batch indices `need_from..` (at least the last one).
fn decode_batch(
    session: &mut Session<'_>,
    batch: &[TokenId],
    need_from: usize,
    positions: &mut Vec<usize>,
) -> anyhow::Result<()> {
    let last = batch.len() - 1;
    if need_from >= last {
        session.decode(batch, LogitsAt::Last)?;
    } else if need_from == 0 {
        session.decode(batch, LogitsAt::All)?;
    } else {
        positions.clear();
        positions.extend(need_from..=last);
        session.decode(batch, LogitsAt::Positions(positions))?;
    }
    Ok(())
}

/// Run `seq` to the end in `session`: the prompt (appended to whatever the session holds),
/// then one step per forward pass (see the module doc of [`crate::decode`]).
pub fn run(
    session: &mut Session<'_>,
    mut seq: Sequence<'_>,
    control: &Control,
    observer: &mut dyn Observer,
) -> anyhow::Result<GenerationResult> {
    let opts = seq.engine_opts();
    seq.stop = StopMatcher::new(control.stop_strings());
    let n_ctx = session.n_ctx();
    let mut positions = Vec::new();
    let mut draft = Vec::with_capacity(opts.draft);
    let mut guesses = Vec::with_capacity(opts.draft);

    // The prompt, plus (template) the forced text the output starts with.
    let start = Instant::now();
    let mut batch: Vec<TokenId> = std::mem::take(&mut seq.prompt);
    let n_prompt = batch.len();
    if opts.template {
        let room = n_ctx.saturating_sub(session.n_past() + batch.len());
        seq.append_forced(&mut batch, room, observer)?;
    }
    let need_from = if seq.want_logprobs {
        n_prompt - 1
    } else {
        batch.len() - 1
    };
    decode_batch(session, &batch, need_from, &mut positions)?;
    seq.stats.forward_passes += 1;
    for (i, lp) in seq.logprobs.iter_mut().enumerate() {
        *lp = log_softmax_at(session.logits(n_prompt - 1 + i), batch[n_prompt + i]);
    }
    seq.stats.prompt_ms = ms_since(start);

    let decode_start = Instant::now();
    // Batch index of the logits for the next position.
    let mut logits_at = batch.len() - 1;
    // A token already chosen (at a rejected draft position) but not yet output.
    let mut pending: Option<Choice> = None;
    let finish_reason = 'steps: loop {
        if let Some(reason) = seq.stop_before_step(control) {
            break reason;
        }
        let choice = match pending.take() {
            Some(p) => p,
            None => seq.choose_at(session.logits(logits_at), None)?,
        };
        if seq.vocab.is_eog(choice.token) {
            break FinishReason::Eos;
        }
        let token = choice.token;
        seq.accept(
            token,
            choice.logprob,
            choice.raw_argmax,
            choice.intervened,
            TokenSource::Sampled,
            observer,
        )?;
        if let Some(reason) = seq.stop_after_token(control) {
            break reason;
        }

        // The next batch: the token, forced text (template), drafts.
        batch.clear();
        batch.push(token);
        let first_forced_out = seq.tokens.len();
        if opts.template {
            let room = n_ctx.saturating_sub(session.n_past() + batch.len());
            seq.append_forced(&mut batch, room, observer)?;
            if let Some(reason) = seq.stop_after_token(control) {
                break reason;
            }
        }
        let n_fixed = batch.len();
        if session.n_past() + n_fixed > n_ctx {
            crate::log!(1, "context full ({n_ctx} positions): stopping");
            break FinishReason::Length;
        }
        let room = opts
            .draft
            .min(seq.max_tokens - seq.tokens.len())
            .min(n_ctx - session.n_past() - n_fixed);
        if room > 0 {
            seq.propose(room, &mut draft, &mut guesses);
        } else {
            draft.clear();
            guesses.clear();
        }
        batch.extend_from_slice(&draft);
        let need_from = if seq.want_logprobs && n_fixed > 1 {
            0
        } else if !draft.is_empty() {
            n_fixed - 1
        } else {
            batch.len() - 1
        };
        let pass_start = Instant::now();
        decode_batch(session, &batch, need_from, &mut positions)?;
        if n_fixed == 1
            && let Some(tuner) = seq.tuner()
        {
            // `[token, drafts…]` with logits at every position: the pass the cost model is
            // about. Reading the last logits waits for an asynchronous (GPU) backend.
            let _ = session.try_logits(batch.len() - 1);
            tuner.cost.observe(batch.len(), ms_since(pass_start));
        }
        seq.stats.forward_passes += 1;
        if seq.want_logprobs {
            for (i, &t) in batch.iter().enumerate().take(n_fixed).skip(1) {
                seq.logprobs[first_forced_out + i - 1] = log_softmax_at(session.logits(i - 1), t);
            }
        }
        seq.stats.draft_proposed += draft.len();
        logits_at = batch.len() - 1;

        // Verify the drafts in order.
        for (j, &d) in draft.iter().enumerate() {
            let unverified = draft.len() - j;
            if let Some(reason) = seq.stop_after_token(control) {
                session.truncate(session.n_past() - unverified)?;
                break 'steps reason;
            }
            let choice = seq.choose_at(session.logits(n_fixed - 1 + j), Some(d))?;
            let accepted = choice.token == d;
            if let Some(tuner) = seq.tuner() {
                tuner.observe_outcome(j, guesses[j], accepted);
            }
            if accepted {
                seq.accept(
                    d,
                    choice.logprob,
                    choice.raw_argmax,
                    choice.intervened,
                    TokenSource::Draft,
                    observer,
                )?;
                seq.stats.draft_accepted += 1;
            } else {
                // The model's own token at the first disagreement; drop the rest.
                crate::log!(
                    2,
                    "draft rejected: proposed {:?}, chose {:?}",
                    String::from_utf8_lossy(seq.vocab.bytes(d)),
                    String::from_utf8_lossy(seq.vocab.bytes(choice.token))
                );
                session.truncate(session.n_past() - unverified)?;
                pending = Some(choice);
                break;
            }
        }
    };
    Ok(seq.finish(finish_reason, decode_start))
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
