//! Constrained generation: the DOMINO engine inside the decode loop, with opportunistic
//! masking, count-based speculative drafts and the guidance-style template baseline.
//!
//! # The loop ([`generate_constrained`])
//! Every step chooses a token from the latest logits among the tokens the [`Constraint`]
//! allows ([`Chooser`]: full or opportunistic masking), commits it, and runs the next forward
//! pass on a batch `[token, forced…, draft…]`:
//! - **forced** (`template` only): the text every continuation starts with
//!   ([`Constraint::forced_bytes`]) is tokenized with the model's tokenizer and appended
//!   without consulting the model — guidance's jump-forward, and the template-induced
//!   misalignment of the paper's Fig. 2;
//! - **drafts** (`--draft S`, DOMINO §3.6): up to `S` tokens proposed by a count model
//!   [`DraftModel`] keyed by [`Constraint::draft_context`] (while the product of the drafted
//!   tokens' count probabilities — the chance the whole draft is accepted — reaches the
//!   threshold), or else by the grammar itself where the text is forced (probability 1: the
//!   tokenizer's first token of the forced bytes; the counts go first because they know
//!   which tokenization of forced text this model actually prefers). Each proposal is checked with `allows`
//!   and committed so the next proposal sees its context; all of them are rolled back before
//!   verification. A [`DraftTuner`] then cuts the draft where the expected tokens per unit
//!   of measured forward-pass time peak ([`super::draft_policy`]; `--draft-policy threshold`
//!   keeps the whole proposal).
//!
//! One batched decode gives logits at every draft position. Verification walks them in
//! order and chooses a token at each exactly as the non-speculative loop would (same mask,
//! same sampler state): if it equals the draft, the draft is accepted; the first choice that
//! differs *is* the model's next token, obtained for free, and the KV cache is truncated to
//! drop the rejected drafts. Under greedy decoding this makes the output token-for-token
//! identical to `--draft 0`. Under sampling, "draw `x` from the constrained distribution and
//! accept the deterministic draft `d` iff `x = d`" accepts with probability `p(d)` and, on
//! rejection, yields `x` distributed as `p` restricted to `x ≠ d`, renormalised — exactly
//! the speculative-sampling rule for a deterministic draft (accept with `p(d)`, else sample
//! the residual), so the output distribution is the constrained model's.
//!
//! # Stopping
//! At an end-of-generation token (`"eos"`, only allowed where the text is a sentence), when
//! the grammar admits nothing more (`"grammar_end"`, detected *before* the next forward pass,
//! so no model call is wasted), or at `max_tokens` / a full context (`"length"`).
//!
//! # Invariants
//! - Every committed token was allowed by the constraint; `tokens`, `bytes`, `logprobs` and
//!   callback calls correspond one to one; the session's KV cache holds the prompt and every
//!   output token that a later step conditioned on (never a rejected draft).
//! - Draft counts are updated with the tokens actually output, never with proposals.
//! - The draft policy decides how many proposed tokens are verified, never which token is
//!   output.

use super::draft_model::DraftModel;
use super::draft_policy::{DraftGuess, DraftSource, DraftTuner};
use super::opportunistic::Chooser;
use super::{FinishReason, GenerationRequest, GenerationResult, GenerationStats, log_softmax_at};
use crate::engine::Constraint;
use crate::runtime::{LogitsAt, Session};
use crate::vocab::{TokenId, Vocabulary};
use std::sync::Arc;
use std::time::Instant;

/// How the engine is used in the loop.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineDecodeOptions {
    /// Sample first, compute the mask only on rejection.
    pub opportunistic: bool,
    /// Most draft tokens per forward pass (0 = no speculation).
    pub draft: usize,
    /// Smallest count probability for a drafted token.
    pub draft_threshold: f32,
    /// Append forced text without consulting the model (the `template` baseline).
    pub template: bool,
}

impl Default for EngineDecodeOptions {
    fn default() -> Self {
        EngineDecodeOptions {
            opportunistic: false,
            draft: 0,
            draft_threshold: 0.8,
            template: false,
        }
    }
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

/// The state of one constrained generation.
struct Run<'a> {
    vocab: Arc<Vocabulary>,
    constraint: &'a mut Constraint,
    drafts: &'a mut DraftModel,
    tuner: &'a mut DraftTuner,
    chooser: Chooser,
    want_logprobs: bool,
    max_tokens: usize,
    tokens: Vec<TokenId>,
    bytes: Vec<u8>,
    logprobs: Vec<f32>,
    stats: GenerationStats,
    on_token: &'a mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
}

impl Run<'_> {
    /// Output `t`: commit it, count it for the draft model, report it.
    fn accept(&mut self, t: TokenId, logprob: Option<f32>) -> anyhow::Result<()> {
        let ctx = self.constraint.draft_context();
        self.constraint.commit(t).map_err(|e| {
            anyhow::anyhow!("internal error: the chosen token was rejected by the constraint: {e}")
        })?;
        self.drafts.observe(ctx, t);
        let piece = self.vocab.bytes(t);
        self.tokens.push(t);
        self.bytes.extend_from_slice(piece);
        if self.want_logprobs {
            self.logprobs.push(logprob.unwrap_or(f32::NAN));
        }
        (self.on_token)(t, piece)
    }

    fn full(&self) -> bool {
        self.tokens.len() >= self.max_tokens
    }

    /// Template mode: output the forced text's tokens (up to `room`) and append them to
    /// `batch`. Returns how many were appended.
    fn append_forced(&mut self, batch: &mut Vec<TokenId>, room: usize) -> anyhow::Result<usize> {
        let forced = self.constraint.forced_bytes();
        let text = valid_utf8_prefix(&forced);
        if text.is_empty() {
            return Ok(0);
        }
        let Ok(tokens) = self.vocab.tokenize(text) else {
            return Ok(0);
        };
        let mut n = 0;
        for t in tokens {
            if n >= room || self.full() || self.vocab.is_eog(t) || !self.constraint.allows(t) {
                break;
            }
            self.accept(t, None)?;
            batch.push(t);
            n += 1;
        }
        self.stats.forced_tokens += n;
        Ok(n)
    }

    /// Up to `room` draft tokens after the current state ([`propose_draft`]).
    fn propose(
        &mut self,
        room: usize,
        threshold: f32,
        out: &mut Vec<TokenId>,
        guesses: &mut Vec<DraftGuess>,
    ) {
        propose_draft(
            self.constraint,
            self.drafts,
            &self.vocab,
            room,
            threshold,
            out,
            guesses,
        );
    }
}

/// The tokenizer's first token of the forced text, when it is allowed here.
fn forced_token(constraint: &mut Constraint, vocab: &Vocabulary) -> Option<TokenId> {
    let forced = constraint.forced_bytes();
    let text = valid_utf8_prefix(&forced);
    if text.is_empty() {
        return None;
    }
    let t = *vocab.tokenize(text).ok()?.first()?;
    (!vocab.is_eog(t) && constraint.allows(t)).then_some(t)
}

/// Up to `room` draft tokens after the constraint's current state into `out`, with what the
/// proposer knew of each into `guesses`; the constraint is left as it was. A token comes from
/// the counts while the chain's count probability stays at or above `threshold`, else from
/// the grammar's forced text; the draft stops at an end-of-generation token, a token the
/// grammar refuses, or a context it has already proposed from.
pub(crate) fn propose_draft(
    constraint: &mut Constraint,
    drafts: &DraftModel,
    vocab: &Vocabulary,
    room: usize,
    threshold: f32,
    out: &mut Vec<TokenId>,
    guesses: &mut Vec<DraftGuess>,
) {
    out.clear();
    guesses.clear();
    // Probability that the whole draft so far is accepted, under the counts: a later
    // token only pays if the chain up to it is likely (drafts stop when confidence drops).
    let mut confidence = 1.0f32;
    // Contexts this draft has proposed from: a context met again means the counts predict
    // a loop (free text, where the key does not move), which is almost never what the
    // model writes. Drafts are short, so a list is the right set.
    let mut visited: Vec<u64> = Vec::new();
    while out.len() < room {
        let ctx = constraint.draft_context();
        if visited.contains(&ctx) {
            break;
        }
        visited.push(ctx);
        let counted = drafts
            .best(ctx)
            .filter(|&(_, p)| confidence * p >= threshold);
        let (t, guess) = match counted {
            Some((t, p)) => {
                confidence *= p;
                (
                    t,
                    DraftGuess {
                        q: p,
                        source: DraftSource::Counted,
                    },
                )
            }
            None => match forced_token(constraint, vocab) {
                Some(t) => (
                    t,
                    DraftGuess {
                        q: 1.0,
                        source: DraftSource::Forced,
                    },
                ),
                None => break,
            },
        };
        if vocab.is_eog(t) || constraint.commit(t).is_err() {
            break;
        }
        out.push(t);
        guesses.push(guess);
    }
    constraint.rollback(out.len());
}

/// The longest valid UTF-8 prefix of `b` (forced text may stop inside a character).
fn valid_utf8_prefix(b: &[u8]) -> &str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).expect("valid prefix"),
    }
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

/// Generate from `request.prompt` under `constraint` (see the module doc). The constraint
/// must be fresh or positioned where the output starts; `drafts` is updated with the
/// output.
pub fn generate_constrained(
    session: &mut Session<'_>,
    request: &GenerationRequest,
    constraint: &mut Constraint,
    drafts: &mut DraftModel,
    tuner: &mut DraftTuner,
    opts: &EngineDecodeOptions,
    on_token: &mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<GenerationResult> {
    if request.prompt.is_empty() {
        anyhow::bail!("the prompt is empty: there is nothing to condition the model on");
    }
    request
        .sampling
        .validate()
        .map_err(|e| anyhow::anyhow!("bad sampling parameters: {e}"))?;
    if !(0.0..=1.0).contains(&opts.draft_threshold) {
        anyhow::bail!(
            "the draft threshold must be in [0, 1], got {}",
            opts.draft_threshold
        );
    }
    let vocab = session.model().vocabulary();
    if vocab.len() != constraint.vocab().len() {
        anyhow::bail!(
            "the constraint was built for a vocabulary of {} tokens, the model has {}",
            constraint.vocab().len(),
            vocab.len()
        );
    }
    let n_ctx = session.n_ctx();
    let mut run = Run {
        chooser: Chooser::new(request.sampling.clone(), vocab.len(), opts.opportunistic),
        vocab,
        constraint,
        drafts,
        tuner,
        want_logprobs: request.logprobs,
        max_tokens: request.max_tokens,
        tokens: Vec::new(),
        bytes: Vec::new(),
        logprobs: Vec::new(),
        stats: GenerationStats {
            prompt_tokens: request.prompt.len(),
            ..Default::default()
        },
        on_token,
    };
    let mut positions = Vec::new();
    let mut draft = Vec::with_capacity(opts.draft);
    let mut guesses = Vec::with_capacity(opts.draft);

    // The prompt, plus (template) the forced text the output starts with.
    let start = Instant::now();
    let mut batch: Vec<TokenId> = request.prompt.clone();
    if opts.template {
        let room = n_ctx.saturating_sub(session.n_past() + batch.len());
        run.append_forced(&mut batch, room)?;
    }
    let n_prompt = request.prompt.len();
    let need_from = if run.want_logprobs {
        n_prompt - 1
    } else {
        batch.len() - 1
    };
    decode_batch(session, &batch, need_from, &mut positions)?;
    run.stats.forward_passes += 1;
    for (i, lp) in run.logprobs.iter_mut().enumerate() {
        *lp = log_softmax_at(session.logits(n_prompt - 1 + i), batch[n_prompt + i]);
    }
    run.stats.prompt_ms = ms_since(start);

    let decode_start = Instant::now();
    // Batch index of the logits for the next position.
    let mut logits_at = batch.len() - 1;
    // A token already chosen (at a rejected draft position) but not yet output.
    let mut pending: Option<(TokenId, Option<f32>)> = None;
    let finish_reason = 'steps: loop {
        if run.full() {
            break FinishReason::Length;
        }
        if run.constraint.is_finished() {
            break FinishReason::GrammarEnd;
        }
        let (token, logprob) = match pending.take() {
            Some(p) => p,
            None => {
                let logits = session.logits(logits_at);
                let t = run
                    .chooser
                    .choose(logits, run.constraint, None)
                    .ok_or_else(|| {
                        anyhow::anyhow!("internal error: the grammar allows no token here")
                    })?;
                (t, run.want_logprobs.then(|| log_softmax_at(logits, t)))
            }
        };
        if run.vocab.is_eog(token) {
            break FinishReason::Eos;
        }
        run.accept(token, logprob)?;
        if run.full() {
            break FinishReason::Length;
        }
        if run.constraint.is_finished() {
            break FinishReason::GrammarEnd;
        }

        // The next batch: the token, forced text (template), drafts.
        batch.clear();
        batch.push(token);
        let first_forced_out = run.tokens.len();
        if opts.template {
            let room = n_ctx.saturating_sub(session.n_past() + batch.len());
            run.append_forced(&mut batch, room)?;
            if run.full() {
                break FinishReason::Length;
            }
            if run.constraint.is_finished() {
                break FinishReason::GrammarEnd;
            }
        }
        let n_fixed = batch.len();
        if session.n_past() + n_fixed > n_ctx {
            crate::log!(1, "context full ({n_ctx} positions): stopping");
            break FinishReason::Length;
        }
        let room = opts
            .draft
            .min(run.max_tokens - run.tokens.len())
            .min(n_ctx - session.n_past() - n_fixed);
        if room > 0 {
            run.propose(room, opts.draft_threshold, &mut draft, &mut guesses);
            let keep = run.tuner.draft_len(&guesses);
            draft.truncate(keep);
            guesses.truncate(keep);
        } else {
            draft.clear();
            guesses.clear();
        }
        batch.extend_from_slice(&draft);
        let need_from = if run.want_logprobs && n_fixed > 1 {
            0
        } else if !draft.is_empty() {
            n_fixed - 1
        } else {
            batch.len() - 1
        };
        let pass_start = Instant::now();
        decode_batch(session, &batch, need_from, &mut positions)?;
        if n_fixed == 1 {
            // `[token, drafts…]` with logits at every position: the pass the cost model is
            // about. Reading the last logits waits for an asynchronous (GPU) backend.
            let _ = session.try_logits(batch.len() - 1);
            run.tuner.cost.observe(batch.len(), ms_since(pass_start));
        }
        run.stats.forward_passes += 1;
        if run.want_logprobs {
            for i in 1..n_fixed {
                run.logprobs[first_forced_out + i - 1] =
                    log_softmax_at(session.logits(i - 1), batch[i]);
            }
        }
        run.stats.draft_proposed += draft.len();
        logits_at = batch.len() - 1;

        // Verify the drafts in order.
        for (j, &d) in draft.iter().enumerate() {
            let unverified = draft.len() - j;
            if run.full() || run.constraint.is_finished() {
                session.truncate(session.n_past() - unverified)?;
                break 'steps if run.full() {
                    FinishReason::Length
                } else {
                    FinishReason::GrammarEnd
                };
            }
            let logits = session.logits(n_fixed - 1 + j);
            let y = run
                .chooser
                .choose(logits, run.constraint, Some(d))
                .ok_or_else(|| {
                    anyhow::anyhow!("internal error: the grammar allows no token here")
                })?;
            let lp = run.want_logprobs.then(|| log_softmax_at(logits, y));
            run.tuner.observe_outcome(j, guesses[j], y == d);
            if y == d {
                run.accept(y, lp)?;
                run.stats.draft_accepted += 1;
            } else {
                // The model's own token at the first disagreement; drop the rest.
                crate::log!(
                    2,
                    "draft rejected: proposed {:?}, chose {:?}",
                    String::from_utf8_lossy(run.vocab.bytes(d)),
                    String::from_utf8_lossy(run.vocab.bytes(y))
                );
                session.truncate(session.n_past() - unverified)?;
                pending = Some((y, lp));
                break;
            }
        }
    };

    let c = run.chooser.stats;
    let mut stats = run.stats;
    stats.finish_decode(run.tokens.len(), decode_start);
    stats.masks_computed = c.masks_computed;
    stats.mask_us_total = c.mask_us_total;
    stats.interventions = c.interventions;
    Ok(GenerationResult {
        tokens: run.tokens,
        bytes: run.bytes,
        logprobs: run.logprobs,
        finish_reason,
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::{CompiledGrammar, Options};
    use crate::grammar::{CompileOptions, GrammarSource};

    fn smollm2() -> Arc<Vocabulary> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../shared/tokenizers/SmolLM2-135M-Instruct.tokenizer.json");
        Arc::new(
            crate::vocab::tokenizer_json::load(&path).expect("../shared/tokenizers is required"),
        )
    }

    fn constraint(regex: &str, vocab: &Arc<Vocabulary>) -> Constraint {
        let ir = GrammarSource::Regex(regex.into())
            .compile(&CompileOptions::default())
            .unwrap();
        Constraint::new(
            &CompiledGrammar::new(ir).unwrap(),
            vocab,
            Options::default(),
        )
        .unwrap()
    }

    #[test]
    fn a_draft_never_proposes_twice_from_one_context() {
        let vocab = smollm2();
        // Free text: after " motors" the key is where it was, and the counts (seen once:
        // " motors") would propose it again and again.
        let mut c = constraint("[a-z ]*", &vocab);
        let motors = vocab.tokenize(" motors").unwrap()[0];
        c.commit(motors).unwrap();
        let inside = c.draft_context();
        c.commit(motors).unwrap();
        assert_eq!(
            c.draft_context(),
            inside,
            "inside free text the key does not move"
        );
        let mut drafts = DraftModel::new(0);
        drafts.observe(inside, motors);
        let (mut out, mut guesses) = (Vec::new(), Vec::new());
        propose_draft(&mut c, &drafts, &vocab, 16, 0.8, &mut out, &mut guesses);
        assert_eq!(out, vec![motors], "one guess per context");
        assert_eq!(
            guesses,
            vec![DraftGuess {
                q: 1.0,
                source: DraftSource::Counted
            }]
        );
        assert_eq!(c.num_committed(), 2, "the constraint is left as it was");
    }

    #[test]
    fn forced_text_is_drafted_in_the_tokenizers_tokens() {
        let vocab = smollm2();
        let mut c = constraint("<name>[a-z]{1,9}</name>", &vocab);
        let (mut out, mut guesses) = (Vec::new(), Vec::new());
        propose_draft(
            &mut c,
            &DraftModel::new(0),
            &vocab,
            16,
            0.8,
            &mut out,
            &mut guesses,
        );
        let text: Vec<u8> = out.iter().flat_map(|&t| vocab.bytes(t).to_vec()).collect();
        assert_eq!(
            text, b"<name>",
            "the forced prefix, then nothing (free text, no counts)"
        );
        assert!(
            guesses
                .iter()
                .all(|g| g.source == DraftSource::Forced && g.q == 1.0)
        );
        // Room bounds the draft.
        propose_draft(
            &mut c,
            &DraftModel::new(0),
            &vocab,
            1,
            0.8,
            &mut out,
            &mut guesses,
        );
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn utf8_prefix_stops_before_a_cut_character() {
        assert_eq!(valid_utf8_prefix(b"ab"), "ab");
        assert_eq!(valid_utf8_prefix(&"aé".as_bytes()[..2]), "a");
        assert_eq!(valid_utf8_prefix(b""), "");
    }
}
