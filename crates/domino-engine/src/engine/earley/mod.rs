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
//!
//! # Layout
//! `tables` holds the grammar analysis, `sets` the item and set storage (buckets, chunks,
//! [`TerminalSet`]), `scratch` the per-thread working memory of a push, `chart` the parser
//! itself (scan, complete, predict, Leo records, rollback) and `fingerprints` the state
//! hashes.

mod chart;
mod fingerprints;
mod scratch;
mod sets;
mod tables;

pub use chart::{Parser, ParserStats};
pub use sets::{CHUNK_SETS, TerminalSet};
pub use tables::ParserTables;

#[cfg(test)]
mod tests;
