//! A terminal's DFA, determinised on demand from its Thompson NFA.
//!
//! # Why
//! Determinising every terminal of a grammar up front was most of a JSON Schema's time to
//! first mask: a key that is none of 40 property names is a ~600-state DFA (1–3 ms through
//! `regex-automata`'s dense builder), a string of at most 100 characters a few hundred
//! states with a wide subset per state, and a decoding run visits a small fraction of either.
//! A [`LazyDfa`] compiles only the NFA (linear in the regex; a counted repetition's body is
//! compiled once and copied, module `nfa`) and builds a DFA state the first time a walk steps
//! into it: the subterminal trees of the states the parser reaches, and the bytes decoding
//! feeds.
//!
//! # How
//! A DFA state is the set of *important* NFA states (byte transitions and the match state)
//! in the ε-closure of the bytes read so far, keeping only NFA states that can still reach
//! the match state. That keeps the one invariant eager pruning gave: **every state can reach
//! a match** (a subset can reach a match iff one of its members can), so a byte that can no
//! longer lead to a match goes to [`DEAD`] — masks stay exact without exploring the DFA.
//! A state accepts when its set holds the match state (all-matches semantics, as the eager
//! DFA's `MatchKind::All`). Bytes are grouped by the NFA's byte classes (bytes no
//! transition distinguishes), so a state has one transition slot per class.
//!
//! # Invariants
//! - State 0 is the start state; ids are dense in creation order. They may differ between
//!   processes, so persisted data names a state by its NFA set ([`LazyDfa::state_key`]).
//! - Readers never lock: slots go from unknown to their final value once, under the builder
//!   lock, after the new state's data is stored (`crate::segmented`).
//! - At most `max_states` states: beyond it a transition reads as [`DEAD`] (masks only get
//!   stricter) and [`LazyDfa::overflowed`] turns true, which the engine reports as an error.
//! - Only NFAs without look-around are built lazily ([`LazyDfa::new`] returns `None`
//!   otherwise and the caller determinises eagerly).

use super::dfa::{DEAD, DfaError};
use super::nfa::{Nfa, NfaError};
use crate::hash::WordHashMap;
use crate::segmented::{Segmented, SlotRows};
use regex_syntax::hir::Hir;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A terminal's DFA built on demand (see the module doc).
pub struct LazyDfa {
    nfa: Nfa,
    /// Per NFA state: it can reach the match state.
    live: Box<[bool]>,
    /// Byte → class (the NFA's byte classes, numbered by first byte).
    classes: [u8; 256],
    /// A representative byte of each class.
    class_bytes: Box<[u8]>,
    trans: SlotRows,
    accept: Segmented<bool>,
    num_states: AtomicU32,
    max_states: usize,
    overflowed: AtomicBool,
    builder: Mutex<Builder>,
    /// This automaton's number in the process ([`LazyDfa::id`]).
    id: u64,
}

/// The writer's side: the NFA set of every state and the scratch of the subset step.
struct Builder {
    /// [`set_hash`] of a state's NFA set → the newest state with it; `same_hash[id]` is the
    /// state before `id` with the same hash (`u32::MAX`: none). Candidates are compared in
    /// full. (A `Vec` per hash under std's SipHash was an allocation per state and a tenth
    /// of interning.)
    ids: WordHashMap<u64, u32>,
    same_hash: Vec<u32>,
    sets: Vec<Box<[u32]>>,
    /// Stamp per NFA state (ε-closure visited marks without clearing).
    seen: Vec<u32>,
    stamp: u32,
    stack: Vec<u32>,
    /// Scratch: the NFA states one byte leads to.
    seeds: Vec<u32>,
    /// Scratch: their closure ([`LazyDfa::closure`]'s result, reused: most closures are
    /// states that exist already, so nothing is allocated for them).
    out: Vec<u32>,
    set_bytes: usize,
}

/// A word-wise FNV-1a of an NFA set (the key of [`Builder::ids`]).
fn set_hash(set: &[u32]) -> u64 {
    let mut h = crate::hash::Fnv1a::new();
    for &q in set {
        h.write_word(q as u64);
    }
    h.finish()
}

impl std::fmt::Debug for LazyDfa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyDfa")
            .field("nfa_states", &self.nfa.len())
            .field("states", &self.num_states())
            .finish()
    }
}

impl LazyDfa {
    /// Compile `hir`'s NFA and the start state. `Ok(None)`: the regex uses look-around
    /// (determinise it eagerly instead). Errors: the NFA is over `nfa_limit` bytes, or the
    /// language is empty ([`DfaError::MatchesNothing`]).
    pub fn new(hir: &Hir, nfa_limit: usize, max_states: usize) -> Result<Option<Self>, DfaError> {
        let nfa = match Nfa::compile(hir, nfa_limit) {
            Ok(nfa) => nfa,
            Err(NfaError::LookAround) => return Ok(None),
            Err(NfaError::Compile(e)) => return Err(DfaError::Compile(e)),
        };
        let live = nfa.co_reachable();
        // Classes are numbered in byte order, so a class's first byte represents it.
        let classes = nfa.byte_classes();
        let mut class_bytes = Vec::new();
        for b in 0..=255u8 {
            if classes[b as usize] as usize == class_bytes.len() {
                class_bytes.push(b);
            }
        }
        let n = nfa.len();
        let dfa = LazyDfa {
            trans: SlotRows::new(class_bytes.len()),
            classes,
            class_bytes: class_bytes.into(),
            accept: Segmented::default(),
            num_states: AtomicU32::new(0),
            max_states: max_states.max(1),
            overflowed: AtomicBool::new(false),
            builder: Mutex::new(Builder {
                ids: WordHashMap::default(),
                same_hash: Vec::new(),
                sets: Vec::new(),
                seen: vec![0; n],
                stamp: 0,
                stack: Vec::new(),
                seeds: Vec::new(),
                out: Vec::new(),
                set_bytes: 0,
            }),
            live,
            nfa,
            id: super::dfa::next_automaton_id(),
        };
        {
            let mut b = dfa.builder.lock().unwrap_or_else(|e| e.into_inner());
            b.seeds.clear();
            b.seeds.push(dfa.nfa.start());
            let start = dfa.closure(&mut b);
            if start.is_empty() {
                return Err(DfaError::MatchesNothing);
            }
            dfa.intern(&mut b, &start);
            b.out = start;
        }
        Ok(Some(dfa))
    }

    /// Next state after byte `b`, or [`DEAD`]; built on first use.
    #[inline]
    pub fn next(&self, s: u32, b: u8) -> u32 {
        let cls = self.classes[b as usize] as usize;
        match self.trans.load(s as usize, cls) {
            SlotRows::UNKNOWN => self.expand(s, cls),
            n => n,
        }
    }

    /// Next state after byte `b` when that transition is already built ([`DEAD`] included),
    /// else `None` (nothing is built).
    #[inline]
    pub fn next_if_built(&self, s: u32, b: u8) -> Option<u32> {
        let cls = self.classes[b as usize] as usize;
        match self.trans.load(s as usize, cls) {
            SlotRows::UNKNOWN => None,
            n => Some(n),
        }
    }

    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        *self
            .accept
            .get(s as usize)
            .expect("a lazy DFA state used before it was created")
    }

    /// States built so far.
    pub fn num_states(&self) -> usize {
        self.num_states.load(Ordering::Acquire) as usize
    }

    /// A number no other automaton of this process has (state numbers mean the same in every
    /// grammar that shares this automaton, so walks over it may be shared under this key).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether a state was refused for the state limit (see the module doc).
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed)
    }

    /// The class of byte `b`: bytes of one class have the same transition in every state.
    #[inline]
    pub fn class(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Bytes held: the NFA, the transition rows and state sets built so far.
    pub fn memory_bytes(&self) -> usize {
        let sets = self
            .builder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_bytes;
        self.nfa.memory_bytes()
            + self.live.len()
            + self.trans.memory_bytes()
            + self.accept.memory_bytes()
            + sets
            + self.nfa.len() * 4
    }

    /// State `s`'s NFA set: the same in every process that compiles the same regex.
    pub fn state_key(&self, s: u32) -> Option<Vec<u32>> {
        let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        b.sets.get(s as usize).map(|k| k.to_vec())
    }

    /// The state whose NFA set is `key` (as [`LazyDfa::state_key`] gave it), created if new;
    /// `None` when `key` is no such set or the state limit is reached.
    pub fn state_of_key(&self, key: &[u32]) -> Option<u32> {
        let n = self.nfa.len();
        if key.is_empty()
            || key.windows(2).any(|w| w[0] >= w[1])
            || key
                .iter()
                .any(|&q| (q as usize) >= n || !self.live[q as usize] || !self.nfa.is_important(q))
        {
            return None;
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        self.intern(&mut b, key)
    }

    /// Build every state reachable from the start, stopping (`false`) once more than
    /// `max_states` exist; `true`: the whole DFA is built, within `max_states`. Pass a
    /// `max_states` below the DFA's own limit so the DFA never overflows here.
    ///
    /// The same states, numbered the same, as stepping every state on every class in order
    /// ([`LazyDfa::next`]), but a state's transitions come from one pass over its NFA set
    /// (each NFA state's byte ranges, spread over the classes they cover) under one lock:
    /// a class no member steps on is [`DEAD`] at once instead of a subset step of its own.
    /// Lowering explores a candidate terminal's whole DFA this way to decide whether it fits
    /// (`dfa::dfa_fits`): that was most of lowering a schema whose value bodies are regular
    /// (`box.schema` of JSONSchemaBench: 21 ms of 37).
    pub fn explore(&self, max_states: usize) -> bool {
        let mut guard = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *guard;
        let classes = self.class_bytes.len();
        // Per class: the NFA states its byte leads to from the state being expanded, and
        // the last member that stepped there (a member's first matching range wins, as in
        // `Nfa::step`).
        let mut seeds: Vec<Vec<u32>> = vec![Vec::new(); classes];
        let mut last_member: Vec<u32> = vec![u32::MAX; classes];
        let mut s = 0usize;
        while s < b.sets.len() {
            if b.sets.len() > max_states {
                return false;
            }
            let set = std::mem::take(&mut b.sets[s]);
            for (i, &q) in set.iter().enumerate() {
                for t in self.nfa.transitions(q) {
                    let (lo, hi) = (self.classes[t.lo as usize], self.classes[t.hi as usize]);
                    for c in lo as usize..=hi as usize {
                        if last_member[c] != i as u32 {
                            last_member[c] = i as u32;
                            seeds[c].push(t.next);
                        }
                    }
                }
            }
            b.sets[s] = set;
            last_member.fill(u32::MAX);
            let row = self.trans.row(s);
            for (c, slot) in row.iter().enumerate() {
                if slot.load(Ordering::Acquire) != SlotRows::UNKNOWN {
                    seeds[c].clear();
                    continue;
                }
                let id = if seeds[c].is_empty() {
                    DEAD
                } else {
                    std::mem::swap(&mut b.seeds, &mut seeds[c]);
                    let next = self.closure(b);
                    std::mem::swap(&mut b.seeds, &mut seeds[c]);
                    seeds[c].clear();
                    let id = if next.is_empty() {
                        Some(DEAD)
                    } else if b.sets.len() > max_states {
                        // Leave the rest unknown: a later step builds it.
                        None
                    } else {
                        self.intern(b, &next)
                    };
                    b.out = next;
                    match id {
                        Some(id) => id,
                        None => {
                            for v in &mut seeds {
                                v.clear();
                            }
                            return false;
                        }
                    }
                };
                slot.store(id, Ordering::Release);
            }
            s += 1;
        }
        b.sets.len() <= max_states
    }

    #[cold]
    fn expand(&self, s: u32, cls: usize) -> u32 {
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &self.trans.row(s as usize)[cls];
        let known = slot.load(Ordering::Acquire);
        if known != SlotRows::UNKNOWN {
            return known;
        }
        let byte = self.class_bytes[cls];
        let b = &mut *b;
        b.seeds.clear();
        for &q in b.sets[s as usize].iter() {
            if let Some(n) = self.nfa.step(q, byte) {
                b.seeds.push(n);
            }
        }
        let set = self.closure(b);
        let interned = if set.is_empty() {
            Some(DEAD)
        } else {
            self.intern(b, &set)
        };
        b.out = set;
        let Some(id) = interned else {
            self.overflowed.store(true, Ordering::Relaxed);
            // Not stored: a later call may try again (and is refused again).
            return DEAD;
        };
        slot.store(id, Ordering::Release);
        id
    }

    /// The important, live NFA states in the ε-closure of `b.seeds`, sorted: `b.out`'s
    /// buffer, taken (hand it back with `b.out = set` when done).
    fn closure(&self, b: &mut Builder) -> Vec<u32> {
        b.stamp = b.stamp.wrapping_add(1);
        if b.stamp == 0 {
            b.seen.fill(0);
            b.stamp = 1;
        }
        let stamp = b.stamp;
        let mut out = std::mem::take(&mut b.out);
        out.clear();
        b.stack.clear();
        let Builder { stack, seeds, .. } = b;
        stack.extend(seeds.iter().rev());
        while let Some(q) = b.stack.pop() {
            if b.seen[q as usize] == stamp || !self.live[q as usize] {
                continue;
            }
            b.seen[q as usize] = stamp;
            if self.nfa.is_important(q) {
                out.push(q);
            } else {
                b.stack.extend(self.nfa.epsilons(q).iter().rev());
            }
        }
        out.sort_unstable();
        out
    }

    /// The state of this NFA set, created if new; `None` beyond the state limit.
    fn intern(&self, b: &mut Builder, set: &[u32]) -> Option<u32> {
        let hash = set_hash(set);
        let newest = b.ids.get(&hash).copied().unwrap_or(u32::MAX);
        let mut candidate = newest;
        while candidate != u32::MAX {
            if *b.sets[candidate as usize] == *set {
                return Some(candidate);
            }
            candidate = b.same_hash[candidate as usize];
        }
        let id = b.sets.len();
        if id >= self.max_states {
            return None;
        }
        let accepting = set.iter().any(|&q| self.nfa.is_match(q));
        // Data first, then the count: a reader that sees the id finds its row and flag.
        let _ = self.accept.slot(id).set(accepting);
        self.trans.row(id);
        b.set_bytes += set.len() * 4 + 32;
        b.ids.insert(hash, id as u32);
        b.same_hash.push(newest);
        b.sets.push(set.into());
        self.num_states.store(id as u32 + 1, Ordering::Release);
        Some(id as u32)
    }
}
