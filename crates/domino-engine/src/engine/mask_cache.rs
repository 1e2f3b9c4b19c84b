//! The finished-mask cache of a (grammar, vocabulary) pair (see [`super::TreeCache`]).

use crate::vocab::TokenSet;
use std::collections::HashMap;
use std::sync::Arc;

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
