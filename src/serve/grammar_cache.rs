//! Compiled constraints shared by every request that names the same grammar.
//!
//! Compiling a grammar (parsing, lowering, the scanner DFA, the parser tables) costs
//! milliseconds to seconds, and the subterminal trees built on first use cost more; both
//! live in the engine's [`CompiledGrammar`] (its tree cache is per vocabulary). Keyed by the
//! content of the constraint (its [`GrammarSource`] and [`CompileOptions`], hashed), the
//! cache hands every later request with the same grammar the same `Arc`, so a service that
//! sends one schema over and over compiles it once. Bounded by entry count: the least
//! recently used entry goes when a new one would exceed it. Compilation — the grammar, its
//! token trees and first mask — runs on a blocking thread under the request's compile budget
//! (`--grammar-timeout`, `--grammar-memory`; see [`crate::engine::budget`]), which stops that
//! thread with an error naming the limit ([`GrammarCache::get_or_compile`]).
//!
//! Tool-call and reasoning plans ([`TagPlan`], built per request from `tools`,
//! `tool_choice`, `parallel_tool_calls`, the template's call syntax and the reasoning marker)
//! go through the same cache ([`GrammarCache::get_or_compile_plan`]), keyed by the plan's
//! content ([`plan_key`]): a client that sends the same tools with every request compiles
//! them once, and its later requests count as hits in `/metrics`. A plan's entry is a
//! [`EngineGrammar`]: a whole-output grammar (forced calls) or a triggered spec, whose
//! free-text masks are then built once too.

use crate::constraint::ConstraintSpec;
use crate::decode::methods::EngineGrammar;
use crate::decode::regions::{CompiledPlan, TagPlan};
use crate::engine::budget::Budget;
use crate::engine::{CompiledGrammar, Options};
use crate::grammar::{CompileOptions, GrammarSource};
use crate::vocab::Vocabulary;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// How long past its time budget a compile thread may take to notice it before the request
/// is answered anyway (checkpoints come far more often; this only catches a stage without).
pub const COMPILE_GRACE: Duration = Duration::from_secs(10);

/// The cache (see the module doc) and its counters.
pub struct GrammarCache {
    entries: Mutex<HashMap<u64, Entry>>,
    capacity: usize,
    clock: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Total compile time of misses, in microseconds.
    pub compile_us: AtomicU64,
    /// Per miss: the compile with its token trees and first mask (time to first mask).
    pub first_mask: super::metrics::Histogram,
}

/// One grammar: compiled once, by the first request that needs it; requests that arrive
/// while it compiles wait for that compilation instead of starting their own.
struct Entry {
    cell: Arc<OnceCell<EngineGrammar>>,
    last_used: u64,
}

/// The cache key of a constraint: its content, hashed.
pub fn content_key(source: &GrammarSource, compile: &CompileOptions) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{source:?}\u{0}{compile:?}").hash(&mut h);
    h.finish()
}

/// The cache key of a tagged-region plan: its content (regions with their grammars, triggers
/// and closing texts, what follows a region, how many, whether it starts in one) and the
/// compile options, hashed apart from [`content_key`]'s.
pub fn plan_key(plan: &TagPlan, compile: &CompileOptions) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("plan\u{0}{}", plan.key_text(compile)).hash(&mut h);
    h.finish()
}

impl GrammarCache {
    pub fn new(capacity: usize) -> GrammarCache {
        GrammarCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            compile_us: AtomicU64::new(0),
            first_mask: super::metrics::Histogram::new(super::metrics::Histogram::COMPILE_BOUNDS),
        }
    }

    /// Compiled grammars held now.
    pub fn len(&self) -> usize {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries.values().filter(|e| e.cell.initialized()).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of `key`, made (evicting the least recently used one) if missing.
    fn cell(&self, key: u64) -> Arc<OnceCell<EngineGrammar>> {
        let tick = self.clock.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get_mut(&key) {
            e.last_used = tick;
            return e.cell.clone();
        }
        if entries.len() >= self.capacity {
            let oldest = entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| *k);
            if let Some(k) = oldest {
                entries.remove(&k);
            }
        }
        let cell = Arc::new(OnceCell::new());
        entries.insert(
            key,
            Entry {
                cell: cell.clone(),
                last_used: tick,
            },
        );
        cell
    }

    /// The compiled grammar of `spec` and its key: from the cache, or compiled (with the
    /// first mask over `vocab`) on a blocking thread under `spec.compile.budget`. Over the
    /// budget the thread stops at its next checkpoint and the request fails with a grammar
    /// limit error naming the limit; a thread stuck between checkpoints is given up on
    /// [`COMPILE_GRACE`] past the time limit (its result is dropped). A failed compilation is
    /// not kept: the next request with that grammar tries again (and fails the same way).
    pub async fn get_or_compile(
        self: &Arc<Self>,
        spec: ConstraintSpec,
        vocab: Arc<Vocabulary>,
    ) -> anyhow::Result<(Arc<CompiledGrammar>, u64)> {
        let key = content_key(&spec.source, &spec.compile);
        let budget = spec.compile.budget;
        let (grammar, key) = self
            .get_or_build(key, budget, move || {
                spec.compile_for(&vocab, Options::default())
                    .map(EngineGrammar::Plain)
            })
            .await?;
        match grammar {
            EngineGrammar::Plain(g) => Ok((g, key)),
            EngineGrammar::Triggered(_) => {
                anyhow::bail!("internal error: a grammar's cache entry holds a tagged-region plan")
            }
        }
    }

    /// A tagged-region plan (tool calls, reasoning) compiled for `vocab`, and its key: from
    /// the cache (keyed by [`plan_key`]) or compiled as [`GrammarCache::get_or_compile`]
    /// compiles a grammar, the whole plan under `compile.budget`.
    pub async fn get_or_compile_plan(
        self: &Arc<Self>,
        plan: TagPlan,
        compile: CompileOptions,
        vocab: Arc<Vocabulary>,
    ) -> anyhow::Result<(EngineGrammar, u64)> {
        let key = plan_key(&plan, &compile);
        let budget = compile.budget;
        self.get_or_build(key, budget, move || {
            let _armed = budget.enter();
            Ok(match plan.compile_plan(&compile, &vocab)? {
                CompiledPlan::Whole(g) => EngineGrammar::Plain(g),
                CompiledPlan::Triggered(spec) => EngineGrammar::Triggered(spec),
            })
        })
        .await
    }

    /// The entry of `key`, built by `build` on a blocking thread when missing (see
    /// [`GrammarCache::get_or_compile`]); counts a hit or a miss.
    async fn get_or_build(
        self: &Arc<Self>,
        key: u64,
        budget: Budget,
        build: impl FnOnce() -> anyhow::Result<EngineGrammar> + Send + 'static,
    ) -> anyhow::Result<(EngineGrammar, u64)> {
        let cell = self.cell(key);
        let mut compiled_here = false;
        let result = cell
            .get_or_try_init(|| {
                compiled_here = true;
                self.compile(build, budget)
            })
            .await
            .cloned();
        let counter = if compiled_here {
            &self.misses
        } else {
            &self.hits
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if result.is_err() {
            let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
            if entries
                .get(&key)
                .is_some_and(|e| Arc::ptr_eq(&e.cell, &cell) && !cell.initialized())
            {
                entries.remove(&key);
            }
        }
        Ok((result?, key))
    }

    async fn compile(
        self: &Arc<Self>,
        build: impl FnOnce() -> anyhow::Result<EngineGrammar> + Send + 'static,
        budget: Budget,
    ) -> anyhow::Result<EngineGrammar> {
        let limit = budget
            .time
            .map_or(Duration::MAX, |t| t.saturating_add(COMPILE_GRACE));
        let cache = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let compiled = build();
            let took = start.elapsed();
            cache
                .compile_us
                .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
            if compiled.is_ok() {
                cache.first_mask.observe(took);
            }
            compiled
        });
        match tokio::time::timeout(limit, task).await {
            Ok(Ok(compiled)) => compiled,
            Ok(Err(join)) => anyhow::bail!("grammar compilation failed: {join}"),
            Err(_) => Err(crate::grammar::GrammarError::whole(format!(
                "the grammar took longer than its time budget of {:.1} s to compile (--grammar-timeout)",
                budget.time.unwrap_or_default().as_secs_f64()
            ))
            .with_kind(crate::grammar::ErrorKind::Limit)
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regex(re: &str) -> ConstraintSpec {
        ConstraintSpec::regex(re, CompileOptions::default())
    }

    fn vocab() -> Arc<Vocabulary> {
        let pieces: Vec<Vec<u8>> = ["a", "b", "0", "1", "(", "x"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        Arc::new(Vocabulary::new(pieces, vec![false; 6], vec![]))
    }

    #[tokio::test]
    async fn the_same_grammar_is_compiled_once_and_the_oldest_goes() {
        let cache = Arc::new(GrammarCache::new(2));
        let v = vocab();
        let (a, _) = cache
            .get_or_compile(regex("[0-9]+"), v.clone())
            .await
            .unwrap();
        let (a2, _) = cache
            .get_or_compile(regex("[0-9]+"), v.clone())
            .await
            .unwrap();
        assert!(Arc::ptr_eq(&a, &a2));
        assert_eq!(cache.hits.load(Ordering::Relaxed), 1);
        assert_eq!(cache.misses.load(Ordering::Relaxed), 1);
        cache.get_or_compile(regex("a+"), v.clone()).await.unwrap();
        cache.get_or_compile(regex("b+"), v.clone()).await.unwrap();
        assert_eq!(cache.len(), 2);
        // `[0-9]+` was the least recently used: compiling it again is a miss.
        cache.get_or_compile(regex("[0-9]+"), v).await.unwrap();
        assert_eq!(cache.misses.load(Ordering::Relaxed), 4);
    }

    #[tokio::test]
    async fn the_same_plan_is_compiled_once_and_its_content_is_the_key() {
        use crate::decode::tools::{Syntax, ToolChoice, parse_tools, tag_plan};
        let cache = Arc::new(GrammarCache::new(8));
        let tokens: Vec<Vec<u8>> = (0u8..128).map(|b| vec![b]).collect();
        let special = vec![false; tokens.len()];
        let vocab = Arc::new(Vocabulary::new(
            tokens,
            special,
            vec![crate::vocab::TokenId(0)],
        ));
        let tools = parse_tools(&serde_json::json!([
            {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}
        ]))
        .unwrap();
        let plan = |choice: ToolChoice, parallel| {
            tag_plan(&tools, &choice, Syntax::Generic, parallel).unwrap()
        };
        let opts = CompileOptions::default();
        let get = |p: TagPlan| cache.get_or_compile_plan(p, opts.clone(), vocab.clone());
        let (a, key_a) = get(plan(ToolChoice::Auto, true)).await.unwrap();
        let (b, key_b) = get(plan(ToolChoice::Auto, true)).await.unwrap();
        assert_eq!(key_a, key_b);
        match (a, b) {
            (EngineGrammar::Triggered(a), EngineGrammar::Triggered(b)) => {
                assert!(Arc::ptr_eq(&a, &b))
            }
            _ => panic!("auto tool calls are a triggered plan"),
        }
        assert_eq!(cache.misses.load(Ordering::Relaxed), 1);
        assert_eq!(cache.hits.load(Ordering::Relaxed), 1);
        // Another choice or parallel flag is another plan.
        let (_, key_c) = get(plan(ToolChoice::Auto, false)).await.unwrap();
        let (req, _) = get(plan(ToolChoice::Required, true)).await.unwrap();
        assert!(matches!(req, EngineGrammar::Plain(_)));
        assert_ne!(key_a, key_c);
        assert_eq!(cache.misses.load(Ordering::Relaxed), 3);
        // A plan and a grammar never share an entry.
        let (_, key_g) = cache
            .get_or_compile(regex("[0-9]+"), vocab.clone())
            .await
            .unwrap();
        assert!(![key_a, key_c].contains(&key_g));
    }

    #[tokio::test]
    async fn a_bad_grammar_is_an_error_and_not_cached() {
        let cache = Arc::new(GrammarCache::new(4));
        assert!(cache.get_or_compile(regex("("), vocab()).await.is_err());
        assert!(cache.is_empty());
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_compilation() {
        let cache = Arc::new(GrammarCache::new(4));
        let v = vocab();
        let (a, b) = tokio::join!(
            cache.get_or_compile(regex("[a-z]{2,9}"), v.clone()),
            cache.get_or_compile(regex("[a-z]{2,9}"), v)
        );
        assert!(Arc::ptr_eq(&a.unwrap().0, &b.unwrap().0));
        assert_eq!(cache.misses.load(Ordering::Relaxed), 1);
        assert_eq!(cache.hits.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_grammar_over_its_budget_is_a_limit_error_naming_it() {
        let cache = Arc::new(GrammarCache::new(4));
        let mut spec = regex("[a-z]{2,9}");
        spec.compile.budget = crate::engine::budget::Budget {
            time: Some(Duration::ZERO),
            max_bytes: None,
        };
        let started = Instant::now();
        let e = cache.get_or_compile(spec, vocab()).await.unwrap_err();
        assert!(
            started.elapsed() < COMPILE_GRACE,
            "the compile thread stopped itself"
        );
        let g = e
            .chain()
            .find_map(|c| c.downcast_ref::<crate::grammar::GrammarError>())
            .expect("a grammar error");
        assert_eq!(g.kind, crate::grammar::ErrorKind::Limit);
        assert!(g.message.contains("time budget of 0.0 s"), "{g}");
        assert!(cache.is_empty());
    }
}
