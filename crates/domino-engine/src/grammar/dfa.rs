//! Byte DFAs of terminals.
//!
//! [`TerminalDfa`] is one terminal's language as a DFA over bytes whose states can all still
//! reach a match (the scanner runs the union of a grammar's terminal DFAs; the JSON Schema
//! front end builds one to decide whether a constrained language is empty or too large).
//! `build_dfa` is `regex-automata`'s dense DFA of a HIR, for lowering's size checks and the
//! reference recognizer. [`TerminalDfa`]'s errors are a [`DfaError`], so callers tell
//! "matches nothing" (an empty language, which some callers accept) from a real failure by
//! its variant.
//!
//! # Cost on the first request
//! Determinising a grammar's terminals up front was the bulk of compiling a JSON Schema, yet
//! a decoding run visits few of their states, most terminals are literals (keys, enum
//! members, punctuation), and the rest recur in every schema (strings, numbers, whitespace,
//! formats). So [`TerminalDfa::new`] builds a literal's chain directly, gives every other
//! regex a [`LazyDfa`] (states built when a walk first reaches them, see
//! [`crate::grammar::lazy_dfa`]), and keeps those in a process-wide cache keyed by the HIR
//! (by [`hir_hash`], compared in full), bounded by [`DFA_CACHE_BYTES`]: grammars that share
//! a terminal share its states. Constrained terminals (products, [`TerminalDfa::product`])
//! stay eager tables: an intersection's liveness is not a property of its parts' states.
//! An object key that is none of a set of plain names (the JSON Schema front end's key
//! sets, kept as their names: [`RegexHir::key_set`]) gets the DFA of the names' trie instead
//! ([`crate::grammar::key_set_dfa`], through [`TerminalDfa::for_terminal`]): compiling those
//! HIRs' NFAs was nine tenths of building the terminal DFAs of the slowest schemas.

use crate::grammar::hir_key::{HirMap, constrained_hash_of, hir_bytes, hir_hash};
use crate::grammar::ir;
use crate::grammar::key_set_dfa::KeySetDfa;
use crate::grammar::lazy_dfa::LazyDfa;
use crate::grammar::regex_hir::RegexHir;
use regex_automata::dfa::{Automaton, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind, dfa::StartKind};
use regex_syntax::hir::Hir;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// No live terminal remains: the byte sequence cannot continue any terminal.
pub const DEAD: u32 = u32::MAX;
/// Size limit for one terminal's automaton (bytes; the armed memory budget may lower it).
pub const TERMINAL_DFA_SIZE_LIMIT: usize = 64 << 20;

/// Why a [`TerminalDfa`] could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DfaError {
    /// `regex-automata` could not compile the regular expression (too large, unsupported);
    /// its message.
    Compile(String),
    /// The language is empty.
    MatchesNothing,
    /// A constrained terminal's product automaton exceeded this many states.
    TooManyStates(usize),
    /// Building the DFA of a `constraints.and` part failed.
    Intersected(Box<DfaError>),
    /// Building the DFA of a `constraints.and_not` part failed (other than by matching
    /// nothing, which excludes nothing).
    Excluded(Box<DfaError>),
}

impl std::fmt::Display for DfaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DfaError::Compile(message) => f.write_str(message),
            DfaError::MatchesNothing => f.write_str("the terminal matches nothing"),
            DfaError::TooManyStates(n) => write!(f, "the intersection has more than {n} states"),
            DfaError::Intersected(e) => write!(f, "intersected language: {e}"),
            DfaError::Excluded(e) => write!(f, "excluded language: {e}"),
        }
    }
}

impl std::error::Error for DfaError {}

/// Budget of the process-wide cache of terminal DFAs (transition tables), in bytes; when a
/// new entry would pass it the cache is emptied (the next grammars refill it).
pub const DFA_CACHE_BYTES: usize = 128 << 20;

/// One cached terminal: its HIR (shared with the terminals that gave it, when they did) and
/// constraints (compared by address, then in full, on a hash match), its DFA, and the bytes of
/// its key.
type CacheEntry = (RegexHir, ir::Constraints, TerminalDfa, usize);

/// Whether a cached HIR is `hir`: the same allocation (a shared lexical pattern or key set),
/// or equal in full.
fn same_hir(cached: &RegexHir, hir: &Hir) -> bool {
    std::ptr::eq(cached.hir(), hir) || *cached.hir() == *hir
}

/// Process-wide: [`constrained_hash`] → the terminals with it and their DFAs (see the module
/// doc), and the bytes held.
static DFA_CACHE: Mutex<Option<DfaCache>> = Mutex::new(None);

/// The cache's entries by hash, and the bytes they held when last counted.
type DfaCache = (HashMap<u64, Vec<CacheEntry>>, usize);

/// The cached DFA of this terminal (`hash` its [`constrained_hash`]), if any.
fn cached(hash: u64, hir: &Hir, constraints: &ir::Constraints) -> Option<TerminalDfa> {
    let cache = DFA_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .as_ref()?
        .0
        .get(&hash)?
        .iter()
        .find(|(h, c, _, _)| same_hir(h, hir) && c == constraints)
        .map(|(_, _, d, _)| d.clone())
}

/// Bytes of an entry's key.
fn key_bytes(hir: &Hir, constraints: &ir::Constraints) -> usize {
    hir_bytes(hir)
        + constraints
            .and
            .iter()
            .chain(&constraints.and_not)
            .map(hir_bytes)
            .sum::<usize>()
}

/// Keep `d` for this terminal (`shared`: `hir` behind the terminal's `Arc`, kept instead of a
/// copy). A lazy DFA grows after it is kept, so when the bytes held
/// would pass the budget they are counted again from the entries' current sizes, and the
/// cache is emptied if that is still over it (grammars holding an entry keep theirs alive).
fn remember(
    hash: u64,
    hir: &Hir,
    shared: Option<&RegexHir>,
    constraints: &ir::Constraints,
    d: &TerminalDfa,
) {
    let key = key_bytes(hir, constraints);
    let bytes = key + d.memory_bytes();
    if bytes > DFA_CACHE_BYTES {
        return;
    }
    let mut cache = DFA_CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let (map, held) = cache.get_or_insert_with(|| (HashMap::new(), 0));
    if *held + bytes > DFA_CACHE_BYTES {
        *held = map
            .values()
            .flatten()
            .map(|(_, _, d, k)| k + d.memory_bytes())
            .sum();
        if *held + bytes > DFA_CACHE_BYTES {
            // Freeing a full cache (a hundred megabytes of small allocations) took 0.4 s,
            // on whichever request happened to overflow it: hand it to a thread instead.
            let old = std::mem::take(map);
            *held = 0;
            // (If no thread can be started, `spawn` drops the closure, and the map, here.)
            let _ = std::thread::Builder::new()
                .name("dfa-cache-free".into())
                .spawn(move || drop(old));
        }
    }
    let bucket = map.entry(hash).or_default();
    if !bucket
        .iter()
        .any(|(h, c, _, _)| same_hir(h, hir) && c == constraints)
    {
        *held += bytes;
        let hir = shared.map_or_else(|| RegexHir::new(hir.clone()), Clone::clone);
        bucket.push((hir, constraints.clone(), d.clone(), key));
    }
}

/// Whether `hir`'s [`state_estimate`] is at most `max_estimate` and its dense DFA stays under
/// `limit` bytes ([`build_dfa`] succeeds), remembered per process: lowering asks this of the
/// same pieces (strings, numbers, formats) in every schema. The estimate is checked first and
/// refuses without building anything.
pub(crate) fn dfa_fits(hir: &Hir, limit: usize, max_estimate: usize) -> bool {
    type Fits = HashMap<(usize, usize), HirMap<bool>>;
    static FITS: Mutex<Option<Fits>> = Mutex::new(None);
    let hash = hir_hash(hir);
    if let Some(&ok) = FITS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|m| m.get(&(limit, max_estimate))?.get(hash, hir))
    {
        return ok;
    }
    let ok = state_estimate(hir) <= max_estimate && explored_fits(hir, limit);
    let mut fits = FITS.lock().unwrap_or_else(|e| e.into_inner());
    let m = fits.get_or_insert_with(HashMap::new);
    if m.values().map(HirMap::len).sum::<usize>() >= 100_000 {
        m.clear();
    }
    m.entry((limit, max_estimate))
        .or_default()
        .insert(hash, hir.clone(), ok);
    ok
}

/// The common refinement of the byte classes of `parts`: each byte's group, and one
/// representative byte per group (groups numbered in order of their first byte).
fn joint_byte_classes(parts: &[TerminalDfa]) -> ([u8; 256], Vec<u8>) {
    let classes: Vec<[u8; 256]> = parts
        .iter()
        .map(|d| std::array::from_fn(|b| d.byte_class(b as u8)))
        .collect();
    let mut group_of = [0u8; 256];
    let mut reps: Vec<u8> = Vec::new();
    for b in 0..=255u8 {
        let same = reps
            .iter()
            .position(|&r| classes.iter().all(|c| c[r as usize] == c[b as usize]));
        group_of[b as usize] = match same {
            Some(g) => g as u8,
            None => {
                reps.push(b);
                (reps.len() - 1) as u8
            }
        };
    }
    (group_of, reps)
}

/// Whether `hir`'s DFA, every state built, stays under `limit` bytes of transitions (one
/// 4-byte slot per state and byte class). Built as the terminal's own lazy DFA, through the
/// terminal-DFA cache: a piece that fits becomes a terminal, and the scanner then finds its
/// DFA already built instead of compiling the NFA again (checking with `regex-automata`'s
/// dense builder was a separate NFA and DFA, thrown away: 5–8 % of compiling a median
/// JSONSchemaBench schema, where whole maps with string values are such pieces).
fn explored_fits(hir: &Hir, limit: usize) -> bool {
    let Ok(d) = TerminalDfa::new(hir) else {
        return false;
    };
    let l = match &d.repr {
        Repr::Lazy(l) => l,
        Repr::Literal(_) | Repr::KeySet(_) => return true,
        // An eager table (look-around): sized by the dense builder.
        Repr::Table { .. } => return build_dfa(hir, Some(limit)).is_ok(),
    };
    let (_, reps) = joint_byte_classes(std::slice::from_ref(&d));
    // Stop short of the lazy DFA's own state limit: an overflowed DFA left in the cache
    // would turn a later terminal with this HIR into an error (`LazyDfa::explore` stops one
    // state past its limit; the margin is what stepping class by class needed).
    let max_states =
        (limit / (4 * reps.len()).max(1)).min(MAX_LAZY_STATES.saturating_sub(reps.len() + 1));
    l.explore(max_states) && !l.overflowed()
}

/// A cheap structural estimate of the states in `hir`'s DFA (saturating): literals count
/// their bytes, a class the bytes of its longest UTF-8 sequence, a concatenation the sum of
/// its parts, an alternation the sum of its branches, and a counted repetition its count
/// times its body. It sees counting (`x{0,255}` needs ~255 copies of `x`'s states), not
/// subset blow-up, so `dfa_fits` uses it only to refuse early: a piece whose estimate is
/// over the caller's bound is refused without determinising it (on JSONSchemaBench, building
/// DFAs only to find them too large was most of lowering's time: every piece the exact check
/// refused had an estimate over 8,192), the others are still built and measured.
pub fn state_estimate(hir: &Hir) -> usize {
    use regex_syntax::hir::{Class, HirKind};
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => 0,
        HirKind::Literal(l) => l.0.len(),
        HirKind::Class(Class::Bytes(_)) => 1,
        HirKind::Class(Class::Unicode(c)) => c.ranges().last().map_or(1, |r| r.end().len_utf8()),
        HirKind::Capture(c) => state_estimate(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v
            .iter()
            .fold(0usize, |a, h| a.saturating_add(state_estimate(h))),
        HirKind::Repetition(r) => {
            let n = r.max.unwrap_or(r.min).max(1) as usize;
            state_estimate(&r.sub).max(1).saturating_mul(n)
        }
    }
}

/// One terminal's DFA over bytes, live states only (every state can reach a match). State 0
/// is the start state.
///
/// Either a table built eagerly (literals, constrained products, and regexes with
/// look-around), a [`LazyDfa`] whose states are built when a walk first reaches them, or a
/// key set's [`KeySetDfa`].
/// Cloning shares the table or the lazy automaton (`Arc`).
#[derive(Clone, Debug)]
pub struct TerminalDfa {
    repr: Repr,
}

#[derive(Clone, Debug)]
enum Repr {
    Table {
        /// Byte → class: the bytes of a class go to the same state from every state.
        classes: Arc<[u8; 256]>,
        /// Classes (the length of a row of `next`).
        stride: u32,
        /// `next[s * stride + classes[b]]`: the next state, or [`DEAD`]. (A product kept
        /// a row per byte was 1 KB a state: 6 MB for a `format` capped at 128 characters,
        /// filled and scanned for liveness when about 60 classes tell its bytes apart.)
        next: Arc<[u32]>,
        /// Whether the bytes read so far form a match.
        accept: Arc<[bool]>,
        /// See [`TerminalDfa::shared_id`].
        id: u64,
    },
    Lazy(Arc<LazyDfa>),
    /// An object key that is none of a set of names, from the names' trie (module
    /// [`crate::grammar::key_set_dfa`]): every state exists from the start.
    KeySet(Arc<KeySetDfa>),
    /// The chain of one non-empty string: state `i` has read `lit[..i]`, state `len`
    /// accepts, and state `len + 1` (regex-automata's delayed-match state, kept so state
    /// numbers equal the determinised DFA's) goes nowhere. No table: a key literal's table
    /// was 256 × 4 bytes per character, filled and scanned for every literal of every
    /// grammar.
    Literal(Arc<[u8]>),
}

/// First word of a key-set DFA state's [`TerminalDfa::state_key`]: never the first word of a
/// lazy state's key (an ascending NFA set) nor a table state's (a single word).
pub const KEY_SET_STATE: u32 = u32::MAX;

/// The next number for [`TerminalDfa::shared_id`] (never reused in a process).
pub(crate) fn next_automaton_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Every byte its own class (a table with a row entry per byte).
#[cfg(test)]
const IDENTITY_CLASSES: [u8; 256] = {
    let mut c = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        c[b] = b as u8;
        b += 1;
    }
    c
};

/// The most states one lazily built terminal DFA may build (about 1 KB each at most).
pub const MAX_LAZY_STATES: usize = 1 << 16;

impl TerminalDfa {
    /// Compile a terminal's HIR (anchored, byte-oriented, UTF-8 classes as byte sequences).
    /// Literals are built directly; other regexes get a [`LazyDfa`], cached per process (see
    /// the module doc), so grammars that share a terminal share its states.
    pub fn new(hir: &Hir) -> Result<Self, DfaError> {
        Self::new_keyed(hir, None, &mut None)
    }

    /// [`TerminalDfa::new`], with `hir` behind `shared` (kept by the cache instead of a copy)
    /// and its [`hir_hash`] in `hir_hash` when known (computed into it otherwise, except for
    /// a literal, which is not cached).
    fn new_keyed(
        hir: &Hir,
        shared: Option<&RegexHir>,
        known_hash: &mut Option<u64>,
    ) -> Result<Self, DfaError> {
        if let regex_syntax::hir::HirKind::Literal(lit) = hir.kind() {
            if !lit.0.is_empty() {
                return Ok(Self::literal(&lit.0));
            }
        }
        let none = ir::Constraints::default();
        let hash = constrained_hash_of(*known_hash.get_or_insert_with(|| hir_hash(hir)), &none);
        if let Some(d) = cached(hash, hir, &none) {
            return Ok(d);
        }
        let limit = crate::budget::dfa_size_limit(TERMINAL_DFA_SIZE_LIMIT);
        let d = match LazyDfa::new(hir, limit, MAX_LAZY_STATES)? {
            Some(l) => TerminalDfa {
                repr: Repr::Lazy(Arc::new(l)),
            },
            None => Self::determinise(hir)?,
        };
        remember(hash, hir, shared, &none, &d);
        Ok(d)
    }

    /// A key set's DFA from its names' trie (see [`crate::grammar::key_set_dfa`]).
    pub(crate) fn key_set(d: Arc<KeySetDfa>) -> Self {
        TerminalDfa {
            repr: Repr::KeySet(d),
        }
    }

    /// The eagerly determinised DFA of `hir` (the reference the lazy one is tested against).
    pub fn eager(hir: &Hir) -> Result<Self, DfaError> {
        if let regex_syntax::hir::HirKind::Literal(lit) = hir.kind() {
            if !lit.0.is_empty() {
                return Ok(Self::literal(&lit.0));
            }
        }
        Self::determinise(hir)
    }

    /// A table with a row of `next` per state, one entry per byte class of `classes`
    /// (`stride` of them).
    fn table(classes: [u8; 256], stride: usize, next: Vec<u32>, accept: Vec<bool>) -> Self {
        debug_assert_eq!(next.len(), accept.len() * stride);
        debug_assert!(classes.iter().all(|&c| (c as usize) < stride));
        TerminalDfa {
            repr: Repr::Table {
                classes: Arc::new(classes),
                stride: stride as u32,
                next: next.into(),
                accept: accept.into(),
                id: next_automaton_id(),
            },
        }
    }

    /// The chain DFA of one non-empty string: state `i` has read `lit[..i]`; only the last
    /// accepts (what [`TerminalDfa::determinise`] gives for a literal, without building it).
    fn literal(lit: &[u8]) -> Self {
        TerminalDfa {
            repr: Repr::Literal(lit.into()),
        }
    }

    /// [`TerminalDfa::literal`] as a table (what the determinised DFA of a literal is).
    #[cfg(test)]
    fn literal_table(lit: &[u8]) -> Self {
        let n = lit.len();
        // `regex-automata` also reaches one more state after the match (its delayed-match
        // state), which can reach no match: kept, with every transition pruned to DEAD, so
        // state numbers (and component ids) are the same on both paths.
        let mut next = vec![DEAD; (n + 2) * 256];
        for (i, &b) in lit.iter().enumerate() {
            next[i * 256 + b as usize] = i as u32 + 1;
        }
        let mut accept = vec![false; n + 2];
        accept[n] = true;
        Self::table(IDENTITY_CLASSES, 256, next, accept)
    }

    /// The general path: `regex-automata`'s dense DFA, copied into our table.
    fn determinise(hir: &Hir) -> Result<Self, DfaError> {
        let nfa =
            crate::grammar::nfa::thompson_nfa(hir, None, false, thompson::WhichCaptures::None)
                .map_err(DfaError::Compile)?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    // All matches, not leftmost-first: with leftmost-first, `[0-9]|[1-9][0-9]*`
                    // would stop after "1" (the first alternative wins) and never match "10".
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .minimize(false)
                    // Acceleration speeds up `regex-automata`'s own searches; we only copy
                    // the transitions out, so its analysis would be wasted compile time.
                    .accelerate(false)
                    .dfa_size_limit(Some(crate::budget::dfa_size_limit(TERMINAL_DFA_SIZE_LIMIT)))
                    .determinize_size_limit(Some(crate::budget::dfa_size_limit(
                        TERMINAL_DFA_SIZE_LIMIT,
                    ))),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| DfaError::Compile(e.to_string()))?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| DfaError::Compile(e.to_string()))?;
        // Explore reachable states, numbering them densely. A dense DFA's state ids are
        // table offsets (`index << stride2`), so the renumbering is a flat array, not a hash
        // map.
        let stride2 = dfa.stride2();
        let index = |id: regex_automata::util::primitives::StateID| id.as_usize() >> stride2;
        const UNSEEN: u32 = u32::MAX;
        let mut ids: Vec<u32> = Vec::new();
        let mut order = vec![start];
        ids.resize(index(start) + 1, UNSEEN);
        ids[index(start)] = 0;
        // One transition per byte class of the DFA's (its classes tell apart every two
        // bytes that any state does), read through a representative byte.
        let classes: [u8; 256] = std::array::from_fn(|b| dfa.byte_classes().get(b as u8));
        let stride = classes.iter().map(|&c| c as usize + 1).max().unwrap_or(1);
        let mut reps = vec![0u8; stride];
        for b in (0..=255u8).rev() {
            reps[classes[b as usize] as usize] = b;
        }
        let mut raw_next: Vec<u32> = Vec::new();
        let mut accept = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            accept.push(dfa.is_match_state(dfa.next_eoi_state(s)));
            for &b in &reps {
                let n = dfa.next_state(s, b);
                if dfa.is_dead_state(n) || dfa.is_quit_state(n) {
                    raw_next.push(DEAD);
                    continue;
                }
                let k = index(n);
                if k >= ids.len() {
                    ids.resize(k + 1, UNSEEN);
                }
                if ids[k] == UNSEEN {
                    ids[k] = order.len() as u32;
                    order.push(n);
                }
                raw_next.push(ids[k]);
            }
            i += 1;
        }
        Self::pruned(classes, stride, raw_next, accept)
    }

    /// The most states [`TerminalDfa::for_terminal`] builds for a constrained terminal.
    pub const MAX_PRODUCT_STATES: usize = 100_000;

    /// The DFA of a terminal's whole language: its HIR intersected with every
    /// `constraints.and` and minus every `constraints.and_not` (a product construction over
    /// the parts' DFAs; an `and_not` part that has died no longer excludes anything).
    pub fn for_terminal(t: &ir::Terminal) -> Result<Self, DfaError> {
        // A key set's DFA is its names' trie (its HIR is not even built).
        if let Some(d) = t.hir.key_set_dfa().filter(|_| t.constraints.is_empty()) {
            return Ok(Self::key_set(d));
        }
        Self::product_keyed(
            &t.hir,
            Some(&t.hir),
            Some(t.hir_hash()),
            &t.constraints,
            Self::MAX_PRODUCT_STATES,
        )
        .map_err(|(e, _)| e)
    }

    /// See [`TerminalDfa::for_terminal`]; fails beyond `max_states` product states.
    pub fn product(
        hir: &Hir,
        constraints: &ir::Constraints,
        max_states: usize,
    ) -> Result<Self, DfaError> {
        Self::product_keyed(hir, None, None, constraints, max_states).map_err(|(e, _)| e)
    }

    /// [`TerminalDfa::product`], and when it fails with [`DfaError::TooManyStates`] after
    /// building (not on a cache hit), its *reach*: the most bytes any state it found took
    /// from the start (breadth first, so all of them took at most that many).
    ///
    /// What the reach is for: every one of those more than `max_states` tuples is reached
    /// by a string of at most `reach` bytes. Replace one `and` part by a length counter
    /// capped at `c ≥ reach` characters that counts those strings exactly as before (the
    /// same counter with a higher cap), leaving every other part as it is: the strings reach
    /// distinct tuples still, so that product fails too, without building it (the JSON
    /// Schema front end skips such shorter `format` caps; `product_reach_bounds_capped_products`
    /// checks the claim).
    pub fn product_reach(
        hir: &Hir,
        constraints: &ir::Constraints,
        max_states: usize,
    ) -> Result<Self, (DfaError, Option<usize>)> {
        Self::product_keyed(hir, None, None, constraints, max_states)
    }

    /// The product of `hir` (its [`hir_hash`] `known_hash`, when known) and `constraints`.
    fn product_keyed(
        hir: &Hir,
        shared: Option<&RegexHir>,
        mut known_hash: Option<u64>,
        constraints: &ir::Constraints,
        max_states: usize,
    ) -> Result<Self, (DfaError, Option<usize>)> {
        let base = TerminalDfa::new_keyed(hir, shared, &mut known_hash).map_err(|e| (e, None))?;
        if constraints.is_empty() {
            return Ok(base);
        }
        // The JSON Schema front end builds each constrained terminal's product to test it
        // for emptiness, and the scanner builds it again: cached like plain DFAs, keyed by
        // every part (a hit larger than `max_states` fails as the construction would).
        let hash = constrained_hash_of(
            *known_hash.get_or_insert_with(|| hir_hash(hir)),
            constraints,
        );
        if let Some(d) = cached(hash, hir, constraints) {
            if d.num_states() > max_states {
                return Err((DfaError::TooManyStates(max_states), None));
            }
            return Ok(d);
        }
        let d = Self::product_uncached(base, constraints, max_states)?;
        remember(hash, hir, shared, constraints, &d);
        Ok(d)
    }

    fn product_uncached(
        base: TerminalDfa,
        constraints: &ir::Constraints,
        max_states: usize,
    ) -> Result<Self, (DfaError, Option<usize>)> {
        let mut parts = vec![base];
        for h in &constraints.and {
            parts
                .push(TerminalDfa::new(h).map_err(|e| (DfaError::Intersected(Box::new(e)), None))?);
        }
        let n_pos = parts.len();
        for h in &constraints.and_not {
            match TerminalDfa::new(h) {
                Ok(d) => parts.push(d),
                // Matches nothing: excludes nothing.
                Err(DfaError::MatchesNothing) => {}
                Err(e) => return Err((DfaError::Excluded(Box::new(e)), None)),
            }
        }
        // States are tuples of the parts' states, stored flat (`k` words each, state `i` at
        // `tuples[i * k..]`) and interned by a hash of the tuple: `heads` maps a hash to the
        // newest state with it, `same_hash` links each state to the previous one. (A map
        // keyed by `Vec<u32>` cost two allocations per state and a SipHash per transition:
        // 30 % of building a product; a failing one, stopped at `max_states`, is pure loss.)
        let k = parts.len();
        const NONE: u32 = u32::MAX;
        let tuple_hash = |t: &[u32]| {
            t.iter().fold(0x9e37_79b9_7f4a_7c15u64, |h, &w| {
                (h ^ u64::from(w))
                    .wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .rotate_left(26)
            })
        };
        let mut tuples: Vec<u32> = vec![0; k];
        let mut heads: crate::hash::WordHashMap<u64, u32> = Default::default();
        heads.insert(tuple_hash(&tuples), 0);
        let mut same_hash: Vec<u32> = vec![NONE];
        // Bytes from the start to each state (for the reach of a failure).
        let mut depth: Vec<u32> = vec![0];
        let mut accept = Vec::new();
        // Bytes that every part treats alike (the common refinement of the parts' byte
        // classes) step together: one step per class, not per byte (a JSON string's product
        // has about 20 classes; stepping all 256 bytes was most of building it). Transitions
        // are kept per class (`classes` words a state) and spread to 256 bytes only once the
        // product is known to fit.
        let (group_of, reps) = joint_byte_classes(&parts);
        let classes = reps.len();
        let mut class_next: Vec<u32> = Vec::new();
        // One tuple buffer for every class (no allocation per transition).
        let mut next: Vec<u32> = vec![0; k];
        let mut i = 0;
        while i < same_hash.len() {
            let tuple = &tuples[i * k..(i + 1) * k];
            let is_match = |j: usize| tuple[j] != DEAD && parts[j].is_accepting(tuple[j]);
            accept.push((0..n_pos).all(is_match) && !(n_pos..k).any(is_match));
            for &b in &reps {
                let tuple = &tuples[i * k..(i + 1) * k];
                for ((n, &s), d) in next.iter_mut().zip(tuple).zip(&parts) {
                    *n = if s == DEAD { DEAD } else { d.next(s, b) };
                }
                let id = if next[..n_pos].contains(&DEAD) {
                    DEAD
                } else {
                    let h = tuple_hash(&next);
                    let mut c = heads.get(&h).copied().unwrap_or(NONE);
                    while c != NONE && tuples[c as usize * k..(c as usize + 1) * k] != next[..] {
                        c = same_hash[c as usize];
                    }
                    if c == NONE {
                        if same_hash.len() >= max_states {
                            let reach = depth[i] as usize + 1;
                            return Err((DfaError::TooManyStates(max_states), Some(reach)));
                        }
                        c = same_hash.len() as u32;
                        depth.push(depth[i] + 1);
                        same_hash.push(heads.insert(h, c).unwrap_or(NONE));
                        tuples.extend_from_slice(&next);
                    }
                    c
                };
                class_next.push(id);
            }
            i += 1;
        }
        drop((tuples, heads, same_hash, depth));
        Self::pruned(group_of, classes, class_next, accept).map_err(|e| (e, None))
    }

    /// Byte → class: bytes of one class go to the same state from every state.
    pub(crate) fn byte_class(&self, b: u8) -> u8 {
        match &self.repr {
            Repr::Lazy(l) => l.class(b),
            Repr::KeySet(k) => k.class(b),
            // A literal chain tells only its own bytes apart: each is its own class, every
            // other byte class 0 (when the literal holds NUL itself, every byte its own).
            Repr::Literal(lit) => {
                if lit.contains(&b) || lit.contains(&0) {
                    b
                } else {
                    0
                }
            }
            Repr::Table { classes, .. } => classes[b as usize],
        }
    }

    /// Remove the states that cannot reach a match (their transitions go to [`DEAD`]).
    /// `raw_next` has `stride` entries a state, one per class of `classes`.
    fn pruned(
        classes: [u8; 256],
        stride: usize,
        raw_next: Vec<u32>,
        accept: Vec<bool>,
    ) -> Result<Self, DfaError> {
        // Liveness: states that can reach an accepting state (reverse reachability, one
        // pass over the reversed edges: linear even for long chains like `.{0,500}`).
        // Reversed edges in one flat array (CSR), each (s, t) edge once: `seen[t] == s`
        // marks t as already counted for s (no per-state allocation or sort).
        let n = accept.len();
        let mut seen = vec![u32::MAX; n];
        let mut edges: Vec<(u32, u32)> = Vec::new();
        let mut count = vec![0u32; n + 1];
        for s in 0..n {
            for &t in &raw_next[s * stride..(s + 1) * stride] {
                if t != DEAD && seen[t as usize] != s as u32 {
                    seen[t as usize] = s as u32;
                    edges.push((t, s as u32));
                    count[t as usize + 1] += 1;
                }
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let mut preds = vec![0u32; edges.len()];
        let mut fill = count.clone();
        for &(t, s) in &edges {
            preds[fill[t as usize] as usize] = s;
            fill[t as usize] += 1;
        }
        drop(edges);
        let mut live = accept.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| accept[s as usize]).collect();
        while let Some(t) = stack.pop() {
            for &s in &preds[count[t as usize] as usize..count[t as usize + 1] as usize] {
                if !std::mem::replace(&mut live[s as usize], true) {
                    stack.push(s);
                }
            }
        }
        let mut next = raw_next;
        for t in next.iter_mut() {
            if *t != DEAD && !live[*t as usize] {
                *t = DEAD;
            }
        }
        if !live[0] {
            return Err(DfaError::MatchesNothing);
        }
        Ok(Self::table(classes, stride, next, accept))
    }

    #[inline]
    pub fn next(&self, s: u32, b: u8) -> u32 {
        match &self.repr {
            Repr::Table {
                classes,
                stride,
                next,
                ..
            } => next[s as usize * *stride as usize + classes[b as usize] as usize],
            Repr::Lazy(l) => l.next(s, b),
            Repr::KeySet(k) => k.next(s, b),
            Repr::Literal(lit) => match lit.get(s as usize) {
                Some(&c) if c == b => s + 1,
                _ => DEAD,
            },
        }
    }

    /// [`TerminalDfa::next`] without building anything: `None` when `s`'s transition on `b`
    /// is not built yet (a lazy DFA; a table or a literal always answers).
    #[inline]
    pub fn next_if_built(&self, s: u32, b: u8) -> Option<u32> {
        match &self.repr {
            Repr::Lazy(l) => l.next_if_built(s, b),
            _ => Some(self.next(s, b)),
        }
    }

    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        match &self.repr {
            Repr::Table { accept, .. } => accept[s as usize],
            Repr::Lazy(l) => l.is_accepting(s),
            Repr::KeySet(k) => k.is_accepting(s),
            Repr::Literal(lit) => s as usize == lit.len(),
        }
    }

    /// States built so far (all of them for a table; a lazy DFA grows as walks reach states).
    pub fn num_states(&self) -> usize {
        match &self.repr {
            Repr::Table { accept, .. } => accept.len(),
            Repr::Lazy(l) => l.num_states(),
            Repr::KeySet(k) => k.num_states(),
            Repr::Literal(lit) => lit.len() + 2,
        }
    }

    /// The string, when this is one literal's chain (see [`TerminalDfa::distinguishing_rows`]:
    /// row `i < len` distinguishes exactly the byte `lit[i]` from all others).
    pub fn literal_bytes(&self) -> Option<&[u8]> {
        match &self.repr {
            Repr::Literal(lit) => Some(lit),
            _ => None,
        }
    }

    /// A number no other automaton of this process has, for a lazy DFA or a table (shared by
    /// the clones of this one: every grammar with this terminal, through the DFA cache);
    /// none for a literal or a key set (cheap to walk, and a key set is per grammar). Facts
    /// about a state of this automaton hold in every grammar that has it.
    pub fn shared_id(&self) -> Option<u64> {
        match &self.repr {
            Repr::Table { id, .. } => Some(*id),
            Repr::Lazy(l) => Some(l.id()),
            Repr::Literal(_) | Repr::KeySet(_) => None,
        }
    }

    /// A key set's [`KeySetDfa::tail_start`]: from there on its states and transitions are
    /// every key set's, shifted (`None` for other automata).
    pub fn key_set_tail(&self) -> Option<u32> {
        match &self.repr {
            Repr::KeySet(k) => Some(k.tail_start()),
            _ => None,
        }
    }

    /// Whether the DFA is built on demand.
    pub fn is_lazy(&self) -> bool {
        matches!(self.repr, Repr::Lazy(_))
    }

    /// Whether a lazy DFA refused a state for [`MAX_LAZY_STATES`] (a transition then read as
    /// [`DEAD`]); never for a table.
    pub fn overflowed(&self) -> bool {
        match &self.repr {
            Repr::Table { .. } | Repr::Literal(_) | Repr::KeySet(_) => false,
            Repr::Lazy(l) => l.overflowed(),
        }
    }

    /// Rows that separate bytes: two bytes `a`, `b` with `distinguishing(r, a) ==
    /// distinguishing(r, b)` for every `r < distinguishing_rows()` have the same transition
    /// in every state, built or not (a table's, a lazy DFA's or a key set's one row is its
    /// byte classes; a literal's rows are its states).
    pub fn distinguishing_rows(&self) -> usize {
        match &self.repr {
            Repr::Table { .. } | Repr::Lazy(_) | Repr::KeySet(_) => 1,
            Repr::Literal(lit) => lit.len() + 2,
        }
    }

    /// See [`TerminalDfa::distinguishing_rows`].
    #[inline]
    pub fn distinguishing(&self, r: u32, b: u8) -> u32 {
        match &self.repr {
            Repr::Literal(_) => self.next(r, b),
            _ => self.byte_class(b) as u32,
        }
    }

    /// State `s` by content, the same in every process (persisted data names states so): a
    /// table state by its number, a lazy state by its NFA set, a key set's state by
    /// [`KEY_SET_STATE`] and its number. (The same language has the trie's DFA as a key set
    /// and the lazy DFA of its HIR when that HIR is a terminal's by other means; the tag
    /// keeps one's keys from naming the other's states.)
    pub fn state_key(&self, s: u32) -> Option<Vec<u32>> {
        match &self.repr {
            Repr::Table { .. } | Repr::Literal(_) => {
                ((s as usize) < self.num_states()).then(|| vec![s])
            }
            Repr::KeySet(_) => ((s as usize) < self.num_states()).then(|| vec![KEY_SET_STATE, s]),
            Repr::Lazy(l) => l.state_key(s),
        }
    }

    /// The state [`TerminalDfa::state_key`] named, built if needed; `None` if there is none.
    pub fn state_of_key(&self, key: &[u32]) -> Option<u32> {
        match &self.repr {
            Repr::Table { .. } | Repr::Literal(_) => match key {
                [s] if (*s as usize) < self.num_states() => Some(*s),
                _ => None,
            },
            Repr::KeySet(_) => match key {
                [KEY_SET_STATE, s] if (*s as usize) < self.num_states() => Some(*s),
                _ => None,
            },
            Repr::Lazy(l) => l.state_of_key(key),
        }
    }

    /// Bytes held by the transition and accept tables (a lazy DFA: built so far, and its NFA).
    pub fn memory_bytes(&self) -> usize {
        match &self.repr {
            Repr::Table { next, accept, .. } => next.len() * 4 + accept.len() + 256,
            Repr::Lazy(l) => l.memory_bytes(),
            Repr::KeySet(k) => k.memory_bytes(),
            Repr::Literal(lit) => lit.len(),
        }
    }
}

/// Build a dense, anchored, all-matches DFA for a terminal's HIR, with an optional size
/// limit in bytes (shared with the reference recognizer).
pub(crate) fn build_dfa(hir: &Hir, limit: Option<usize>) -> Result<dense::DFA<Vec<u32>>, String> {
    let nfa = crate::grammar::nfa::thompson_nfa(
        hir,
        limit.map(|l| l * 4),
        false,
        thompson::WhichCaptures::All,
    )?;
    let limit = limit.map(crate::budget::dfa_size_limit);
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(limit)
                .determinize_size_limit(limit)
                .accelerate(false),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
pub(crate) mod tests;
