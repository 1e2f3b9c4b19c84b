//! The finished-mask cache of a (grammar, vocabulary) pair (see [`super::TreeCache`]).

use crate::vocab::TokenSet;
use std::collections::HashMap;
use std::sync::Arc;

/// A mask computed faster than this is not cached. Recomputing it costs about what copying
/// it out of the cache does (a 32 KB copy for Gemma 3's vocabulary), while caching it costs
/// an allocation of that size, and fresh memory is what made first visits slow: with
/// transparent huge pages the first write to each new 2 MB took 4–5 ms on the development
/// machine, so one cached mask in about sixty paid that. A long document of JSONSchemaBench's
/// `o21185` had 28 first-visit masks over 1 ms this way, each computed in under 40 µs. The
/// masks that take longer (a tree walked, a large parser state) are the ones worth keeping.
pub(super) const MIN_CACHED_MASK_TIME: std::time::Duration = std::time::Duration::from_micros(10);

/// A bounded map (scanner state, parser fingerprint, k) → finished mask, approximating LRU
/// with two generations: lookups promote from the old generation; when the young one is
/// full the old one is dropped.
pub(super) struct MaskCache {
    capacity: usize,
    young: HashMap<(u32, u64, u32), Arc<TokenSet>>,
    old: HashMap<(u32, u64, u32), Arc<TokenSet>>,
}

impl MaskCache {
    pub(super) fn new(capacity: usize) -> Self {
        MaskCache {
            capacity,
            young: HashMap::new(),
            old: HashMap::new(),
        }
    }

    pub(super) fn get(&mut self, key: &(u32, u64, u32)) -> Option<Arc<TokenSet>> {
        if let Some(m) = self.young.get(key) {
            return Some(m.clone());
        }
        let m = self.old.remove(key)?;
        self.insert(*key, m.clone());
        Some(m)
    }

    pub(super) fn insert(&mut self, key: (u32, u64, u32), m: Arc<TokenSet>) {
        if self.capacity == 0 {
            return;
        }
        if self.young.len() >= self.capacity.div_ceil(2) {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(key, m);
    }

    pub(super) fn clear(&mut self) {
        self.young.clear();
        self.old.clear();
    }
}
