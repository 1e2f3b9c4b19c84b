//! Working memory for building one set (item buffer, dedup table, predicted bitset, sort
//! keys, spare chunks), thread-local and shared by all parsers on a thread.

use std::sync::Arc;

use super::sets::{Bucket, CHUNK_SETS, Chunk, Item};

/// A set of u64 keys cleared in O(1) (generation stamps), for per-push deduplication.
#[derive(Debug, Default)]
pub(super) struct StampSet {
    keys: Vec<u64>,
    stamps: Vec<u32>,
    stamp: u32,
    len: usize,
}

impl StampSet {
    pub(super) fn clear(&mut self) {
        self.len = 0;
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.stamps.iter_mut().for_each(|s| *s = 0);
            self.stamp = 1;
        }
        if self.keys.is_empty() {
            self.keys = vec![0; 64];
            self.stamps = vec![0; 64];
        }
    }

    #[inline]
    fn slot(key: u64, mask: usize) -> usize {
        (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & mask
    }

    /// Inserts `key`; returns whether it was absent.
    #[inline(always)]
    pub(super) fn insert(&mut self, key: u64) -> bool {
        if (self.len + 1) * 2 > self.keys.len() {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut i = Self::slot(key, mask);
        loop {
            if self.stamps[i] != self.stamp {
                self.stamps[i] = self.stamp;
                self.keys[i] = key;
                self.len += 1;
                return true;
            }
            if self.keys[i] == key {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    #[cold]
    fn grow(&mut self) {
        let old_keys = std::mem::take(&mut self.keys);
        let old_stamps = std::mem::take(&mut self.stamps);
        let cap = (old_keys.len() * 2).max(64);
        self.keys = vec![0; cap];
        self.stamps = vec![0; cap];
        let live = self.stamp;
        self.stamp = 1;
        self.len = 0;
        for (k, s) in old_keys.into_iter().zip(old_stamps) {
            if s == live {
                self.insert(k);
            }
        }
    }
}

/// Per-parser working memory for building one set (not shared by clones).
#[derive(Debug, Default)]
pub(super) struct Scratch {
    pub(super) items: Vec<Item>,
    pub(super) completions: Vec<(u32, u32)>,
    pub(super) seen: StampSet,
    /// Bitset over nonterminals predicted in the set being built.
    pub(super) predicted: Vec<u64>,
    pub(super) predicted_touched: Vec<u32>,
    pub(super) predict_stack: Vec<u32>,
    pub(super) sort_keys: Vec<u64>,
    pub(super) sorted: Vec<Item>,
    pub(super) buckets: Vec<Bucket>,
    /// Leo resolution: per new bucket 0 = unvisited, 1 = on the path, 2 = done.
    pub(super) leo_state: Vec<u8>,
    pub(super) leo_path: Vec<usize>,
    /// Tarjan's algorithm over the new set's buckets (completion fingerprints).
    pub(super) t_index: Vec<u32>,
    pub(super) t_low: Vec<u32>,
    pub(super) t_on: Vec<bool>,
    pub(super) t_stack: Vec<usize>,
    pub(super) t_calls: Vec<(usize, usize)>,
    pub(super) t_scc: Vec<usize>,
    /// Sets whose completion fingerprints are being computed (dependencies on top).
    pub(super) cfp_work: Vec<usize>,
    pub(super) expected: Vec<u64>,
    /// Emptied chunks kept for reuse (at most [`SPARE_CHUNKS`]), so pushing and popping
    /// across a chunk boundary allocates nothing.
    pub(super) spare: Vec<Chunk>,
}

const SPARE_CHUNKS: usize = 64;

impl Scratch {
    pub(super) fn take_chunk(&mut self, words: usize) -> Chunk {
        self.spare.pop().unwrap_or_else(|| Chunk {
            sets: Vec::with_capacity(CHUNK_SETS),
            items: Vec::with_capacity(CHUNK_SETS * 32),
            buckets: Vec::with_capacity(CHUNK_SETS * 16),
            cfps: Vec::with_capacity(CHUNK_SETS * 16),
            expected: Vec::with_capacity(CHUNK_SETS * words),
        })
    }

    pub(super) fn recycle(&mut self, chunk: Arc<Chunk>) {
        if self.spare.len() < SPARE_CHUNKS
            && let Ok(mut c) = Arc::try_unwrap(chunk)
        {
            c.clear();
            self.spare.push(c);
        }
    }
}

thread_local! {
    /// Working memory shared by all parsers on a thread, so a fresh clone allocates nothing.
    pub(super) static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}
