//! Compiled constraints shared by every request that names the same grammar.
//!
//! Compiling a grammar (parsing, lowering, the scanner DFA, the parser tables) costs
//! milliseconds to seconds, and the subterminal trees built on first use cost more; both
//! live in the engine's [`CompiledGrammar`] (its tree cache is per vocabulary). Keyed by the
//! content of the constraint (its [`GrammarSource`] and [`CompileOptions`], hashed), the
//! cache hands every later request with the same grammar the same `Arc`, so a service that
//! sends one schema over and over compiles it once. Bounded by entry count: the least
//! recently used entry goes when a new one would exceed it. Compilation runs on a blocking
//! thread under a time limit ([`GrammarCache::get_or_compile`]).

use crate::constraint::ConstraintSpec;
use crate::engine::CompiledGrammar;
use crate::grammar::{CompileOptions, GrammarSource};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// The cache (see the module doc) and its counters.
pub struct GrammarCache {
    entries: Mutex<HashMap<u64, Entry>>,
    capacity: usize,
    clock: AtomicU64,
    pub hits: AtomicU64,
    pub misses: AtomicU64,
    /// Total compile time of misses, in microseconds.
    pub compile_us: AtomicU64,
}

/// One grammar: compiled once, by the first request that needs it; requests that arrive
/// while it compiles wait for that compilation instead of starting their own.
struct Entry {
    cell: Arc<OnceCell<Arc<CompiledGrammar>>>,
    last_used: u64,
}

/// The cache key of a constraint: its content, hashed.
pub fn content_key(source: &GrammarSource, compile: &CompileOptions) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    format!("{source:?}\u{0}{compile:?}").hash(&mut h);
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
    fn cell(&self, key: u64) -> Arc<OnceCell<Arc<CompiledGrammar>>> {
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

    /// The compiled grammar of `spec` and its key: from the cache, or compiled on a blocking
    /// thread that may take at most `limit` (past it the request fails; the compilation
    /// finishes in the background and its result is dropped). A failed compilation is not
    /// kept: the next request with that grammar tries again (and fails the same way).
    pub async fn get_or_compile(
        self: &Arc<Self>,
        spec: ConstraintSpec,
        limit: Duration,
    ) -> anyhow::Result<(Arc<CompiledGrammar>, u64)> {
        let key = content_key(&spec.source, &spec.compile);
        let cell = self.cell(key);
        let mut compiled_here = false;
        let result = cell
            .get_or_try_init(|| {
                compiled_here = true;
                self.compile(spec, limit)
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
        spec: ConstraintSpec,
        limit: Duration,
    ) -> anyhow::Result<Arc<CompiledGrammar>> {
        let cache = self.clone();
        let task = tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let compiled = spec.compile();
            cache
                .compile_us
                .fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
            compiled
        });
        match tokio::time::timeout(limit, task).await {
            Ok(Ok(compiled)) => compiled,
            Ok(Err(join)) => anyhow::bail!("grammar compilation failed: {join}"),
            Err(_) => Err(crate::diag::UsageError(format!(
                "the grammar took longer than {:.1} s to compile (--grammar-timeout)",
                limit.as_secs_f64()
            ))
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

    #[tokio::test]
    async fn the_same_grammar_is_compiled_once_and_the_oldest_goes() {
        let cache = Arc::new(GrammarCache::new(2));
        let limit = Duration::from_secs(30);
        let (a, _) = cache.get_or_compile(regex("[0-9]+"), limit).await.unwrap();
        let (a2, _) = cache.get_or_compile(regex("[0-9]+"), limit).await.unwrap();
        assert!(Arc::ptr_eq(&a, &a2));
        assert_eq!(cache.hits.load(Ordering::Relaxed), 1);
        assert_eq!(cache.misses.load(Ordering::Relaxed), 1);
        cache.get_or_compile(regex("a+"), limit).await.unwrap();
        cache.get_or_compile(regex("b+"), limit).await.unwrap();
        assert_eq!(cache.len(), 2);
        // `[0-9]+` was the least recently used: compiling it again is a miss.
        cache.get_or_compile(regex("[0-9]+"), limit).await.unwrap();
        assert_eq!(cache.misses.load(Ordering::Relaxed), 4);
    }

    #[tokio::test]
    async fn a_bad_grammar_is_an_error_and_not_cached() {
        let cache = Arc::new(GrammarCache::new(4));
        assert!(
            cache
                .get_or_compile(regex("("), Duration::from_secs(30))
                .await
                .is_err()
        );
        assert!(cache.is_empty());
    }

    #[tokio::test]
    async fn concurrent_requests_share_one_compilation() {
        let cache = Arc::new(GrammarCache::new(4));
        let limit = Duration::from_secs(30);
        let (a, b) = tokio::join!(
            cache.get_or_compile(regex("[a-z]{2,9}"), limit),
            cache.get_or_compile(regex("[a-z]{2,9}"), limit)
        );
        assert!(Arc::ptr_eq(&a.unwrap().0, &b.unwrap().0));
        assert_eq!(cache.misses.load(Ordering::Relaxed), 1);
        assert_eq!(cache.hits.load(Ordering::Relaxed), 1);
    }
}
