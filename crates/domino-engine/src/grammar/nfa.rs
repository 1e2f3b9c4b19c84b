//! A terminal's NFA in the form the lazy DFA walks, compiled so that a counted repetition
//! costs copies of its body, not recompilations of it.
//!
//! # Why
//! `maxLength: 256` is the terminal `"U{0,256}"` with `U` one JSON string character (an
//! escape, a `\u` surrogate pair, or a UTF-8 scalar value). `regex-automata`'s Thompson
//! compiler compiles `U` once per count: its UTF-8 class compilation, its builder and its
//! final pass, 256 times. On JSONSchemaBench that was most of the slowest engine stages (the
//! `vercel` schema, with `maxLength` 256 and 4,096 strings: 62 ms of its 72 ms compile).
//!
//! # How
//! - A piece with no counted repetition of at least [`COPY_MIN`] inside is compiled by
//!   `regex-automata` and imported (its states shifted, its match state made an ε state
//!   whose target is filled in once the piece that follows exists).
//! - `X{m,n}` compiles `X` once into a *template*, then appends `n` copies of it (a copy is
//!   the template's states shifted): `m` mandatory ones, then `n − m` optional ones nested as
//!   `(X(X…)?)?`, each able to skip to the end. `X{m,}` ends with one copy looping through a
//!   union state.
//! - Concatenations, alternations and groups around such a repetition are built here, left
//!   to right, so state ids grow along the text (see `Nfa::piece`).
//!
//! The automaton is the textbook Thompson construction of the same expression, so it
//! accepts the same language; the lazy DFA's tests compare it with the eagerly determinised
//! DFA, repetitions included.
//!
//! # Representation
//! A state either has byte transitions (sorted ranges), ε moves, or is the match state (or
//! fails). Transitions and ε moves sit in two flat arrays, each state naming its slice.

use regex_automata::nfa::thompson::{self, NFA, State};
use regex_syntax::hir::{Hir, HirKind};

/// A compiler keeps what it learned from NFAs this big or smaller between builds; a larger
/// one (or a failed build) gets a fresh compiler after it, so a thread holds no more than
/// its builder's vectors for this many states.
const REUSE_MAX_STATES: usize = 20_000;

/// `regex-automata`'s Thompson NFA of `hir` (bytes, not UTF-8; forward), from one compiler
/// per thread (the error as its message): `size_limit` in bytes (`None`: none), `shrink` and `captures` as
/// `thompson::Config` has them.
///
/// A new compiler fills a 10,000-entry UTF-8 suffix cache (about 400 KB, fresh pages the
/// kernel must zero) on its first build; a reused one bumps a version number instead.
/// Built once per terminal, that was a tenth of building a big schema's engine grammar.
/// Every setting is given on every call: a compiler's `configure` only overwrites the
/// settings the new configuration sets, so one left out would leak in from the last build.
pub(crate) fn thompson_nfa(
    hir: &regex_syntax::hir::Hir,
    size_limit: Option<usize>,
    shrink: bool,
    captures: thompson::WhichCaptures,
) -> Result<NFA, String> {
    let config = thompson::Config::new()
        .utf8(false)
        .reverse(false)
        .shrink(shrink)
        .which_captures(captures)
        .nfa_size_limit(size_limit);
    thread_local! {
        static COMPILER: std::cell::RefCell<thompson::Compiler> =
            std::cell::RefCell::new(thompson::Compiler::new());
    }
    COMPILER.with(|cell| {
        // Never nested today; if it ever is, the inner build gets a compiler of its own.
        let Ok(mut c) = cell.try_borrow_mut() else {
            return thompson::Compiler::new()
                .configure(config)
                .build_from_hir(hir)
                .map_err(|e| e.to_string());
        };
        c.configure(config);
        let built = c.build_from_hir(hir);
        if built
            .as_ref()
            .map_or(true, |nfa| nfa.states().len() > REUSE_MAX_STATES)
        {
            *c = thompson::Compiler::new();
        }
        built.map_err(|e| e.to_string())
    })
}

/// Repetitions counted up to at least this many copies are built by copying their body.
pub const COPY_MIN: u32 = 4;

/// An ε target not known yet (a piece's exit), set by [`Nfa::patch`] or `set_target` once
/// the state it leads to exists.
const HOLE: u32 = u32::MAX;

/// One byte-range transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub lo: u8,
    pub hi: u8,
    pub next: u32,
}

/// What a state does (slices index [`Nfa`]'s `trans` and `eps`).
#[derive(Clone, Copy, Debug)]
enum Node {
    Bytes { at: u32, len: u32 },
    Eps { at: u32, len: u32 },
    Match,
    Fail,
}

/// Why [`Nfa::compile`] failed.
#[derive(Debug)]
pub enum NfaError {
    /// The expression uses look-around (the lazy DFA does not handle it).
    LookAround,
    /// `regex-automata`'s message, or the size limit.
    Compile(String),
}

/// An NFA (see the module doc). State ids are dense; the start is [`Nfa::start`].
#[derive(Clone, Debug, Default)]
pub struct Nfa {
    nodes: Vec<Node>,
    trans: Vec<Transition>,
    eps: Vec<u32>,
    start: u32,
    /// A template's open exit (see [`Nfa::piece`]).
    exit: u32,
    /// Bytes allowed (`compile`'s limit).
    limit: usize,
}

impl Nfa {
    /// The NFA of `hir`; fails beyond `limit` bytes (as `regex-automata`'s size limit).
    pub fn compile(hir: &Hir, limit: usize) -> Result<Nfa, NfaError> {
        let mut n = Nfa {
            limit,
            ..Nfa::default()
        };
        let copies = Copies::of(hir);
        if copies.holds(hir) {
            let (start, exit) = n.piece(hir, &copies)?;
            let m = n.push(Node::Match)?;
            n.patch(exit, m);
            n.start = start;
            n.bypass_junctions();
        } else {
            n.start = n.import(hir, false)?.0;
        }
        Ok(n)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    #[inline]
    pub fn start(&self) -> u32 {
        self.start
    }

    /// Bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<Node>()
            + self.trans.len() * std::mem::size_of::<Transition>()
            + self.eps.len() * 4
    }

    #[inline]
    pub fn is_match(&self, q: u32) -> bool {
        matches!(self.nodes[q as usize], Node::Match)
    }

    /// Byte transitions or the match state: the states a DFA state's set keeps.
    #[inline]
    pub fn is_important(&self, q: u32) -> bool {
        matches!(self.nodes[q as usize], Node::Bytes { .. } | Node::Match)
    }

    /// `q`'s byte transitions (empty for other states).
    #[inline]
    pub fn transitions(&self, q: u32) -> &[Transition] {
        match self.nodes[q as usize] {
            Node::Bytes { at, len } => &self.trans[at as usize..(at + len) as usize],
            _ => &[],
        }
    }

    /// `q`'s ε moves (empty for other states).
    #[inline]
    pub fn epsilons(&self, q: u32) -> &[u32] {
        match self.nodes[q as usize] {
            Node::Eps { at, len } => &self.eps[at as usize..(at + len) as usize],
            _ => &[],
        }
    }

    /// Where byte `b` leads from `q`, if anywhere.
    #[inline]
    pub fn step(&self, q: u32, b: u8) -> Option<u32> {
        for t in self.transitions(q) {
            if t.lo > b {
                break;
            }
            if b <= t.hi {
                return Some(t.next);
            }
        }
        None
    }

    /// Byte → class, classes numbered in byte order: bytes of one class have the same
    /// transitions in every state.
    pub fn byte_classes(&self) -> [u8; 256] {
        let mut boundary = [false; 256];
        for t in &self.trans {
            if t.lo > 0 {
                boundary[t.lo as usize - 1] = true;
            }
            boundary[t.hi as usize] = true;
        }
        let mut classes = [0u8; 256];
        let mut c = 0u8;
        for b in 0..256 {
            classes[b] = c;
            if boundary[b] && b < 255 {
                c += 1;
            }
        }
        classes
    }

    /// Per state: whether the match state is reachable from it (over byte and ε edges).
    pub fn co_reachable(&self) -> Box<[bool]> {
        let n = self.nodes.len();
        // Reversed edges (CSR), then a search from the match states.
        let mut count = vec![0u32; n + 1];
        for q in 0..n {
            for t in self.transitions(q as u32) {
                count[t.next as usize + 1] += 1;
            }
            for &t in self.epsilons(q as u32) {
                count[t as usize + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let mut preds = vec![0u32; count[n] as usize];
        let mut fill = count.clone();
        for q in 0..n {
            let targets = self
                .transitions(q as u32)
                .iter()
                .map(|t| t.next)
                .chain(self.epsilons(q as u32).iter().copied());
            for t in targets {
                preds[fill[t as usize] as usize] = q as u32;
                fill[t as usize] += 1;
            }
        }
        let mut live = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32).filter(|&q| self.is_match(q)).collect();
        for &q in &stack {
            live[q as usize] = true;
        }
        while let Some(t) = stack.pop() {
            for &q in &preds[count[t as usize] as usize..count[t as usize + 1] as usize] {
                if !std::mem::replace(&mut live[q as usize], true) {
                    stack.push(q);
                }
            }
        }
        live.into()
    }

    fn check_size(&self) -> Result<(), NfaError> {
        if self.memory_bytes() > self.limit {
            return Err(NfaError::Compile(format!(
                "NFA exceeded the size limit of {} bytes",
                self.limit
            )));
        }
        Ok(())
    }

    fn push(&mut self, node: Node) -> Result<u32, NfaError> {
        self.nodes.push(node);
        if self.nodes.len() % 1024 == 0 {
            self.check_size()?;
        }
        Ok(self.nodes.len() as u32 - 1)
    }

    fn push_eps(&mut self, targets: &[u32]) -> Result<u32, NfaError> {
        let at = self.eps.len() as u32;
        self.eps.extend_from_slice(targets);
        self.push(Node::Eps {
            at,
            len: targets.len() as u32,
        })
    }

    /// Pieces are built left to right, so ids grow along the text and an ε-closure comes out
    /// nearly sorted (the lazy DFA sorts every set; built right to left, sorting made its
    /// sets 30 % slower to build). `(start, exit)`: the exit is an ε state with one open
    /// target ([`HOLE`]), filled by [`Nfa::patch`] once the continuation exists.
    fn piece(&mut self, hir: &Hir, copies: &Copies) -> Result<(u32, u32), NfaError> {
        if !copies.holds(hir) {
            return self.import(hir, true);
        }
        match hir.kind() {
            HirKind::Concat(subs) => {
                let (start, mut exit) = self.piece(&subs[0], copies)?;
                for s in &subs[1..] {
                    let (s2, e2) = self.piece(s, copies)?;
                    self.patch(exit, s2);
                    exit = e2;
                }
                Ok((start, exit))
            }
            HirKind::Alternation(subs) => {
                let u = self.push_eps(&vec![HOLE; subs.len()])?;
                let mut exits = Vec::with_capacity(subs.len());
                for (k, s) in subs.iter().enumerate() {
                    let (s2, e2) = self.piece(s, copies)?;
                    self.set_target(u, k, s2);
                    exits.push(e2);
                }
                let j = self.push_eps(&[HOLE])?;
                for e in exits {
                    self.patch(e, j);
                }
                Ok((u, j))
            }
            HirKind::Capture(c) => self.piece(&c.sub, copies),
            HirKind::Repetition(r) => {
                let mut t = Nfa {
                    limit: self.limit,
                    ..Nfa::default()
                };
                (t.start, t.exit) = t.piece(&r.sub, copies)?;
                let first = self.push_eps(&[HOLE])?;
                let mut exit = first;
                // `X{m,}` with m ≥ 1 is `X{m-1}` and a copy that loops back to itself, as
                // `regex-automata` builds it: a separate looping copy after m copies would
                // let the DFA tell the m-th copy from the loop's, and double its states.
                let looping_last = r.max.is_none() && r.min > 0;
                for _ in 0..r.min - looping_last as u32 {
                    let (s2, e2) = self.append(&t)?;
                    self.patch(exit, s2);
                    exit = e2;
                }
                // Optional copies skip to the end, `(X(X…)?)?`; an unbounded one loops.
                let mut skips = Vec::new();
                match r.max {
                    Some(hi) => {
                        for _ in r.min..hi {
                            let u = self.push_eps(&[HOLE, HOLE])?;
                            self.patch(exit, u);
                            let (s2, e2) = self.append(&t)?;
                            self.set_target(u, 0, s2);
                            skips.push(u);
                            exit = e2;
                        }
                    }
                    None if looping_last => {
                        let (s2, e2) = self.append(&t)?;
                        self.patch(exit, s2);
                        let u = self.push_eps(&[s2, HOLE])?;
                        self.patch(e2, u);
                        skips.push(u);
                    }
                    None => {
                        let u = self.push_eps(&[HOLE, HOLE])?;
                        self.patch(exit, u);
                        let (s2, e2) = self.append(&t)?;
                        self.set_target(u, 0, s2);
                        self.patch(e2, u);
                        skips.push(u);
                    }
                }
                let end = self.push_eps(&[HOLE])?;
                if r.max.is_some() {
                    self.patch(exit, end);
                }
                for u in skips {
                    self.set_target(u, 1, end);
                }
                Ok((first, end))
            }
            // Leaves hold no repetition (no copies).
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {
                self.import(hir, true)
            }
        }
    }

    /// Bypass the ε states with one target (the pieces' exits and junctions, which
    /// `regex-automata`'s own builder never leaves): every edge to one goes where it leads.
    /// Each was a step of every ε-closure through it. The bypassed states stay, unreachable
    /// (dropping them would renumber 100,000-state NFAs for a few bytes each).
    fn bypass_junctions(&mut self) {
        let n = self.nodes.len();
        // Where each state really leads (a chain of one-target ε states followed to its end;
        // a cycle of them, which matches nothing more, stops where it closes).
        let mut to: Vec<u32> = (0..n as u32).collect();
        // 0: not resolved, 1: on the current chain, 2: resolved.
        let mut mark = vec![0u8; n];
        let mut chain = Vec::new();
        for q in 0..n {
            let mut t = q as u32;
            let end = loop {
                match mark[t as usize] {
                    2 => break to[t as usize],
                    1 => break t, // a cycle of one-target ε states
                    _ => {}
                }
                let next = match self.nodes[t as usize] {
                    Node::Eps { at, len: 1 } if self.eps[at as usize] != HOLE => {
                        self.eps[at as usize]
                    }
                    _ => break t,
                };
                mark[t as usize] = 1;
                chain.push(t);
                t = next;
            };
            for c in chain.drain(..) {
                to[c as usize] = end;
                mark[c as usize] = 2;
            }
            if mark[q] != 2 {
                to[q] = end;
                mark[q] = 2;
            }
        }
        for x in &mut self.trans {
            x.next = to[x.next as usize];
        }
        for x in &mut self.eps {
            if *x != HOLE {
                *x = to[*x as usize];
            }
        }
        self.start = to[self.start as usize];
    }

    /// Fill exit state `exit`'s open target.
    fn patch(&mut self, exit: u32, target: u32) {
        self.set_target(exit, 0, target);
    }

    /// Set ε state `q`'s `k`-th target.
    fn set_target(&mut self, q: u32, k: usize, target: u32) {
        match self.nodes[q as usize] {
            Node::Eps { at, .. } => self.eps[at as usize + k] = target,
            _ => unreachable!("only ε states have open targets"),
        }
    }

    /// A copy of template `t` (its states shifted to the end); its `(start, exit)`.
    fn append(&mut self, t: &Nfa) -> Result<(u32, u32), NfaError> {
        let base = self.nodes.len() as u32;
        let map = |q: u32| if q == HOLE { HOLE } else { q + base };
        let (tb, eb) = (self.trans.len() as u32, self.eps.len() as u32);
        self.trans.extend(t.trans.iter().map(|x| Transition {
            next: map(x.next),
            ..*x
        }));
        self.eps.extend(t.eps.iter().map(|&q| map(q)));
        self.nodes.extend(t.nodes.iter().map(|n| match *n {
            Node::Bytes { at, len } => Node::Bytes { at: at + tb, len },
            Node::Eps { at, len } => Node::Eps { at: at + eb, len },
            other => other,
        }));
        self.check_size()?;
        Ok((t.start + base, t.exit + base))
    }

    /// `regex-automata`'s NFA of `hir`: `(start, exit)`, the exit its match state made an
    /// open ε state when `open` (else it stays the match state).
    fn import(&mut self, hir: &Hir, open: bool) -> Result<(u32, u32), NfaError> {
        let used = self.memory_bytes();
        let nfa = thompson_nfa(
            hir,
            Some(self.limit.saturating_sub(used)),
            false,
            thompson::WhichCaptures::None,
        )
        .map_err(NfaError::Compile)?;
        if !nfa.look_set_any().is_empty() {
            return Err(NfaError::LookAround);
        }
        self.import_nfa(&nfa, open)
    }

    /// The states of `nfa` reachable from its anchored start (not its unanchored prefix),
    /// appended in their original order: `regex-automata` numbers states so that an
    /// ε-closure mostly comes out in increasing order, which keeps sorting the lazy DFA's
    /// sets cheap (a breadth-first renumbering made them 60 % slower to build).
    fn import_nfa(&mut self, nfa: &NFA, open: bool) -> Result<(u32, u32), NfaError> {
        let n = nfa.states().len();
        let mut reach = vec![false; n];
        let mut stack = vec![nfa.start_anchored()];
        reach[nfa.start_anchored().as_usize()] = true;
        let mut succ = Vec::new();
        while let Some(q) = stack.pop() {
            succ.clear();
            match &nfa.states()[q.as_usize()] {
                State::ByteRange { trans } => succ.push(trans.next),
                State::Sparse(sp) => succ.extend(sp.transitions.iter().map(|t| t.next)),
                State::Dense(d) => succ.extend(d.transitions.iter().filter(|t| t.as_usize() != 0)),
                State::Union { alternates } => succ.extend(alternates.iter().copied()),
                State::BinaryUnion { alt1, alt2 } => succ.extend([*alt1, *alt2]),
                State::Capture { next, .. } | State::Look { next, .. } => succ.push(*next),
                State::Match { .. } | State::Fail => {}
            }
            for &t in &succ {
                if !std::mem::replace(&mut reach[t.as_usize()], true) {
                    stack.push(t);
                }
            }
        }
        let base = self.nodes.len() as u32;
        let mut new_id = vec![u32::MAX; n];
        let mut k = base;
        for q in 0..n {
            if reach[q] {
                new_id[q] = k;
                k += 1;
            }
        }
        let mut exit = HOLE;
        let id = |s: regex_automata::util::primitives::StateID| new_id[s.as_usize()];
        for st in nfa
            .states()
            .iter()
            .zip(&reach)
            .filter(|(_, r)| **r)
            .map(|(s, _)| s)
        {
            let at = self.trans.len() as u32;
            let eps_at = self.eps.len() as u32;
            let node = match st {
                State::ByteRange { trans } => {
                    self.trans.push(Transition {
                        lo: trans.start,
                        hi: trans.end,
                        next: id(trans.next),
                    });
                    Node::Bytes { at, len: 1 }
                }
                State::Sparse(sp) => {
                    self.trans.extend(sp.transitions.iter().map(|t| Transition {
                        lo: t.start,
                        hi: t.end,
                        next: id(t.next),
                    }));
                    Node::Bytes {
                        at,
                        len: sp.transitions.len() as u32,
                    }
                }
                State::Dense(d) => {
                    // Runs of equal targets (state 0: no transition).
                    let mut b = 0usize;
                    while b < 256 {
                        let t = d.transitions[b];
                        let mut e = b;
                        while e + 1 < 256 && d.transitions[e + 1] == t {
                            e += 1;
                        }
                        if t.as_usize() != 0 {
                            self.trans.push(Transition {
                                lo: b as u8,
                                hi: e as u8,
                                next: id(t),
                            });
                        }
                        b = e + 1;
                    }
                    Node::Bytes {
                        at,
                        len: self.trans.len() as u32 - at,
                    }
                }
                State::Union { alternates } => {
                    self.eps.extend(alternates.iter().map(|&s| id(s)));
                    Node::Eps {
                        at: eps_at,
                        len: alternates.len() as u32,
                    }
                }
                State::BinaryUnion { alt1, alt2 } => {
                    self.eps.extend([id(*alt1), id(*alt2)]);
                    Node::Eps { at: eps_at, len: 2 }
                }
                State::Capture { next, .. } => {
                    self.eps.push(id(*next));
                    Node::Eps { at: eps_at, len: 1 }
                }
                State::Match { .. } => {
                    exit = self.nodes.len() as u32;
                    if open {
                        self.eps.push(HOLE);
                        Node::Eps { at: eps_at, len: 1 }
                    } else {
                        Node::Match
                    }
                }
                State::Look { .. } => return Err(NfaError::LookAround),
                State::Fail => Node::Fail,
            };
            self.nodes.push(node);
        }
        self.check_size()?;
        if exit == HOLE && open {
            // No match state: the piece matches nothing; an exit no state reaches.
            exit = self.push_eps(&[HOLE])?;
        }
        Ok((id(nfa.start_anchored()), exit))
    }
}

/// The nodes of one HIR that hold a repetition counted to [`COPY_MIN`] or more copies (by
/// address, valid while that HIR is borrowed), found in one walk. [`Nfa::piece`] asks this
/// of every node it descends through: walking the subtree each time was quadratic in the
/// depth, and a key set's trie is deep (7–9 % of building a big schema's scanner).
struct Copies(crate::hash::WordHashSet<usize>);

impl Copies {
    fn of(hir: &Hir) -> Copies {
        fn walk(h: &Hir, set: &mut crate::hash::WordHashSet<usize>) -> bool {
            // Every child is walked (no short cut): `piece` asks about the children too.
            let held = match h.kind() {
                HirKind::Repetition(r) => walk(&r.sub, set) | (r.max.unwrap_or(r.min) >= COPY_MIN),
                HirKind::Concat(s) | HirKind::Alternation(s) => {
                    s.iter().fold(false, |any, x| walk(x, set) | any)
                }
                HirKind::Capture(c) => walk(&c.sub, set),
                HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => {
                    false
                }
            };
            if held {
                set.insert(h as *const Hir as usize);
            }
            held
        }
        let mut set = Default::default();
        walk(hir, &mut set);
        Copies(set)
    }

    /// Whether `h` (a node of the HIR this was built from) holds such a repetition.
    fn holds(&self, h: &Hir) -> bool {
        self.0.contains(&(h as *const Hir as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// One walk marks exactly the nodes the recursive definition says hold copies, at every
    /// depth (the NFA builder asks about inner nodes too).
    #[test]
    fn copies_marks_every_node_the_definition_marks() {
        fn naive(h: &Hir) -> bool {
            match h.kind() {
                HirKind::Repetition(r) => r.max.unwrap_or(r.min) >= COPY_MIN || naive(&r.sub),
                HirKind::Concat(s) | HirKind::Alternation(s) => s.iter().any(naive),
                HirKind::Capture(c) => naive(&c.sub),
                _ => false,
            }
        }
        fn every(h: &Hir, f: &mut dyn FnMut(&Hir)) {
            f(h);
            match h.kind() {
                HirKind::Repetition(r) => every(&r.sub, f),
                HirKind::Concat(s) | HirKind::Alternation(s) => s.iter().for_each(|x| every(x, f)),
                HirKind::Capture(c) => every(&c.sub, f),
                _ => {}
            }
        }
        let mut marked = 0;
        for re in [
            "(?:a[0-9]{0,6}b)+c(?:d|e{2})",
            "x(?:y(?:z[0-9]{4}|w)|v{3})*u",
            "(?:(?:a{5})?b)*|c{1,3}|(?:d(?:e(?:f{0,9})))",
            "[a-z]+",
            "\\[[ \\t]{0,4}(?:[0-9]+[ \\t]{0,4},[ \\t]{0,4})*\\]",
        ] {
            let h = regex_syntax::ParserBuilder::new()
                .build()
                .parse(re)
                .unwrap();
            let copies = Copies::of(&h);
            every(&h, &mut |n| {
                assert_eq!(copies.holds(n), naive(n), "{re}: {n:?}");
                marked += usize::from(naive(n));
            });
        }
        assert!(marked > 10, "the cases mark inner nodes");
    }

    /// The per-thread compiler gives the NFA a fresh compiler gives, whatever it built
    /// before, and no setting of an earlier build (a size limit, captures) carries over.
    #[test]
    fn a_reused_thompson_compiler_builds_what_a_fresh_one_builds() {
        let parse = |re: &str| {
            regex_syntax::ParserBuilder::new()
                .utf8(false)
                .build()
                .parse(re)
                .unwrap()
        };
        let fresh = |h: &regex_syntax::hir::Hir, limit, captures| {
            thompson::Compiler::new()
                .configure(
                    thompson::Config::new()
                        .utf8(false)
                        .which_captures(captures)
                        .nfa_size_limit(limit),
                )
                .build_from_hir(h)
                .map(|n| format!("{n:?}"))
                .map_err(|e| e.to_string())
        };
        let big = parse("(é|[a-zα-ω]|\\\\u[0-9a-f]{4}){0,300}");
        let cases = [
            (parse("(ab|c)*"), None, thompson::WhichCaptures::All),
            (big.clone(), Some(1000), thompson::WhichCaptures::None),
            (big.clone(), None, thompson::WhichCaptures::None),
            (
                parse("(x)(yz)?[^\\x00-\\x7f]"),
                None,
                thompson::WhichCaptures::All,
            ),
            (
                parse("(x)(yz)?[^\\x00-\\x7f]"),
                None,
                thompson::WhichCaptures::None,
            ),
            (
                parse("[0-9]+(\\.[0-9]+)?"),
                Some(1 << 20),
                thompson::WhichCaptures::None,
            ),
        ];
        for _ in 0..2 {
            for (h, limit, captures) in &cases {
                let reused = thompson_nfa(h, *limit, false, *captures)
                    .map(|n| format!("{n:?}"))
                    .map_err(|e| e.to_string());
                assert_eq!(reused, fresh(h, *limit, *captures), "{h:?} {limit:?}");
            }
        }
        assert!(thompson_nfa(&big, Some(1000), false, thompson::WhichCaptures::None).is_err());
    }

    /// The number of states of the subset construction over `n` (live or not), and whether
    /// it accepts each string of `probe`.
    fn subset_states(n: &Nfa, probe: &[&[u8]]) -> (usize, Vec<bool>) {
        let closure = |seeds: Vec<u32>| {
            let mut seen = vec![false; n.len()];
            let mut stack = seeds;
            let mut out = Vec::new();
            while let Some(q) = stack.pop() {
                if std::mem::replace(&mut seen[q as usize], true) {
                    continue;
                }
                if n.is_important(q) {
                    out.push(q);
                }
                stack.extend(n.epsilons(q));
            }
            out.sort_unstable();
            out
        };
        let step = |set: &[u32], b: u8| closure(set.iter().filter_map(|&q| n.step(q, b)).collect());
        let start = closure(vec![n.start()]);
        let mut ids = HashMap::from([(start.clone(), 0)]);
        let mut order = vec![start.clone()];
        let mut i = 0;
        while i < order.len() {
            for b in 0..=255u8 {
                let next = step(&order[i], b);
                if !next.is_empty() && !ids.contains_key(&next) {
                    ids.insert(next.clone(), order.len());
                    order.push(next);
                }
            }
            i += 1;
        }
        let accepts = probe
            .iter()
            .map(|w| {
                let set = w.iter().fold(start.clone(), |s, &b| step(&s, b));
                set.iter().any(|&q| n.is_match(q))
            })
            .collect();
        (order.len(), accepts)
    }

    /// Copies give the subset construction the same states, and the same language, as one
    /// `regex-automata` compile of the whole expression (a looping copy after `m` mandatory
    /// ones once doubled the DFA of `(…)+`).
    #[test]
    fn copies_give_the_same_dfa_as_one_compile() {
        let probe: [&[u8]; 8] = [
            b"", b"a1b", b"a12b", b"a1ba2b", b"ab", b"1.5", b"[ 1 ]", b"xx",
        ];
        for re in [
            "(?:a[0-9]{0,6}b)+",
            "(?:a[0-9]{0,6}b){2,}",
            "(?:a[0-9]{0,6}b)*",
            "[1-9][0-9]{0,6}(?:\\.[0-9]+)?",
            "\\[[ \\t]{0,4}(?:[0-9]+[ \\t]{0,4},[ \\t]{0,4})*[0-9]*[ \\t]{0,4}\\]",
            "(?:ab|x{4}){2,5}",
            "(?:a{4}|b)",
            "(?:x{0}z?){4}",
        ] {
            let h = regex_syntax::ParserBuilder::new()
                .build()
                .parse(re)
                .unwrap();
            assert!(Copies::of(&h).holds(&h), "{re}");
            let copies = Nfa::compile(&h, 1 << 24).unwrap();
            let mut plain = Nfa {
                limit: 1 << 24,
                ..Nfa::default()
            };
            plain.start = plain.import(&h, false).unwrap().0;
            assert_eq!(
                subset_states(&copies, &probe),
                subset_states(&plain, &probe),
                "{re}"
            );
        }
    }

    #[test]
    fn the_size_limit_is_an_error_not_an_allocation() {
        let h = regex_syntax::ParserBuilder::new()
            .build()
            .parse("(?:[a-z\\p{Greek}]{1000}){1000}")
            .unwrap();
        assert!(matches!(
            Nfa::compile(&h, 1 << 20),
            Err(NfaError::Compile(_))
        ));
    }
}
