//! Append-only tables that grow without moving and are read without locks.
//!
//! The engine's automata are built lazily and shared between threads: a scanner state, a
//! terminal-DFA state or a component is created the first time a walk reaches it, by one
//! writer at a time (under the owner's lock), while other threads keep reading the entries
//! that already exist. Both tables here store their entries in *segments* that double in
//! size (segment `k` holds `BASE << k` entries), allocated once and never moved, so
//!
//! - a reader indexes with two dependent loads and no lock;
//! - a table that stays small (most terminal DFAs have a handful of states) costs one small
//!   segment, not a chunk sized for the largest table;
//! - there is no capacity to choose up front (32 segments hold over 10¹¹ entries).
//!
//! [`Segmented`] holds one `T` per index, each set at most once. [`SlotRows`] holds rows of
//! `width` atomic `u32` slots (a state's transitions): a slot goes from [`SlotRows::UNKNOWN`]
//! to its final value once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Entries of segment 0; segment `k` holds `BASE << k`.
const BASE_BITS: u32 = 4;
const BASE: usize = 1 << BASE_BITS;
/// Segments: enough for any index a `u32` can name.
const SEGMENTS: usize = 32;

/// Segment and offset of entry `i`: segment `k` starts at `BASE · (2^k − 1)`.
#[inline]
fn locate(i: usize) -> (usize, usize) {
    let q = (i >> BASE_BITS) + 1;
    let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
    (k, i - (BASE << k) + BASE)
}

/// One `T` per index, each set at most once, read without locks (see the module doc).
pub(crate) struct Segmented<T> {
    segments: [OnceLock<Box<[OnceLock<T>]>>; SEGMENTS],
}

impl<T> Default for Segmented<T> {
    fn default() -> Self {
        Segmented {
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl<T> Segmented<T> {
    /// The cell of index `i`, its segment allocated if needed (any thread may call this).
    #[inline]
    pub(crate) fn slot(&self, i: usize) -> &OnceLock<T> {
        let (k, off) = locate(i);
        &self.segments[k].get_or_init(|| (0..BASE << k).map(|_| OnceLock::new()).collect())[off]
    }

    /// Entry `i`, if it was set.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        let (k, off) = locate(i);
        self.segments.get(k)?.get()?[off].get()
    }

    /// Bytes of the segments allocated so far.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.segments
            .iter()
            .enumerate()
            .filter(|(_, s)| s.get().is_some())
            .map(|(k, _)| (BASE << k) * std::mem::size_of::<OnceLock<T>>())
            .sum()
    }

    /// The entries set so far, with their indices, in index order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.segments.iter().enumerate().flat_map(|(k, seg)| {
            let start = (BASE << k) - BASE;
            seg.get()
                .into_iter()
                .flat_map(move |cells| cells.iter().enumerate())
                .filter_map(move |(off, cell)| cell.get().map(|t| (start + off, t)))
        })
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Segmented<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segmented")
            .field("bytes", &self.memory_bytes())
            .finish()
    }
}

/// Rows of `width` atomic slots, one row per index (see the module doc).
#[derive(Debug)]
pub(crate) struct SlotRows {
    width: usize,
    segments: [OnceLock<Box<[AtomicU32]>>; SEGMENTS],
}

impl SlotRows {
    /// A slot whose value is not known yet.
    pub(crate) const UNKNOWN: u32 = u32::MAX - 1;

    pub(crate) fn new(width: usize) -> Self {
        SlotRows {
            width: width.max(1),
            segments: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Row `i`, its segment allocated (slots [`SlotRows::UNKNOWN`]) if needed.
    #[inline]
    pub(crate) fn row(&self, i: usize) -> &[AtomicU32] {
        let (k, off) = locate(i);
        let seg = match self.segments[k].get() {
            Some(s) => s,
            None => self.segments[k].get_or_init(|| {
                (0..(BASE << k) * self.width)
                    .map(|_| AtomicU32::new(Self::UNKNOWN))
                    .collect()
            }),
        };
        &seg[off * self.width..(off + 1) * self.width]
    }

    /// Slot `j` of row `i` (acquire load).
    #[inline]
    pub(crate) fn load(&self, i: usize, j: usize) -> u32 {
        self.row(i)[j].load(Ordering::Acquire)
    }

    /// Bytes of the segments allocated so far.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.segments
            .iter()
            .enumerate()
            .filter(|(_, s)| s.get().is_some())
            .map(|(k, _)| (BASE << k) * self.width * 4)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_indices() {
        let mut expect = (0usize, 0usize);
        for i in 0..100_000usize {
            let (k, off) = locate(i);
            assert_eq!((k, off), expect, "index {i}");
            expect.1 += 1;
            if expect.1 == BASE << expect.0 {
                expect = (expect.0 + 1, 0);
            }
        }
        let (k, _) = locate(u32::MAX as usize);
        assert!(k < SEGMENTS);
    }

    #[test]
    fn entries_and_rows_keep_their_values() {
        let s: Segmented<u64> = Segmented::default();
        for i in (0..5000).step_by(7) {
            s.slot(i).set(i as u64 * 3).unwrap();
        }
        for i in 0..5000 {
            assert_eq!(s.get(i).copied(), (i % 7 == 0).then_some(i as u64 * 3));
        }
        assert_eq!(s.get(1 << 30), None);
        let r = SlotRows::new(3);
        assert_eq!(r.load(40, 2), SlotRows::UNKNOWN);
        r.row(40)[2].store(9, Ordering::Release);
        assert_eq!(r.load(40, 2), 9);
        assert_eq!(r.load(41, 0), SlotRows::UNKNOWN);
        assert_eq!(r.load(39, 2), SlotRows::UNKNOWN);
    }
}
