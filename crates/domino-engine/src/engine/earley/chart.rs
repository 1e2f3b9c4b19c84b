//! The parser proper: the stack of Earley sets, building a set by scan, complete and
//! predict (with Leo records), and rollback by truncating the stack.

use std::sync::Arc;

use super::fingerprints::fingerprint_of;
use super::scratch::{SCRATCH, Scratch};
use super::sets::{
    Bucket, CHUNK_SETS, Chunk, Item, Lazy, NO_LEO, SetHeader, SetRef, Stack, TerminalSet,
};
use super::tables::{END, ParserTables};
use crate::grammar::ir::TerminalId;

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
            .copy_from_words(stack.set(self.num_sets - 1).expected);
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
        self.expected.copy_from_words(&s.expected);
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
