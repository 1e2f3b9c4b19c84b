//! Per-sample records and per-method aggregates (the columns of Table 2 and more).
//!
//! Metric definitions, per method over the samples it completed:
//! - **accuracy**: share of samples scored correct ([`super::score`] defines correct per task).
//! - **well-formed rate**: share whose first JSON document validates against the task schema.
//! - **perplexity**: `exp(-Σ logprob / Σ tokens)` over all generated tokens of all samples,
//!   where each logprob is the chosen token's log-probability under the *unmasked* model
//!   (token-weighted, so long outputs weigh more; `mean_sample_perplexity` is the per-sample
//!   mean for comparison). This is how the paper shows that invasive methods push the model
//!   into tokens it would not choose.
//! - **tokens/s**: `Σ generated tokens / Σ decode seconds` (prompt evaluation excluded), and
//!   **performance impact**: that divided by `none`'s tokens/s in the same run (absent when
//!   `none` was not run).
//! - **intervention rate**: `Σ interventions / Σ generated tokens`, an intervention being a step
//!   where the model's top token was blocked.
//! - **exact match with `none`**: share of samples (completed by both) where the method
//!   produced the same output as `none` — see [`same_output`]: equal token ids, or equal ids
//!   until both had written the same complete JSON document. (A constrained run stops
//!   when the document is complete, while `none` often writes on: `\n\nQ: …`. By the paper's
//!   claim, and this project's invariant, k = ∞ DOMINO with greedy decoding reproduces `none`'s
//!   tokens exactly up to the end of a valid document.) **Mean first divergence**: over the
//!   samples that are not the same, the mean index of the first differing token (the shorter
//!   length when one is a prefix of the other).
//! - **entity F1** (CoNLL): micro F1 over summed entity counts.

use super::Task;
use super::method::Method;
use super::score::EntityCounts;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// An end-of-generation token (or, constrained, the grammar accepted and ended).
    Eos,
    /// A stop string was produced.
    Stop,
    /// The token limit was reached.
    MaxTokens,
    /// Constrained: the grammar reached a state with nothing more to generate.
    GrammarEnd,
    /// The constraint left no token to choose (a dead end).
    DeadEnd,
    /// The backend failed on this sample; `error` in the record says why.
    Error,
}

impl FinishReason {
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Eos => "eos",
            FinishReason::Stop => "stop",
            FinishReason::MaxTokens => "max_tokens",
            FinishReason::GrammarEnd => "grammar_end",
            FinishReason::DeadEnd => "dead_end",
            FinishReason::Error => "error",
        }
    }
}

/// One line of `results.jsonl`: one sample decoded with one method, and its score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleResult {
    pub task: Task,
    /// The sample's 0-based line index in the test file.
    pub sample_id: usize,
    pub method: Method,
    /// Fingerprint of the few-shot prompt ([`super::prompt::FewShotPrompt::prompt_id`]).
    pub prompt_id: String,
    pub output_text: String,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Log-probability of each generated token under the unmasked model.
    pub logprobs: Vec<f32>,
    /// Steps where the model's top token was blocked.
    pub interventions: u32,
    pub parsed_answer: Value,
    pub gold: Value,
    pub correct: bool,
    pub well_formed: bool,
    pub generated_tokens: usize,
    pub prompt_tokens: usize,
    /// Milliseconds spent generating (prompt evaluation excluded).
    pub decode_ms: f64,
    /// Milliseconds spent evaluating the prompt.
    pub prompt_ms: f64,
    pub finish_reason: FinishReason,
    /// CoNLL entity counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entities: Option<EntityCounts>,
    /// Why no answer could be read (extraction or schema error), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_note: Option<String>,
    /// The backend's error, when `finish_reason` is `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SampleResult {
    /// Perplexity of this sample's generated tokens (None without tokens).
    pub fn perplexity(&self) -> Option<f64> {
        if self.logprobs.is_empty() {
            return None;
        }
        let sum: f64 = self.logprobs.iter().map(|&l| l as f64).sum();
        Some((-sum / self.logprobs.len() as f64).exp())
    }
}

/// Aggregates of one method over one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodSummary {
    pub method: Method,
    pub samples: usize,
    pub correct: usize,
    pub accuracy: f64,
    pub well_formed_rate: f64,
    pub perplexity: Option<f64>,
    pub mean_sample_perplexity: Option<f64>,
    pub generated_tokens: u64,
    pub decode_seconds: f64,
    pub tokens_per_second: Option<f64>,
    /// tokens/s divided by `none`'s tokens/s in the same run.
    pub performance_impact: Option<f64>,
    pub intervention_rate: Option<f64>,
    /// Share of samples whose tokens equal `none`'s; None when `none` has no shared samples.
    pub exact_match_with_none: Option<f64>,
    /// Mean first divergence position over the samples that differ from `none`.
    pub mean_first_divergence: Option<f64>,
    /// Samples compared with `none`.
    pub compared_with_none: usize,
    /// Exact match with `none` over the samples where `none`'s output is well-formed: where
    /// the unconstrained answer is already valid, a minimally invasive method must not change it.
    pub exact_match_where_none_well_formed: Option<f64>,
    /// Correctness paired with `none` on the same samples (McNemar's exact test).
    pub vs_none: Option<PairedComparison>,
    /// CoNLL only.
    pub entity_f1: Option<f64>,
    pub entities: Option<EntityCounts>,
    /// Samples per finish reason.
    pub finish_reasons: BTreeMap<String, usize>,
    /// Samples the backend failed on.
    pub errors: usize,
}

/// Index of the first differing element (the shorter length when one is a prefix), or None
/// when equal.
pub fn first_divergence(a: &[u32], b: &[u32]) -> Option<usize> {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => Some(i),
        None if a.len() == b.len() => None,
        None => Some(a.len().min(b.len())),
    }
}

/// Whether `result` is the same output as `reference` (`none`'s on the same sample): equal
/// tokens, or the same tokens until both had written the same complete JSON document — what
/// follows the document (a constrained run's trailing whitespace or end of text, `none`'s
/// `\n\nQ: …`) does not count. A run cut off before its document was complete is not the same
/// output.
pub fn same_output(result: &SampleResult, reference: &SampleResult) -> bool {
    if first_divergence(&result.tokens, &reference.tokens).is_none() {
        return true;
    }
    // Identical tokens give identical text, so the divergence in text is at or after the
    // divergence in tokens: the common text prefix holds everything both outputs agree on.
    let common = common_prefix(&result.output_text, &reference.output_text);
    super::extract::first_json_document(common).is_ok()
}

/// The longest common prefix of two strings, cut at a character boundary.
fn common_prefix<'a>(a: &'a str, b: &str) -> &'a str {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !a.is_char_boundary(n) {
        n -= 1;
    }
    &a[..n]
}

/// A method's correctness against `none`'s on the same samples.
///
/// Accuracy differences on a few hundred samples are often noise; McNemar's exact test looks
/// only at the discordant samples (one right, the other wrong) and asks how likely a split at
/// least this uneven is if both methods were equally good: a two-sided binomial test with
/// p = 1/2. `p_value` near 1 = no evidence of a difference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairedComparison {
    pub both_correct: usize,
    /// Correct with this method, wrong with `none`.
    pub only_method: usize,
    /// Correct with `none`, wrong with this method.
    pub only_none: usize,
    pub neither: usize,
    pub p_value: f64,
}

impl PairedComparison {
    /// From (method correct, none correct) pairs.
    pub fn from_pairs(pairs: &[(bool, bool)]) -> PairedComparison {
        let count = |m: bool, n: bool| pairs.iter().filter(|&&p| p == (m, n)).count();
        let (only_method, only_none) = (count(true, false), count(false, true));
        PairedComparison {
            both_correct: count(true, true),
            only_method,
            only_none,
            neither: count(false, false),
            p_value: mcnemar_exact(only_method, only_none),
        }
    }
}

/// Two-sided exact McNemar p-value for `b` and `c` discordant pairs:
/// `min(1, 2 · P[X ≤ min(b, c)])` with `X ~ Binomial(b + c, 1/2)`.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    let k = b.min(c);
    // ln C(n, i) built up incrementally, in log space so large n cannot overflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0f64;
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    (2.0 * tail).min(1.0)
}

fn rate(n: usize, d: usize) -> f64 {
    if d == 0 { 0.0 } else { n as f64 / d as f64 }
}

/// Summaries per method, in the order of `methods` (methods without results are left out).
pub fn summarize(results: &[SampleResult], methods: &[Method]) -> Vec<MethodSummary> {
    let none_results: HashMap<usize, &SampleResult> = results
        .iter()
        .filter(|r| r.method == Method::None && r.error.is_none())
        .map(|r| (r.sample_id, r))
        .collect();
    let none_tps = tokens_per_second(results.iter().filter(|r| r.method == Method::None));
    let mut out = Vec::new();
    for &method in methods {
        let rows: Vec<&SampleResult> = results.iter().filter(|r| r.method == method).collect();
        if rows.is_empty() {
            continue;
        }
        let n = rows.len();
        let correct = rows.iter().filter(|r| r.correct).count();
        let well_formed = rows.iter().filter(|r| r.well_formed).count();
        let token_count: usize = rows.iter().map(|r| r.logprobs.len()).sum();
        let logprob_sum: f64 = rows
            .iter()
            .flat_map(|r| r.logprobs.iter())
            .map(|&l| l as f64)
            .sum();
        let perplexity = (token_count > 0).then(|| (-logprob_sum / token_count as f64).exp());
        let sample_ppl: Vec<f64> = rows.iter().filter_map(|r| r.perplexity()).collect();
        let mean_sample_perplexity = (!sample_ppl.is_empty())
            .then(|| sample_ppl.iter().sum::<f64>() / sample_ppl.len() as f64);
        let generated_tokens: u64 = rows.iter().map(|r| r.generated_tokens as u64).sum();
        let decode_seconds: f64 = rows.iter().map(|r| r.decode_ms).sum::<f64>() / 1000.0;
        let tps = tokens_per_second(rows.iter().copied());
        let performance_impact = match (tps, none_tps) {
            (Some(t), Some(n)) if n > 0.0 => Some(t / n),
            _ => None,
        };
        let interventions: u64 = rows.iter().map(|r| r.interventions as u64).sum();
        let intervention_rate =
            (generated_tokens > 0).then(|| interventions as f64 / generated_tokens as f64);
        let mut compared = 0;
        let mut equal = 0;
        let (mut compared_valid, mut equal_valid) = (0, 0);
        let mut divergences = Vec::new();
        for r in rows.iter().filter(|r| r.error.is_none()) {
            if let Some(reference) = none_results.get(&r.sample_id) {
                compared += 1;
                let same = same_output(r, reference);
                if reference.well_formed {
                    compared_valid += 1;
                    equal_valid += same as usize;
                }
                if same {
                    equal += 1;
                } else {
                    let i =
                        first_divergence(&r.tokens, &reference.tokens).unwrap_or(r.tokens.len());
                    divergences.push(i as f64);
                }
            }
        }
        let exact_match_with_none = (compared > 0).then(|| rate(equal, compared));
        let paired: Vec<(bool, bool)> = rows
            .iter()
            .filter_map(|r| {
                none_results
                    .get(&r.sample_id)
                    .map(|n| (r.correct, n.correct))
            })
            .collect();
        let vs_none = (method != Method::None && !paired.is_empty())
            .then(|| PairedComparison::from_pairs(&paired));
        let mean_first_divergence = (!divergences.is_empty())
            .then(|| divergences.iter().sum::<f64>() / divergences.len() as f64);
        let entities =
            rows.iter()
                .filter_map(|r| r.entities)
                .fold(None, |acc: Option<EntityCounts>, c| {
                    let mut acc = acc.unwrap_or_default();
                    acc.add(c);
                    Some(acc)
                });
        let mut finish_reasons = BTreeMap::new();
        for r in &rows {
            *finish_reasons
                .entry(r.finish_reason.name().to_string())
                .or_insert(0) += 1;
        }
        out.push(MethodSummary {
            method,
            samples: n,
            correct,
            accuracy: rate(correct, n),
            well_formed_rate: rate(well_formed, n),
            perplexity,
            mean_sample_perplexity,
            generated_tokens,
            decode_seconds,
            tokens_per_second: tps,
            performance_impact,
            intervention_rate,
            exact_match_with_none,
            mean_first_divergence,
            compared_with_none: compared,
            exact_match_where_none_well_formed: (compared_valid > 0)
                .then(|| rate(equal_valid, compared_valid)),
            vs_none,
            entity_f1: entities.map(|e| e.f1()),
            entities,
            finish_reasons,
            errors: rows.iter().filter(|r| r.error.is_some()).count(),
        });
    }
    out
}

fn tokens_per_second<'a>(rows: impl Iterator<Item = &'a SampleResult>) -> Option<f64> {
    let (tokens, ms) = rows.fold((0u64, 0f64), |(t, m), r| {
        (t + r.generated_tokens as u64, m + r.decode_ms)
    });
    (ms > 0.0 && tokens > 0).then(|| tokens as f64 / (ms / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_reference_values() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        assert_eq!(mcnemar_exact(3, 3), 1.0);
        // b = 0, c = 5: 2 · 0.5^5 = 0.0625.
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-12);
        // b = 1, c = 9: 2 · (1 + 10) / 1024.
        assert!((mcnemar_exact(9, 1) - 22.0 / 1024.0).abs() < 1e-12);
        assert!(mcnemar_exact(0, 2000) < 1e-300 || mcnemar_exact(0, 2000) == 0.0);
        let p = PairedComparison::from_pairs(&[
            (true, true),
            (true, false),
            (false, true),
            (false, true),
            (false, false),
        ]);
        assert_eq!(
            (p.both_correct, p.only_method, p.only_none, p.neither),
            (1, 1, 2, 1)
        );
        assert!((p.p_value - 1.0).abs() < 1e-12);
    }

    #[test]
    fn divergence_positions() {
        assert_eq!(first_divergence(&[1, 2, 3], &[1, 2, 3]), None);
        assert_eq!(first_divergence(&[1, 2, 3], &[1, 5, 3]), Some(1));
        assert_eq!(first_divergence(&[1, 2], &[1, 2, 3]), Some(2));
    }

    fn record(method: Method, text: &str) -> SampleResult {
        let tokens: Vec<u32> = text.bytes().map(u32::from).collect();
        SampleResult {
            task: Task::Gsm8k,
            sample_id: 0,
            method,
            prompt_id: String::new(),
            output_text: text.into(),
            logprobs: vec![-1.0; tokens.len()],
            generated_tokens: tokens.len(),
            tokens,
            interventions: 0,
            parsed_answer: Value::Null,
            gold: Value::Null,
            correct: false,
            well_formed: false,
            prompt_tokens: 0,
            decode_ms: 1.0,
            prompt_ms: 0.0,
            finish_reason: FinishReason::Eos,
            entities: None,
            score_note: None,
            error: None,
        }
    }

    #[test]
    fn constrained_output_stopping_at_the_document_end_is_the_same() {
        let none = record(Method::None, "{\"answer\": 1}\n\nQ: next");
        assert!(same_output(
            &record(Method::DOMINO, "{\"answer\": 1}"),
            &none
        ));
        assert!(!same_output(
            &record(Method::DOMINO, "{\"answer\": 2}"),
            &none
        ));
        assert!(
            !same_output(&record(Method::DOMINO, "{\"answer\""), &none),
            "a cut-off prefix is not the same output"
        );
        assert!(!same_output(&record(Method::DOMINO, ""), &none));
        // Diverging only after the document (the grammar's trailing whitespace then EOS, where
        // `none` writes on into the next few-shot question) is the same output.
        assert!(same_output(
            &record(Method::DOMINO, "{\"answer\": 1}\n\n\n"),
            &none
        ));
        assert!(!same_output(
            &record(Method::DOMINO, "{\"answer\": 1 }\n\nQ: next"),
            &none
        ));
        let summary = summarize(
            &[
                none.clone(),
                record(Method::DOMINO, "{\"answer\": 1}"),
                record(Method::Naive, "{\"answer\":1}"),
            ],
            &[Method::None, Method::DOMINO, Method::Naive],
        );
        assert_eq!(summary[1].exact_match_with_none, Some(1.0));
        assert_eq!(summary[1].mean_first_divergence, None);
        assert_eq!(summary[2].exact_match_with_none, Some(0.0));
        assert_eq!(summary[2].mean_first_divergence, Some(10.0));
    }
}
