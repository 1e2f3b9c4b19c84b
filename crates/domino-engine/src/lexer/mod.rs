//! The scanner: one deterministic automaton over the union of a grammar's terminals.
//!
//! # What
//! Every terminal of an [`ir::Grammar`] is a regular language over bytes (HIR). We compile
//! each one to an anchored dense DFA (`regex-automata`), copy it into a small table of our
//! own ([`TerminalDfa`]) with dead states pruned (a state is *live* when it can still reach a
//! match; a terminal with [`ir::Constraints`] is the product of its parts' DFAs, see
//! [`TerminalDfa::for_terminal`]), and then run a subset/product construction over all of them at once: a
//! [`Scanner`] state is the set of `(terminal, terminal-DFA state)` pairs that are still live
//! after the bytes read since the last terminal boundary.
//!
//! # Why
//! The engine's subterminal trees ([`crate::engine`]) walk every vocabulary token through
//! the scanner, so a byte step must be one table lookup. The automaton itself has **no lexer
//! policy** (no maximal munch, no priorities): it only reports, per state, which terminals
//! are still possible ([`Scanner::live_set`]) and which would accept if the terminal ended
//! here ([`Scanner::accepting`]); the engine and the parser decide where terminals end. The
//! one policy the scanner knows is a grammar's [`ir::Lexing`]: under greedy (Lark) lexing,
//! [`Scanner::may_end`] says where a lexeme may end — the design note is in [`greedy`]; under
//! character-level lexing (GBNF, regex, JSON Schema) it is always true.
//!
//! # Invariants
//! - [`Scanner::START`] (state 0) is "between terminals": every terminal at its start state.
//!   No terminal accepts in it (IR invariant: ε is never a terminal match).
//! - Every other state holds at least one live pair; a transition that would leave none goes
//!   to [`DEAD`].
//! - States are interned and built **lazily**: [`Scanner::next`] computes a transition the
//!   first time it is taken and keeps it. A grammar with thousands of differently patterned,
//!   length-bounded strings has far more product states than any decoding visits (JSON
//!   Schemas reach millions); the engine only ever reaches the states that vocabulary tokens
//!   lead to from a terminal boundary, plus those decoding walks through. Components (every
//!   `(terminal, DFA state)` pair) are numbered eagerly and deterministically.
//! - Tables only grow, and readers never lock: states live in chunks allocated once
//!   (`OnceLock`), transition slots are atomics that go from "unknown" to their final value
//!   exactly once, under the builder lock, after the new state's data is stored. Ids are
//!   dense in creation order, so they may differ between processes (persisted data names
//!   states by their components, see [`Scanner::state_of_components`]).
//! - Beyond [`MAX_SCANNER_STATES`] a new state is refused: the transition reads as [`DEAD`]
//!   (the mask can only get stricter, never unsound) and [`Scanner::overflowed`] is set, which
//!   the engine turns into an error.
//! - Bytes are grouped into equivalence classes (bytes no terminal distinguishes), so the
//!   transition table is `states × classes`.

pub mod greedy;

pub use crate::grammar::dfa::DEAD;
use crate::grammar::dfa::{DfaError, TerminalDfa};
use crate::grammar::ir;
use crate::hash::WordHashMap;
use crate::segmented::{Segmented, SlotRows};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The most components (pairs `(terminal, DFA state)`) one scanner numbers before refusing
/// new ones (the transition that needs one then reads as [`DEAD`], as for states).
pub const MAX_COMPONENTS: usize = 1 << 24;

/// The most scanner states built (lazily) before refusing new ones. A state costs about
/// `4 × byte classes` bytes of transitions plus its component list (~0.5 KB for a large
/// JSON Schema), so the limit bounds the tables near 0.5 GB.
pub const MAX_SCANNER_STATES: usize = 1_000_000;

/// Errors building the scanner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexerError {
    /// A terminal's DFA could not be built (too large, unsupported, empty).
    Terminal { terminal: String, error: DfaError },
    /// The product automaton reached [`MAX_SCANNER_STATES`] (see [`Scanner::overflowed`]).
    TooManyStates(usize),
    /// The compile budget ([`crate::budget`]) ran out while building the scanner.
    Budget(crate::budget::BudgetExceeded),
}

impl std::fmt::Display for LexerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LexerError::Terminal { terminal, error } => {
                write!(f, "terminal {terminal}: {error}")
            }
            LexerError::TooManyStates(n) => {
                write!(f, "scanner has more than {n} states (grammar too large)")
            }
            LexerError::Budget(e) => write!(f, "{e}"),
        }
    }
}
impl std::error::Error for LexerError {}

/// Identifies an interned set of terminals (see [`Scanner::live_set`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LiveSetId(pub u32);

/// A scanner state id; index into the scanner's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScanState(pub u32);

/// One `(terminal, terminal-DFA state)` pair of a scanner state, interned: a *component*.
/// Subterminal trees are built per component and shared by every scanner state holding it.
/// Numbered densely in the order a walk first reaches them (terminal DFAs are built lazily,
/// so there is no count to number them by up front); ids may differ between processes, so
/// the on-disk tree cache names a component by its terminal and DFA state key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentId(pub u32);

/// States per allocation chunk of the lazily grown tables.
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;
/// A transition slot not computed yet (never a state id: ids stay below [`MAX_SCANNER_STATES`]).
const UNKNOWN: u32 = u32::MAX - 1;

/// What the scanner knows about one state once it exists.
#[derive(Debug)]
struct StateInfo {
    /// Its components, sorted (one per live terminal).
    components: Box<[ComponentId]>,
    /// Terminals that accept in it, sorted.
    accepting: Box<[ir::TerminalId]>,
    /// Its interned live-terminal set.
    live: LiveSetId,
}

/// An interned live set and, when the scanner was given a follow relation, the terminals
/// that some member may follow.
#[derive(Debug)]
struct LiveSetInfo {
    terminals: Box<[ir::TerminalId]>,
    /// Bit `t`: some terminal of the set may follow terminal `t`.
    followed: Box<[u64]>,
}

/// Append-only storage that readers index without locks: a fixed array of chunk slots,
/// each filled once. Writers push under the scanner's builder lock (one writer at a time).
#[derive(Debug)]
struct Chunked<T> {
    chunks: Box<[Chunk<T>]>,
}

/// One chunk slot of [`Chunked`]: allocated once, its entries filled once each.
type Chunk<T> = OnceLock<Box<[OnceLock<T>]>>;

impl<T> Chunked<T> {
    fn new(capacity: usize) -> Self {
        Chunked {
            chunks: (0..capacity.div_ceil(CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
        }
    }

    /// Store item `i` (each index once, in order, by the single writer).
    fn set(&self, i: usize, v: T) {
        let chunk = self.chunks[i >> CHUNK_BITS]
            .get_or_init(|| (0..CHUNK).map(|_| OnceLock::new()).collect());
        if chunk[i & (CHUNK - 1)].set(v).is_err() {
            unreachable!("Chunked::set: index {i} stored twice");
        }
    }

    #[inline]
    fn get(&self, i: usize) -> &T {
        self.chunks[i >> CHUNK_BITS]
            .get()
            .and_then(|c| c[i & (CHUNK - 1)].get())
            .expect("scanner state or live set used before it was created")
    }
}

/// The builder's side of the lazy tables: everything a new state needs, under one lock.
#[derive(Debug, Default)]
struct Builder {
    num_components: usize,
    states: WordHashMap<Box<[ComponentId]>, u32>,
    num_states: usize,
    live_sets: WordHashMap<Box<[ir::TerminalId]>, u32>,
    num_live_sets: usize,
}

/// The product automaton over all terminals (see the module doc), built lazily.
#[derive(Debug)]
pub struct Scanner {
    num_terminals: usize,
    dfas: Vec<TerminalDfa>,
    /// `component_of[t]`, row `s`: the component of terminal `t`'s DFA state `s`
    /// ([`SlotRows::UNKNOWN`] until numbered).
    component_of: Vec<SlotRows>,
    /// Component → `(terminal, terminal-DFA state)`.
    components: Segmented<(ir::TerminalId, u32)>,
    /// The live set `{t}` of each terminal.
    singleton_live: Vec<LiveSetId>,
    /// Byte → class.
    classes: [u8; 256],
    /// A representative byte of each class.
    class_bytes: Vec<u8>,
    num_classes: usize,
    /// Per chunk of states: `num_classes` transition slots per state, [`UNKNOWN`] until
    /// computed, then a state id or [`DEAD`].
    trans: Box<[OnceLock<Box<[AtomicU32]>>]>,
    states: Chunked<StateInfo>,
    live_sets: Chunked<LiveSetInfo>,
    /// `preceders[u]`: bit `t` when terminal `u` may follow terminal `t` (a row of the
    /// transposed follow relation); empty when no relation was given (everything follows).
    preceders: Vec<Box<[u64]>>,
    builder: Mutex<Builder>,
    /// [`MAX_SCANNER_STATES`] (smaller in tests).
    max_states: usize,
    /// Set when a state was refused for [`MAX_SCANNER_STATES`]; see [`Scanner::overflowed`].
    overflowed: AtomicBool,
    /// Under [`ir::Lexing::Greedy`]: per terminal, whether it is a string literal (literals win
    /// ties against regexes, see [`mod@greedy`]); `None` under [`ir::Lexing::Characters`].
    literal: Option<Box<[bool]>>,
}

impl Scanner {
    /// "Between terminals": every terminal at its start.
    pub const START: ScanState = ScanState(0);

    /// Build the scanner of a grammar's terminals.
    pub fn new(grammar: &ir::Grammar) -> Result<Self, LexerError> {
        Self::with_follow(grammar, None)
    }

    /// Like [`Scanner::new`], and remember which terminal may follow which, for
    /// [`Scanner::followed_by`]: `preceders[u]` has bit `t` (words of 64 terminals) when `u`
    /// may come right after `t`; `None` when everything may follow everything.
    pub fn with_follow(
        grammar: &ir::Grammar,
        preceders: Option<Vec<Box<[u64]>>>,
    ) -> Result<Self, LexerError> {
        let mut dfas = Vec::with_capacity(grammar.terminals.len());
        for t in &grammar.terminals {
            crate::budget::check("the scanner's terminal DFAs").map_err(LexerError::Budget)?;
            dfas.push(TerminalDfa::for_terminal(t).map_err(|error| {
                // A size limit the memory budget made smaller is the budget's error.
                let budget = crate::budget::size_limit_error(
                    crate::grammar::dfa::TERMINAL_DFA_SIZE_LIMIT,
                    "the scanner's terminal DFAs",
                );
                match budget {
                    Some(e) if matches!(error, DfaError::Compile(_)) => LexerError::Budget(e),
                    _ => LexerError::Terminal {
                        terminal: t.name.clone(),
                        error,
                    },
                }
            })?);
        }
        let literal = (grammar.lexing == ir::Lexing::Greedy).then(|| {
            grammar
                .terminals
                .iter()
                .map(|t| t.literal.is_some())
                .collect()
        });
        let mut sc = Self::build(dfas, preceders, MAX_SCANNER_STATES)?;
        crate::budget::status().map_err(LexerError::Budget)?;
        sc.literal = literal;
        Ok(sc)
    }

    /// Build from per-terminal DFAs (`TerminalId(i)` is `dfas[i]`).
    pub fn from_dfas(dfas: Vec<TerminalDfa>) -> Result<Self, LexerError> {
        Self::build(dfas, None, MAX_SCANNER_STATES)
    }

    fn build(
        dfas: Vec<TerminalDfa>,
        preceders: Option<Vec<Box<[u64]>>>,
        max_states: usize,
    ) -> Result<Self, LexerError> {
        let (classes, class_bytes) = byte_classes(&dfas);
        let num_classes = class_bytes.len();
        let nt = dfas.len();
        let words = nt.div_ceil(64).max(1);
        let preceders = match preceders {
            None => Vec::new(),
            Some(rows) => {
                assert!(
                    rows.len() == nt && rows.iter().all(|r| r.len() == words),
                    "one row of {words} words per terminal"
                );
                rows
            }
        };
        let mut sc = Scanner {
            num_terminals: nt,
            component_of: (0..nt).map(|_| SlotRows::new(1)).collect(),
            dfas,
            components: Segmented::default(),
            singleton_live: Vec::new(),
            classes,
            class_bytes,
            num_classes,
            trans: (0..max_states.div_ceil(CHUNK))
                .map(|_| OnceLock::new())
                .collect(),
            states: Chunked::new(max_states),
            live_sets: Chunked::new(max_states + nt + 1),
            preceders,
            builder: Mutex::new(Builder::default()),
            max_states,
            overflowed: AtomicBool::new(false),
            literal: None,
        };
        {
            let mut b = sc.builder.lock().unwrap_or_else(|e| e.into_inner());
            let start: Vec<ComponentId> = (0..nt as u32)
                .map(|t| {
                    sc.intern_component(&mut b, ir::TerminalId(t), 0)
                        .expect("the start components fit")
                })
                .collect();
            let s = sc
                .intern_state(&mut b, start)
                .expect("the first state fits");
            debug_assert_eq!(s, Self::START.0);
            sc.singleton_live = (0..nt as u32)
                .map(|t| sc.intern_live(&mut b, vec![ir::TerminalId(t)]))
                .collect();
        }
        Ok(sc)
    }

    /// Next state after byte `b`, or [`DEAD`]. Computes (and keeps) the state on first use.
    /// Beyond [`MAX_SCANNER_STATES`] a new state is refused: the byte reads as [`DEAD`] and
    /// [`Scanner::overflowed`] turns true (sound, since it only forbids).
    #[inline]
    pub fn next(&self, s: ScanState, b: u8) -> u32 {
        let cls = self.classes[b as usize] as usize;
        let slot = &self.trans_slots(s.0)[(s.0 as usize & (CHUNK - 1)) * self.num_classes + cls];
        match slot.load(Ordering::Acquire) {
            UNKNOWN => self.expand(s, cls),
            n => n,
        }
    }

    #[inline]
    fn trans_slots(&self, s: u32) -> &[AtomicU32] {
        self.trans[s as usize >> CHUNK_BITS]
            .get()
            .expect("scanner state used before it was created")
    }

    /// Compute the transition of `s` on byte class `cls` (slow path of [`Scanner::next`]).
    #[cold]
    fn expand(&self, s: ScanState, cls: usize) -> u32 {
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &self.trans_slots(s.0)[(s.0 as usize & (CHUNK - 1)) * self.num_classes + cls];
        let known = slot.load(Ordering::Acquire);
        if known != UNKNOWN {
            return known;
        }
        let byte = self.class_bytes[cls];
        let mut next: Vec<ComponentId> = Vec::with_capacity(self.components(s).len());
        for &c in self.components(s) {
            let (t, q) = self.component(c);
            let n = self.dfas[t.0 as usize].next(q, byte);
            if n == DEAD {
                continue;
            }
            match self.intern_component(&mut b, t, n) {
                Some(c) => next.push(c),
                None => {
                    self.overflowed.store(true, Ordering::Relaxed);
                    return DEAD;
                }
            }
        }
        // Components are numbered as reached, so their order is not the terminals' order.
        next.sort_unstable_by_key(|&c| self.component(c).0);
        let id = if next.is_empty() {
            DEAD
        } else {
            match self.intern_state(&mut b, next) {
                Some(id) => id,
                None => {
                    self.overflowed.store(true, Ordering::Relaxed);
                    // Not stored: a later call may try again (and is refused again).
                    return DEAD;
                }
            }
        };
        slot.store(id, Ordering::Release);
        id
    }

    /// The component of terminal `t`'s DFA state `s`, numbered if new; `None` beyond
    /// [`MAX_COMPONENTS`].
    fn intern_component(&self, b: &mut Builder, t: ir::TerminalId, s: u32) -> Option<ComponentId> {
        let slot = &self.component_of[t.0 as usize].row(s as usize)[0];
        match slot.load(Ordering::Acquire) {
            SlotRows::UNKNOWN => {}
            c => return Some(ComponentId(c)),
        }
        let id = b.num_components;
        if id >= MAX_COMPONENTS {
            return None;
        }
        let _ = self.components.slot(id).set((t, s));
        b.num_components += 1;
        slot.store(id as u32, Ordering::Release);
        Some(ComponentId(id as u32))
    }

    /// The state with these components (sorted by terminal), created if new; `None` beyond
    /// the limit.
    fn intern_state(&self, b: &mut Builder, components: Vec<ComponentId>) -> Option<u32> {
        if let Some(&id) = b.states.get(components.as_slice()) {
            return Some(id);
        }
        let id = b.num_states;
        if id >= self.max_states {
            return None;
        }
        let terminals: Vec<ir::TerminalId> =
            components.iter().map(|&c| self.component(c).0).collect();
        let accepting = components
            .iter()
            .map(|&c| self.component(c))
            .filter(|&(t, q)| self.dfas[t.0 as usize].is_accepting(q))
            .map(|(t, _)| t)
            .collect();
        let live = self.intern_live(b, terminals);
        let components: Box<[ComponentId]> = components.into();
        self.trans[id >> CHUNK_BITS].get_or_init(|| {
            (0..CHUNK * self.num_classes)
                .map(|_| AtomicU32::new(UNKNOWN))
                .collect()
        });
        self.states.set(
            id,
            StateInfo {
                components: components.clone(),
                accepting,
                live,
            },
        );
        b.states.insert(components, id as u32);
        b.num_states += 1;
        Some(id as u32)
    }

    fn intern_live(&self, b: &mut Builder, terminals: Vec<ir::TerminalId>) -> LiveSetId {
        if let Some(&id) = b.live_sets.get(terminals.as_slice()) {
            return LiveSetId(id);
        }
        let id = b.num_live_sets;
        let words = self.num_terminals.div_ceil(64).max(1);
        let followed: Box<[u64]> = if self.preceders.is_empty() {
            Box::new([]) // everything may follow (see `followed_by`): no row per live set
        } else {
            let mut row = vec![0u64; words];
            for &u in &terminals {
                for (a, p) in row.iter_mut().zip(self.preceders[u.0 as usize].iter()) {
                    *a |= *p;
                }
            }
            row.into()
        };
        let terminals: Box<[ir::TerminalId]> = terminals.into();
        self.live_sets.set(
            id,
            LiveSetInfo {
                terminals: terminals.clone(),
                followed,
            },
        );
        b.live_sets.insert(terminals, id as u32);
        b.num_live_sets += 1;
        LiveSetId(id as u32)
    }

    /// The state whose components are exactly `components` (sorted by terminal, at most one
    /// per terminal, each a live DFA state), created if new. `None` when the list is not such
    /// a set or the state limit is reached. (The on-disk tree cache names states this way.)
    pub fn state_of_components(&self, components: &[ComponentId]) -> Option<ScanState> {
        if components.is_empty()
            || components
                .iter()
                .any(|c| self.components.get(c.0 as usize).is_none())
            || components
                .windows(2)
                .any(|w| self.component(w[0]).0 >= self.component(w[1]).0)
        {
            return None;
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        self.intern_state(&mut b, components.to_vec())
            .map(ScanState)
    }

    /// The interned live set of these terminals (sorted, distinct, in range), created if new.
    pub fn live_set_of(&self, terminals: &[ir::TerminalId]) -> Option<LiveSetId> {
        if terminals.is_empty()
            || terminals.iter().any(|t| t.0 as usize >= self.num_terminals)
            || terminals.windows(2).any(|w| w[0] >= w[1])
        {
            return None;
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        if b.num_live_sets > self.max_states + self.num_terminals {
            return None;
        }
        Some(self.intern_live(&mut b, terminals.to_vec()))
    }

    /// Whether some state was refused for the limit (a scanner state, a component, or a
    /// lazily built terminal DFA's state): masks since then may forbid more than the grammar
    /// does, and the engine reports an error at the next commit.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Relaxed) || self.dfas.iter().any(TerminalDfa::overflowed)
    }

    /// Feed bytes from `s` without terminal boundaries; `None` when no terminal survives.
    pub fn walk(&self, mut s: ScanState, bytes: &[u8]) -> Option<ScanState> {
        for &b in bytes {
            let n = self.next(s, b);
            if n == DEAD {
                return None;
            }
            s = ScanState(n);
        }
        Some(s)
    }

    /// Build every state reachable from [`Scanner::START`], up to `limit` states in all.
    /// Returns the number of states and whether that is all of them (`grammar check` reports
    /// it; the engine never needs it, it builds what tokens reach).
    pub fn explore(&self, limit: usize) -> (usize, bool) {
        let mut i = 0u32;
        while (i as usize) < self.num_states() {
            if self.num_states() > limit || crate::budget::over("the scanner") {
                return (self.num_states(), false);
            }
            for cls in 0..self.num_classes {
                self.next(ScanState(i), self.class_bytes[cls]);
            }
            if self.overflowed() {
                return (self.num_states(), false);
            }
            i += 1;
        }
        (self.num_states(), true)
    }

    /// Terminals that accept in `s`: ending the current terminal here is lexically possible.
    #[inline]
    pub fn accepting(&self, s: ScanState) -> &[ir::TerminalId] {
        &self.states.get(s.0 as usize).accepting
    }

    /// The interned set of terminals still live in `s`.
    #[inline]
    pub fn live_set(&self, s: ScanState) -> LiveSetId {
        self.states.get(s.0 as usize).live
    }

    /// The terminals of an interned live set, sorted.
    #[inline]
    pub fn live_terminals(&self, id: LiveSetId) -> &[ir::TerminalId] {
        &self.live_sets.get(id.0 as usize).terminals
    }

    /// Whether a piece in state `q` may still become a terminal that can follow terminal
    /// `t` (by the relation given to [`Scanner::with_follow`]; always true without one).
    #[inline]
    pub fn followed_by(&self, t: ir::TerminalId, q: ScanState) -> bool {
        let set = self.live_sets.get(self.live_set(q).0 as usize);
        set.followed.is_empty() || set.followed[t.0 as usize / 64] >> (t.0 % 64) & 1 == 1
    }

    /// States built so far (the scanner grows as bytes reach new states).
    pub fn num_states(&self) -> usize {
        self.builder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .num_states
    }

    /// The components `(terminal, terminal-DFA state)` of a scanner state.
    #[inline]
    pub fn components(&self, s: ScanState) -> &[ComponentId] {
        &self.states.get(s.0 as usize).components
    }

    /// A component's terminal and terminal-DFA state.
    #[inline]
    pub fn component(&self, c: ComponentId) -> (ir::TerminalId, u32) {
        *self
            .components
            .get(c.0 as usize)
            .expect("a component used before it was numbered")
    }

    /// The component of terminal `t` in its DFA state `s` (a state built so far), numbered if
    /// new; `None` for no such state or beyond [`MAX_COMPONENTS`].
    pub fn component_id(&self, t: ir::TerminalId, s: u32) -> Option<ComponentId> {
        let d = self.dfas.get(t.0 as usize)?;
        if s as usize >= d.num_states() {
            return None;
        }
        match self.component_of[t.0 as usize].load(s as usize, 0) {
            SlotRows::UNKNOWN => {}
            c => return Some(ComponentId(c)),
        }
        let mut b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
        self.intern_component(&mut b, t, s)
    }

    /// The component of terminal `t` in the DFA state named by `key` (see
    /// [`TerminalDfa::state_key`]), built and numbered if needed.
    pub fn component_of_key(&self, t: ir::TerminalId, key: &[u32]) -> Option<ComponentId> {
        let s = self.dfas.get(t.0 as usize)?.state_of_key(key)?;
        self.component_id(t, s)
    }

    /// A component by content, the same in every process: its terminal and its DFA state's
    /// key ([`TerminalDfa::state_key`]).
    pub fn component_key(&self, c: ComponentId) -> (ir::TerminalId, Vec<u32>) {
        let (t, s) = self.component(c);
        let key = self.dfas[t.0 as usize]
            .state_key(s)
            .expect("a numbered component's DFA state exists");
        (t, key)
    }

    /// Live sets interned so far.
    pub fn num_live_sets(&self) -> usize {
        self.builder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .num_live_sets
    }

    /// Components numbered so far (they grow with the states walks reach).
    pub fn num_components(&self) -> usize {
        self.builder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .num_components
    }

    /// Terminal `t`'s own DFA.
    #[inline]
    pub fn terminal_dfa(&self, t: ir::TerminalId) -> &TerminalDfa {
        &self.dfas[t.0 as usize]
    }

    /// The interned live set `{t}`.
    #[inline]
    pub fn singleton_live(&self, t: ir::TerminalId) -> LiveSetId {
        self.singleton_live[t.0 as usize]
    }

    pub fn num_terminals(&self) -> usize {
        self.num_terminals
    }

    pub fn num_byte_classes(&self) -> usize {
        self.num_classes
    }

    /// Bytes of heap the tables built so far use.
    pub fn memory_bytes(&self) -> usize {
        let (states, live) = {
            let b = self.builder.lock().unwrap_or_else(|e| e.into_inner());
            (b.num_states, b.num_live_sets)
        };
        let words = self.num_terminals.div_ceil(64).max(1);
        states.div_ceil(CHUNK) * CHUNK * self.num_classes * 4
            + self
                .dfas
                .iter()
                .map(TerminalDfa::memory_bytes)
                .sum::<usize>()
            + self.components.memory_bytes()
            + self
                .component_of
                .iter()
                .map(SlotRows::memory_bytes)
                .sum::<usize>()
            + (0..states)
                .map(|s| {
                    let i = self.states.get(s);
                    (i.components.len() * 2 + i.accepting.len()) * 4 + 48
                })
                .sum::<usize>()
            + (0..live)
                .map(|l| self.live_sets.get(l).terminals.len() * 8 + words * 8 + 48)
                .sum::<usize>()
            + self.preceders.len() * words * 8
    }
}

/// Byte classes: bytes with identical transitions in every state of every terminal. Returns
/// byte → class and a representative byte per class, classes numbered by their first byte.
///
/// Partition refinement, one DFA row at a time (linear in the states, no per-byte signature
/// of every state: a JSON Schema with thousands of terminal states made that the bulk of
/// building the scanner): after a row, two bytes share a class iff they did before and the
/// row sends them to the same state.
fn byte_classes(dfas: &[TerminalDfa]) -> ([u8; 256], Vec<u8>) {
    let mut cls = [0u16; 256];
    let mut n: u16 = 1;
    // Per class, the stamp of the row that last saw it and its first byte's target there.
    let mut seen = [u32::MAX; 256];
    let mut first = [0u32; 256];
    let mut splits: Vec<(u16, u32, u16)> = Vec::new();
    let mut stamp = 0u32;
    // A literal's row `i` splits exactly `lit[i]` from every other byte, so literals (most
    // terminals: keys, punctuation) together make each of their bytes a class of its own,
    // done after the loop without scanning 256 bytes per character.
    let mut literal_byte = [false; 256];
    for d in dfas {
        if let Some(lit) = d.literal_bytes() {
            for &b in lit {
                literal_byte[b as usize] = true;
            }
            continue;
        }
        for s in 0..d.distinguishing_rows() as u32 {
            stamp = stamp.wrapping_add(1);
            splits.clear();
            let old = cls;
            for b in 0..256usize {
                let c = old[b];
                let to = d.distinguishing(s, b as u8);
                if seen[c as usize] != stamp {
                    seen[c as usize] = stamp;
                    first[c as usize] = to;
                } else if first[c as usize] != to {
                    cls[b] = match splits.iter().find(|x| x.0 == c && x.1 == to) {
                        Some(x) => x.2,
                        None => {
                            splits.push((c, to, n));
                            n += 1;
                            n - 1
                        }
                    };
                }
            }
        }
    }
    for x in (0..256usize).filter(|&x| literal_byte[x]) {
        let c = cls[x];
        if (0..256usize).any(|y| y != x && cls[y] == c) {
            cls[x] = n;
            n += 1;
        }
    }
    // Renumber by first byte (a class of 256 bytes always fits in a u16 count).
    let mut renum = vec![u16::MAX; n as usize];
    let mut classes = [0u8; 256];
    let mut class_bytes = Vec::new();
    for b in 0..256usize {
        let c = cls[b] as usize;
        if renum[c] == u16::MAX {
            renum[c] = class_bytes.len() as u16;
            class_bytes.push(b as u8);
        }
        classes[b] = renum[c] as u8;
    }
    (classes, class_bytes)
}

#[cfg(test)]
mod tests;
