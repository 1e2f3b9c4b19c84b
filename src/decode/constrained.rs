//! Constrained generation: how the DOMINO engine runs inside decode's loop
//! ([`super::sequence::run`] with [`super::ChoiceRule::Engine`]), with opportunistic
//! masking, count-based speculative drafts and the guidance-style template baseline.
//!
//! # The steps
//! Every step chooses a token from the latest logits among the tokens the constraint ([`TokenConstraint`]: plain, triggered or healed)
//! allows ([`super::opportunistic::Chooser`]: full or opportunistic masking), commits it, and runs the next forward
//! pass on a batch `[token, forced…, draft…]`:
//! - **forced** (`template` only): the text every continuation starts with
//!   ([`TokenConstraint::forced_bytes`]) is tokenized with the model's tokenizer and appended
//!   without consulting the model — guidance's jump-forward, and the template-induced
//!   misalignment of the paper's Fig. 2;
//! - **drafts** (`--draft S`, DOMINO §3.6): up to `S` tokens proposed by a count model
//!   [`DraftModel`] keyed by [`TokenConstraint::draft_context`] (while the product of the drafted
//!   tokens' count probabilities — the chance the whole draft is accepted — reaches the
//!   threshold), or else by the grammar itself where the text is forced (probability 1: the
//!   tokenizer's first token of the forced bytes; the counts go first because they know
//!   which tokenization of forced text this model actually prefers). Each proposal is checked with `allows`
//!   and committed so the next proposal sees its context; all of them are rolled back before
//!   verification. A [`super::draft_policy::DraftTuner`] then cuts the draft where the expected tokens per unit
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
use super::draft_policy::{DraftGuess, DraftSource};
use crate::engine::TokenConstraint;
use crate::vocab::{TokenId, Vocabulary};

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

/// A constraint a generation can drive: the engine's plain [`Constraint`](crate::engine::Constraint)
/// or any boxed [`TokenConstraint`] (triggered, healed), so callers that hold either pass it
/// as they hold it.
pub trait AsDynConstraint {
    /// The constraint as the decode loop drives it.
    fn as_dyn(&mut self) -> &mut dyn TokenConstraint;
}

impl AsDynConstraint for crate::engine::Constraint {
    fn as_dyn(&mut self) -> &mut dyn TokenConstraint {
        self
    }
}

impl AsDynConstraint for Box<dyn TokenConstraint> {
    fn as_dyn(&mut self) -> &mut dyn TokenConstraint {
        &mut **self
    }
}

/// The tokenizer's first token of the forced text, when it is allowed here.
fn forced_token(constraint: &mut dyn TokenConstraint, vocab: &Vocabulary) -> Option<TokenId> {
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
    constraint: &mut dyn TokenConstraint,
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
pub(crate) fn valid_utf8_prefix(b: &[u8]) -> &str {
    match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).expect("valid prefix"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::{CompiledGrammar, Constraint, Options};
    use crate::grammar::{CompileOptions, GrammarSource};
    use std::sync::Arc;

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
