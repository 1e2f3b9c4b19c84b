//! Choosing one token under a constraint: full masking or opportunistic masking.
//!
//! # Overview
//! [`Chooser::choose`] picks the next token from raw logits among the tokens a constraint
//! allows. Two strategies give the *same* result:
//! - **full masking**: compute the mask ([`AllowedTokens::compute_mask`], into a reused
//!   buffer — no per-step allocation), then sample from the masked logits;
//! - **opportunistic** (`--opportunistic`, DOMINO §3.5): sample from the raw logits, check
//!   that one token with [`AllowedTokens::allows`], and compute the mask only when it is
//!   rejected.
//!
//! # Exactness
//! - Greedy: the raw argmax, when allowed, *is* the masked argmax (it is the first index with
//!   the global maximum, so no allowed token beats or ties it earlier); otherwise the mask
//!   is computed and the masked argmax returned. Identical token for token.
//! - Sampling at temperature `T` without truncation: with `p = softmax(logits / T)` and
//!   allowed set `A`, the opportunistic rule outputs `x ∈ A` with probability
//!   `p(x) + (1 − p(A)) · p(x)/p(A) = p(x)/p(A)` — exactly the masked distribution.
//! - With truncation (top-k / top-p / min-p) the sampler truncates *after* masking
//!   (mask → temperature → top-k → top-p → min-p); truncating the raw distribution first
//!   would keep a different set, so the chooser falls back to full masking whenever a
//!   truncation is active. The output distribution is therefore always the masked
//!   sampler's.
//!
//! # Statistics
//! `masks_computed` and `mask_us_total` count full mask computations; `interventions` counts
//! steps where the model's own top choice (the raw argmax) was not allowed.

use super::sampler::{argmax, argmax_masked};
use super::{Sampler, SamplingConfig};
use crate::engine::{Constraint, TokenConstraint};
use crate::vocab::{TokenId, TokenSet};
use std::time::Instant;

/// What a chooser needs from a constraint (implemented by [`Constraint`] and every
/// [`TokenConstraint`]; tests use toys).
pub trait AllowedTokens {
    /// Whether one token is allowed now.
    fn allows(&mut self, t: TokenId) -> bool;
    /// All allowed tokens, into `out` (cleared first).
    fn compute_mask(&mut self, out: &mut TokenSet);
}

impl AllowedTokens for Constraint {
    fn allows(&mut self, t: TokenId) -> bool {
        Constraint::allows(self, t)
    }
    fn compute_mask(&mut self, out: &mut TokenSet) {
        Constraint::compute_mask(self, out)
    }
}

impl AllowedTokens for &mut dyn TokenConstraint {
    fn allows(&mut self, t: TokenId) -> bool {
        TokenConstraint::allows(&mut **self, t)
    }
    fn compute_mask(&mut self, out: &mut TokenSet) {
        TokenConstraint::compute_mask(&mut **self, out)
    }
}

/// Counters of a chooser.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ChoiceStats {
    pub masks_computed: usize,
    pub mask_us_total: f64,
    pub interventions: usize,
}

/// Token choice under a constraint (see the module doc).
#[derive(Clone, Debug)]
pub struct Chooser {
    sampler: Sampler,
    mask: TokenSet,
    opportunistic: bool,
    pub stats: ChoiceStats,
}

impl Chooser {
    pub fn new(sampling: SamplingConfig, vocab_len: usize, opportunistic: bool) -> Self {
        Chooser {
            sampler: Sampler::new(sampling),
            mask: TokenSet::new(vocab_len),
            opportunistic,
            stats: ChoiceStats::default(),
        }
    }

    /// Whether the opportunistic shortcut is exact for this configuration (greedy, or
    /// sampling without truncation).
    pub fn opportunistic_is_active(&self) -> bool {
        let c = self.sampler.config();
        self.opportunistic && (c.is_greedy() || (c.top_k == 0 && c.top_p >= 1.0 && c.min_p <= 0.0))
    }

    fn fill_mask(&mut self, c: &mut dyn AllowedTokens) {
        let start = Instant::now();
        c.compute_mask(&mut self.mask);
        self.stats.masks_computed += 1;
        self.stats.mask_us_total += start.elapsed().as_secs_f64() * 1e6;
    }

    /// The next token: a draw from the constrained distribution of `logits` (greedy: the
    /// masked argmax). `known_allowed` is a token already known to be allowed (a verified
    /// draft), which spares one `allows` check. `None` when nothing is allowed.
    pub fn choose(
        &mut self,
        logits: &[f32],
        c: &mut dyn AllowedTokens,
        known_allowed: Option<TokenId>,
    ) -> Option<TokenId> {
        let raw_best = argmax(logits)?;
        let opportunistic = self.opportunistic_is_active();
        if self.sampler.config().is_greedy() {
            if opportunistic && (known_allowed == Some(raw_best) || c.allows(raw_best)) {
                return Some(raw_best);
            }
            if !opportunistic {
                self.fill_mask(c);
                if self.mask.contains(raw_best) {
                    return Some(raw_best);
                }
            } else {
                self.fill_mask(c);
            }
            self.stats.interventions += 1;
            return argmax_masked(logits, &self.mask);
        }
        if opportunistic {
            let x = self.sampler.sample(logits, None)?;
            if known_allowed == Some(x) || c.allows(x) {
                if x != raw_best && !c.allows(raw_best) {
                    self.stats.interventions += 1;
                }
                return Some(x);
            }
        }
        self.fill_mask(c);
        if !self.mask.contains(raw_best) {
            self.stats.interventions += 1;
        }
        self.sampler.sample(logits, Some(&self.mask))
    }

    /// The masked argmax, computing the mask (for tests and baselines).
    pub fn mask(&self) -> &TokenSet {
        &self.mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::sampler::Rng;

    /// A fixed allowed set.
    struct Fixed(TokenSet, usize);
    impl AllowedTokens for Fixed {
        fn allows(&mut self, t: TokenId) -> bool {
            self.1 += 1;
            self.0.contains(t)
        }
        fn compute_mask(&mut self, out: &mut TokenSet) {
            *out = self.0.clone();
        }
    }

    fn logits(n: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::seeded(seed);
        (0..n).map(|_| (r.next_f64() * 8.0 - 4.0) as f32).collect()
    }

    fn random_set(n: usize, density: f64, seed: u64) -> TokenSet {
        let mut r = Rng::seeded(seed);
        let mut s = TokenSet::new(n);
        for i in 0..n {
            if r.next_f64() < density {
                s.insert(TokenId(i as u32));
            }
        }
        s
    }

    #[test]
    fn greedy_opportunistic_equals_full_masking() {
        for seed in 0..200u64 {
            let n = 300;
            let l = logits(n, seed);
            let allowed = random_set(n, [0.01, 0.2, 0.9][seed as usize % 3], seed + 1000);
            let mut full = Chooser::new(SamplingConfig::default(), n, false);
            let mut opp = Chooser::new(SamplingConfig::default(), n, true);
            let a = full.choose(&l, &mut Fixed(allowed.clone(), 0), None);
            let b = opp.choose(&l, &mut Fixed(allowed.clone(), 0), None);
            assert_eq!(a, b, "seed {seed}");
            assert_eq!(a, argmax_masked(&l, &allowed));
            assert_eq!(full.stats.interventions, opp.stats.interventions);
            // Full masking always computes the mask; opportunistic only on rejection.
            assert_eq!(full.stats.masks_computed, 1);
            assert_eq!(opp.stats.masks_computed, opp.stats.interventions);
        }
    }

    /// Empirical frequencies of opportunistic sampling match the masked distribution
    /// `p(x)/p(A)` (chi-square-like bound on a small vocabulary, many draws).
    #[test]
    fn sampled_opportunistic_follows_the_masked_distribution() {
        let l = [2.0f32, 1.5, 0.0, -1.0, 1.0, 0.5];
        let mut allowed = TokenSet::new(6);
        for t in [1u32, 2, 3, 5] {
            allowed.insert(TokenId(t));
        }
        let config = SamplingConfig {
            temperature: 0.8,
            seed: 17,
            ..Default::default()
        };
        let p: Vec<f64> = l.iter().map(|&x| ((x / 0.8) as f64).exp()).collect();
        let pa: f64 = [1usize, 2, 3, 5].iter().map(|&i| p[i]).sum();
        let draws = 60_000;
        for opportunistic in [true, false] {
            let mut ch = Chooser::new(config.clone(), 6, opportunistic);
            let mut counts = [0usize; 6];
            let mut toy = Fixed(allowed.clone(), 0);
            for _ in 0..draws {
                counts[ch.choose(&l, &mut toy, None).unwrap().index()] += 1;
            }
            for i in 0..6 {
                let expected = if allowed.contains(TokenId(i as u32)) {
                    p[i] / pa
                } else {
                    0.0
                };
                let f = counts[i] as f64 / draws as f64;
                assert!(
                    (f - expected).abs() < 0.01,
                    "opportunistic={opportunistic} token {i}: {f} vs {expected}"
                );
            }
            if opportunistic {
                assert!(ch.stats.masks_computed < draws, "the mask was not skipped");
            }
        }
    }

    #[test]
    fn truncation_falls_back_to_full_masking() {
        let config = SamplingConfig {
            temperature: 1.0,
            top_k: 2,
            ..Default::default()
        };
        let ch = Chooser::new(config, 10, true);
        assert!(!ch.opportunistic_is_active());
        let ch = Chooser::new(
            SamplingConfig {
                temperature: 1.0,
                ..Default::default()
            },
            10,
            true,
        );
        assert!(ch.opportunistic_is_active());
    }

    #[test]
    fn nothing_allowed_gives_none() {
        let l = logits(50, 1);
        let mut ch = Chooser::new(SamplingConfig::default(), 50, true);
        assert_eq!(ch.choose(&l, &mut Fixed(TokenSet::new(50), 0), None), None);
    }
}
