//! `:mask`: the tokens the current constraint allows at the end of the last output (or at
//! the start), ranked by the model's probability there, with the model's favourite and any
//! forced continuation.

use super::{Repl, generation, say};
use crate::engine::{Constraint, Options};
use crate::vocab::{TokenId, TokenSet, Vocabulary};

impl Repl<'_> {
    /// `:mask`: the tokens the current constraint allows after the last output (or at the
    /// start), ranked by the model's probability there.
    pub(super) fn mask(&mut self) -> anyhow::Result<()> {
        let Some(active) = &self.active else {
            anyhow::bail!(
                "no constraint is set: every token is allowed (set one with :json, :schema, :grammar or :regex)"
            );
        };
        let mut constraint = Constraint::new(
            &active.grammar,
            &self.vocab,
            Options {
                lookahead: self.settings.lookahead(),
                ..Default::default()
            },
        )?;
        let (context, place) = match self.turns.last() {
            Some(turn) if constraint.commit_bytes(&turn.outcome.bytes).is_ok() => {
                let mut ctx = turn.prompt_tokens.clone();
                ctx.extend_from_slice(&turn.outcome.tokens);
                (
                    ctx,
                    format!(
                        "after the last output ({} tokens)",
                        turn.outcome.tokens.len()
                    ),
                )
            }
            Some(turn) => (
                turn.prompt_tokens.clone(),
                "at the start (the last output does not fit this constraint)".to_string(),
            ),
            None => {
                let mut ctx = self.model.prompt_tokens("", self.settings.chat)?;
                if ctx.is_empty() {
                    ctx.push(self.model.bos().0);
                }
                (ctx, "at the start (no prompt yet)".to_string())
            }
        };
        let (index, _) = generation::feed(&mut self.session, &context)?;
        let logits = self.session.logits(index);
        let mut mask = TokenSet::new(self.vocab.len());
        constraint.compute_mask(&mut mask);
        let probs = softmax(logits);
        let view = mask_view(&self.vocab, &mask, &probs, 15);
        let mut text = format!(
            "{place}: {} of {} tokens allowed{}; they hold {:.1}% of the model's probability",
            view.allowed,
            self.vocab.len(),
            if view.eos_allowed {
                " (end of generation among them)"
            } else {
                ""
            },
            view.allowed_mass * 100.0
        );
        if let Some((t, p, ok)) = &view.favourite {
            text.push_str(&format!(
                "\nmodel's favourite: {} p={} — {}",
                token_label(&self.vocab, *t),
                format_prob(*p),
                if *ok {
                    "allowed"
                } else {
                    "blocked by the grammar"
                }
            ));
        }
        for (t, p) in &view.top {
            text.push_str(&format!(
                "\n  {:>9}  {}",
                format_prob(*p),
                token_label(&self.vocab, *t)
            ));
        }
        if view.allowed > view.top.len() {
            text.push_str(&format!("\n  … {} more", view.allowed - view.top.len()));
        }
        let forced = constraint.forced_bytes();
        if !forced.is_empty() {
            text.push_str(&format!(
                "\nforced continuation: {:?}",
                String::from_utf8_lossy(&forced)
            ));
        }
        say(text);
        Ok(())
    }
}

/// A probability with four decimals, or in scientific notation when that would show zeros.
fn format_prob(p: f32) -> String {
    if p >= 1e-3 || p == 0.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

/// Probabilities of the full softmax over `logits`.
fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut p: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = p.iter().sum();
    if sum > 0.0 {
        p.iter_mut().for_each(|x| *x /= sum);
    }
    p
}

/// What `:mask` reports.
#[derive(Debug, PartialEq)]
struct MaskView {
    allowed: usize,
    eos_allowed: bool,
    /// Sum of the model's probabilities over allowed tokens.
    allowed_mass: f32,
    /// The model's most likely token, its probability, and whether it is allowed.
    favourite: Option<(TokenId, f32, bool)>,
    /// Allowed tokens by decreasing probability (ties by id).
    top: Vec<(TokenId, f32)>,
}

fn mask_view(vocab: &Vocabulary, mask: &TokenSet, probs: &[f32], n: usize) -> MaskView {
    let mut allowed: Vec<(TokenId, f32)> = mask
        .iter()
        .map(|t| (t, probs.get(t.index()).copied().unwrap_or(0.0)))
        .collect();
    let allowed_mass = allowed.iter().map(|(_, p)| p).sum();
    allowed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let favourite = probs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        .map(|(i, &p)| (TokenId(i as u32), p, mask.contains(TokenId(i as u32))));
    MaskView {
        allowed: allowed.len(),
        eos_allowed: vocab.eog_tokens().iter().any(|&e| mask.contains(e)),
        allowed_mass,
        favourite,
        top: allowed.into_iter().take(n).collect(),
    }
}

/// A token as `:mask` shows it: its text quoted (end-of-generation named).
fn token_label(vocab: &Vocabulary, t: TokenId) -> String {
    if vocab.is_eog(t) {
        format!("<end of generation #{}>", t.0)
    } else {
        format!("{:?} #{}", String::from_utf8_lossy(vocab.bytes(t)), t.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_view_ranks_allowed_tokens_by_probability() {
        let words = ["a", "b", "c", "d", ""];
        let vocab = Vocabulary::new(
            words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            vec![false; 5],
            vec![TokenId(4)],
        );
        let mut mask = TokenSet::new(5);
        for t in [1, 2, 4] {
            mask.insert(TokenId(t));
        }
        let probs = [0.5, 0.1, 0.3, 0.05, 0.05];
        let view = mask_view(&vocab, &mask, &probs, 2);
        assert_eq!(view.allowed, 3);
        assert!(view.eos_allowed);
        assert!((view.allowed_mass - 0.45).abs() < 1e-6);
        assert_eq!(view.favourite, Some((TokenId(0), 0.5, false)));
        assert_eq!(view.top, vec![(TokenId(2), 0.3), (TokenId(1), 0.1)]);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let p = softmax(&[1.0, 2.0, 3.0]);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(p[0] < p[1] && p[1] < p[2]);
    }
}
