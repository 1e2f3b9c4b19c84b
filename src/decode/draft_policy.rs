//! How long a speculative draft should be: measured forward-pass cost against calibrated
//! acceptance.
//!
//! # Why
//! The count model ([`super::draft_model::DraftModel`]) says which token is likely next and
//! how often it was right; it says nothing about what verifying a draft costs. That cost is a
//! property of the machine: on a GPU a batch of 11 positions costs about what one does, so
//! long drafts are free lottery tickets; on a 2-core CPU it costs 6.6× one decode for
//! SmolLM2-135M and 3.9× for Gemma 3 270M (`../shared/notes/llama-cpp-2-on-this-machine.md`),
//! so a long draft that is half rejected makes decoding *slower* than no speculation
//! (measured: `--draft 8` at 0.88× the CPU throughput of `--draft 4` on the GSM8K schema).
//! A fixed length cannot be right on both machines, and timings drift on shared ones.
//!
//! # The rule ([`DraftPolicy::Cost`], the default)
//! One forward pass over `[token, d₁ … d_m]` yields `1 + (number of accepted drafts)` tokens:
//! every accepted draft is output, and the position after the last accepted one gives the
//! model's own next token for free. With `c_i` the probability that `d₁ … d_i` are all
//! accepted, the expected yield is `E(m) = 1 + Σ_{i≤m} c_i`. With `t(n)` the time of a pass
//! over `n` positions, the expected rate is `E(m) / t(m + 1)`; the draft is cut at the `m`
//! (from 0, no draft, up to what was proposed) that maximises it.
//!
//! - `t(n) = a + b·(n − 1)` is fitted online ([`ForwardCost`]) by exponentially weighted least
//!   squares over the passes this decoder actually ran (recent ones weigh most, so drift is
//!   followed). The measurements on both models and the GPU figures of the paper are linear in
//!   `n` to within ~10 % over 1–16 positions. Until two different batch sizes have been seen
//!   the slope is unknown, and a draft is cut to [`PROBE_DRAFT_LEN`] tokens: cheap on any
//!   machine, and enough to measure the slope (a GPU's near-zero slope then lets whole drafts
//!   through).
//! - `c_i = Π p'_k`, where `p'_k` is the count probability `q_k` of draft `k` scaled by an
//!   [`AcceptanceCalibration`] for its *position* in the draft and its source (counts or the
//!   grammar's forced text): the ratio of drafts accepted there to the sum of their `q`, over
//!   recent verified drafts. Position matters: with the threshold rule on the GSM8K schema at
//!   temperature 1 (SmolLM2), drafts 1–4 were accepted 43 times in 50, drafts 5–8 once in 25
//!   (sampled tokenizations of forced keys and whitespace diverge from any fixed guess), far
//!   below what a product of per-token probabilities predicts; on the JSON workload the
//!   reverse: drafts that get past the first position are accepted far more often than the
//!   first one (acceptance is correlated along a draft). Every position starts at factor 1
//!   (optimistic, so that it is tried and measured) and its own verified drafts move it.
//!
//! [`DraftPolicy::Threshold`] is the rule of the paper and of earlier versions: draft while
//! the chain's count probability is at least `--draft-threshold`, at any cost. Under both
//! policies the proposal itself stops at the threshold; the cost rule only shortens drafts.
//!
//! # Invariants
//! - The policy chooses *how many* proposed tokens are verified, never which token is output:
//!   verification is unchanged, so greedy output is identical under every policy and length
//!   (tests/decode_exactness.rs), and sampled output keeps the constrained distribution.
//! - Both keep learning when the counts are frozen (the paper's throughput protocol freezes
//!   its draft priors after warm-up): the cost model measures the machine, and how often
//!   frozen counts are right is a fixed quantity, the easiest one to keep estimating. (Freezing
//!   the calibration with the counts, tried first, kept what it had learned while the counts
//!   were still thin: on the JSON workload it then cut nearly every draft, 10 in 4 reps.)

/// Which rule decides the length of a draft (`--draft-policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DraftPolicy {
    /// Cut each draft where expected tokens per unit of measured forward-pass time peak.
    #[default]
    Cost,
    /// Draft while the count probability stays at or above the threshold, whatever it costs.
    Threshold,
}

impl DraftPolicy {
    /// Every policy, in the order `--help` lists them.
    pub const ALL: [DraftPolicy; 2] = [DraftPolicy::Cost, DraftPolicy::Threshold];

    pub fn as_str(self) -> &'static str {
        match self {
            DraftPolicy::Cost => "cost",
            DraftPolicy::Threshold => "threshold",
        }
    }
}

impl std::str::FromStr for DraftPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<DraftPolicy, String> {
        DraftPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown draft policy `{s}` (expected cost or threshold)"))
    }
}

/// Weight kept by older observations per new one in [`ForwardCost`] (an effective window of
/// about 100 passes: enough to average out timer noise, short enough to follow a machine
/// whose other load changes).
const COST_DECAY: f64 = 0.99;
/// Below this weighted variance of `n − 1` the passes seen do not tell the slope apart from
/// noise (e.g. almost all single-token passes, the last draft long ago): the slope is then
/// unknown, and taken as 0 so that the next draft measures it again.
const MIN_SIZE_VARIANCE: f64 = 0.02;

/// Online model of forward-pass time `t(n) = a + b·(n − 1)` for a batch of `n` positions
/// with logits at every position (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ForwardCost {
    w: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

/// A fitted [`ForwardCost`]: milliseconds of a one-position pass, and per extra position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostEstimate {
    pub base_ms: f64,
    pub per_extra_ms: f64,
    /// Whether passes of different sizes were measured (else `per_extra_ms` is 0, unknown).
    pub slope_known: bool,
}

impl CostEstimate {
    /// Predicted time of a pass over `n ≥ 1` positions.
    pub fn time(&self, n: usize) -> f64 {
        self.base_ms + self.per_extra_ms * n.saturating_sub(1) as f64
    }
}

impl ForwardCost {
    /// A pass over `positions` positions took `ms` milliseconds.
    pub fn observe(&mut self, positions: usize, ms: f64) {
        if positions == 0 || !ms.is_finite() || ms <= 0.0 {
            return;
        }
        let x = (positions - 1) as f64;
        self.w = self.w * COST_DECAY + 1.0;
        self.sx = self.sx * COST_DECAY + x;
        self.sy = self.sy * COST_DECAY + ms;
        self.sxx = self.sxx * COST_DECAY + x * x;
        self.sxy = self.sxy * COST_DECAY + x * ms;
    }

    /// The fitted line, or `None` before any single-position pass was seen in the window (no
    /// base time to compare drafts with).
    pub fn estimate(&self) -> Option<CostEstimate> {
        if self.w <= 0.0 {
            return None;
        }
        let mean_x = self.sx / self.w;
        let mean_y = self.sy / self.w;
        let var_x = self.sxx / self.w - mean_x * mean_x;
        if var_x < MIN_SIZE_VARIANCE {
            // One batch size only. Single positions give the base time and an unknown
            // (optimistic) slope; drafts alone cannot separate base from slope.
            return (mean_x < 0.5).then_some(CostEstimate {
                base_ms: mean_y,
                per_extra_ms: 0.0,
                slope_known: false,
            });
        }
        let cov = self.sxy / self.w - mean_x * mean_y;
        let slope = (cov / var_x).max(0.0);
        // A noisy fit may put the intercept at or below zero; a pass never costs nothing.
        let base = (mean_y - slope * mean_x).max(mean_y * 0.05).max(1e-6);
        Some(CostEstimate {
            base_ms: base,
            per_extra_ms: slope,
            slope_known: true,
        })
    }
}

/// Drafts verified at most this long while the cost slope is unknown (see the module doc).
pub const PROBE_DRAFT_LEN: usize = 2;

/// Prior weight (in drafts) of each position's calibration: every position starts at "the
/// counts are right" and moves once a handful of its own drafts have been verified. (Starting
/// a deep position at the factor of the one before it looked safer, but when the first
/// position is mediocre it cuts every draft there, so deeper positions are never verified and
/// never learn that they are better: measured on the JSON workload, 92 of 97 drafts accepted
/// against 350 of 393 with every proposal verified.)
const CALIBRATION_PRIOR: f64 = 4.0;
/// Weight kept by older verified drafts at a position per new one there (a window of ~200).
const CALIBRATION_DECAY: f64 = 0.995;
/// Positions calibrated separately; deeper ones share the last.
pub const CALIBRATED_POSITIONS: usize = 16;

/// Ratio of drafts accepted to the probability their counts gave them, per position in the
/// draft (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AcceptanceCalibration {
    /// Per position: Σ q and Σ accepted over verified drafts (exponentially decayed).
    predicted: [f64; CALIBRATED_POSITIONS],
    accepted: [f64; CALIBRATED_POSITIONS],
}

impl AcceptanceCalibration {
    /// The draft at `position` (0 = first), which the counts gave probability `q`, was
    /// verified: accepted or not.
    pub fn observe(&mut self, position: usize, q: f32, accepted: bool) {
        let i = position.min(CALIBRATED_POSITIONS - 1);
        self.predicted[i] = self.predicted[i] * CALIBRATION_DECAY + q as f64;
        self.accepted[i] = self.accepted[i] * CALIBRATION_DECAY + if accepted { 1.0 } else { 0.0 };
    }

    /// The factor applied to count probabilities at `position`.
    pub fn factor(&self, position: usize) -> f64 {
        let i = position.min(CALIBRATED_POSITIONS - 1);
        (self.accepted[i] + CALIBRATION_PRIOR) / (self.predicted[i] + CALIBRATION_PRIOR)
    }

    /// `q` at `position` calibrated, as a probability.
    pub fn calibrated(&self, position: usize, q: f32) -> f64 {
        (q as f64 * self.factor(position)).clamp(0.0, 1.0)
    }
}

/// Where a drafted token came from: the counts, or the grammar's forced text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraftSource {
    Counted,
    Forced,
}

/// One proposed draft token with what the proposer knew about it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DraftGuess {
    /// The probability the proposer gave it (count frequency; 1 for forced text).
    pub q: f32,
    pub source: DraftSource,
}

/// The policy's state inside a decoder: cost model and calibrations (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DraftTuner {
    pub policy: DraftPolicy,
    pub cost: ForwardCost,
    counted: AcceptanceCalibration,
    forced: AcceptanceCalibration,
}

impl DraftTuner {
    pub fn new(policy: DraftPolicy) -> Self {
        DraftTuner {
            policy,
            ..Default::default()
        }
    }

    fn calibration(&self, source: DraftSource) -> &AcceptanceCalibration {
        match source {
            DraftSource::Counted => &self.counted,
            DraftSource::Forced => &self.forced,
        }
    }

    /// Calibrated acceptance probability of the guess at `position` of a draft, given the
    /// guesses before it were accepted.
    pub fn probability(&self, position: usize, g: DraftGuess) -> f64 {
        self.calibration(g.source).calibrated(position, g.q)
    }

    /// The draft at `position` was verified: update the calibration of its source there.
    pub fn observe_outcome(&mut self, position: usize, g: DraftGuess, accepted: bool) {
        match g.source {
            DraftSource::Counted => self.counted.observe(position, g.q, accepted),
            DraftSource::Forced => self.forced.observe(position, g.q, accepted),
        }
    }

    /// How many of the proposed `guesses` to verify (a prefix length).
    pub fn draft_len(&self, guesses: &[DraftGuess]) -> usize {
        match self.policy {
            DraftPolicy::Threshold => guesses.len(),
            DraftPolicy::Cost => {
                let probabilities = guesses
                    .iter()
                    .enumerate()
                    .map(|(i, &g)| self.probability(i, g));
                match self.cost.estimate() {
                    // No timings at all yet: one short draft measures what drafts cost.
                    None => guesses.len().min(PROBE_DRAFT_LEN),
                    Some(cost) if !cost.slope_known => best_draft_len(
                        probabilities.take(PROBE_DRAFT_LEN),
                        CostEstimate {
                            per_extra_ms: 0.0,
                            ..cost
                        },
                    ),
                    Some(cost) => best_draft_len(probabilities, cost),
                }
            }
        }
    }

    /// Calibration factors of `source` at the first `n` positions, for diagnostics.
    pub fn factors_by_position(&self, source: DraftSource, n: usize) -> Vec<f64> {
        (0..n).map(|i| self.calibration(source).factor(i)).collect()
    }

    /// The first-position calibration factors (counted, forced), for statistics.
    pub fn calibration_factors(&self) -> (f64, f64) {
        (self.counted.factor(0), self.forced.factor(0))
    }
}

/// The draft length `m` (0 ..= number of probabilities) maximising
/// `(1 + Σ_{i≤m} Π_{k≤i} p_k) / t(m + 1)`; the shortest on ties.
pub fn best_draft_len(probabilities: impl IntoIterator<Item = f64>, cost: CostEstimate) -> usize {
    let mut best = 0;
    let mut best_rate = 1.0 / cost.time(1);
    let mut chain = 1.0;
    let mut expected = 1.0;
    for (i, p) in probabilities.into_iter().enumerate() {
        chain *= p.clamp(0.0, 1.0);
        expected += chain;
        let rate = expected / cost.time(i + 2);
        if rate > best_rate * (1.0 + 1e-9) {
            best = i + 1;
            best_rate = rate;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(q: f32) -> DraftGuess {
        DraftGuess {
            q,
            source: DraftSource::Counted,
        }
    }

    #[test]
    fn the_fitted_line_recovers_linear_pass_times() {
        // SmolLM2 on the 2-core CPU: one position 12 ms, each extra one ~8.3 ms.
        let mut c = ForwardCost::default();
        for i in 0..200 {
            let n = [1, 1, 1, 3, 1, 9, 1, 5][i % 8];
            c.observe(n, 12.0 + 8.3 * (n - 1) as f64);
        }
        let e = c.estimate().unwrap();
        assert!((e.base_ms - 12.0).abs() < 1e-6, "{e:?}");
        assert!((e.per_extra_ms - 8.3).abs() < 1e-6, "{e:?}");
        assert!((e.time(11) - 95.0).abs() < 1e-6);
    }

    #[test]
    fn one_batch_size_gives_an_optimistic_slope_or_nothing() {
        let mut c = ForwardCost::default();
        assert_eq!(c.estimate(), None, "no data");
        c.observe(5, 40.0);
        assert_eq!(
            c.estimate(),
            None,
            "drafts alone cannot separate base time from slope"
        );
        let mut c = ForwardCost::default();
        for _ in 0..10 {
            c.observe(1, 10.0);
        }
        let single = |c: &ForwardCost| {
            let e = c.estimate().expect("single positions give a base time");
            assert!(
                (e.base_ms - 10.0).abs() < 1e-9 && e.per_extra_ms == 0.0 && !e.slope_known,
                "{e:?}"
            );
        };
        single(&c);
        // Bad readings are ignored.
        c.observe(0, 5.0);
        c.observe(3, f64::NAN);
        c.observe(3, -1.0);
        single(&c);
    }

    #[test]
    fn an_old_draft_fades_until_the_slope_is_measured_again() {
        let mut c = ForwardCost::default();
        c.observe(1, 10.0);
        c.observe(9, 90.0);
        assert!(c.estimate().unwrap().per_extra_ms > 9.0 && c.estimate().unwrap().slope_known);
        for _ in 0..2000 {
            c.observe(1, 10.0);
        }
        // Nothing but single positions for a long time: the slope is unknown again, so the
        // next draft is a probe that re-measures it.
        assert!(!c.estimate().unwrap().slope_known);
    }

    #[test]
    fn the_cut_maximises_expected_tokens_per_millisecond() {
        let cpu = CostEstimate {
            base_ms: 12.0,
            per_extra_ms: 8.3,
            slope_known: true,
        };
        let gpu = CostEstimate {
            base_ms: 10.0,
            per_extra_ms: 0.1,
            slope_known: true,
        };
        // Certain drafts pay on both machines, all of them.
        assert_eq!(best_draft_len([1.0; 8], cpu), 8);
        assert_eq!(best_draft_len([1.0; 8], gpu), 8);
        // Coin flips: never worth 8.3 ms each on the CPU; worth 0.1 ms on the GPU until the
        // chain's chance is too small: m = 5 gives (2 - 0.5^5) / 10.5 = 0.1875, m = 6 0.1872,
        // m = 8 0.1848.
        assert_eq!(best_draft_len([0.5; 8], cpu), 0);
        assert_eq!(best_draft_len([0.5; 8], gpu), 5);
        // Two sure tokens, then a guess that rarely holds: stop after the sure ones.
        assert_eq!(best_draft_len([1.0, 1.0, 0.2, 0.2], cpu), 2);
        // Exactly what the rule computes: m = 1 gives (1 + 0.9) / 20.3 = 0.0936 > 1/12.
        assert_eq!(best_draft_len([0.9], cpu), 1);
        assert_eq!(best_draft_len([0.6], cpu), 0); // 1.6 / 20.3 = 0.079 < 0.083
        assert_eq!(best_draft_len(std::iter::empty(), cpu), 0);
    }

    #[test]
    fn calibration_learns_how_often_counts_are_right_at_each_position() {
        let mut t = DraftTuner::new(DraftPolicy::Cost);
        assert!(
            (t.probability(0, counted(1.0)) - 1.0).abs() < 1e-12,
            "starts trusting the counts"
        );
        // Counts that say 1.0 but hold half the time as first drafts and never as third.
        for i in 0..1000 {
            t.observe_outcome(0, counted(1.0), i % 2 == 0);
            t.observe_outcome(2, counted(1.0), false);
        }
        let p = |t: &DraftTuner, pos| t.probability(pos, counted(1.0));
        assert!((p(&t, 0) - 0.5).abs() < 0.02, "{}", p(&t, 0));
        assert!(p(&t, 2) < 0.02, "{}", p(&t, 2));
        // Position 1 has no data of its own: it starts trusting the counts, so that it gets
        // verified and measured; positions past the last calibrated one share it.
        assert!((p(&t, 1) - 1.0).abs() < 1e-12);
        assert!(p(&t, 100) == p(&t, CALIBRATED_POSITIONS - 1));
        // Forced-text drafts are calibrated on their own.
        let forced = DraftGuess {
            q: 1.0,
            source: DraftSource::Forced,
        };
        assert!((t.probability(0, forced) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_policies_decide_the_length() {
        let guesses = [counted(1.0), counted(0.9), counted(0.85)];
        let mut t = DraftTuner::new(DraftPolicy::Cost);
        assert_eq!(
            t.draft_len(&guesses),
            PROBE_DRAFT_LEN,
            "no timings yet: a short probe"
        );
        t.cost.observe(1, 10.0);
        assert_eq!(
            t.draft_len(&guesses),
            PROBE_DRAFT_LEN,
            "slope unknown: a short probe"
        );
        // A GPU-like machine: extra positions almost free. Whole drafts.
        let mut gpu = t.clone();
        gpu.cost.observe(3, 10.2);
        assert_eq!(gpu.draft_len(&guesses), 3);
        // A machine where each extra position costs as much as a whole pass.
        for _ in 0..50 {
            t.cost.observe(1, 10.0);
            t.cost.observe(4, 40.0);
        }
        assert_eq!(
            t.draft_len(&guesses),
            0,
            "even sure drafts do not pay when a position costs a pass"
        );
        let sure = [counted(1.0); 3];
        let mut t = DraftTuner::new(DraftPolicy::Cost);
        for _ in 0..50 {
            t.cost.observe(1, 10.0);
            t.cost.observe(4, 25.0);
        }
        assert_eq!(
            t.draft_len(&sure),
            3,
            "at 5 ms per extra position sure drafts pay: 4 tokens in 25 ms"
        );
        for _ in 0..1000 {
            t.observe_outcome(0, counted(1.0), false);
        }
        assert_eq!(
            t.draft_len(&sure),
            0,
            "drafts that are always rejected do not"
        );
        t.policy = DraftPolicy::Threshold;
        assert_eq!(
            t.draft_len(&guesses),
            3,
            "the threshold policy ignores cost"
        );
    }
}
