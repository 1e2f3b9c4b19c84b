//! Incremental Earley recognizer over the grammar IR's terminals, with Leo items.
//!
//! # What and why
//! The engine asks, at every edge of a subterminal tree, "can this terminal come next?", and
//! backtracks after each answer. [`Parser`] is therefore a *stack* of Earley sets, one per
//! terminal pushed: [`Parser::push`] builds one new set (scan → complete → predict),
//! [`Parser::pop`]/[`Parser::truncate`] just drop sets. All grammar analysis is precomputed
//! once in [`ParserTables`] and shared through an `Arc`.
//!
//! # Algorithm
//! A recognizer (no parse forest), so completed items are never stored:
//! - **Items** are `(dotted, origin)`, two `u32`s: `dotted` is a flattened (production, dot)
//!   index, `origin` the set where the production was predicted. Every stored item
//!   waits on a symbol; sets are sorted into *buckets* by that symbol, so "who waits on
//!   terminal `t`" (scan) and "who waits on nonterminal `A` in set `j`" (complete) are one
//!   binary search each, and the expected-terminal set is the list of terminal buckets.
//! - **Nullable symbols** are handled the Aycock–Horspool way: whenever an item enters a set,
//!   its dot is also advanced over every nullable nonterminal that follows (precomputed as a
//!   contiguous *skip chain* per dotted item). Consequently a completion whose origin is the
//!   current set never needs processing (its effect is already in the skip chains).
//! - **Prediction** uses precomputed tables: predicting `B` adds `B`'s chain-expanded items
//!   (one precomputed slice) and then predicts the nonterminals those items wait on (another
//!   precomputed slice per nonterminal, walked with an explicit stack). A
//!   per-set bitset of predicted nonterminals makes that idempotent; predicted items all have
//!   origin = the new set, so they never collide with scanned/completed items.
//! - **Leo items** keep right recursion linear: when a set `j` has exactly one item waiting on
//!   `A`, and that item is `B → α · A` (A last), completing `A` from `j` deterministically
//!   completes `B` from that item's origin, and so on. Each finished set records, per such
//!   bucket, the *topmost* completion of that chain (resolved through earlier sets' records,
//!   and through same-set chains with cycle detection), so a completion jumps straight to it.
//!   The intermediate completions have no other effect (their sets have a single waiter), and
//!   the accepting symbol (a synthetic `S' → S`) never has waiters, so it is never skipped.
//!
//! # Invariants
//! - Sets only contain items on a path to a complete sentence (Earley sets are prefix-correct,
//!   and [`ParserTables::new`] drops productions that use unproductive nonterminals), so
//!   `push(t)` succeeds exactly when `t ∈ expected()`, and every non-empty expected set can be
//!   extended to a sentence.
//! - A parser's state is a pure function of the terminals pushed: `push(t); pop()` restores
//!   exactly the previous state (same `expected()`, same `state_fingerprint()`).
//! - Cloning is O(1): sets live in `Arc`'d chunks of [`CHUNK_SETS`] sets, the full chunks in
//!   one `Arc`'d spine plus the partly filled last chunk; a clone copies two pointers. The first
//!   push or pop after a clone copies at most the last chunk (copy on write), and a diverging
//!   clone copies the spine (`depth / CHUNK_SETS` pointers) once per `CHUNK_SETS` pushes.
//!
//! # Memory
//! Sets are stored flat per chunk (items, buckets, expected-terminal bitsets). The working
//! memory of a push (item buffer, dedup table, predicted bitset, sort keys, emptied chunks
//! for reuse) is thread-local and shared by all parsers on the thread, so a push allocates
//! nothing in the steady state and a fresh clone owns no buffers.
//!
//! # Fingerprints
//! See [`Parser::state_fingerprint`]: a hash of the top set's items where each item's origin
//! is replaced by a hash of what happens when its production completes (Leo chains
//! collapsed), so e.g. `[1, 2,` and `[1, 2, 3,` hash equal in a JSON grammar. They are
//! computed lazily, so the many push/pop probes of mask computation never pay for them.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use crate::grammar::ir::{self, Symbol, TerminalId};

/// Sets per copy-on-write chunk of the set stack.
pub const CHUNK_SETS: usize = 16;

/// Key of a "complete" dotted item (nothing after the dot).
const END: u32 = u32::MAX;
/// `Bucket::leo_nt` when the bucket has no Leo item.
const NO_LEO: u32 = u32::MAX;
/// Fingerprint context of an item predicted in the set itself (its completion context is
/// the set being hashed).
const ACCEPT_CONTEXT: u64 = 0x5e1f_c0de_acce_97ed;
/// Marks a reference to a member of the same strongly connected component.
const INTERNAL_CONTEXT: u64 = 0x1e7e_4a11_0000_0001;
/// Marks a Leo record inside a strongly connected component.
const LEO_CONTEXT: u64 = 0x1e0_1e0_1e0;

/// What the tables know about one dotted item.
#[derive(Clone, Copy, Debug)]
struct DotInfo {
    /// Symbol after the dot as a bucket key: terminal `t` → `t`, nonterminal `A` →
    /// `num_terminals + A`, nothing (complete) → [`END`].
    key: u32,
    /// The production's left-hand side (nonterminal index, the synthetic start included).
    lhs: u32,
    /// Last dotted id of this production reachable from here by skipping nullable
    /// nonterminals (the Aycock–Horspool skip chain is `self..=chain_end`).
    chain_end: u32,
    /// The symbol after the dot is the production's last symbol (Leo candidate).
    last: bool,
}

/// Grammar analysis shared by all parsers of one grammar.
#[derive(Debug)]
pub struct ParserTables {
    num_terminals: usize,
    /// Nonterminals of the grammar plus the synthetic start `S'` (the last one).
    num_nonterminals: usize,
    /// Index of `S' → S`'s left-hand side.
    accept_nt: u32,
    /// Bitset words per terminal set.
    words: usize,
    dots: Vec<DotInfo>,
    /// Per nonterminal: `own_items[own_ranges[A]]` are the dotted ids (skip chains expanded,
    /// complete ones left out) that predicting `A` adds.
    own_items: Vec<u32>,
    own_ranges: Vec<(u32, u32)>,
    /// Per nonterminal: the distinct nonterminals its predicted items wait on (what predicting
    /// it predicts next). Direct links only, so the tables stay linear in the grammar size.
    left_nts: Vec<u32>,
    left_ranges: Vec<(u32, u32)>,
    nullable: Vec<bool>,
    /// Productions dropped because they use an unproductive nonterminal.
    dropped_productions: usize,
}

impl ParserTables {
    /// Analyse `grammar`: drop productions over unproductive nonterminals, compute nullable
    /// symbols, flatten (production, dot) pairs, skip chains and prediction links.
    ///
    /// # Panics
    /// If the grammar violates the IR's ID invariant (a symbol or `start` out of range); the
    /// front ends never produce such a grammar.
    pub fn new(grammar: &ir::Grammar) -> Self {
        let num_terminals = grammar.terminals.len();
        let n0 = grammar.nonterminals.len();
        assert!(
            (grammar.start.0 as usize) < n0,
            "grammar start {:?} out of range",
            grammar.start
        );
        let accept_nt = n0 as u32;
        let num_nonterminals = n0 + 1;
        let check = |s: &Symbol| match *s {
            Symbol::Terminal(t) => assert!(
                (t.0 as usize) < num_terminals,
                "terminal {t:?} out of range"
            ),
            Symbol::Nonterminal(a) => {
                assert!((a.0 as usize) < n0, "nonterminal {a:?} out of range")
            }
        };
        for p in &grammar.productions {
            assert!(
                (p.lhs.0 as usize) < n0,
                "production lhs {:?} out of range",
                p.lhs
            );
            p.rhs.iter().for_each(check);
        }

        // Productive nonterminals (least fixpoint), then keep only productions over them.
        let productive = least_fixpoint(
            n0,
            grammar.productions.iter().map(|p| {
                let nts = p.rhs.iter().filter_map(|s| match *s {
                    Symbol::Terminal(_) => None,
                    Symbol::Nonterminal(a) => Some(a.0),
                });
                (p.lhs.0, nts.collect())
            }),
        );
        let sym_ok = |s: &Symbol| match *s {
            Symbol::Terminal(_) => true,
            Symbol::Nonterminal(a) => productive[a.0 as usize],
        };
        // Productions as (lhs, rhs keys); the synthetic `S' → S` last.
        let nt_key = |a: u32| num_terminals as u32 + a;
        let sym_key = |s: &Symbol| match *s {
            Symbol::Terminal(t) => t.0,
            Symbol::Nonterminal(a) => nt_key(a.0),
        };
        let mut prods: Vec<(u32, Vec<u32>)> = Vec::with_capacity(grammar.productions.len() + 1);
        let mut dropped_productions = 0;
        for p in &grammar.productions {
            if productive[p.lhs.0 as usize] && p.rhs.iter().all(sym_ok) {
                prods.push((p.lhs.0, p.rhs.iter().map(sym_key).collect()));
            } else {
                dropped_productions += 1;
            }
        }
        if productive[grammar.start.0 as usize] {
            prods.push((accept_nt, vec![nt_key(grammar.start.0)]));
        }

        // Nullable nonterminals (least fixpoint).
        // (Productions with a terminal can never derive ε.)
        let nullable = least_fixpoint(
            num_nonterminals,
            prods
                .iter()
                .filter(|(_, rhs)| rhs.iter().all(|&k| k >= num_terminals as u32))
                .map(|(lhs, rhs)| {
                    (
                        *lhs,
                        rhs.iter().map(|&k| k - num_terminals as u32).collect(),
                    )
                }),
        );
        let key_nullable = |k: u32| {
            k != END && k >= num_terminals as u32 && nullable[(k - num_terminals as u32) as usize]
        };

        // Flatten dotted items; skip chains computed right to left.
        let mut dots: Vec<DotInfo> = Vec::new();
        let mut prod_base: Vec<u32> = Vec::with_capacity(prods.len());
        for (lhs, rhs) in &prods {
            let base = dots.len() as u32;
            prod_base.push(base);
            let n = rhs.len();
            for (dot, key) in rhs.iter().copied().chain([END]).enumerate() {
                dots.push(DotInfo {
                    key,
                    lhs: *lhs,
                    chain_end: base + dot as u32,
                    last: dot + 1 == n,
                });
            }
            for dot in (0..n).rev() {
                let i = (base as usize) + dot;
                if key_nullable(dots[i].key) {
                    dots[i].chain_end = dots[i + 1].chain_end;
                }
            }
        }

        // Per-nonterminal predicted items.
        let mut prods_of: Vec<Vec<usize>> = vec![Vec::new(); num_nonterminals];
        for (i, (lhs, _)) in prods.iter().enumerate() {
            prods_of[*lhs as usize].push(i);
        }
        let mut own_items = Vec::new();
        let mut own_ranges = Vec::with_capacity(num_nonterminals);
        for ps in &prods_of {
            let start = own_items.len() as u32;
            for &p in ps {
                let base = prod_base[p];
                for d in base..=dots[base as usize].chain_end {
                    if dots[d as usize].key != END {
                        own_items.push(d);
                    }
                }
            }
            own_ranges.push((start, own_items.len() as u32));
        }

        // Prediction links: the nonterminals each nonterminal's predicted items wait on.
        let mut left_nts = Vec::new();
        let mut left_ranges = Vec::with_capacity(num_nonterminals);
        let mut mark = vec![u32::MAX; num_nonterminals];
        for (a, &(s, e)) in own_ranges.iter().enumerate() {
            let start = left_nts.len() as u32;
            for &d in &own_items[s as usize..e as usize] {
                let k = dots[d as usize].key;
                if k >= num_terminals as u32 {
                    let b = (k - num_terminals as u32) as usize;
                    if b != a && mark[b] != a as u32 {
                        mark[b] = a as u32;
                        left_nts.push(b as u32);
                    }
                }
            }
            left_ranges.push((start, left_nts.len() as u32));
        }

        ParserTables {
            num_terminals,
            num_nonterminals,
            accept_nt,
            words: num_terminals.div_ceil(64).max(1),
            dots,
            own_items,
            own_ranges,
            left_nts,
            left_ranges,
            nullable,
            dropped_productions,
        }
    }

    pub fn num_terminals(&self) -> usize {
        self.num_terminals
    }

    /// Nonterminals of the grammar, not counting the synthetic start.
    pub fn num_nonterminals(&self) -> usize {
        self.num_nonterminals - 1
    }

    /// Number of flattened (production, dot) items.
    pub fn num_dotted(&self) -> usize {
        self.dots.len()
    }

    /// Whether the grammar's nonterminal `a` derives the empty string.
    pub fn is_nullable(&self, a: ir::NonterminalId) -> bool {
        self.nullable.get(a.0 as usize).copied().unwrap_or(false)
    }

    /// Productions ignored because they use a nonterminal that derives no terminal string.
    pub fn dropped_productions(&self) -> usize {
        self.dropped_productions
    }

    fn own(&self, a: u32) -> &[u32] {
        let (s, e) = self.own_ranges[a as usize];
        &self.own_items[s as usize..e as usize]
    }

    fn left_of(&self, a: u32) -> &[u32] {
        let (s, e) = self.left_ranges[a as usize];
        &self.left_nts[s as usize..e as usize]
    }
}

/// The least set `X` of nonterminals such that `lhs ∈ X` whenever all of a rule's listed
/// nonterminals are in `X` (rules given as `(lhs, nonterminals of the rhs)`). Worklist with
/// per-rule counters: linear in the grammar size, whatever the dependency order.
fn least_fixpoint(n: usize, rules: impl Iterator<Item = (u32, Vec<u32>)>) -> Vec<bool> {
    let rules: Vec<(u32, Vec<u32>)> = rules.collect();
    let mut waiting = vec![0u32; rules.len()];
    let mut uses: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut marked = vec![false; n];
    let mut work = Vec::new();
    for (r, (lhs, nts)) in rules.iter().enumerate() {
        waiting[r] = nts.len() as u32;
        for &b in nts {
            uses[b as usize].push(r as u32);
        }
        if nts.is_empty() && !marked[*lhs as usize] {
            marked[*lhs as usize] = true;
            work.push(*lhs);
        }
    }
    while let Some(b) = work.pop() {
        for &r in &uses[b as usize] {
            waiting[r as usize] -= 1;
            let lhs = rules[r as usize].0 as usize;
            if waiting[r as usize] == 0 && !marked[lhs] {
                marked[lhs] = true;
                work.push(lhs as u32);
            }
        }
    }
    marked
}

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
}

/// An Earley item: a dotted production and the set it was predicted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Item {
    dotted: u32,
    origin: u32,
}

/// The items of one set waiting on one symbol, plus that bucket's Leo record.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    key: u32,
    /// First item (index into the chunk's items); the bucket ends where the next begins.
    start: u32,
    /// Topmost completion of the Leo chain starting here (`NO_LEO` if none).
    leo_nt: u32,
    leo_origin: u32,
}

/// A value computed on first use and cached inside shared (`Arc`'d) sets. The value is a
/// pure function of the set stack below it, so racing writers store the same number.
#[derive(Debug, Default)]
struct Lazy(AtomicU64);

impl Lazy {
    /// Not computed yet (a computed 0 is stored as 1).
    const UNKNOWN: u64 = 0;

    #[inline]
    fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }

    #[inline]
    fn set(&self, v: u64) {
        self.0.store(v.max(1), Relaxed)
    }
}

impl Clone for Lazy {
    fn clone(&self) -> Self {
        Lazy(AtomicU64::new(self.get()))
    }
}

#[derive(Clone, Debug)]
struct SetHeader {
    items_start: u32,
    buckets_start: u32,
    /// The set's fingerprint (see [`Parser::state_fingerprint`]).
    fingerprint: Lazy,
    /// Whether the completion fingerprints of this set's buckets are computed.
    cfps_done: Lazy,
    accepting: bool,
}

/// Up to [`CHUNK_SETS`] consecutive Earley sets, stored flat.
#[derive(Clone, Debug, Default)]
struct Chunk {
    sets: Vec<SetHeader>,
    items: Vec<Item>,
    buckets: Vec<Bucket>,
    /// Parallel to `buckets`: for a nonterminal bucket `A` of set `j`, the *completion
    /// fingerprint* of `(A, j)`, a hash that determines what can follow once `A` completes
    /// with origin `j` (see [`Parser::state_fingerprint`]); computed on demand.
    cfps: Vec<Lazy>,
    /// `words` bitset words of expected terminals per set.
    expected: Vec<u64>,
}

impl Chunk {
    fn clear(&mut self) {
        self.sets.clear();
        self.items.clear();
        self.buckets.clear();
        self.cfps.clear();
        self.expected.clear();
    }

    /// Keep the first `n` sets.
    fn truncate(&mut self, n: usize, words: usize) {
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
    fn prefix(&self, n: usize, words: usize) -> Chunk {
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
    fn set(&self, local: usize, words: usize) -> SetRef<'_> {
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
struct SetRef<'a> {
    header: &'a SetHeader,
    /// The chunk's items up to this set's end (buckets index into it).
    items: &'a [Item],
    buckets: &'a [Bucket],
    cfps: &'a [Lazy],
    expected: &'a [u64],
}

impl<'a> SetRef<'a> {
    #[inline]
    fn find(&self, key: u32) -> Option<usize> {
        self.buckets.binary_search_by_key(&key, |b| b.key).ok()
    }

    /// All items of the set.
    fn all_items(&self) -> &'a [Item] {
        match self.buckets.first() {
            Some(b) => &self.items[b.start as usize..],
            None => &[],
        }
    }

    fn bucket_items(&self, b: usize) -> &'a [Item] {
        let start = self.buckets[b].start as usize;
        let end = match self.buckets.get(b + 1) {
            Some(n) => n.start as usize,
            None => self.items.len(),
        };
        &self.items[start..end]
    }
}

/// A set of u64 keys cleared in O(1) (generation stamps), for per-push deduplication.
#[derive(Debug, Default)]
struct StampSet {
    keys: Vec<u64>,
    stamps: Vec<u32>,
    stamp: u32,
    len: usize,
}

impl StampSet {
    fn clear(&mut self) {
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
    fn insert(&mut self, key: u64) -> bool {
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
struct Scratch {
    items: Vec<Item>,
    completions: Vec<(u32, u32)>,
    seen: StampSet,
    /// Bitset over nonterminals predicted in the set being built.
    predicted: Vec<u64>,
    predicted_touched: Vec<u32>,
    predict_stack: Vec<u32>,
    sort_keys: Vec<u64>,
    sorted: Vec<Item>,
    buckets: Vec<Bucket>,
    /// Leo resolution: per new bucket 0 = unvisited, 1 = on the path, 2 = done.
    leo_state: Vec<u8>,
    leo_path: Vec<usize>,
    /// Tarjan's algorithm over the new set's buckets (completion fingerprints).
    t_index: Vec<u32>,
    t_low: Vec<u32>,
    t_on: Vec<bool>,
    t_stack: Vec<usize>,
    t_calls: Vec<(usize, usize)>,
    t_scc: Vec<usize>,
    /// Sets whose completion fingerprints are being computed (dependencies on top).
    cfp_work: Vec<usize>,
    expected: Vec<u64>,
    /// Emptied chunks kept for reuse (at most [`SPARE_CHUNKS`]), so pushing and popping
    /// across a chunk boundary allocates nothing.
    spare: Vec<Chunk>,
}

const SPARE_CHUNKS: usize = 64;

impl Scratch {
    fn take_chunk(&mut self, words: usize) -> Chunk {
        self.spare.pop().unwrap_or_else(|| Chunk {
            sets: Vec::with_capacity(CHUNK_SETS),
            items: Vec::with_capacity(CHUNK_SETS * 32),
            buckets: Vec::with_capacity(CHUNK_SETS * 16),
            cfps: Vec::with_capacity(CHUNK_SETS * 16),
            expected: Vec::with_capacity(CHUNK_SETS * words),
        })
    }

    fn recycle(&mut self, chunk: Arc<Chunk>) {
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
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Work counters (for tests that check linearity independently of timing).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParserStats {
    /// Items added to sets (scanned, completed or predicted).
    pub items_added: u64,
    /// Completions processed (each `(nonterminal, origin)` once per set), Leo jumps included.
    pub completions: u64,
    /// Completions answered by a Leo record instead of walking the chain.
    pub leo_jumps: u64,
}

/// Incremental Earley parser state: a stack of Earley sets, one per terminal pushed.
pub struct Parser {
    tables: Arc<ParserTables>,
    /// Full chunks (each exactly `CHUNK_SETS` sets), shared copy-on-write.
    full: Arc<Vec<Arc<Chunk>>>,
    /// The last chunk: 1..=CHUNK_SETS sets (empty only while `new` builds set 0).
    last: Arc<Chunk>,
    num_sets: usize,
    /// The top set's expected terminals (a copy, so `expected()` can return a reference).
    expected: TerminalSet,
    stats: ParserStats,
}

impl Clone for Parser {
    /// Shares the set stack (copy on write); the clone gets its own empty scratch space.
    fn clone(&self) -> Self {
        Parser {
            tables: Arc::clone(&self.tables),
            full: Arc::clone(&self.full),
            last: Arc::clone(&self.last),
            num_sets: self.num_sets,
            expected: self.expected.clone(),
            stats: self.stats,
        }
    }
}

impl std::fmt::Debug for Parser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parser")
            .field("depth", &self.depth())
            .field(
                "expected",
                &self.expected.iter().map(|t| t.0).collect::<Vec<_>>(),
            )
            .field("accepting", &self.is_accepting())
            .finish()
    }
}

#[inline]
fn mix64(mut x: u64) -> u64 {
    // splitmix64 finaliser
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

#[inline]
fn item_key(d: u32, o: u32) -> u64 {
    (d as u64) << 32 | o as u64
}

#[inline]
fn completion_key(a: u32, o: u32) -> u64 {
    ((a | 0x8000_0000) as u64) << 32 | o as u64
}

impl Parser {
    /// A parser before any terminal: the set predicted from the start symbol.
    pub fn new(tables: Arc<ParserTables>) -> Self {
        let first = SCRATCH.with_borrow_mut(|s| s.take_chunk(tables.words));
        let mut p = Parser {
            expected: TerminalSet::new(tables.num_terminals),
            tables,
            full: Arc::new(Vec::new()),
            last: Arc::new(first),
            num_sets: 0,
            stats: ParserStats::default(),
        };
        SCRATCH.with_borrow_mut(|s| {
            let tables = &*p.tables;
            s.begin(tables);
            let accept = tables.accept_nt;
            // Empty language (unproductive start): `accept` has no items at all.
            s.predict(tables, accept, 0);
            p.finish_set(s, tables.nullable[accept as usize]);
        });
        p
    }

    pub fn tables(&self) -> &Arc<ParserTables> {
        &self.tables
    }

    /// Terminals that may come next (scannable in the current set).
    pub fn expected(&self) -> &TerminalSet {
        &self.expected
    }

    /// Whether `t` may come next (same as `expected().contains(t)`).
    pub fn can_push(&self, t: TerminalId) -> bool {
        self.expected.contains(t)
    }

    /// Number of terminals pushed so far.
    pub fn depth(&self) -> usize {
        self.num_sets - 1
    }

    /// The terminals pushed so far form a complete sentence.
    pub fn is_accepting(&self) -> bool {
        self.top().header.accepting
    }

    /// Work counters accumulated by this parser value's pushes (not shared with clones).
    pub fn stats(&self) -> ParserStats {
        self.stats
    }

    /// A 64-bit hash of the current state's *future*: the set of terminal sequences that can
    /// still follow, and which of them complete a sentence.
    ///
    /// Definition. For a nonterminal `A` and a set `j`, the *completion fingerprint*
    /// `cfp(A, j)` hashes what completing `A` with origin `j` does: the sum over the items
    /// of `j` waiting on `A` of `mix(dotted, cfp(lhs, origin))` — or, when `j` has a Leo
    /// record for `A`, exactly `cfp` of the record's topmost completion; `cfp(S', 0)` is a
    /// constant "accept". Same-set references (items predicted in `j`) can be cyclic; such
    /// cycles are hashed as a whole component. Then
    /// `fp(m) = mix(accepting, Σ mix(dotted, cfp(lhs, origin)))` over the items of the top set
    /// `m` with origin < `m` (its predicted items are a function of those; set 0 is salted).
    ///
    /// Guarantee: two states of parsers over the same [`ParserTables`] with equal
    /// fingerprints have, barring a 64-bit hash collision, the same set of acceptable future
    /// terminal sequences and the same accepting ones. Reason: the future of an item is
    /// (rest of its production) · (future of completing its lhs from its origin), and the
    /// latter is the union over the origin's waiters of the same thing, which is what `cfp`
    /// hashes, recursively; Leo records are exact (intermediate completions of a chain have
    /// no other effect). The random-grammar tests check this against an oracle. Unequal
    /// fingerprints say nothing (it is a cache key, not an equivalence test), but origins
    /// are normalised through `cfp`, so in a JSON-like grammar the state after `[1, 2,` and
    /// after `[1, 2, 3,` hash equal (left- or right-recursive lists alike), and so do the
    /// first and the later members of an object.
    ///
    /// Cost: computed on first call and cached inside the (shared) sets; computing it may
    /// walk back through origin sets not fingerprinted yet (iteratively, each set once).
    pub fn state_fingerprint(&self) -> u64 {
        fingerprint_of(&self.tables, &self.stack(), self.num_sets - 1)
    }

    /// Advance by one terminal; returns false and leaves the state unchanged if it cannot
    /// follow.
    pub fn push(&mut self, t: TerminalId) -> bool {
        if !self.expected.contains(t) {
            return false;
        }
        SCRATCH.with_borrow_mut(|s| {
            let mut stats = self.stats;
            let accepting = self.build_set(s, t, &mut stats);
            self.stats = stats;
            self.finish_set(s, accepting);
        });
        true
    }

    /// Scan `t` from the top set and run completion (prediction happens as items arrive);
    /// leaves the new set's items in `s`. Returns whether it accepts.
    fn build_set(&self, s: &mut Scratch, t: TerminalId, stats: &mut ParserStats) -> bool {
        let tables = &*self.tables;
        let m = self.num_sets as u32;
        s.begin(tables);
        let mut accepting = false;
        let chunks = Stack {
            full: &self.full,
            last: &self.last,
            words: tables.words,
        };
        let top = chunks.set(m as usize - 1);
        let b = top.find(t.0).expect("expected terminal has a bucket");
        for it in top.bucket_items(b) {
            s.add_kernel(tables, it.dotted + 1, it.origin, m);
        }
        while let Some((a, o)) = s.completions.pop() {
            if !s.seen.insert(completion_key(a, o)) {
                continue;
            }
            stats.completions += 1;
            if a == tables.accept_nt {
                accepting = true;
                continue;
            }
            let origin_set = chunks.set(o as usize);
            let Some(b) = origin_set.find(tables.num_terminals as u32 + a) else {
                continue;
            };
            let bucket = origin_set.buckets[b];
            if bucket.leo_nt != NO_LEO {
                stats.leo_jumps += 1;
                let (top_nt, top_origin) = (bucket.leo_nt, bucket.leo_origin);
                if !s.seen.insert(completion_key(top_nt, top_origin)) {
                    continue;
                }
                if top_nt == tables.accept_nt {
                    accepting = true;
                    continue;
                }
                let top_set = chunks.set(top_origin as usize);
                let Some(tb) = top_set.find(tables.num_terminals as u32 + top_nt) else {
                    continue;
                };
                for it in top_set.bucket_items(tb) {
                    s.add_kernel(tables, it.dotted + 1, it.origin, m);
                }
            } else {
                for it in origin_set.bucket_items(b) {
                    s.add_kernel(tables, it.dotted + 1, it.origin, m);
                }
            }
        }
        accepting
    }

    /// Whether pushing `t` would leave the parser accepting (`push(t) && is_accepting()`),
    /// without changing or copying anything: for end-of-sequence checks on shared states.
    pub fn accepts_after(&self, t: TerminalId) -> bool {
        if !self.expected.contains(t) {
            return false;
        }
        SCRATCH.with_borrow_mut(|s| self.build_set(s, t, &mut ParserStats::default()))
    }

    /// Undo the last successful push (no-op at depth 0).
    pub fn pop(&mut self) {
        if self.num_sets > 1 {
            self.truncate(self.num_sets - 2);
        }
    }

    /// Pop back to `depth` terminals (no-op if already at or below it).
    pub fn truncate(&mut self, depth: usize) {
        let keep = depth + 1;
        if keep >= self.num_sets {
            return;
        }
        let words = self.tables.words;
        // Index of the chunk that will hold the new top set (`keep - 1`).
        let keep_full = (keep - 1) / CHUNK_SETS;
        if keep_full < self.full.len() {
            SCRATCH.with_borrow_mut(|s| {
                let new_last = match Arc::get_mut(&mut self.full) {
                    Some(v) => {
                        while v.len() > keep_full + 1 {
                            s.recycle(v.pop().expect("chunk"));
                        }
                        v.pop().expect("chunk")
                    }
                    None => {
                        let c = Arc::clone(&self.full[keep_full]);
                        self.full = Arc::new(self.full[..keep_full].to_vec());
                        c
                    }
                };
                s.recycle(std::mem::replace(&mut self.last, new_last));
            });
        }
        let local = keep - keep_full * CHUNK_SETS;
        if local < self.last.sets.len() {
            match Arc::get_mut(&mut self.last) {
                Some(c) => c.truncate(local, words),
                None => self.last = Arc::new(self.last.prefix(local, words)),
            }
        }
        self.num_sets = keep;
        self.refresh_expected();
    }

    fn stack(&self) -> Stack<'_> {
        Stack {
            full: &self.full,
            last: &self.last,
            words: self.tables.words,
        }
    }

    fn top(&self) -> SetRef<'_> {
        self.stack().set(self.num_sets - 1)
    }

    fn refresh_expected(&mut self) {
        let words = self.tables.words;
        let stack = Stack {
            full: &self.full,
            last: &self.last,
            words,
        };
        self.expected
            .words
            .copy_from_slice(stack.set(self.num_sets - 1).expected);
    }

    /// Sort the scratch items into buckets, resolve Leo records, fingerprint, and append the
    /// set to the stack.
    fn finish_set(&mut self, s: &mut Scratch, accepting: bool) {
        let tables = &*self.tables;
        let m = self.num_sets as u32;
        let words = tables.words;
        let stack = Stack {
            full: &self.full,
            last: &self.last,
            words,
        };
        self.stats.items_added += s.items.len() as u64;

        // Bucket the items by the symbol after the dot (stable within a bucket).
        s.sort_keys.clear();
        for (i, it) in s.items.iter().enumerate() {
            s.sort_keys
                .push((tables.dots[it.dotted as usize].key as u64) << 32 | i as u64);
        }
        s.sort_keys.sort_unstable();
        s.sorted.clear();
        s.buckets.clear();
        s.expected.clear();
        s.expected.resize(words, 0);
        for &k in &s.sort_keys {
            let key = (k >> 32) as u32;
            if s.buckets.last().is_none_or(|b| b.key != key) {
                s.buckets.push(Bucket {
                    key,
                    start: s.sorted.len() as u32,
                    leo_nt: NO_LEO,
                    leo_origin: 0,
                });
                if (key as usize) < tables.num_terminals {
                    s.expected[key as usize / 64] |= 1 << (key % 64);
                }
            }
            s.sorted.push(s.items[(k & 0xffff_ffff) as usize]);
        }

        // Leo records (needs the new set's buckets; earlier sets are final).
        let nt_base = tables.num_terminals as u32;
        let first_nt_bucket = s.buckets.partition_point(|b| b.key < nt_base);
        s.leo_state.clear();
        s.leo_state.resize(s.buckets.len(), 0);
        for start in first_nt_bucket..s.buckets.len() {
            if s.leo_state[start] != 0 {
                continue;
            }
            s.leo_path.clear();
            s.leo_path.push(start);
            // Walk the same-set chain until it resolves; then unwind.
            loop {
                let cur = *s.leo_path.last().expect("path");
                let only = bucket_single(&s.buckets, &s.sorted, cur);
                let Some(w) = only.filter(|w| tables.dots[w.dotted as usize].last) else {
                    s.leo_state[cur] = 2; // no Leo record
                    break;
                };
                let b_nt = tables.dots[w.dotted as usize].lhs;
                if w.origin < m {
                    let (nt, o) =
                        earlier_leo(&stack, nt_base, w.origin, b_nt).unwrap_or((b_nt, w.origin));
                    s.buckets[cur].leo_nt = nt;
                    s.buckets[cur].leo_origin = o;
                    s.leo_state[cur] = 2;
                    break;
                }
                // Same-set link: resolve the bucket of `b_nt` in this set first.
                let key = nt_base + b_nt;
                match s.buckets.binary_search_by_key(&key, |b| b.key) {
                    Err(_) => {
                        s.buckets[cur].leo_nt = b_nt;
                        s.buckets[cur].leo_origin = m;
                        s.leo_state[cur] = 2;
                        break;
                    }
                    Ok(y) if s.leo_state[y] == 2 => {
                        let yb = s.buckets[y];
                        let (nt, o) = if yb.leo_nt != NO_LEO {
                            (yb.leo_nt, yb.leo_origin)
                        } else {
                            (b_nt, m)
                        };
                        s.buckets[cur].leo_nt = nt;
                        s.buckets[cur].leo_origin = o;
                        s.leo_state[cur] = 2;
                        break;
                    }
                    Ok(y) if s.leo_state[y] == 1 => {
                        // A cycle of unit-like links: give its members no Leo record.
                        let pos = s.leo_path.iter().position(|&p| p == y).expect("on path");
                        for &p in &s.leo_path[pos..] {
                            s.leo_state[p] = 2;
                        }
                        s.leo_path.truncate(pos);
                        break;
                    }
                    Ok(y) => {
                        s.leo_state[cur] = 1;
                        s.leo_path.push(y);
                    }
                }
            }
            // Unwind: every node still on the path links to the next one, which is resolved.
            while s.leo_path.len() >= 2 {
                let y = s.leo_path.pop().expect("path");
                let cur = *s.leo_path.last().expect("path");
                if s.leo_state[cur] == 2 {
                    continue;
                }
                let w = bucket_single(&s.buckets, &s.sorted, cur).expect("on path");
                let b_nt = tables.dots[w.dotted as usize].lhs;
                let yb = s.buckets[y];
                let (nt, o) = if yb.leo_nt != NO_LEO {
                    (yb.leo_nt, yb.leo_origin)
                } else {
                    (b_nt, m)
                };
                s.buckets[cur].leo_nt = nt;
                s.buckets[cur].leo_origin = o;
                s.leo_state[cur] = 2;
            }
            if let Some(&p) = s.leo_path.first() {
                s.leo_state[p] = 2;
            }
        }

        // Append to the stack.
        if self.last.sets.len() >= CHUNK_SETS {
            let fresh = Arc::new(s.take_chunk(words));
            let full_chunk = std::mem::replace(&mut self.last, fresh);
            Arc::make_mut(&mut self.full).push(full_chunk);
        }
        let chunk = Arc::make_mut(&mut self.last);
        let items_start = chunk.items.len() as u32;
        chunk.sets.push(SetHeader {
            items_start,
            buckets_start: chunk.buckets.len() as u32,
            fingerprint: Lazy::default(),
            cfps_done: Lazy::default(),
            accepting,
        });
        chunk.items.extend_from_slice(&s.sorted);
        chunk.buckets.extend(s.buckets.iter().map(|b| Bucket {
            start: b.start + items_start,
            ..*b
        }));
        chunk.cfps.resize_with(chunk.buckets.len(), Lazy::default);
        chunk.expected.extend_from_slice(&s.expected);
        self.num_sets += 1;
        self.expected.words.copy_from_slice(&s.expected);
    }
}

/// The fingerprint of set `j` (see [`Parser::state_fingerprint`]), computed on first use
/// and cached in the set's header.
fn fingerprint_of(tables: &ParserTables, stack: &Stack<'_>, j: usize) -> u64 {
    let set = stack.set(j);
    let known = set.header.fingerprint.get();
    if known != Lazy::UNKNOWN {
        return known;
    }
    let nt_base = tables.num_terminals as u32;
    // Predicted items (origin j) are a function of the other items' dotted ids, so only
    // those items count, each with the completion fingerprint of its (lhs, origin). Set 0
    // is the exception (predicted from the start symbol), hence its own salt.
    let mut sum: u64 = if j == 0 { 0x5e70_0000_5e70 } else { 0 };
    for it in set.all_items().iter().filter(|it| (it.origin as usize) < j) {
        ensure_cfps(tables, stack, it.origin as usize);
        let lhs = tables.dots[it.dotted as usize].lhs;
        let ctx = earlier_cfp(stack, nt_base, it.origin, lhs);
        sum = sum.wrapping_add(mix64(mix64(it.dotted as u64 ^ 0x1357_9bdf_0246_8ace) ^ ctx));
    }
    let fp = mix64(sum ^ if set.header.accepting { 0xacce_97ed } else { 0 });
    set.header.fingerprint.set(fp);
    set.header.fingerprint.get()
}

/// The completion fingerprint of `(nt, o)`; set `o`'s fingerprints must be computed.
#[inline]
fn earlier_cfp(stack: &Stack<'_>, nt_base: u32, o: u32, nt: u32) -> u64 {
    let set = stack.set(o as usize);
    debug_assert!(set.header.cfps_done.get() != Lazy::UNKNOWN);
    match set.find(nt_base + nt) {
        Some(b) => set.cfps[b].get(),
        // Only the synthetic start has no waiters: completing it accepts.
        None => ACCEPT_CONTEXT,
    }
}

/// Compute the completion fingerprints of set `j` and of every set they depend on
/// (iteratively: the chain of origins can be as long as the stack).
fn ensure_cfps(tables: &ParserTables, stack: &Stack<'_>, j: usize) {
    let done = |x: usize| stack.set(x).header.cfps_done.get() != Lazy::UNKNOWN;
    if done(j) {
        return;
    }
    SCRATCH.with_borrow_mut(|s| {
        let mut work = std::mem::take(&mut s.cfp_work);
        work.clear();
        work.push(j);
        while let Some(&x) = work.last() {
            if done(x) {
                work.pop();
                continue;
            }
            let set = stack.set(x);
            let dep = set
                .all_items()
                .iter()
                .map(|it| it.origin as usize)
                .chain(
                    set.buckets
                        .iter()
                        .filter(|b| b.leo_nt != NO_LEO)
                        .map(|b| b.leo_origin as usize),
                )
                .find(|&o| o < x && !done(o));
            if let Some(o) = dep {
                work.push(o);
                continue;
            }
            set_cfps(tables, stack, s, x);
            set.header.cfps_done.set(1);
            work.pop();
        }
        s.cfp_work = work;
    });
}

/// What one step of the same-set dependency walk sees.
enum Edge {
    /// No more items in this bucket.
    Done,
    /// This item depends on nothing in this set.
    Skip,
    /// This item depends on the completion fingerprint of bucket `w` of this set.
    To(usize),
}

/// The `pos`-th same-set dependency of bucket `v` of set `m`: the Leo top's bucket for a
/// Leo bucket, else the bucket of the lhs of each item predicted in this set.
fn same_set_edge(tables: &ParserTables, set: &SetRef<'_>, v: usize, pos: usize, m: u32) -> Edge {
    let nt_base = tables.num_terminals as u32;
    let b = &set.buckets[v];
    let find = |nt: u32| match set.find(nt_base + nt) {
        Some(w) => Edge::To(w),
        None => Edge::Skip,
    };
    if b.leo_nt != NO_LEO {
        return match (pos, b.leo_origin == m) {
            (0, true) => find(b.leo_nt),
            (0, false) => Edge::Skip,
            _ => Edge::Done,
        };
    }
    let items = set.bucket_items(v);
    match items.get(pos) {
        None => Edge::Done,
        Some(it) if it.origin == m => find(tables.dots[it.dotted as usize].lhs),
        Some(_) => Edge::Skip,
    }
}

/// Fill the completion fingerprints of set `m`'s nonterminal buckets (earlier sets' are
/// done). `cfp(A, m)` hashes the waiters on `A`: each waiter's dotted id and the completion
/// fingerprint of its own `(lhs, origin)` — from an earlier set, or (origin `m`) another
/// bucket of this set. A Leo bucket takes its top's fingerprint (the futures are equal).
/// Same-set dependencies can be cyclic (left recursion), so buckets are processed by
/// strongly connected components (iterative Tarjan, dependencies first); a component with
/// a cycle is hashed as a whole (every member's items, internal references by name) and
/// each member's fingerprint is that hash combined with its name.
fn set_cfps(tables: &ParserTables, stack: &Stack<'_>, s: &mut Scratch, m: usize) {
    const UNVISITED: u32 = u32::MAX;
    let set = stack.set(m);
    let nt_base = tables.num_terminals as u32;
    let m = m as u32;
    let nb = set.buckets.len();
    let first_nt = set.buckets.partition_point(|b| b.key < nt_base);
    s.t_index.clear();
    s.t_index.resize(nb, UNVISITED);
    s.t_low.clear();
    s.t_low.resize(nb, 0);
    s.t_on.clear();
    s.t_on.resize(nb, false);
    s.t_stack.clear();
    s.t_calls.clear();
    let mut counter = 0u32;
    for root in first_nt..nb {
        if s.t_index[root] != UNVISITED {
            continue;
        }
        s.t_index[root] = counter;
        s.t_low[root] = counter;
        counter += 1;
        s.t_stack.push(root);
        s.t_on[root] = true;
        s.t_calls.push((root, 0));
        while let Some(&(v, pos)) = s.t_calls.last() {
            match same_set_edge(tables, &set, v, pos, m) {
                Edge::Skip => s.t_calls.last_mut().expect("call").1 += 1,
                Edge::To(w) => {
                    s.t_calls.last_mut().expect("call").1 += 1;
                    if s.t_index[w] == UNVISITED {
                        s.t_index[w] = counter;
                        s.t_low[w] = counter;
                        counter += 1;
                        s.t_stack.push(w);
                        s.t_on[w] = true;
                        s.t_calls.push((w, 0));
                    } else if s.t_on[w] {
                        s.t_low[v] = s.t_low[v].min(s.t_index[w]);
                    }
                }
                Edge::Done => {
                    s.t_calls.pop();
                    if let Some(&(u, _)) = s.t_calls.last() {
                        s.t_low[u] = s.t_low[u].min(s.t_low[v]);
                    }
                    if s.t_low[v] == s.t_index[v] {
                        let from = s.t_stack.iter().rposition(|&x| x == v).expect("on stack");
                        s.t_scc.clear();
                        s.t_scc.extend(s.t_stack.drain(from..));
                        hash_component(tables, stack, &set, s, m);
                    }
                }
            }
        }
    }
}

/// Completion fingerprints for the component in `s.t_scc` (its dependencies are done).
fn hash_component(
    tables: &ParserTables,
    stack: &Stack<'_>,
    set: &SetRef<'_>,
    s: &mut Scratch,
    m: u32,
) {
    let nt_base = tables.num_terminals as u32;
    // Reference to the completion of `nt` with origin `o`: its fingerprint, or a name when
    // it is a member of this component.
    let code = |s: &Scratch, nt: u32, o: u32| -> u64 {
        if o < m {
            return earlier_cfp(stack, nt_base, o, nt);
        }
        match set.find(nt_base + nt) {
            Some(w) if s.t_on[w] => mix64(INTERNAL_CONTEXT ^ nt as u64),
            Some(w) => set.cfps[w].get(),
            None => ACCEPT_CONTEXT,
        }
    };
    let cyclic = s.t_scc.len() > 1 || {
        let v = s.t_scc[0];
        let mut pos = 0;
        let mut self_loop = false;
        loop {
            match same_set_edge(tables, set, v, pos, m) {
                Edge::Done => break,
                Edge::To(w) if w == v => self_loop = true,
                _ => {}
            }
            pos += 1;
        }
        self_loop
    };
    let item_sum = |s: &Scratch, v: usize, salt: u64| -> u64 {
        let b = set.buckets[v];
        if b.leo_nt != NO_LEO {
            return mix64(salt ^ LEO_CONTEXT ^ mix64(code(s, b.leo_nt, b.leo_origin)));
        }
        let mut sum: u64 = 0;
        for it in set.bucket_items(v) {
            let lhs = tables.dots[it.dotted as usize].lhs;
            sum = sum.wrapping_add(mix64(
                mix64(salt ^ it.dotted as u64) ^ code(s, lhs, it.origin),
            ));
        }
        sum
    };
    if !cyclic {
        let v = s.t_scc[0];
        let b = set.buckets[v];
        let cfp = if b.leo_nt != NO_LEO {
            // Transparent: a Leo bucket's future is its top's (this is what makes list
            // continuations hash equal whatever the list's length).
            code(s, b.leo_nt, b.leo_origin)
        } else {
            mix64(item_sum(s, v, 0) ^ 0x6a09_e667_f3bc_c908)
        };
        set.cfps[v].set(cfp);
        s.t_on[v] = false;
        return;
    }
    let mut total: u64 = 0;
    for &v in &s.t_scc {
        let name = set.buckets[v].key as u64;
        total = total.wrapping_add(item_sum(s, v, mix64(name ^ 0xbb67_ae85_84ca_a73b)));
    }
    for &v in &s.t_scc {
        set.cfps[v].set(mix64(
            mix64(total ^ 0x3c6e_f372_fe94_f82b) ^ set.buckets[v].key as u64,
        ));
    }
    for i in 0..s.t_scc.len() {
        let v = s.t_scc[i];
        s.t_on[v] = false;
    }
}

/// The only item of new-set bucket `b`, if it has exactly one.
fn bucket_single(buckets: &[Bucket], items: &[Item], b: usize) -> Option<Item> {
    let start = buckets[b].start as usize;
    let end = buckets.get(b + 1).map_or(items.len(), |n| n.start as usize);
    (end == start + 1).then(|| items[start])
}

/// The Leo record of finished set `o` for nonterminal `nt`, if any.
fn earlier_leo(stack: &Stack<'_>, nt_base: u32, o: u32, nt: u32) -> Option<(u32, u32)> {
    let set = stack.set(o as usize);
    let b = set.find(nt_base + nt)?;
    let bucket = set.buckets[b];
    (bucket.leo_nt != NO_LEO).then_some((bucket.leo_nt, bucket.leo_origin))
}

/// Read access to the set stack (full chunks, then the last one).
struct Stack<'a> {
    full: &'a [Arc<Chunk>],
    last: &'a Chunk,
    words: usize,
}

impl<'a> Stack<'a> {
    #[inline]
    fn set(&self, j: usize) -> SetRef<'a> {
        let c = j / CHUNK_SETS;
        let chunk: &'a Chunk = if c < self.full.len() {
            &self.full[c]
        } else {
            self.last
        };
        chunk.set(j % CHUNK_SETS, self.words)
    }
}

impl Scratch {
    fn begin(&mut self, tables: &ParserTables) {
        self.items.clear();
        self.completions.clear();
        self.seen.clear();
        let words = tables.num_nonterminals.div_ceil(64);
        if self.predicted.len() != words {
            self.predicted = vec![0; words];
            self.predicted_touched.clear();
        }
        for &a in &self.predicted_touched {
            self.predicted[a as usize / 64] = 0;
        }
        self.predicted_touched.clear();
    }

    /// Add item `(d, o)` and its nullable skip chain to the set `m` being built.
    #[inline]
    fn add_kernel(&mut self, tables: &ParserTables, d: u32, o: u32, m: u32) {
        let end = tables.dots[d as usize].chain_end;
        for d in d..=end {
            if !self.seen.insert(item_key(d, o)) {
                break;
            }
            let info = tables.dots[d as usize];
            if info.key == END {
                self.completions.push((info.lhs, o));
            } else {
                self.items.push(Item {
                    dotted: d,
                    origin: o,
                });
                if info.key >= tables.num_terminals as u32 {
                    self.predict(tables, info.key - tables.num_terminals as u32, m);
                }
            }
        }
    }

    /// Predict nonterminal `a` (and everything it predicts) in set `m`.
    #[inline]
    fn predict(&mut self, tables: &ParserTables, a: u32, m: u32) {
        if !self.mark_predicted(a) {
            return;
        }
        self.predict_stack.push(a);
        while let Some(c) = self.predict_stack.pop() {
            for &d in tables.own(c) {
                self.items.push(Item {
                    dotted: d,
                    origin: m,
                });
            }
            for &b in tables.left_of(c) {
                if self.mark_predicted(b) {
                    self.predict_stack.push(b);
                }
            }
        }
    }

    /// Marks `a` predicted in the set being built; false if it already was.
    #[inline]
    fn mark_predicted(&mut self, a: u32) -> bool {
        let (w, bit) = (a as usize / 64, 1u64 << (a % 64));
        if self.predicted[w] & bit != 0 {
            return false;
        }
        self.predicted[w] |= bit;
        self.predicted_touched.push(a);
        true
    }
}

#[cfg(test)]
mod tests;
