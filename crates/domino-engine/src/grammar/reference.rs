//! The reference recognizer: a slow, obviously correct byte-level recognizer for `L(G)` of an
//! [`crate::grammar::ir::Grammar`] — the oracle the engine's masks are tested against.
//!
//! # How
//! Earley's algorithm over the IR's productions, with one twist: terminals are not tokens
//! produced by a lexer but regular languages scanned byte by byte. Item set `S_i` holds the
//! items `(production, dot, origin)` valid after `i` bytes. For every item in `S_i` whose
//! next symbol is a terminal `t`, a *scan* `(t, DFA state, origin i)` starts; each byte
//! advances every scan's DFA (a dense, anchored, all-matches DFA of `t`'s HIR; for a terminal
//! with constraints, the explicit product of its parts' DFAs). Whenever a
//! scan's bytes so far form a non-empty string of `L(t)`, the items of `S_origin` waiting for
//! `t` advance into the next set. This implements the IR semantics exactly: any split of the
//! input into terminal strings counts, there is no lexer policy, and `ε` never matches a
//! terminal.
//!
//! Nullable nonterminals use the Aycock–Horspool rule (predicting a nullable `B` also
//! advances over it), so ε-rules, left recursion, ambiguity and loops like `("a"*)*` work.
//!
//! # Exact viability
//! Each terminal DFA's states are classified once: a state is *live* when some (possibly
//! empty) continuation reaches a match. Scans in dead states are dropped immediately. Since
//! the IR guarantees every nonterminal is productive and every terminal matches a non-empty
//! string, any remaining scan (or an accepting state) proves a completion exists, so
//! [`ReferenceRecognizer::is_viable`] is exact, not an approximation.

use super::GrammarError;
use super::dfa::build_dfa;
use super::ir::{Grammar, Symbol, Terminal, TerminalId};
use regex_automata::Anchored;
use regex_automata::dfa::{Automaton, dense};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

/// An Earley item: production index, dot position, origin set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Item {
    prod: u32,
    dot: u32,
    origin: u32,
}

/// A terminal being scanned: which terminal, its DFA state, where it started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Scan {
    terminal: TerminalId,
    state: u32,
    origin: u32,
}

/// One Earley set, indexed by the symbol each item waits for (completion looks items up
/// by symbol, so long right-recursive chains stay quadratic, not cubic).
#[derive(Debug, Default)]
struct ItemSet {
    items: Vec<Item>,
    waiting: HashMap<Symbol, Vec<Item>>,
}

/// The recognizer's state after some bytes (cheap to clone: item sets are shared).
#[derive(Clone, Debug)]
pub struct RefState {
    sets: Vec<Rc<ItemSet>>,
    scans: Vec<Scan>,
}

impl RefState {
    /// Number of bytes consumed.
    pub fn len(&self) -> usize {
        self.sets.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One terminal's language as an explicit automaton: states are tuples of DFA states, one
/// per part (the terminal's HIR, each `constraints.and`, each `constraints.and_not`), numbered
/// densely. A tuple matches when every positive part matches and no negated part does.
struct TerminalAutomaton {
    /// `next[s * 256 + b]`: the next state, or [`NO_STATE`] once a positive part is dead.
    next: Vec<u32>,
    /// Whether the bytes that led to each state form a match.
    accept: Vec<bool>,
    /// States from which a match is reachable (with zero or more further bytes).
    live: Vec<bool>,
    /// Whether some non-empty string matches (IR invariant 1; checked, not assumed).
    nonempty: bool,
}

const NO_STATE: u32 = u32::MAX;
const START_STATE: u32 = 0;

impl TerminalAutomaton {
    fn new(t: &Terminal) -> Result<Self, String> {
        let mut parts: Vec<(dense::DFA<Vec<u32>>, bool)> = vec![(build_dfa(&t.hir, None)?, true)];
        for h in &t.constraints.and {
            parts.push((build_dfa(h, None)?, true));
        }
        for h in &t.constraints.and_not {
            parts.push((build_dfa(h, None)?, false));
        }
        let mut start = Vec::with_capacity(parts.len());
        for (dfa, _) in &parts {
            start.push(
                dfa.start_state(&start::Config::new().anchored(Anchored::Yes))
                    .map_err(|e| format!("cannot start terminal DFA: {e}"))?,
            );
        }
        // Explore every tuple reachable from the start.
        let mut index: HashMap<Vec<StateID>, u32> = HashMap::new();
        index.insert(start.clone(), START_STATE);
        let mut states = vec![start];
        let mut next: Vec<u32> = Vec::new();
        let mut accept = Vec::new();
        let mut k = 0;
        while k < states.len() {
            let tuple = states[k].clone();
            k += 1;
            accept.push(
                parts
                    .iter()
                    .zip(&tuple)
                    .all(|((dfa, positive), &s)| Self::eof_match(dfa, s) == *positive),
            );
            for b in 0..=255u8 {
                let t: Vec<StateID> = parts
                    .iter()
                    .zip(&tuple)
                    .map(|((dfa, _), &s)| dfa.next_state(s, b))
                    .collect();
                let dead = parts.iter().zip(&t).any(|((dfa, positive), &s)| {
                    *positive && (dfa.is_dead_state(s) || dfa.is_quit_state(s))
                });
                if dead {
                    next.push(NO_STATE);
                    continue;
                }
                let id = *index.entry(t.clone()).or_insert_with(|| {
                    states.push(t);
                    (states.len() - 1) as u32
                });
                next.push(id);
            }
        }
        let n = states.len();
        let mut rev: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, &t) in next.iter().enumerate() {
            if t != NO_STATE {
                rev[t as usize].push(i / 256);
            }
        }
        let mut live = vec![false; n];
        let mut stack: Vec<usize> = (0..n).filter(|&i| accept[i]).collect();
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut live[i], true) {
                continue;
            }
            stack.extend(rev[i].iter().copied());
        }
        let nonempty = (0..256).any(|b| {
            let t = next[START_STATE as usize * 256 + b];
            t != NO_STATE && live[t as usize]
        });
        Ok(TerminalAutomaton {
            next,
            accept,
            live,
            nonempty,
        })
    }

    /// Do the bytes that led to `s` form a match (for one part's DFA)?
    fn eof_match(dfa: &dense::DFA<Vec<u32>>, s: StateID) -> bool {
        dfa.is_match_state(dfa.next_eoi_state(s))
    }

    fn step(&self, s: u32, b: u8) -> u32 {
        self.next[s as usize * 256 + b as usize]
    }

    fn is_live(&self, s: u32) -> bool {
        s != NO_STATE && self.live[s as usize]
    }
}

/// A byte-level recognizer for `L(G)` under character-level lexing. See the module doc (and
/// [`GreedyReference`] for Lark's greedy lexing).
pub struct ReferenceRecognizer {
    grammar: Grammar,
    automata: Vec<TerminalAutomaton>,
    nullable: Vec<bool>,
    prods_of: Vec<Vec<u32>>,
}

impl ReferenceRecognizer {
    pub fn new(grammar: &Grammar) -> Result<Self, GrammarError> {
        let mut automata = Vec::with_capacity(grammar.terminals.len());
        for t in &grammar.terminals {
            let a = TerminalAutomaton::new(t).map_err(|e| {
                GrammarError::whole(format!("terminal {}: cannot build its DFA: {e}", t.name))
            })?;
            if !a.nonempty {
                return Err(GrammarError::whole(format!(
                    "terminal {} matches no non-empty string (IR invariant 1)",
                    t.name
                )));
            }
            automata.push(a);
        }
        let mut prods_of = vec![Vec::new(); grammar.nonterminals.len()];
        for (i, p) in grammar.productions.iter().enumerate() {
            prods_of[p.lhs.0 as usize].push(i as u32);
        }
        let mut nullable = vec![false; grammar.nonterminals.len()];
        loop {
            let mut changed = false;
            for p in &grammar.productions {
                if !nullable[p.lhs.0 as usize]
                    && p.rhs
                        .iter()
                        .all(|s| matches!(s, Symbol::Nonterminal(n) if nullable[n.0 as usize]))
                {
                    nullable[p.lhs.0 as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Ok(ReferenceRecognizer {
            grammar: grammar.clone(),
            automata,
            nullable,
            prods_of,
        })
    }

    pub fn grammar(&self) -> &Grammar {
        &self.grammar
    }

    fn next_symbol(&self, item: &Item) -> Option<Symbol> {
        self.grammar.productions[item.prod as usize]
            .rhs
            .get(item.dot as usize)
            .copied()
    }

    /// Complete the item set at position `n` (= `sets.len()`) from `seed`, then start scans.
    fn close(&self, sets: &[Rc<ItemSet>], seed: Vec<Item>) -> (ItemSet, Vec<Scan>) {
        let n = sets.len() as u32;
        let mut seen: HashSet<Item> = HashSet::new();
        let mut items: Vec<Item> = Vec::new();
        let mut work = seed;
        while let Some(item) = work.pop() {
            if !seen.insert(item) {
                continue;
            }
            items.push(item);
            match self.next_symbol(&item) {
                None => {
                    // Completion. Same-set completions of nullable symbols are covered by the
                    // Aycock–Horspool rule at prediction time.
                    if item.origin < n {
                        let lhs = self.grammar.productions[item.prod as usize].lhs;
                        if let Some(ws) = sets[item.origin as usize]
                            .waiting
                            .get(&Symbol::Nonterminal(lhs))
                        {
                            work.extend(ws.iter().map(|w| Item {
                                dot: w.dot + 1,
                                ..*w
                            }));
                        }
                    }
                }
                Some(Symbol::Nonterminal(b)) => {
                    for &p in &self.prods_of[b.0 as usize] {
                        work.push(Item {
                            prod: p,
                            dot: 0,
                            origin: n,
                        });
                    }
                    if self.nullable[b.0 as usize] {
                        work.push(Item {
                            dot: item.dot + 1,
                            ..item
                        });
                    }
                }
                Some(Symbol::Terminal(_)) => {}
            }
        }
        let mut waiting: HashMap<Symbol, Vec<Item>> = HashMap::new();
        let mut scans = Vec::new();
        for item in &items {
            if let Some(sym) = self.next_symbol(item) {
                let entry = waiting.entry(sym).or_default();
                if entry.is_empty() {
                    if let Symbol::Terminal(t) = sym {
                        scans.push(Scan {
                            terminal: t,
                            state: START_STATE,
                            origin: n,
                        });
                    }
                }
                entry.push(*item);
            }
        }
        (ItemSet { items, waiting }, scans)
    }

    /// The state before any byte.
    pub fn start(&self) -> RefState {
        let seed = self.prods_of[self.grammar.start.0 as usize]
            .iter()
            .map(|&p| Item {
                prod: p,
                dot: 0,
                origin: 0,
            })
            .collect();
        let (items, scans) = self.close(&[], seed);
        RefState {
            sets: vec![Rc::new(items)],
            scans,
        }
    }

    /// Consume one byte; `None` when the bytes so far are not a prefix of any sentence.
    pub fn feed(&self, s: &RefState, byte: u8) -> Option<RefState> {
        let mut kept: Vec<Scan> = Vec::new();
        let mut seed: Vec<Item> = Vec::new();
        for scan in &s.scans {
            let a = &self.automata[scan.terminal.0 as usize];
            let next = a.step(scan.state, byte);
            if !a.is_live(next) {
                continue;
            }
            if a.accept[next as usize] {
                if let Some(ws) = s.sets[scan.origin as usize]
                    .waiting
                    .get(&Symbol::Terminal(scan.terminal))
                {
                    seed.extend(ws.iter().map(|w| Item {
                        dot: w.dot + 1,
                        ..*w
                    }));
                }
            }
            kept.push(Scan {
                state: next,
                ..*scan
            });
        }
        let (items, fresh) = self.close(&s.sets, seed);
        kept.extend(fresh);
        let mut sets = s.sets.clone();
        sets.push(Rc::new(items));
        let out = RefState { sets, scans: kept };
        self.is_viable(&out).then_some(out)
    }

    /// Does some continuation of the bytes so far belong to `L(G)`?
    pub fn is_viable(&self, s: &RefState) -> bool {
        !s.scans.is_empty() || self.is_accepting(s)
    }

    /// Are the bytes so far a sentence of `L(G)`?
    pub fn is_accepting(&self, s: &RefState) -> bool {
        let last = s.sets.last().expect("at least one set");
        last.items.iter().any(|item| {
            item.origin == 0
                && self.next_symbol(item).is_none()
                && self.grammar.productions[item.prod as usize].lhs == self.grammar.start
        })
    }

    pub fn accepts(&self, bytes: &[u8]) -> bool {
        self.run(bytes).is_some_and(|s| self.is_accepting(&s))
    }

    pub fn is_viable_prefix(&self, bytes: &[u8]) -> bool {
        self.run(bytes).is_some()
    }

    /// The state after `bytes`, or `None` once they stop being a viable prefix.
    pub fn run(&self, bytes: &[u8]) -> Option<RefState> {
        let mut s = self.start();
        if !self.is_viable(&s) {
            return None;
        }
        for &b in bytes {
            s = self.feed(&s, b)?;
        }
        Some(s)
    }
}

/// The reference for Lark grammars ([`crate::grammar::ir::Lexing::Greedy`]): tokenize
/// greedily, then parse — written from the rule's definition, sharing no code with the
/// engine's scanner or trees (see [`crate::lexer::greedy`] for the rule).
///
/// A search over lexings: from a lexeme start (Earley sets over *terminals*, one set per
/// lexeme), run every terminal of the grammar byte by byte through its own automaton; at each
/// end position `e` the lexeme may end as terminal `t` when `t` accepts, no terminal is still
/// live one byte further (or `e` is the end of the text), and no string literal accepts when
/// `t` is a regex; then the parser must take `t`, and lexing continues from `e`. A prefix is
/// viable when some lexing leaves a lexeme in progress that a terminal the parser expects
/// can still complete; a text is accepted when some lexing ends it on a lexeme boundary with
/// the parser accepting. Exponential in the worst case; fine for tests' short strings.
pub struct GreedyReference {
    inner: ReferenceRecognizer,
    literal: Vec<bool>,
}

impl GreedyReference {
    pub fn new(grammar: &Grammar) -> Result<Self, GrammarError> {
        Ok(GreedyReference {
            inner: ReferenceRecognizer::new(grammar)?,
            literal: grammar
                .terminals
                .iter()
                .map(|t| t.literal.is_some())
                .collect(),
        })
    }

    fn start_sets(&self) -> Vec<Rc<ItemSet>> {
        let seed = self.inner.prods_of[self.inner.grammar.start.0 as usize]
            .iter()
            .map(|&p| Item {
                prod: p,
                dot: 0,
                origin: 0,
            })
            .collect();
        vec![Rc::new(self.inner.close(&[], seed).0)]
    }

    /// The terminals the parser accepts next.
    fn allowed(&self, sets: &[Rc<ItemSet>]) -> Vec<TerminalId> {
        let mut out: Vec<TerminalId> = sets
            .last()
            .expect("at least one set")
            .waiting
            .keys()
            .filter_map(|s| match s {
                Symbol::Terminal(t) => Some(*t),
                Symbol::Nonterminal(_) => None,
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The sets after pushing terminal `t` (`None` when the parser rejects it).
    fn push(&self, sets: &[Rc<ItemSet>], t: TerminalId) -> Option<Vec<Rc<ItemSet>>> {
        let ws = sets.last()?.waiting.get(&Symbol::Terminal(t))?;
        let seed = ws
            .iter()
            .map(|w| Item {
                dot: w.dot + 1,
                ..*w
            })
            .collect();
        let (items, _) = self.inner.close(sets, seed);
        let mut out = sets.to_vec();
        out.push(Rc::new(items));
        Some(out)
    }

    fn parser_accepting(&self, sets: &[Rc<ItemSet>]) -> bool {
        let last = sets.last().expect("at least one set");
        last.items.iter().any(|item| {
            item.origin == 0
                && self.inner.next_symbol(item).is_none()
                && self.inner.grammar.productions[item.prod as usize].lhs
                    == self.inner.grammar.start
        })
    }

    /// Some lexing of `w[start..]` from parser `sets` (see the type doc); `at_end`: the text
    /// ends after `w` (acceptance) rather than continuing (viability).
    fn explore(&self, sets: &[Rc<ItemSet>], w: &[u8], start: usize, at_end: bool) -> bool {
        let allowed = self.allowed(sets);
        if start == w.len() {
            return self.parser_accepting(sets) || (!at_end && !allowed.is_empty());
        }
        let mut states: Vec<(TerminalId, u32)> = (0..self.literal.len())
            .map(|t| (TerminalId(t as u32), START_STATE))
            .collect();
        for e in start + 1..=w.len() {
            states = states
                .into_iter()
                .filter_map(|(t, s)| {
                    let a = &self.inner.automata[t.0 as usize];
                    let n = a.step(s, w[e - 1]);
                    a.is_live(n).then_some((t, n))
                })
                .collect();
            if states.is_empty() {
                return false;
            }
            if e == w.len() && !at_end {
                return states.iter().any(|(t, _)| allowed.contains(t));
            }
            if e < w.len() {
                let b = w[e];
                let extends = states.iter().any(|&(t, s)| {
                    let a = &self.inner.automata[t.0 as usize];
                    a.is_live(a.step(s, b))
                });
                if extends {
                    continue;
                }
            }
            let accepting: Vec<TerminalId> = states
                .iter()
                .filter(|&&(t, s)| self.inner.automata[t.0 as usize].accept[s as usize])
                .map(|&(t, _)| t)
                .collect();
            let any_literal = accepting.iter().any(|t| self.literal[t.0 as usize]);
            for &t in &accepting {
                if any_literal && !self.literal[t.0 as usize] {
                    continue;
                }
                if let Some(next) = self.push(sets, t) {
                    if self.explore(&next, w, e, at_end) {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Is `w` a prefix of the greedy lexing of some text (see the type doc)?
    pub fn is_viable_prefix(&self, w: &[u8]) -> bool {
        self.explore(&self.start_sets(), w, 0, false)
    }

    /// Is `w` a sentence under greedy lexing?
    pub fn accepts(&self, w: &[u8]) -> bool {
        self.explore(&self.start_sets(), w, 0, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{gbnf, lower};

    fn rec(text: &str) -> ReferenceRecognizer {
        ReferenceRecognizer::new(&lower::lower(&gbnf::parse(text, "root").unwrap()).unwrap())
            .unwrap()
    }

    #[test]
    fn left_recursion_and_nullable() {
        let r = rec("root ::= root \"+\" n | n\nn ::= [0-9]+ | \"(\" root \")\" | e\ne ::= \"\"");
        for ok in ["1", "1+2", "(1+2)+3", "+", "", "()"] {
            assert!(r.accepts(ok.as_bytes()), "{ok}");
        }
        for bad in ["1+)", "(1", "a"] {
            assert!(!r.accepts(bad.as_bytes()), "{bad}");
        }
        assert!(r.is_viable_prefix(b"(1+"));
        assert!(!r.is_viable_prefix(b")"));
    }

    #[test]
    fn nullable_loops() {
        let r = rec("root ::= (\"a\"*)* \"b\"");
        assert!(r.accepts(b"aaab"));
        assert!(r.accepts(b"b"));
        assert!(!r.accepts(b"aa"));
        let r = rec("root ::= (x?)* \"b\"\nx ::= \"a\" | \"(\" root \")\"");
        assert!(r.accepts(b"a(b)ab"));
    }

    #[test]
    fn any_split_counts() {
        // "ab" as [a-b]+ or as "a" "b": no lexer policy.
        let r = rec("root ::= w \"b\"\nw ::= [a-b]+");
        assert!(r.accepts(b"abb"));
        assert!(r.accepts(b"ab"));
        assert!(!r.accepts(b"aa"));
        assert!(r.is_viable_prefix(b"aa"));
    }
}
