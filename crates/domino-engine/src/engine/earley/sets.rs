//! Storage of the Earley sets: items, buckets by awaited symbol, expected-terminal bitsets,
//! grouped into copy-on-write chunks so that cloning a parser is O(1).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::grammar::ir::TerminalId;

/// Sets per copy-on-write chunk of the set stack.
pub const CHUNK_SETS: usize = 16;
/// `Bucket::leo_nt` when the bucket has no Leo item.
pub(super) const NO_LEO: u32 = u32::MAX;

/// Bitset words stored inline up to this many (256 terminals), so cloning a parser (which
/// holds its top set's expected terminals) allocates nothing for most grammars.
const INLINE_WORDS: usize = 4;

/// The words of a [`TerminalSet`]: inline when few, else on the heap.
#[derive(Clone)]
enum Words {
    Inline { len: u8, words: [u64; INLINE_WORDS] },
    Heap(Box<[u64]>),
}

impl Words {
    fn zeros(n: usize) -> Self {
        if n <= INLINE_WORDS {
            Words::Inline {
                len: n as u8,
                words: [0; INLINE_WORDS],
            }
        } else {
            Words::Heap(vec![0; n].into_boxed_slice())
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [u64];

    #[inline]
    fn deref(&self) -> &[u64] {
        match self {
            Words::Inline { len, words } => &words[..*len as usize],
            Words::Heap(b) => b,
        }
    }
}

impl std::ops::DerefMut for Words {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Words::Inline { len, words } => &mut words[..*len as usize],
            Words::Heap(b) => b,
        }
    }
}

impl PartialEq for Words {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Words {}

impl std::hash::Hash for Words {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

/// A set of terminals (bitset over [`TerminalId`]) of a fixed universe size.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TerminalSet {
    words: Words,
}

impl TerminalSet {
    /// The empty set over terminals `0..universe`.
    pub fn new(universe: usize) -> Self {
        TerminalSet {
            words: Words::zeros(universe.div_ceil(64).max(1)),
        }
    }

    pub fn contains(&self, t: TerminalId) -> bool {
        let i = t.0 as usize;
        self.words
            .get(i / 64)
            .is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// Adds `t`; returns whether it was new. Terminals beyond the universe are ignored
    /// (returns false).
    pub fn insert(&mut self, t: TerminalId) -> bool {
        let i = t.0 as usize;
        match self.words.get_mut(i / 64) {
            Some(w) => {
                let bit = 1u64 << (i % 64);
                let new = *w & bit == 0;
                *w |= bit;
                new
            }
            None => false,
        }
    }

    pub fn remove(&mut self, t: TerminalId) -> bool {
        let i = t.0 as usize;
        match self.words.get_mut(i / 64) {
            Some(w) => {
                let bit = 1u64 << (i % 64);
                let had = *w & bit != 0;
                *w &= !bit;
                had
            }
            None => false,
        }
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The members in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = TerminalId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros();
                rest &= rest - 1;
                Some(TerminalId(wi as u32 * 64 + b))
            })
        })
    }

    /// Whether the two sets share a member.
    pub fn intersects(&self, other: &TerminalSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter())
            .any(|(a, b)| a & b != 0)
    }

    /// `self ∪= other` (over the common universe).
    pub fn union_with(&mut self, other: &TerminalSet) {
        self.words
            .iter_mut()
            .zip(other.words.iter())
            .for_each(|(a, b)| *a |= b);
    }

    /// The raw bitset words (bit `i % 64` of word `i / 64` is terminal `i`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Overwrite the set with raw bitset words of the same universe (a stored set's
    /// expected terminals).
    pub(super) fn copy_from_words(&mut self, words: &[u64]) {
        self.words.copy_from_slice(words);
    }
}

/// An Earley item: a dotted production and the set it was predicted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) dotted: u32,
    pub(super) origin: u32,
}

/// The items of one set waiting on one symbol, plus that bucket's Leo record.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bucket {
    pub(super) key: u32,
    /// First item (index into the chunk's items); the bucket ends where the next begins.
    pub(super) start: u32,
    /// Topmost completion of the Leo chain starting here (`NO_LEO` if none).
    pub(super) leo_nt: u32,
    pub(super) leo_origin: u32,
}

/// A value computed on first use and cached inside shared (`Arc`'d) sets. The value is a
/// pure function of the set stack below it, so racing writers store the same number.
#[derive(Debug, Default)]
pub(super) struct Lazy(AtomicU64);

impl Lazy {
    /// Not computed yet (a computed 0 is stored as 1).
    pub(super) const UNKNOWN: u64 = 0;

    #[inline]
    pub(super) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    #[inline]
    pub(super) fn set(&self, v: u64) {
        self.0.store(v.max(1), Relaxed)
    }
}

impl Clone for Lazy {
    fn clone(&self) -> Self {
        Lazy(AtomicU64::new(self.get()))
    }
}

#[derive(Clone, Debug)]
pub(super) struct SetHeader {
    pub(super) items_start: u32,
    pub(super) buckets_start: u32,
    /// The set's fingerprint (see [`Parser::state_fingerprint`](super::Parser::state_fingerprint)).
    pub(super) fingerprint: Lazy,
    /// Whether the completion fingerprints of this set's buckets are computed.
    pub(super) cfps_done: Lazy,
    pub(super) accepting: bool,
}

/// Up to [`CHUNK_SETS`] consecutive Earley sets, stored flat.
#[derive(Clone, Debug, Default)]
pub(super) struct Chunk {
    pub(super) sets: Vec<SetHeader>,
    pub(super) items: Vec<Item>,
    pub(super) buckets: Vec<Bucket>,
    /// Parallel to `buckets`: for a nonterminal bucket `A` of set `j`, the *completion
    /// fingerprint* of `(A, j)`, a hash that determines what can follow once `A` completes
    /// with origin `j` (see [`Parser::state_fingerprint`](super::Parser::state_fingerprint));
    /// computed on demand.
    pub(super) cfps: Vec<Lazy>,
    /// `words` bitset words of expected terminals per set.
    pub(super) expected: Vec<u64>,
}

impl Chunk {
    pub(super) fn clear(&mut self) {
        self.sets.clear();
        self.items.clear();
        self.buckets.clear();
        self.cfps.clear();
        self.expected.clear();
    }

    /// Keep the first `n` sets.
    pub(super) fn truncate(&mut self, n: usize, words: usize) {
        if n >= self.sets.len() {
            return;
        }
        let h = &self.sets[n];
        self.items.truncate(h.items_start as usize);
        self.buckets.truncate(h.buckets_start as usize);
        self.cfps.truncate(h.buckets_start as usize);
        self.expected.truncate(n * words);
        self.sets.truncate(n);
    }

    /// A copy of the first `n` sets.
    pub(super) fn prefix(&self, n: usize, words: usize) -> Chunk {
        let (items_end, buckets_end) = match self.sets.get(n) {
            Some(h) => (h.items_start as usize, h.buckets_start as usize),
            None => (self.items.len(), self.buckets.len()),
        };
        Chunk {
            sets: self.sets[..n].to_vec(),
            items: self.items[..items_end].to_vec(),
            buckets: self.buckets[..buckets_end].to_vec(),
            cfps: self.cfps[..buckets_end].to_vec(),
            expected: self.expected[..n * words].to_vec(),
        }
    }

    #[inline]
    pub(super) fn set(&self, local: usize, words: usize) -> SetRef<'_> {
        let h = &self.sets[local];
        let (items_end, buckets_end) = match self.sets.get(local + 1) {
            Some(n) => (n.items_start as usize, n.buckets_start as usize),
            None => (self.items.len(), self.buckets.len()),
        };
        SetRef {
            header: h,
            items: &self.items[..items_end],
            buckets: &self.buckets[h.buckets_start as usize..buckets_end],
            cfps: &self.cfps[h.buckets_start as usize..buckets_end],
            expected: &self.expected[local * words..(local + 1) * words],
        }
    }
}

/// A read-only view of one set.
pub(super) struct SetRef<'a> {
    pub(super) header: &'a SetHeader,
    /// The chunk's items up to this set's end (buckets index into it).
    pub(super) items: &'a [Item],
    pub(super) buckets: &'a [Bucket],
    pub(super) cfps: &'a [Lazy],
    pub(super) expected: &'a [u64],
}

impl<'a> SetRef<'a> {
    #[inline]
    pub(super) fn find(&self, key: u32) -> Option<usize> {
        self.buckets.binary_search_by_key(&key, |b| b.key).ok()
    }

    /// All items of the set.
    pub(super) fn all_items(&self) -> &'a [Item] {
        match self.buckets.first() {
            Some(b) => &self.items[b.start as usize..],
            None => &[],
        }
    }

    pub(super) fn bucket_items(&self, b: usize) -> &'a [Item] {
        let start = self.buckets[b].start as usize;
        let end = match self.buckets.get(b + 1) {
            Some(n) => n.start as usize,
            None => self.items.len(),
        };
        &self.items[start..end]
    }
}

/// Read access to the set stack (full chunks, then the last one).
pub(super) struct Stack<'a> {
    pub(super) full: &'a [Arc<Chunk>],
    pub(super) last: &'a Chunk,
    pub(super) words: usize,
}

impl<'a> Stack<'a> {
    #[inline]
    pub(super) fn set(&self, j: usize) -> SetRef<'a> {
        let c = j / CHUNK_SETS;
        let chunk: &'a Chunk = if c < self.full.len() {
            &self.full[c]
        } else {
            self.last
        };
        chunk.set(j % CHUNK_SETS, self.words)
    }
}
