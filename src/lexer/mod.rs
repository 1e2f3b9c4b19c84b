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
//! the scanner, so a byte step must be one table lookup. The scanner has **no lexer policy**
//! (no maximal munch, no priorities): it only reports, per state, which terminals are still
//! possible ([`Scanner::live_set`]) and which would accept if the terminal ended here
//! ([`Scanner::accepting`]); the engine and the parser decide where terminals end.
//!
//! # Invariants
//! - [`Scanner::START`] (state 0) is "between terminals": every terminal at its start state.
//!   No terminal accepts in it (IR invariant: ε is never a terminal match).
//! - Every other state holds at least one live pair; a transition that would leave none goes
//!   to [`DEAD`].
//! - States are interned and built eagerly; construction stops with an error beyond
//!   [`MAX_SCANNER_STATES`].
//! - Bytes are grouped into equivalence classes (bytes no terminal distinguishes), so the
//!   transition table is `states × classes`.

use crate::grammar::ir;
use regex_automata::dfa::{Automaton, StartKind, dense};
use regex_automata::nfa::thompson;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};
use std::collections::HashMap;

/// No live terminal remains: the byte sequence cannot continue any terminal.
pub const DEAD: u32 = u32::MAX;
/// The most scanner states built before giving up with an error.
pub const MAX_SCANNER_STATES: usize = 200_000;
/// Size limit for one terminal's dense DFA (bytes).
const TERMINAL_DFA_SIZE_LIMIT: usize = 64 << 20;

/// Errors building the scanner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexerError {
    /// A terminal's regular expression could not be compiled (too large, unsupported).
    Terminal { terminal: String, message: String },
    /// The product automaton exceeded [`MAX_SCANNER_STATES`].
    TooManyStates(usize),
}

impl std::fmt::Display for LexerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LexerError::Terminal { terminal, message } => write!(f, "terminal {terminal}: {message}"),
            LexerError::TooManyStates(n) => write!(f, "scanner has more than {n} states (grammar too large)"),
        }
    }
}
impl std::error::Error for LexerError {}

/// One terminal's DFA over bytes, live states only. State 0 is the start state.
#[derive(Clone, Debug)]
pub struct TerminalDfa {
    /// `next[s * 256 + b]`: the next state, or [`DEAD`].
    next: Vec<u32>,
    /// Whether the bytes read so far form a match.
    accept: Vec<bool>,
}

impl TerminalDfa {
    /// Compile a terminal's HIR (anchored, byte-oriented, UTF-8 classes as byte sequences).
    pub fn new(hir: &regex_syntax::hir::Hir) -> Result<Self, String> {
        let nfa = thompson::Compiler::new()
            .configure(
                thompson::Config::new()
                    .utf8(false)
                    .which_captures(thompson::WhichCaptures::None),
            )
            .build_from_hir(hir)
            .map_err(|e| e.to_string())?;
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    // All matches, not leftmost-first: with leftmost-first, `[0-9]|[1-9][0-9]*`
                    // would stop after "1" (the first alternative wins) and never match "10".
                    .match_kind(MatchKind::All)
                    .start_kind(StartKind::Anchored)
                    .minimize(false)
                    .dfa_size_limit(Some(TERMINAL_DFA_SIZE_LIMIT))
                    .determinize_size_limit(Some(TERMINAL_DFA_SIZE_LIMIT)),
            )
            .build_from_nfa(&nfa)
            .map_err(|e| e.to_string())?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| e.to_string())?;
        // Explore reachable states, numbering them densely.
        let mut ids: HashMap<regex_automata::util::primitives::StateID, u32> = HashMap::new();
        let mut order = vec![start];
        ids.insert(start, 0);
        let mut raw_next: Vec<u32> = Vec::new();
        let mut accept = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            accept.push(dfa.is_match_state(dfa.next_eoi_state(s)));
            for b in 0..=255u8 {
                let n = dfa.next_state(s, b);
                if dfa.is_dead_state(n) || dfa.is_quit_state(n) {
                    raw_next.push(DEAD);
                    continue;
                }
                let id = *ids.entry(n).or_insert_with(|| {
                    order.push(n);
                    (order.len() - 1) as u32
                });
                raw_next.push(id);
            }
            i += 1;
        }
        Self::pruned(raw_next, accept)
    }

    /// The most states [`TerminalDfa::for_terminal`] builds for a constrained terminal.
    pub const MAX_PRODUCT_STATES: usize = 100_000;

    /// The DFA of a terminal's whole language: its HIR intersected with every
    /// `constraints.and` and minus every `constraints.and_not` (a product construction over
    /// the parts' DFAs; an `and_not` part that has died no longer excludes anything).
    pub fn for_terminal(t: &ir::Terminal) -> Result<Self, String> {
        Self::product(&t.hir, &t.constraints, Self::MAX_PRODUCT_STATES)
    }

    /// See [`TerminalDfa::for_terminal`]; fails beyond `max_states` product states.
    pub fn product(hir: &regex_syntax::hir::Hir, constraints: &ir::Constraints, max_states: usize) -> Result<Self, String> {
        let base = TerminalDfa::new(hir)?;
        if constraints.is_empty() {
            return Ok(base);
        }
        let mut parts = vec![base];
        for h in &constraints.and {
            parts.push(TerminalDfa::new(h).map_err(|e| format!("intersected language: {e}"))?);
        }
        let n_pos = parts.len();
        for h in &constraints.and_not {
            match TerminalDfa::new(h) {
                Ok(d) => parts.push(d),
                // Matches nothing: excludes nothing.
                Err(e) if e == "the terminal matches nothing" => {}
                Err(e) => return Err(format!("excluded language: {e}")),
            }
        }
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let start = vec![0u32; parts.len()];
        ids.insert(start.clone(), 0);
        let mut order = vec![start];
        let mut raw_next: Vec<u32> = Vec::new();
        let mut accept = Vec::new();
        let mut i = 0;
        while i < order.len() {
            let tuple = order[i].clone();
            let is_match = |k: usize| tuple[k] != DEAD && parts[k].is_accepting(tuple[k]);
            accept.push((0..n_pos).all(is_match) && !(n_pos..parts.len()).any(is_match));
            for b in 0..=255u8 {
                let next: Vec<u32> =
                    tuple.iter().zip(&parts).map(|(&s, d)| if s == DEAD { DEAD } else { d.next(s, b) }).collect();
                if next[..n_pos].contains(&DEAD) {
                    raw_next.push(DEAD);
                    continue;
                }
                let id = match ids.get(&next) {
                    Some(&id) => id,
                    None => {
                        if order.len() >= max_states {
                            return Err(format!("the intersection has more than {max_states} states"));
                        }
                        let id = order.len() as u32;
                        ids.insert(next.clone(), id);
                        order.push(next);
                        id
                    }
                };
                raw_next.push(id);
            }
            i += 1;
        }
        Self::pruned(raw_next, accept)
    }

    /// Remove the states that cannot reach a match (their transitions go to [`DEAD`]).
    fn pruned(raw_next: Vec<u32>, accept: Vec<bool>) -> Result<Self, String> {
        // Liveness: states that can reach an accepting state (reverse reachability, one
        // pass over the reversed edges: linear even for long chains like `.{0,500}`).
        let n = accept.len();
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); n];
        for s in 0..n {
            let mut row: Vec<u32> = raw_next[s * 256..(s + 1) * 256].iter().copied().filter(|&t| t != DEAD).collect();
            row.sort_unstable();
            row.dedup();
            for t in row {
                preds[t as usize].push(s as u32);
            }
        }
        let mut live = accept.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| accept[s as usize]).collect();
        while let Some(t) = stack.pop() {
            for &s in &preds[t as usize] {
                if !std::mem::replace(&mut live[s as usize], true) {
                    stack.push(s);
                }
            }
        }
        let next = raw_next
            .iter()
            .map(|&t| if t != DEAD && live[t as usize] { t } else { DEAD })
            .collect();
        if !live[0] {
            return Err("the terminal matches nothing".into());
        }
        Ok(TerminalDfa { next, accept })
    }

    #[inline]
    pub fn next(&self, s: u32, b: u8) -> u32 {
        self.next[s as usize * 256 + b as usize]
    }

    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        self.accept[s as usize]
    }

    pub fn num_states(&self) -> usize {
        self.accept.len()
    }
}

/// Identifies an interned set of terminals (see [`Scanner::live_set`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LiveSetId(pub u32);

/// A scanner state id; index into the scanner's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ScanState(pub u32);

/// One `(terminal, terminal-DFA state)` pair of a scanner state, interned: a *component*.
/// Subterminal trees are built per component and shared by every scanner state holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentId(pub u32);

/// The product automaton over all terminals (see the module doc).
#[derive(Debug)]
pub struct Scanner {
    num_terminals: usize,
    dfas: Vec<TerminalDfa>,
    /// Interned components: `(terminal, terminal-DFA state)`.
    components: Vec<(ir::TerminalId, u32)>,
    component_ids: HashMap<(u32, u32), u32>,
    /// The components of each scanner state.
    state_components: Vec<Box<[ComponentId]>>,
    /// The live set `{t}` of each terminal.
    singleton_live: Vec<LiveSetId>,
    /// Byte → class.
    classes: [u8; 256],
    num_classes: usize,
    /// `trans[s * num_classes + class]`: next state or [`DEAD`].
    trans: Vec<u32>,
    /// Terminals that accept in each state (sorted).
    accepting: Vec<Box<[ir::TerminalId]>>,
    /// The interned live-terminal set of each state.
    live: Vec<LiveSetId>,
    /// Interned live sets (sorted terminal ids).
    live_sets: Vec<Box<[ir::TerminalId]>>,
}

impl Scanner {
    /// "Between terminals": every terminal at its start.
    pub const START: ScanState = ScanState(0);

    /// Build the scanner of a grammar's terminals.
    pub fn new(grammar: &ir::Grammar) -> Result<Self, LexerError> {
        let mut dfas = Vec::with_capacity(grammar.terminals.len());
        for t in &grammar.terminals {
            dfas.push(TerminalDfa::for_terminal(t).map_err(|message| LexerError::Terminal {
                terminal: t.name.clone(),
                message,
            })?);
        }
        Self::from_dfas(dfas)
    }

    /// Build from per-terminal DFAs (`TerminalId(i)` is `dfas[i]`).
    pub fn from_dfas(dfas: Vec<TerminalDfa>) -> Result<Self, LexerError> {
        // Byte classes: bytes with identical transitions in every state of every terminal.
        let mut sig_to_class: HashMap<Vec<u32>, u8> = HashMap::new();
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        for b in 0..=255u8 {
            let mut sig = Vec::new();
            for d in &dfas {
                for s in 0..d.num_states() as u32 {
                    sig.push(d.next(s, b));
                }
            }
            let next_class = sig_to_class.len();
            let c = *sig_to_class.entry(sig).or_insert_with(|| {
                reps.push(b);
                next_class as u8
            });
            classes[b as usize] = c;
        }
        let num_classes = reps.len();

        type Pairs = Vec<(u32, u32)>;
        let mut intern: HashMap<Pairs, u32> = HashMap::new();
        let mut states: Vec<Pairs> = Vec::new();
        let start: Pairs = (0..dfas.len() as u32).map(|t| (t, 0)).collect();
        intern.insert(start.clone(), 0);
        states.push(start);
        let mut trans: Vec<u32> = Vec::new();
        let mut live_intern: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut live_sets: Vec<Box<[ir::TerminalId]>> = Vec::new();
        let mut live = Vec::new();
        let mut accepting = Vec::new();
        let mut components: Vec<(ir::TerminalId, u32)> = Vec::new();
        let mut component_ids: HashMap<(u32, u32), u32> = HashMap::new();
        let mut state_components: Vec<Box<[ComponentId]>> = Vec::new();
        let mut i = 0;
        while i < states.len() {
            let cur = states[i].clone();
            state_components.push(
                cur.iter()
                    .map(|&(t, s)| {
                        ComponentId(*component_ids.entry((t, s)).or_insert_with(|| {
                            components.push((ir::TerminalId(t), s));
                            (components.len() - 1) as u32
                        }))
                    })
                    .collect(),
            );
            let terms: Vec<u32> = cur.iter().map(|p| p.0).collect();
            let lid = *live_intern.entry(terms.clone()).or_insert_with(|| {
                live_sets.push(terms.iter().map(|&t| ir::TerminalId(t)).collect());
                (live_sets.len() - 1) as u32
            });
            live.push(LiveSetId(lid));
            accepting.push(
                cur.iter()
                    .filter(|&&(t, s)| i != 0 && dfas[t as usize].is_accepting(s))
                    .map(|&(t, _)| ir::TerminalId(t))
                    .collect::<Box<[_]>>(),
            );
            for &b in &reps {
                let next: Pairs = cur
                    .iter()
                    .filter_map(|&(t, s)| {
                        let n = dfas[t as usize].next(s, b);
                        (n != DEAD).then_some((t, n))
                    })
                    .collect();
                if next.is_empty() {
                    trans.push(DEAD);
                    continue;
                }
                let id = match intern.get(&next) {
                    Some(&id) => id,
                    None => {
                        if states.len() >= MAX_SCANNER_STATES {
                            return Err(LexerError::TooManyStates(MAX_SCANNER_STATES));
                        }
                        let id = states.len() as u32;
                        intern.insert(next.clone(), id);
                        states.push(next);
                        id
                    }
                };
                trans.push(id);
            }
            i += 1;
        }
        let singleton_live = (0..dfas.len() as u32)
            .map(|t| {
                LiveSetId(*live_intern.entry(vec![t]).or_insert_with(|| {
                    live_sets.push(vec![ir::TerminalId(t)].into());
                    (live_sets.len() - 1) as u32
                }))
            })
            .collect();
        Ok(Scanner {
            num_terminals: dfas.len(),
            dfas,
            components,
            component_ids,
            state_components,
            singleton_live,
            classes,
            num_classes,
            trans,
            accepting,
            live,
            live_sets,
        })
    }

    /// Next state after byte `b`, or [`DEAD`].
    #[inline]
    pub fn next(&self, s: ScanState, b: u8) -> u32 {
        self.trans[s.0 as usize * self.num_classes + self.classes[b as usize] as usize]
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

    /// Terminals that accept in `s`: ending the current terminal here is lexically possible.
    #[inline]
    pub fn accepting(&self, s: ScanState) -> &[ir::TerminalId] {
        &self.accepting[s.0 as usize]
    }

    /// The interned set of terminals still live in `s`.
    #[inline]
    pub fn live_set(&self, s: ScanState) -> LiveSetId {
        self.live[s.0 as usize]
    }

    /// The terminals of an interned live set, sorted.
    #[inline]
    pub fn live_terminals(&self, id: LiveSetId) -> &[ir::TerminalId] {
        &self.live_sets[id.0 as usize]
    }

    pub fn num_states(&self) -> usize {
        self.live.len()
    }

    /// The components `(terminal, terminal-DFA state)` of a scanner state.
    #[inline]
    pub fn components(&self, s: ScanState) -> &[ComponentId] {
        &self.state_components[s.0 as usize]
    }

    /// A component's terminal and terminal-DFA state.
    #[inline]
    pub fn component(&self, c: ComponentId) -> (ir::TerminalId, u32) {
        self.components[c.0 as usize]
    }

    /// The component of terminal `t` in its DFA state `s`, if some scanner state has it.
    pub fn component_id(&self, t: ir::TerminalId, s: u32) -> Option<ComponentId> {
        self.component_ids.get(&(t.0, s)).map(|&c| ComponentId(c))
    }

    pub fn num_live_sets(&self) -> usize {
        self.live_sets.len()
    }

    pub fn num_components(&self) -> usize {
        self.components.len()
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

    /// Bytes of heap the tables use.
    pub fn memory_bytes(&self) -> usize {
        self.trans.len() * 4
            + self
                .dfas
                .iter()
                .map(|d| d.next.len() * 4 + d.accept.len())
                .sum::<usize>()
            + self.components.len() * 8
            + self.state_components.iter().map(|c| c.len() * 4 + 16).sum::<usize>()
            + self.accepting.iter().map(|a| a.len() * 4 + 16).sum::<usize>()
            + self.live.len() * 4
            + self.live_sets.iter().map(|a| a.len() * 4 + 16).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_syntax::hir::Hir;

    fn grammar(terms: &[Hir]) -> ir::Grammar {
        ir::Grammar {
            terminals: terms
                .iter()
                .enumerate()
                .map(|(i, h)| ir::Terminal::new(format!("t{i}"), h.clone(), None))
                .collect(),
            nonterminals: vec!["s".into()],
            productions: vec![],
            start: ir::NonterminalId(0),
            warnings: vec![],
        }
    }

    fn re(p: &str) -> Hir {
        regex_syntax::ParserBuilder::new().utf8(false).build().parse(p).unwrap()
    }

    #[test]
    fn live_and_accepting_sets_follow_the_terminals() {
        let g = grammar(&[Hir::literal(*b"if"), re("[a-z]+"), re("[0-9]+")]);
        let sc = Scanner::new(&g).unwrap();
        assert!(sc.accepting(Scanner::START).is_empty());
        let i = sc.walk(Scanner::START, b"i").unwrap();
        assert_eq!(
            sc.live_terminals(sc.live_set(i)),
            &[ir::TerminalId(0), ir::TerminalId(1)]
        );
        assert_eq!(sc.accepting(i), &[ir::TerminalId(1)]);
        let iff = sc.walk(Scanner::START, b"if").unwrap();
        assert_eq!(sc.accepting(iff), &[ir::TerminalId(0), ir::TerminalId(1)]);
        let ifx = sc.walk(Scanner::START, b"ifx").unwrap();
        assert_eq!(sc.live_terminals(sc.live_set(ifx)), &[ir::TerminalId(1)]);
        assert!(sc.walk(Scanner::START, b"i1").is_none());
        assert_eq!(
            sc.accepting(sc.walk(Scanner::START, b"42").unwrap()),
            &[ir::TerminalId(2)]
        );
    }

    #[test]
    fn every_match_counts_not_only_the_preferred_alternative() {
        let g = grammar(&[re("[0-9]|[1-9][0-9]*")]);
        let sc = Scanner::new(&g).unwrap();
        let s = sc.walk(Scanner::START, b"10").expect("\"10\" is a prefix");
        assert_eq!(sc.accepting(s), &[ir::TerminalId(0)]);
    }

    #[test]
    fn dead_ends_are_pruned_and_utf8_classes_are_bytes() {
        // "ab" then "c" required: after "ab" only the full "abc" is live.
        let g = grammar(&[re("abc"), re("é")]);
        let sc = Scanner::new(&g).unwrap();
        assert!(sc.walk(Scanner::START, b"abd").is_none());
        let half = sc.walk(Scanner::START, &"é".as_bytes()[..1]).unwrap();
        assert!(sc.accepting(half).is_empty());
        assert_eq!(
            sc.accepting(sc.walk(half, &"é".as_bytes()[1..]).unwrap()),
            &[ir::TerminalId(1)]
        );
    }
}
