//! Root walks shared between grammars ([`RootWalk`], kept per vocabulary in
//! [`RootWalks`]; see `tree`'s "Root walks shared between grammars").
//!
//! A component tree build `(t, s)` walks the vocabulary trie with the *root thread* — `t`'s
//! DFA from state `s`, no boundary yet — and with the threads that boundaries start. What the
//! root thread does depends only on the automaton, the state and the vocabulary: which tokens
//! stay inside `t` (the root group), the DFA states they end in, and the trie nodes before
//! whose byte it accepts. Only at those nodes does the grammar come in (whether a boundary is
//! recorded: which terminal may start there and follow `t`). Lazy terminal DFAs and constrained
//! products are shared by every grammar through the process-wide DFA cache, so the same
//! `(automaton, state)` comes back in grammar after grammar (a JSON string body, a slug
//! pattern, a `maxLength` count); the first build records its root walk here and the later
//! builds, in any grammar, replay it: the root group and end states are copied, and the walk
//! runs only below the accepting nodes, with the threads their boundaries start.
//!
//! # Key sets
//! A key set (`additionalProperties` beside named properties: any key but these names,
//! [`crate::grammar::key_set_dfa::KeySetDfa`]) is a DFA of its own in every grammar, so it has
//! no shared number. But past its names' trie its states are a fixed tail automaton, the
//! same in every key set, numbered from `tail_start`: a build from a tail state keys its
//! walk by [`KEY_SET_TAIL`] and the state less `tail_start`, and every key set of every
//! grammar replays it, shifted. A build from a trie node `s` (a key spelled so far) steps
//! like the tail's `Free` state on every first byte except its children's, the closing
//! quote (when `s` is a name) and `\` (an escape there may not spell a name's character), so
//! it replays `Free`'s walk without those first bytes' subtrees, which it walks from `s`
//! instead ([`RootWalk::for_sibling`]; end states are kept per first byte for it,
//! [`RootWalk::ends_by_top`]). The first such build in a process builds the `Free` tree to
//! record it. On JSONSchemaBench over Gemma 3 these builds were half of all cold-mask time:
//! 300–1,300 µs each, 5,000–10,000 trie nodes walked every time for the same tail.
//!
//! # Sibling states
//! The same replay serves any shared automaton: a state seen for the first time that accepts
//! nothing and lives on most first bytes replays the walk of an earlier state of its
//! automaton that steps like it on most of them ([`sibling_walk`]). A pattern searched inside
//! a string is the case: a new partial-match state with every character of a UUID, each
//! stepping like the others on every byte that is not the pattern's.
//!
//! # Invariants
//! - A walk is stored only when the build visited every node before which the root thread
//!   accepts (no fast path took a subtree across an accepting state, no per-grammar
//!   remembered subtree was taken) and did not overflow: then every grammar-dependent event
//!   of any grammar's build is at one of [`RootWalk::accepts`].
//! - The key's automaton number is never reused in a process (`TerminalDfa::shared_id`), and
//!   is never [`KEY_SET_TAIL`].
//! - A walk replayed for a sibling state `s` of its own state `r` keeps only the subtrees of
//!   first bytes on which `s` and `r` step to the same state: below them the two root
//!   threads are the same thread.
//! - A sibling replay starts only from a walk recorded with its end states by first byte,
//!   and only between states that accept nothing (no event sits at the root itself).

use std::sync::{Arc, Mutex};

use super::trie::{NO_NODE, VocabTrie};
use crate::grammar::dfa::{DEAD, TerminalDfa};
use crate::hash::WordHashMap;

/// What the root thread of one component build found over the whole trie.
#[derive(Debug)]
pub(crate) struct RootWalk {
    /// The root group's tokens, as increasing ranges of the trie's token array.
    pub(crate) ranges: Box<[(u32, u32)]>,
    /// The DFA states root-group tokens end in (sorted, distinct; a superset where a chain of
    /// state sets took a subtree, as the build itself records).
    pub(crate) ends: Box<[u32]>,
    /// In preorder (by node), where a replay must ask the grammar (see [`RootEvent`]).
    pub(crate) events: Box<[RootEvent]>,
    /// `ends` by the top-level trie node (the token's first byte) whose subtree reached them:
    /// `(node, state)`, sorted, so that a walk taking only some first bytes from this one
    /// ([`RootWalk::for_sibling`]) knows its end states exactly. Recorded only for the walk
    /// sibling replays start from (the key-set tail's `Free`, and states of shared automata
    /// that accept nothing: [`sibling_walk`]); empty otherwise.
    pub(crate) ends_by_top: Box<[(u32, u32)]>,
}

/// The store's automaton number for the tail every key set shares
/// ([`crate::grammar::key_set_dfa::KeySetDfa::tail_start`]): its walks are kept with states
/// counted from the tail's start, so every key set of every grammar replays them (shared
/// automata are numbered from 1 upwards and never reach it).
pub(crate) const KEY_SET_TAIL: u64 = u64::MAX;

/// A trie node where a replay asks its grammar.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RootEvent {
    pub(crate) node: u32,
    /// The root thread's DFA state before the node's byte.
    pub(crate) state: u32,
    /// `false`: the state accepts, and the replay makes the boundary its grammar allows
    /// before the node's byte. `true`: the recording build took the node's subtree at once
    /// by a character chain across a state that accepts (its grammar let no byte of the
    /// subtree start a terminal there), so the replay walks the subtree with the root thread
    /// from this state, as a build without a stored walk does.
    pub(crate) rewalk: bool,
}

impl RootWalk {
    fn bytes(&self) -> usize {
        ENTRY_BYTES
            + self.ranges.len() * 8
            + self.ends.len() * 4
            + self.events.len() * std::mem::size_of::<RootEvent>()
            + self.ends_by_top.len() * 8
    }

    /// The walk with every state it names moved by `delta` (wrapping): a key set's tail
    /// states to the store's numbering (from 0) and back.
    pub(crate) fn shifted(&self, delta: u32) -> RootWalk {
        let s = |x: u32| x.wrapping_add(delta);
        RootWalk {
            ranges: self.ranges.clone(),
            ends: self.ends.iter().map(|&e| s(e)).collect(),
            events: self
                .events
                .iter()
                .map(|e| RootEvent {
                    state: s(e.state),
                    ..*e
                })
                .collect(),
            ends_by_top: self.ends_by_top.iter().map(|&(n, e)| (n, s(e))).collect(),
        }
    }

    /// The walk of a state `s` from this walk, recorded from a state `r` of the same
    /// automaton: `differs[b]` says whether `s` and `r` step to different states on byte
    /// `b`. Below every first byte where they do not, the two walks are the same; the
    /// subtrees of the bytes where they do lose what this walk found there and become
    /// [`RootEvent::rewalk`] nodes from `s` (a replay walks them with the root thread), or
    /// nothing where `s` dies on the byte (`dies[b]`). (A key set's trie node `s` steps
    /// like the tail's `Free` on every byte but its children's, the closing quote and `\`.)
    pub(crate) fn for_sibling(
        &self,
        trie: &VocabTrie,
        s: u32,
        differs: &[bool; 256],
        dies: &[bool; 256],
    ) -> RootWalk {
        // The top-level nodes to take out, in trie order (nodes, then token ranges).
        let mut out: Vec<(u32, u32, u32, u32)> = Vec::new();
        for (&x, _) in trie.root_child.iter().zip(differs).filter(|(_, d)| **d) {
            if x != NO_NODE {
                let r = trie.subtree_range(x as usize);
                out.push((x, trie.nodes[x as usize].next, r.start, r.end));
            }
        }
        out.sort_unstable();
        let inside = |n: u32| {
            let k = out.partition_point(|o| o.0 <= n);
            k > 0 && n < out[k - 1].1
        };
        let mut events: Vec<RootEvent> = Vec::with_capacity(self.events.len() + out.len());
        let mut again = out.iter().filter(|o| {
            let b = trie.nodes[o.0 as usize].byte as usize;
            !dies[b]
        });
        let mut next_again = again.next();
        for e in self.events.iter().filter(|e| !inside(e.node)) {
            while let Some(o) = next_again.filter(|o| o.0 < e.node) {
                events.push(RootEvent {
                    node: o.0,
                    state: s,
                    rewalk: true,
                });
                next_again = again.next();
            }
            events.push(*e);
        }
        for o in next_again.into_iter().chain(again) {
            events.push(RootEvent {
                node: o.0,
                state: s,
                rewalk: true,
            });
        }
        // Ranges minus the taken-out subtrees' token ranges (both increasing).
        let mut ranges: Vec<(u32, u32)> = Vec::with_capacity(self.ranges.len() + out.len());
        let mut k = 0;
        for &(mut a, b) in self.ranges.iter() {
            while k < out.len() && out[k].3 <= a {
                k += 1;
            }
            let mut j = k;
            while a < b {
                match out.get(j) {
                    Some(&(_, _, oa, ob)) if oa < b => {
                        if a < oa {
                            ranges.push((a, oa));
                        }
                        a = a.max(ob);
                        j += 1;
                    }
                    _ => {
                        ranges.push((a, b));
                        break;
                    }
                }
            }
        }
        let ends_by_top: Vec<(u32, u32)> = self
            .ends_by_top
            .iter()
            .copied()
            .filter(|&(n, _)| !inside(n))
            .collect();
        let mut ends: Vec<u32> = ends_by_top.iter().map(|&(_, e)| e).collect();
        ends.sort_unstable();
        ends.dedup();
        RootWalk {
            ranges: ranges.into(),
            ends: ends.into(),
            events: events.into(),
            ends_by_top: ends_by_top.into(),
        }
    }
}

/// Where a component build `(t, s0)` keeps its root walk: (automaton number, state as
/// stored, what to add to a stored state for this automaton's numbering).
pub(crate) type WalkKey = (u64, u32, u32);

/// The stored walk a component build of automaton `dfa` from `s0` keys, replays and records
/// (`state_root`: a greedy lexer's state tree, never shared): `(key, walk to replay,
/// whether to record)`. A shared automaton keys its walks by its number; a key set's tail
/// state by the tail's ([`KEY_SET_TAIL`]). A key set's trie node replays the tail's `Free`
/// walk with the first bytes it steps on differently walked again
/// ([`RootWalk::for_sibling`]); `record_free(free)` builds the tree of the key set's `Free`
/// state when no walk of it is stored yet (once per process: it records it). A shared
/// automaton's state with no walk stored may replay a sibling state's ([`sibling_walk`])
/// instead of recording its own.
pub(crate) fn walk_for(
    trie: &VocabTrie,
    dfa: &TerminalDfa,
    s0: u32,
    state_root: bool,
    record_free: impl FnOnce(u32),
) -> (Option<WalkKey>, Option<Arc<RootWalk>>, bool) {
    let tail = dfa.key_set_tail().filter(|_| !state_root);
    let key = match (state_root, dfa.literal_bytes(), dfa.shared_id(), tail) {
        (false, None, Some(id), _) if !dfa.overflowed() => Some((id, s0, 0)),
        (_, _, _, Some(t)) if s0 >= t => Some((KEY_SET_TAIL, s0 - t, t)),
        _ => None,
    };
    let stored = |k: WalkKey| match trie.root_walks.get(k.0, k.1) {
        StoredWalk::Walk(w) if k.2 == 0 => (Some(w), false),
        StoredWalk::Walk(w) => (Some(Arc::new(w.shifted(k.2))), false),
        StoredWalk::Absent => (None, true),
        StoredWalk::NotWorthIt => (None, false),
    };
    if let Some(k) = key {
        let (w, recording) = stored(k);
        if recording && k.0 != KEY_SET_TAIL && !dfa.is_accepting(s0) {
            if let Some(w) = sibling_walk(trie, dfa, k.0, s0) {
                return (None, Some(w), false);
            }
        }
        return (key, w, recording);
    }
    let Some(t) = tail.filter(|&t| (1..t).contains(&s0)) else {
        return (None, None, false);
    };
    let free: WalkKey = (KEY_SET_TAIL, 0, t);
    let w = match stored(free) {
        (None, true) => {
            record_free(t);
            stored(free).0
        }
        (w, _) => w,
    };
    let w = w.map(|w| {
        let next = first_steps(dfa, s0);
        Arc::new(w.for_sibling(trie, s0, &differs(dfa, &next, t), &dies(&next)))
    });
    (None, w, false)
}

/// Where state `s0` of `dfa` goes on each byte.
fn first_steps(dfa: &TerminalDfa, s0: u32) -> [u32; 256] {
    std::array::from_fn(|b| dfa.next(s0, b as u8))
}

/// The bytes on which state `r` of `dfa` steps otherwise than `next` (a state's
/// [`first_steps`]): [`RootWalk::for_sibling`]'s `differs`.
fn differs(dfa: &TerminalDfa, next: &[u32; 256], r: u32) -> [bool; 256] {
    std::array::from_fn(|b| next[b] != dfa.next(r, b as u8))
}

/// The bytes on which `next` (a state's [`first_steps`]) dies: [`RootWalk::for_sibling`]'s
/// `dies`.
fn dies(next: &[u32; 256]) -> [bool; 256] {
    std::array::from_fn(|b| next[b] == DEAD)
}

/// Most states of one automaton kept as [`sibling_walk`]'s candidates.
pub(crate) const MAX_SIBLINGS: usize = 4;

/// A new state `s0` of shared automaton `id` (it accepts nothing yet: no boundary before
/// its first byte) replays the stored walk of another of its states, `r`, with the first
/// bytes they step on differently walked again ([`RootWalk::for_sibling`]), when `s0` lives
/// on first bytes holding over half of the vocabulary and those bytes' subtrees hold at
/// most a third of that (else the build walks and records its own). Candidates are the
/// first [`MAX_SIBLINGS`] states of `id` whose walks were recorded with their end states by
/// first byte. A pattern searched inside a string (a UUID
/// anywhere in it) has a state per partial match, new one after another as a document is
/// written, and each state steps like the others on every byte that is not the pattern's:
/// on Gemma 3 such builds were about 1.8 ms each, 37 of them in one schema.
fn sibling_walk(trie: &VocabTrie, dfa: &TerminalDfa, id: u64, s0: u32) -> Option<Arc<RootWalk>> {
    let candidates = trie.root_walks.siblings(id);
    if candidates.is_empty() {
        return None;
    }
    // Tokens under the first bytes `pick` says.
    let tokens_under = |pick: &[bool; 256]| -> usize {
        (0..256)
            .filter(|&b| pick[b] && trie.root_child[b] != NO_NODE)
            .map(|b| trie.subtree_range(trie.root_child[b] as usize).len())
            .sum()
    };
    let next = first_steps(dfa, s0);
    let dies = dies(&next);
    // Worth it only for a state that lives on most first bytes (a string body's): a
    // replay copies the whole stored walk, which costs more than walking a state that dies
    // on most of them.
    let live = trie.tokens.len() - tokens_under(&dies);
    if live * 2 <= trie.tokens.len() {
        return None;
    }
    let (w, differs, cost) = candidates
        .into_iter()
        .filter(|(r, _)| *r != s0)
        .map(|(r, w)| {
            let differs = differs(dfa, &next, r);
            let cost = tokens_under(&differs);
            (w, differs, cost)
        })
        .min_by_key(|c| c.2)?;
    if cost * 3 > live {
        return None;
    }
    trie.root_walks.count_sibling_replay();
    Some(Arc::new(w.for_sibling(trie, s0, &differs, &dies)))
}

/// The end states of a recording walk by top-level trie node ([`RootWalk::ends_by_top`]):
/// the walk enters each top-level node in order, and the end states listed since it entered
/// the last one are that one's.
#[derive(Debug)]
pub(crate) struct TopEnds {
    node: u32,
    at: usize,
    pub(crate) pairs: Vec<(u32, u32)>,
}

impl Default for TopEnds {
    fn default() -> Self {
        TopEnds {
            node: NO_NODE,
            at: 0,
            pairs: Vec::new(),
        }
    }
}

impl TopEnds {
    /// The walk leaves the top-level node it was in; `list`: the end states so far.
    pub(crate) fn close(&mut self, list: &[u32]) {
        if self.node != NO_NODE {
            let mut v = list[self.at.min(list.len())..].to_vec();
            v.sort_unstable();
            v.dedup();
            self.pairs.extend(v.into_iter().map(|e| (self.node, e)));
            self.node = NO_NODE;
        }
    }

    /// The walk enters top-level node `node`; `at`: the end-state list's length then (the
    /// list's mark: every state added from now on is listed after it).
    pub(crate) fn enter(&mut self, node: u32, at: usize) {
        self.node = node;
        self.at = at;
    }
}

/// Most bytes one vocabulary's [`RootWalks`] hold; past it the store is emptied and starts
/// again (trees already built keep what they replayed).
pub(crate) const MAX_ROOT_WALK_BYTES: usize = 32 << 20;

/// Bytes counted per stored walk besides its arrays (map slot, `Arc`, three allocations).
const ENTRY_BYTES: usize = 96;

/// A walk is stored only when its accepting nodes are fewer than the nodes it visited over
/// this (replaying a walk costs about as much as walking below each accepting node): an
/// integer's walk accepts at nearly every node it visits, and replaying it saves nothing.
pub(crate) const MIN_VISITS_PER_ACCEPT: usize = 4;

/// The root walks of one vocabulary's builds, by (automaton number, state).
#[derive(Debug, Default)]
pub(crate) struct RootWalks {
    inner: Mutex<Store>,
}

/// What the store knows of one `(automaton, state)`.
#[derive(Debug)]
pub(crate) enum StoredWalk {
    /// Nothing yet: the build records its walk.
    Absent,
    /// A walk to replay.
    Walk(Arc<RootWalk>),
    /// A build recorded the walk and found it not worth keeping ([`MIN_VISITS_PER_ACCEPT`]):
    /// later builds neither replay nor record (recording stops the walk's fast paths at
    /// every state that accepts).
    NotWorthIt,
}

#[derive(Debug, Default)]
struct Store {
    /// `None`: not worth keeping (see [`StoredWalk::NotWorthIt`]).
    map: WordHashMap<(u64, u32), Option<Arc<RootWalk>>>,
    bytes: usize,
    /// Walks replayed so far, and the times the store was emptied for its budget (for the
    /// tree cache's statistics and tests).
    replays: u64,
    emptied: u64,
    /// Neither replay nor record (tests: a store whose builds walk everything).
    disabled: bool,
    /// Per shared automaton, its first states whose walks have their end states by first
    /// byte (at most [`MAX_SIBLINGS`]): [`sibling_walk`]'s candidates.
    siblings: WordHashMap<u64, Vec<(u32, Arc<RootWalk>)>>,
    /// Walks replayed for a sibling state (tests).
    sibling_replays: u64,
}

impl RootWalks {
    /// What is stored for state `state` of automaton `dfa` (a walk is counted as replayed).
    pub(crate) fn get(&self, dfa: u64, state: u32) -> StoredWalk {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if s.disabled {
            return StoredWalk::NotWorthIt;
        }
        match s.map.get(&(dfa, state)) {
            None => StoredWalk::Absent,
            Some(None) => StoredWalk::NotWorthIt,
            Some(Some(w)) => {
                let w = StoredWalk::Walk(w.clone());
                s.replays += 1;
                w
            }
        }
    }

    /// Keep `walk` for state `state` of automaton `dfa`, or `None`: a recorded walk not worth
    /// keeping (an entry already there stays).
    ///
    /// `sibling`: the walk has its end states by first byte and its state accepts nothing,
    /// so other states of `dfa` may replay it ([`sibling_walk`]).
    pub(crate) fn insert(&self, dfa: u64, state: u32, walk: Option<RootWalk>, sibling: bool) {
        let bytes = walk.as_ref().map_or(ENTRY_BYTES, RootWalk::bytes);
        if bytes > MAX_ROOT_WALK_BYTES {
            return;
        }
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if s.disabled {
            return;
        }
        if s.bytes + bytes > MAX_ROOT_WALK_BYTES {
            s.map.clear();
            s.siblings.clear();
            s.bytes = 0;
            s.emptied += 1;
        }
        if let std::collections::hash_map::Entry::Vacant(e) = s.map.entry((dfa, state)) {
            let walk = walk.map(Arc::new);
            e.insert(walk.clone());
            s.bytes += bytes;
            if let Some(w) = walk.filter(|_| sibling) {
                let list = s.siblings.entry(dfa).or_default();
                if list.len() < MAX_SIBLINGS {
                    list.push((state, w));
                }
            }
        }
    }

    /// [`sibling_walk`]'s candidates for automaton `dfa`.
    fn siblings(&self, dfa: u64) -> Vec<(u32, Arc<RootWalk>)> {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if s.disabled {
            return Vec::new();
        }
        s.siblings.get(&dfa).cloned().unwrap_or_default()
    }

    fn count_sibling_replay(&self) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.replays += 1;
        s.sibling_replays += 1;
    }

    /// Turn the store off: every build walks the whole trie (tests compare such builds with
    /// replays).
    #[cfg(test)]
    pub(crate) fn disable(&self) {
        let mut s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        s.map.clear();
        s.siblings.clear();
        s.disabled = true;
    }

    /// Walks replayed for a sibling state so far ([`sibling_walk`]).
    #[cfg(test)]
    pub(crate) fn sibling_replays(&self) -> u64 {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .sibling_replays
    }

    /// (Walks held, bytes the store takes, walks replayed so far, times the store was emptied.)
    pub(crate) fn counts(&self) -> (usize, usize, u64, u64) {
        let s = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let walks = s.map.values().filter(|w| w.is_some()).count();
        (walks, s.bytes, s.replays, s.emptied)
    }
}

#[cfg(test)]
mod tests {
    use super::super::CompiledGrammar;
    use super::super::build_memo::BuildMemo;
    use super::super::tree::{MAX_TREE_WORK, SubterminalTree};
    use super::super::trie::VocabTrie;
    use crate::grammar::GrammarSource;
    use crate::lexer::{ComponentId, Scanner};
    use crate::test_rng::Rng;
    use crate::vocab::{TokenSet, Vocabulary};
    use std::collections::BTreeMap;

    /// Random tokens over an alphabet with JSON punctuation, escapes, digits, letters and
    /// non-ASCII characters, so that strings close inside tokens (`ab",`) and boundaries
    /// follow them.
    fn vocab(seed: u64, n: usize) -> Vocabulary {
        const PIECES: &[&str] = &[
            "a", "b", "k", "z", "e", "-", "0", "7", "\"", "\"", ",", ":", " ", "}", "]", "{", "[",
            "\\", "é", "東", "x", "q", ".", "n", "u", "l", "t", "r",
        ];
        let mut rng = Rng(seed);
        let mut words: Vec<Vec<u8>> = PIECES.iter().map(|p| p.as_bytes().to_vec()).collect();
        while words.len() < n {
            let len = 1 + rng.below(7);
            let w: String = (0..len).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            words.push(w.into_bytes());
        }
        words.sort();
        words.dedup();
        let n = words.len();
        Vocabulary::new(words, vec![false; n], vec![])
    }

    /// A tree as a comparable value: per event path, its groups' token sets by live set.
    type Canon = BTreeMap<Vec<(u32, u32)>, BTreeMap<u32, Vec<u32>>>;

    fn canon(t: &SubterminalTree, vocab_len: usize) -> (Canon, Vec<u32>, Vec<u32>) {
        let (nodes, children, groups) = t.parts();
        let mut out = Canon::new();
        let mut stack = vec![(0u32, Vec::new())];
        while let Some((n, path)) = stack.pop() {
            let (cs, gs) = nodes[n as usize].ranges();
            let entry = out.entry(path.clone()).or_default();
            for g in &groups[gs.start as usize..gs.end as usize] {
                let mut set = TokenSet::new(vocab_len);
                g.tokens.union_into(&mut set);
                let ids = entry.entry(g.live.0).or_default();
                ids.extend(set.iter().map(|t| t.0));
                ids.sort_unstable();
                ids.dedup();
            }
            for &c in &children[cs.start as usize..cs.end as usize] {
                let node = &nodes[c as usize];
                let mut p = path.clone();
                p.push((node.terminal.0, node.inside));
                stack.push((c, p));
            }
        }
        let ends = t.end_components().iter().map(|c| c.0).collect();
        let states = t.end_states().iter().map(|s| s.0).collect();
        (out, ends, states)
    }

    /// Every component tree of each grammar, built with the root walks other grammars'
    /// builds stored (one trie for all) and built from scratch (a trie whose store is emptied
    /// before each build), is the same tree. The schemas share terminals (a slug, a bounded
    /// string, a string body) where different things may follow them: nothing (a top-level
    /// string), `,` or `}` (an object member), `,` or `]` (an array item). Replays happen, and
    /// some replayed trees record boundaries.
    #[test]
    fn replayed_root_walks_build_the_trees_a_fresh_walk_builds() {
        let slug = serde_json::json!({"type": "string", "pattern": "^[a-z][-0-9a-z]+$"});
        let short = serde_json::json!({"type": "string", "maxLength": 5});
        let sources = [
            // Digits accept at every count; a chain takes a digit subtree across those states
            // when no digit may start a terminal after the number (the first grammar), but
            // in the second a `7` may, so the replay must walk the subtree again.
            GrammarSource::Gbnf(
                "root ::= num rest\nnum ::= \"a\" [0-9]{3} ([0-9]{3})?\nrest ::= \"x\" \"(\" rest \")\" | \"x\"".into(),
            ),
            GrammarSource::Gbnf(
                "root ::= num rest\nnum ::= \"a\" [0-9]{3} ([0-9]{3})?\nrest ::= \"7\" \"(\" rest \")\" | \"7\"".into(),
            ),
        ];
        let schemas = [
            slug.clone(),
            serde_json::json!({"type": "array", "items": slug}),
            serde_json::json!({
                "type": "object",
                "properties": {"id": slug, "name": {"type": "string"}, "n": {"type": "integer"},
                               "s": short},
                "required": ["id", "name"]
            }),
            serde_json::json!({"type": "array", "items": {"type": "string"}}),
            serde_json::json!({"type": "object", "additionalProperties": short}),
            serde_json::json!({"type": "string"}),
            // Key sets (any key but these): their tails' walks are shared, and a trie node's
            // tree replays the tail's `Free` walk with its children's bytes walked again.
            serde_json::json!({"type": "object", "properties": {"ab": {"type": "integer"},
                "abe": {"type": "string"}, "ka": slug, "z": {"type": "integer"}}}),
            serde_json::json!({"type": "object", "properties": {"ka": {"type": "integer"},
                "kaz": {"type": "integer"}, "e": short, "-x": {"type": "string"}}}),
            // A pattern searched inside a string (unanchored): a state per partial match,
            // each replaying an earlier one's walk with the pattern's bytes walked again.
            serde_json::json!({"type": "string", "pattern": "a7-?[be]"}),
            serde_json::json!({"type": "array", "items": {"type": "string", "pattern": "ze[0-7]"}}),
        ];
        let v = vocab(7, 4000);
        let shared = VocabTrie::new(&v);
        let fresh = VocabTrie::new(&v);
        fresh.root_walks.disable();
        let mut replayed_with_boundaries = 0;
        let mut key_set_node_replays = 0;
        let sources = sources
            .into_iter()
            .chain(schemas.into_iter().map(GrammarSource::JsonSchema));
        for source in sources {
            let schema = format!("{source:?}");
            let ir = source.compile(&Default::default()).unwrap();
            let g = CompiledGrammar::new(ir).unwrap();
            let (mut memo_shared, mut memo_fresh) = (BuildMemo::default(), BuildMemo::default());
            // Every component reachable from the start, as `TreeCache::precompute_all` finds them.
            let mut seen = std::collections::HashSet::new();
            let mut queue: Vec<ComponentId> = g.scanner.components(Scanner::START).to_vec();
            let mut states_seen = std::collections::HashSet::new();
            while let Some(c) = queue.pop() {
                if !seen.insert(c) {
                    continue;
                }
                let before = shared.root_walks.counts().2;
                let build = |trie: &VocabTrie, memo: &mut BuildMemo| {
                    SubterminalTree::build_component(
                        &g.scanner,
                        &g.follow,
                        trie,
                        v.len(),
                        c,
                        MAX_TREE_WORK,
                        memo,
                    )
                };
                let a = build(&shared, &mut memo_shared);
                let replayed = shared.root_walks.counts().2 > before;
                let b = build(&fresh, &mut memo_fresh);
                assert_eq!(fresh.root_walks.counts().2, 0, "a fresh build replayed");
                let (ca, cb) = (canon(&a, v.len()), canon(&b, v.len()));
                assert!(
                    ca == cb,
                    "component {c:?} of {schema}: the replayed tree differs (replayed: {replayed})"
                );
                replayed_with_boundaries += (replayed && a.num_nodes() > 1) as usize;
                let (t, s) = g.scanner.component(c);
                let tail = g.scanner.terminal_dfa(t).key_set_tail();
                key_set_node_replays += (replayed && tail.is_some_and(|t| s < t)) as usize;
                queue.extend_from_slice(a.end_components());
                for &q in a.end_states() {
                    if states_seen.insert(q) {
                        queue.extend_from_slice(g.scanner.components(q));
                    }
                }
            }
        }
        let (walks, bytes, replays, _) = shared.root_walks.counts();
        assert!(
            walks > 0 && bytes > 0 && replays > 0,
            "{walks} {bytes} {replays}"
        );
        let rewalks = {
            let store = shared.root_walks.inner.lock().unwrap();
            let walks = store.map.values().flatten();
            walks
                .flat_map(|w| w.events.iter())
                .filter(|e| e.rewalk)
                .count()
        };
        assert!(rewalks > 0, "no stored walk has a subtree to walk again");
        assert!(
            key_set_node_replays > 0,
            "no key set's trie node replayed its tail's walk"
        );
        assert!(
            shared.root_walks.sibling_replays() > 0,
            "no searched pattern's state replayed a sibling's walk"
        );
        assert!(
            replayed_with_boundaries > 0,
            "no replayed tree had a boundary"
        );
    }
}
