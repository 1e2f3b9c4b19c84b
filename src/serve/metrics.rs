//! Counters of the running server, rendered as Prometheus text for `GET /metrics`.
//!
//! Everything is a relaxed atomic: requests bump them from the HTTP side and the workers from
//! theirs, and a scrape reads a consistent-enough snapshot without taking a lock. Names follow
//! Prometheus conventions (`domino_` prefix, `_total` for counters, base units).

use super::grammar_cache::GrammarCache;
use crate::decode::GenerationStats;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The server's counters (see the module doc).
#[derive(Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub requests_failed: AtomicU64,
    pub requests_cancelled: AtomicU64,
    pub requests_timed_out: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    pub decode_us: AtomicU64,
    pub prompt_us: AtomicU64,
    pub masks: AtomicU64,
    pub mask_us: AtomicU64,
    pub interventions: AtomicU64,
    pub draft_proposed: AtomicU64,
    pub draft_accepted: AtomicU64,
    /// Requests being generated now.
    pub processing: AtomicU64,
    /// Requests waiting for a slot.
    pub queued: AtomicU64,
    /// Forward passes of the shared context (one per step, all busy slots together).
    pub batch_passes: AtomicU64,
    /// Slots served by those passes, summed (÷ passes = slots per pass).
    pub batch_sequences: AtomicU64,
    /// Tokens decoded by those passes (prompts, chosen tokens, forced text, drafts).
    pub batch_tokens: AtomicU64,
}

/// A Prometheus histogram of durations with fixed buckets (seconds), lock-free like the
/// counters.
pub struct Histogram {
    /// Upper bounds in seconds, ascending; the implicit last bucket is `+Inf`.
    bounds: &'static [f64],
    /// Observations per bucket (not cumulative; rendering sums them), one more than `bounds`.
    counts: Vec<AtomicU64>,
    sum_us: AtomicU64,
}

impl Histogram {
    /// Buckets for compile times and times to first mask: 1 ms to 30 s.
    pub const COMPILE_BOUNDS: &'static [f64] = &[
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    ];

    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: std::time::Duration) {
        let secs = d.as_secs_f64();
        let i = self.bounds.partition_point(|&b| b < secs);
        add(&self.counts[i], 1);
        add(&self.sum_us, d.as_micros() as u64);
    }

    /// `name_bucket{le=…}` (cumulative), `name_sum` and `name_count` lines.
    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP domino_{name} {help}");
        let _ = writeln!(out, "# TYPE domino_{name} histogram");
        let mut total = 0;
        for (i, c) in self.counts.iter().enumerate() {
            total += c.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "domino_{name}_bucket{{le=\"{le}\"}} {total}");
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "domino_{name}_sum {sum}");
        let _ = writeln!(out, "domino_{name}_count {total}");
    }
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    /// Count one finished generation's statistics.
    pub fn record(&self, stats: &GenerationStats) {
        add(&self.prompt_tokens, stats.prompt_tokens as u64);
        add(&self.generated_tokens, stats.generated_tokens as u64);
        add(&self.prompt_us, (stats.prompt_ms * 1000.0) as u64);
        add(&self.decode_us, (stats.decode_ms * 1000.0) as u64);
        add(&self.masks, stats.masks_computed as u64);
        add(&self.mask_us, stats.mask_us_total as u64);
        add(&self.interventions, stats.interventions as u64);
        add(&self.draft_proposed, stats.draft_proposed as u64);
        add(&self.draft_accepted, stats.draft_accepted as u64);
    }

    /// The Prometheus text exposition of these counters and the grammar cache's.
    pub fn render(&self, cache: &GrammarCache, slots: usize) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let secs = |c: &AtomicU64| get(c) as f64 / 1e6;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: String| {
            let _ = writeln!(out, "# HELP domino_{name} {help}");
            let _ = writeln!(out, "# TYPE domino_{name} {kind}");
            let _ = writeln!(out, "domino_{name} {value}");
        };
        let c = "counter";
        let g = "gauge";
        metric(
            "requests_total",
            c,
            "Generation requests received.",
            get(&self.requests).to_string(),
        );
        metric(
            "requests_failed_total",
            c,
            "Generation requests that ended in an error.",
            get(&self.requests_failed).to_string(),
        );
        metric(
            "requests_cancelled_total",
            c,
            "Generations stopped because the client went away.",
            get(&self.requests_cancelled).to_string(),
        );
        metric(
            "requests_timed_out_total",
            c,
            "Generations cut off by --timeout (partial result returned).",
            get(&self.requests_timed_out).to_string(),
        );
        metric(
            "requests_processing",
            g,
            "Generations running now.",
            get(&self.processing).to_string(),
        );
        metric(
            "requests_queued",
            g,
            "Requests waiting for a free slot.",
            get(&self.queued).to_string(),
        );
        metric(
            "slots",
            g,
            "Generation slots (--parallel).",
            slots.to_string(),
        );
        metric(
            "batch_passes_total",
            c,
            "Forward passes of the shared context (continuous batching: one per step for all busy slots).",
            get(&self.batch_passes).to_string(),
        );
        metric(
            "batch_sequences_total",
            c,
            "Slots decoded in those passes, summed (divided by the passes: slots per pass).",
            get(&self.batch_sequences).to_string(),
        );
        metric(
            "batch_tokens_total",
            c,
            "Tokens decoded in those passes (prompts, chosen tokens, forced text, drafts).",
            get(&self.batch_tokens).to_string(),
        );
        metric(
            "prompt_tokens_total",
            c,
            "Prompt tokens evaluated.",
            get(&self.prompt_tokens).to_string(),
        );
        metric(
            "tokens_predicted_total",
            c,
            "Tokens generated.",
            get(&self.generated_tokens).to_string(),
        );
        metric(
            "prompt_seconds_total",
            c,
            "Time spent evaluating prompts.",
            secs(&self.prompt_us).to_string(),
        );
        metric(
            "tokens_predicted_seconds_total",
            c,
            "Time spent generating.",
            secs(&self.decode_us).to_string(),
        );
        metric(
            "masks_total",
            c,
            "Token masks computed by the engine.",
            get(&self.masks).to_string(),
        );
        metric(
            "mask_seconds_total",
            c,
            "Time spent computing masks.",
            secs(&self.mask_us).to_string(),
        );
        metric(
            "interventions_total",
            c,
            "Steps where the model's top token was not allowed.",
            get(&self.interventions).to_string(),
        );
        metric(
            "draft_tokens_proposed_total",
            c,
            "Speculative draft tokens proposed.",
            get(&self.draft_proposed).to_string(),
        );
        metric(
            "draft_tokens_accepted_total",
            c,
            "Speculative draft tokens accepted.",
            get(&self.draft_accepted).to_string(),
        );
        metric(
            "grammar_cache_hits_total",
            c,
            "Requests whose grammar was already compiled.",
            get(&cache.hits).to_string(),
        );
        metric(
            "grammar_cache_misses_total",
            c,
            "Requests whose grammar had to be compiled.",
            get(&cache.misses).to_string(),
        );
        metric(
            "grammar_compile_seconds_total",
            c,
            "Time spent compiling grammars.",
            secs(&cache.compile_us).to_string(),
        );
        metric(
            "grammar_cache_entries",
            g,
            "Compiled grammars held.",
            cache.len().to_string(),
        );
        cache.first_mask.render(
            &mut out,
            "grammar_time_to_first_mask_seconds",
            "Per compiled grammar (cache miss): compile, token trees and first mask, as `domino bench masks` measures time to first mask (tool and reasoning plans: compile only).",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_with_sum_and_count() {
        let h = Histogram::new(&[0.001, 0.01]);
        for ms in [0.5, 2.0, 3.0, 50.0] {
            h.observe(std::time::Duration::from_secs_f64(ms / 1000.0));
        }
        let mut out = String::new();
        h.render(&mut out, "t_seconds", "help");
        assert!(
            out.contains("domino_t_seconds_bucket{le=\"0.001\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("domino_t_seconds_bucket{le=\"0.01\"} 3\n"),
            "{out}"
        );
        assert!(
            out.contains("domino_t_seconds_bucket{le=\"+Inf\"} 4\n"),
            "{out}"
        );
        assert!(out.contains("domino_t_seconds_count 4\n"), "{out}");
        let sum: f64 = out
            .lines()
            .find_map(|l| l.strip_prefix("domino_t_seconds_sum "))
            .unwrap()
            .parse()
            .unwrap();
        assert!((sum - 0.0555).abs() < 1e-5, "{out}");
    }

    #[test]
    fn rendered_counters_follow_the_exposition_format() {
        let m = Metrics::default();
        m.record(&GenerationStats {
            prompt_tokens: 5,
            generated_tokens: 7,
            interventions: 2,
            ..Default::default()
        });
        let text = m.render(&GrammarCache::new(1), 2);
        assert!(text.contains(
            "# TYPE domino_tokens_predicted_total counter\ndomino_tokens_predicted_total 7\n"
        ));
        assert!(text.contains("domino_interventions_total 2\n"));
        assert!(text.contains("domino_slots 2\n"));
        assert!(text.contains("# TYPE domino_grammar_time_to_first_mask_seconds histogram\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once(' ').unwrap();
            assert!(name.starts_with("domino_"), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
