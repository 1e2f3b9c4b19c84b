//! Token sampling over raw logits, in Rust: greedy, temperature, top-k, top-p, min-p, with an
//! optional mask of allowed tokens and a seeded RNG.
//!
//! Truncation order (each step sees only what the previous one kept):
//! **mask → temperature → top-k → top-p → min-p**, then one draw from the renormalised rest.
//! - mask: only members of the allowed [`TokenSet`] are candidates (tokens outside it, or
//!   beyond the logits, are never picked); with `temperature <= 0` the result is the
//!   allowed token with the highest logit (the first one on ties).
//! - top-p keeps the smallest set of most probable tokens whose probability mass reaches
//!   `top_p`; min-p then drops tokens with probability below `min_p × p(best)`.
//!
//! Speed: logits are read once per step and never copied whole; the candidate buffer is
//! reused across steps (no vocabulary-sized allocation per token). Greedy decoding is a
//! 16-lane max that the compiler vectorises; with a mask it walks the mask's 64-bit words,
//! scanning full words as contiguous slices and sparse words bit by bit, so a mask that
//! allows 1% of the vocabulary costs about 1% of a full scan.

use crate::vocab::{TokenId, TokenSet};

/// Sampling parameters. The defaults are greedy decoding.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingConfig {
    /// Softmax temperature; `<= 0` means greedy (argmax).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Nucleus sampling mass in (0, 1]; 1 = off.
    pub top_p: f32,
    /// Drop tokens below `min_p × p(best)`, in [0, 1]; 0 = off.
    pub min_p: f32,
    /// Seed of the random generator (same seed, same logits → same tokens).
    pub seed: u64,
}

impl Default for SamplingConfig {
    fn default() -> Self {
        SamplingConfig {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 0,
        }
    }
}

impl SamplingConfig {
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    /// Reject values outside the parameters' ranges (NaN included).
    pub fn validate(&self) -> Result<(), String> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(format!(
                "temperature must be a finite number >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(format!("top-p must be in (0, 1], got {}", self.top_p));
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return Err(format!("min-p must be in [0, 1], got {}", self.min_p));
        }
        Ok(())
    }
}

/// xoshiro256** (Blackman & Vigna), seeded through SplitMix64: small, fast, reproducible
/// on every platform.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn seeded(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A token of the truncated distribution with its (renormalised) probability.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub id: TokenId,
    /// The logit before sampling, then the probability once the distribution is built.
    pub p: f32,
}

/// A sampler: configuration, RNG state and reusable buffers.
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplingConfig,
    rng: Rng,
    candidates: Vec<Candidate>,
}

impl Sampler {
    pub fn new(config: SamplingConfig) -> Self {
        let rng = Rng::seeded(config.seed);
        Sampler {
            config,
            rng,
            candidates: Vec::new(),
        }
    }

    pub fn config(&self) -> &SamplingConfig {
        &self.config
    }

    /// Pick the next token from `logits`, only among `mask` when given. `None` when no token
    /// is allowed (an empty mask).
    pub fn sample(&mut self, logits: &[f32], mask: Option<&TokenSet>) -> Option<TokenId> {
        if self.config.is_greedy() {
            return match mask {
                Some(m) => argmax_masked(logits, m),
                None => argmax(logits),
            };
        }
        self.build_distribution(logits, mask);
        let total: f64 = self.candidates.iter().map(|c| c.p as f64).sum();
        let mut u = self.rng.next_f64() * total;
        for c in &self.candidates {
            u -= c.p as f64;
            if u < 0.0 {
                return Some(c.id);
            }
        }
        self.candidates.last().map(|c| c.id)
    }

    /// The distribution `sample` draws from, after every truncation, normalised to sum 1
    /// (in no particular order). Greedy configurations give the argmax with probability 1.
    /// Speculative sampling needs this to accept or reject a drafted token exactly.
    pub fn distribution(&mut self, logits: &[f32], mask: Option<&TokenSet>) -> &[Candidate] {
        if self.config.is_greedy() {
            self.candidates.clear();
            let best = match mask {
                Some(m) => argmax_masked(logits, m),
                None => argmax(logits),
            };
            self.candidates
                .extend(best.map(|id| Candidate { id, p: 1.0 }));
            return &self.candidates;
        }
        self.build_distribution(logits, mask);
        let total: f32 = self.candidates.iter().map(|c| c.p).sum();
        if total > 0.0 {
            self.candidates.iter_mut().for_each(|c| c.p /= total);
        }
        &self.candidates
    }

    /// Fill `candidates` with the truncated distribution (unnormalised probabilities).
    fn build_distribution(&mut self, logits: &[f32], mask: Option<&TokenSet>) {
        let c = &mut self.candidates;
        c.clear();
        // 1. mask
        match mask {
            None => c.extend(logits.iter().enumerate().map(|(i, &l)| Candidate {
                id: TokenId(i as u32),
                p: l,
            })),
            Some(m) => for_each_allowed(logits, m, |i, l| {
                c.push(Candidate {
                    id: TokenId(i as u32),
                    p: l,
                })
            }),
        }
        c.retain(|x| x.p > f32::NEG_INFINITY && !x.p.is_nan());
        if c.is_empty() {
            return;
        }
        let desc = |a: &Candidate, b: &Candidate| b.p.total_cmp(&a.p);
        // 2. temperature, 3. top-k (on logits: the order is the same as on probabilities)
        let k = self.config.top_k;
        if k > 0 && k < c.len() {
            c.select_nth_unstable_by(k - 1, desc);
            c.truncate(k);
        }
        let inv_t = 1.0 / self.config.temperature;
        let max = c.iter().fold(f32::NEG_INFINITY, |m, x| m.max(x.p));
        for x in c.iter_mut() {
            x.p = ((x.p - max) * inv_t).exp();
        }
        // 4. top-p: sort only as many of the most probable tokens as needed to reach the mass.
        let top_p = self.config.top_p;
        if top_p < 1.0 {
            let target = top_p as f64 * c.iter().map(|x| x.p as f64).sum::<f64>();
            let mut m = c.len().min(64);
            let keep = loop {
                if m < c.len() {
                    c.select_nth_unstable_by(m - 1, desc);
                }
                c[..m].sort_unstable_by(desc);
                let mut mass = 0.0f64;
                let found = c[..m].iter().position(|x| {
                    mass += x.p as f64;
                    mass >= target
                });
                match found {
                    Some(j) => break j + 1,
                    None if m == c.len() => break m,
                    None => m = (m * 8).min(c.len()),
                }
            };
            c.truncate(keep);
        }
        // 5. min-p (the best token has probability ratio 1 after the shift by `max`).
        if self.config.min_p > 0.0 {
            let best = c.iter().fold(0.0f32, |m, x| m.max(x.p));
            let floor = self.config.min_p * best;
            c.retain(|x| x.p >= floor);
        }
    }
}

/// Calls `f(index, logit)` for every allowed index below `logits.len()`, in increasing order.
#[inline]
fn for_each_allowed(logits: &[f32], mask: &TokenSet, mut f: impl FnMut(usize, f32)) {
    let n = logits.len().min(mask.universe());
    for (wi, &word) in mask.words().iter().enumerate() {
        let base = wi * 64;
        if base >= n {
            break;
        }
        let mut w = word;
        while w != 0 {
            let i = base + w.trailing_zeros() as usize;
            if i >= n {
                break;
            }
            f(i, logits[i]);
            w &= w - 1;
        }
    }
}

/// The largest value of a slice, in 16 independent lanes (vectorises).
#[inline]
fn max_value(xs: &[f32]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 16];
    let chunks = xs.chunks_exact(16);
    let rest = chunks.remainder();
    for chunk in chunks {
        for j in 0..16 {
            lanes[j] = if chunk[j] > lanes[j] {
                chunk[j]
            } else {
                lanes[j]
            };
        }
    }
    let mut m = lanes
        .iter()
        .fold(f32::NEG_INFINITY, |a, &b| if b > a { b } else { a });
    for &x in rest {
        if x > m {
            m = x;
        }
    }
    m
}

/// The index of the largest logit (the first one on ties); `None` for empty logits.
pub fn argmax(logits: &[f32]) -> Option<TokenId> {
    if logits.is_empty() {
        return None;
    }
    let m = max_value(logits);
    let i = logits.iter().position(|&x| x == m).unwrap_or(0);
    Some(TokenId(i as u32))
}

/// The allowed token with the largest logit (the first one on ties); `None` when the mask
/// allows nothing below `logits.len()`.
pub fn argmax_masked(logits: &[f32], mask: &TokenSet) -> Option<TokenId> {
    let n = logits.len().min(mask.universe());
    let mut best: Option<(usize, f32)> = None;
    for (wi, &word) in mask.words().iter().enumerate() {
        let base = wi * 64;
        if base >= n {
            break;
        }
        if word == 0 {
            continue;
        }
        if word == u64::MAX && base + 64 <= n {
            // A full word: a contiguous, vectorised scan.
            let chunk = &logits[base..base + 64];
            let m = max_value(chunk);
            if best.is_none_or(|(_, b)| m > b) {
                let j = chunk.iter().position(|&x| x == m).unwrap_or(0);
                best = Some((base + j, m));
            }
            continue;
        }
        let mut w = word;
        while w != 0 {
            let i = base + w.trailing_zeros() as usize;
            if i >= n {
                break;
            }
            let x = logits[i];
            if best.is_none_or(|(_, b)| x > b) {
                best = Some((i, x));
            }
            w &= w - 1;
        }
    }
    best.map(|(i, _)| TokenId(i as u32))
}

/// `log softmax(logits)[token]`: the model's log-probability of `token` at temperature 1,
/// unmasked (what perplexity needs). No allocation; `-inf` for an out-of-range token.
pub fn log_softmax_at(logits: &[f32], token: TokenId) -> f32 {
    let Some(&x) = logits.get(token.index()) else {
        return f32::NEG_INFINITY;
    };
    let (m, ln_sum) = log_sum_exp(logits);
    (x - m) - ln_sum
}

/// The `n` most likely tokens under `logits` with their log-probabilities, most likely first
/// (equal logits: the lower id first). What OpenAI's `top_logprobs` and llama-server's
/// `n_probs` list: the unmasked model's alternatives at that position.
pub fn top_log_softmax(logits: &[f32], n: usize) -> Vec<(TokenId, f32)> {
    if n == 0 || logits.is_empty() {
        return Vec::new();
    }
    // A bounded buffer sorted best first: one pass, O(V · n) in the worst case, n ≤ 20.
    let mut best: Vec<(usize, f32)> = Vec::with_capacity(n + 1);
    for (i, &x) in logits.iter().enumerate() {
        if best.len() == n && x <= best[n - 1].1 {
            continue;
        }
        let at = best.partition_point(|&(_, y)| y >= x);
        best.insert(at, (i, x));
        best.truncate(n);
    }
    let (m, ln_sum) = log_sum_exp(logits);
    best.into_iter()
        .map(|(i, x)| (TokenId(i as u32), (x - m) - ln_sum))
        .collect()
}

/// `ln Σ exp(logits)` as `(m, ln Σ exp(logits - m))` with `m` the maximum (stable; the two
/// parts are kept apart so `(x - m) - ln_sum` rounds as it always has).
fn log_sum_exp(logits: &[f32]) -> (f32, f32) {
    let m = max_value(logits);
    let mut lanes = [0.0f32; 16];
    let chunks = logits.chunks_exact(16);
    let rest = chunks.remainder();
    for chunk in chunks {
        for j in 0..16 {
            lanes[j] += (chunk[j] - m).exp();
        }
    }
    let mut sum: f64 = lanes.iter().map(|&v| v as f64).sum();
    sum += rest.iter().map(|&v| ((v - m).exp()) as f64).sum::<f64>();
    (m, sum.ln() as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_log_softmax_lists_the_most_likely_tokens_first_with_their_log_probabilities() {
        let logits = [1.0, 3.0, 2.0, 3.0, -1.0];
        let top = top_log_softmax(&logits, 3);
        let ids: Vec<u32> = top.iter().map(|(t, _)| t.0).collect();
        assert_eq!(ids, vec![1, 3, 2], "equal logits: lower id first");
        for (t, lp) in &top {
            assert!((lp - log_softmax_at(&logits, *t)).abs() < 1e-6);
        }
        assert_eq!(top_log_softmax(&logits, 0), vec![]);
        assert_eq!(top_log_softmax(&logits, 9).len(), 5);
    }

    fn set(universe: usize, ids: &[u32]) -> TokenSet {
        let mut s = TokenSet::new(universe);
        ids.iter().for_each(|&i| s.insert(TokenId(i)));
        s
    }

    /// Deterministic pseudo-random logits.
    fn logits(n: usize, seed: u64) -> Vec<f32> {
        let mut r = Rng::seeded(seed);
        (0..n)
            .map(|_| (r.next_f64() * 20.0 - 10.0) as f32)
            .collect()
    }

    fn naive_argmax(l: &[f32], allowed: impl Fn(usize) -> bool) -> Option<usize> {
        let mut best: Option<usize> = None;
        for i in 0..l.len() {
            if allowed(i) && best.is_none_or(|b| l[i] > l[b]) {
                best = Some(i);
            }
        }
        best
    }

    fn sampled_set(
        config: SamplingConfig,
        l: &[f32],
        mask: Option<&TokenSet>,
        draws: usize,
    ) -> std::collections::BTreeSet<u32> {
        let mut s = Sampler::new(config);
        (0..draws).map(|_| s.sample(l, mask).unwrap().0).collect()
    }

    #[test]
    fn greedy_is_argmax() {
        for seed in 0..20 {
            let l = logits(1000 + seed as usize * 37, seed);
            let expected = naive_argmax(&l, |_| true).unwrap();
            assert_eq!(argmax(&l), Some(TokenId(expected as u32)));
            let mut s = Sampler::new(SamplingConfig::default());
            assert_eq!(s.sample(&l, None), Some(TokenId(expected as u32)));
        }
        assert_eq!(argmax(&[]), None);
        // Ties go to the first index.
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), Some(TokenId(1)));
    }

    #[test]
    fn masked_greedy_matches_naive_on_sparse_and_dense_masks() {
        for seed in 0..30 {
            let n = 500 + seed as usize * 13;
            let l = logits(n, seed);
            let mut r = Rng::seeded(seed + 100);
            // density from ~1% to 100%
            let density = (seed as f64 + 1.0) / 30.0;
            let mut m = TokenSet::new(n);
            for i in 0..n {
                if r.next_f64() < density.powi(2) {
                    m.insert(TokenId(i as u32));
                }
            }
            let expected = naive_argmax(&l, |i| m.contains(TokenId(i as u32)));
            assert_eq!(
                argmax_masked(&l, &m).map(|t| t.index()),
                expected,
                "seed {seed}"
            );
        }
        let full = {
            let mut m = TokenSet::new(300);
            (0..300).for_each(|i| m.insert(TokenId(i)));
            m
        };
        let l = logits(300, 7);
        assert_eq!(argmax_masked(&l, &full), argmax(&l));
        assert_eq!(argmax_masked(&l, &TokenSet::new(300)), None);
    }

    #[test]
    fn masked_sampling_never_leaves_the_mask() {
        let l = logits(2000, 3);
        // The allowed tokens are deliberately among the least likely ones.
        let mut order: Vec<usize> = (0..l.len()).collect();
        order.sort_by(|&a, &b| l[a].total_cmp(&l[b]));
        let allowed: Vec<u32> = order[..5].iter().map(|&i| i as u32).collect();
        let m = set(2000, &allowed);
        for config in [
            SamplingConfig {
                temperature: 1.0,
                seed: 1,
                ..Default::default()
            },
            SamplingConfig {
                temperature: 5.0,
                top_k: 3,
                seed: 2,
                ..Default::default()
            },
            SamplingConfig {
                temperature: 0.7,
                top_p: 0.5,
                min_p: 0.1,
                seed: 3,
                ..Default::default()
            },
            SamplingConfig::default(),
        ] {
            let got = sampled_set(config, &l, Some(&m), 300);
            assert!(
                got.iter().all(|t| allowed.contains(t)),
                "{got:?} outside {allowed:?}"
            );
        }
        let mut s = Sampler::new(SamplingConfig {
            temperature: 1.0,
            ..Default::default()
        });
        assert_eq!(s.sample(&l, Some(&TokenSet::new(2000))), None);
    }

    #[test]
    fn top_k_keeps_the_k_best() {
        let l = vec![0.0, 5.0, 1.0, 4.0, 3.0, 2.0];
        let got = sampled_set(
            SamplingConfig {
                temperature: 100.0,
                top_k: 3,
                seed: 9,
                ..Default::default()
            },
            &l,
            None,
            2000,
        );
        assert_eq!(got, [1, 3, 4].into_iter().collect());
        let mut s = Sampler::new(SamplingConfig {
            temperature: 1.0,
            top_k: 2,
            ..Default::default()
        });
        let mut ids: Vec<u32> = s.distribution(&l, None).iter().map(|c| c.id.0).collect();
        ids.sort();
        assert_eq!(ids, vec![1, 3]);
    }

    #[test]
    fn top_p_keeps_the_smallest_set_reaching_the_mass() {
        // probabilities 0.5, 0.25, 0.125, 0.0625, 0.0625 (log-space logits, temperature 1)
        let p = [0.5f32, 0.25, 0.125, 0.0625, 0.0625];
        let l: Vec<f32> = p.iter().map(|x| x.ln()).collect();
        let dist = |top_p: f32| {
            let mut s = Sampler::new(SamplingConfig {
                temperature: 1.0,
                top_p,
                ..Default::default()
            });
            let mut ids: Vec<u32> = s.distribution(&l, None).iter().map(|c| c.id.0).collect();
            ids.sort();
            ids
        };
        assert_eq!(dist(0.5), vec![0]);
        assert_eq!(dist(0.6), vec![0, 1]);
        assert_eq!(dist(0.8), vec![0, 1, 2]);
        assert_eq!(dist(1.0), vec![0, 1, 2, 3, 4]);
        // A large flat tail: the partial sort must widen its window (64 → 512 → all).
        let mut big = vec![0.0f32; 5000];
        big[4321] = 3.0;
        let mut s = Sampler::new(SamplingConfig {
            temperature: 1.0,
            top_p: 0.9,
            ..Default::default()
        });
        let kept = s.distribution(&big, None).len();
        let total = 3f64.exp() + 4999.0;
        let expected = ((0.9 * total - 3f64.exp()) / 1.0).ceil() as usize + 1;
        assert_eq!(kept, expected);
        // The renormalised probabilities sum to 1.
        let sum: f32 = s.distribution(&big, None).iter().map(|c| c.p).sum();
        assert!((sum - 1.0).abs() < 1e-3, "{sum}");
    }

    #[test]
    fn min_p_drops_tokens_below_the_fraction_of_the_best() {
        let p = [0.5f32, 0.3, 0.1, 0.06, 0.04];
        let l: Vec<f32> = p.iter().map(|x| x.ln()).collect();
        let mut s = Sampler::new(SamplingConfig {
            temperature: 1.0,
            min_p: 0.15,
            ..Default::default()
        });
        let mut ids: Vec<u32> = s.distribution(&l, None).iter().map(|c| c.id.0).collect();
        ids.sort();
        // floor = 0.075: keeps 0.5, 0.3, 0.1
        assert_eq!(ids, vec![0, 1, 2]);
        let probs: Vec<f32> = s.distribution(&l, None).iter().map(|c| c.p).collect();
        assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_seeds_differ() {
        let l = logits(5000, 11);
        let run = |seed| {
            let mut s = Sampler::new(SamplingConfig {
                temperature: 1.5,
                top_p: 0.95,
                seed,
                ..Default::default()
            });
            (0..50)
                .map(|_| s.sample(&l, None).unwrap().0)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert_ne!(run(42), run(43));
    }

    #[test]
    fn sampling_follows_the_probabilities() {
        // p = 0.75 / 0.25: frequencies within a few percent over 20k draws.
        let l = [0.75f32.ln(), 0.25f32.ln()];
        let mut s = Sampler::new(SamplingConfig {
            temperature: 1.0,
            seed: 5,
            ..Default::default()
        });
        let n = 20_000;
        let zeros = (0..n)
            .filter(|_| s.sample(&l, None) == Some(TokenId(0)))
            .count();
        let f = zeros as f64 / n as f64;
        assert!((f - 0.75).abs() < 0.02, "{f}");
    }

    #[test]
    fn log_softmax_matches_the_definition() {
        let l = logits(777, 2);
        let m = l.iter().cloned().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = l.iter().map(|&x| (x as f64 - m).exp()).sum();
        for t in [0usize, 5, 776] {
            let expected = l[t] as f64 - m - z.ln();
            let got = log_softmax_at(&l, TokenId(t as u32)) as f64;
            assert!((got - expected).abs() < 1e-4, "{got} vs {expected}");
        }
        assert_eq!(log_softmax_at(&l, TokenId(777)), f32::NEG_INFINITY);
        // Probabilities sum to one.
        let total: f64 = (0..777)
            .map(|t| (log_softmax_at(&l, TokenId(t)) as f64).exp())
            .sum();
        assert!((total - 1.0).abs() < 1e-4);
    }

    #[test]
    fn config_validation_rejects_out_of_range_values() {
        assert!(SamplingConfig::default().validate().is_ok());
        assert!(
            SamplingConfig {
                temperature: f32::NAN,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingConfig {
                temperature: -1.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingConfig {
                top_p: 0.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingConfig {
                top_p: 1.5,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
        assert!(
            SamplingConfig {
                min_p: 2.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
    }
}
