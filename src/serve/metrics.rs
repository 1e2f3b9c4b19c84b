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
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once(' ').unwrap();
            assert!(name.starts_with("domino_"), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
