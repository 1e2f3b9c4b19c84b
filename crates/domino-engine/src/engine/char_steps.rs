//! Whole-character steps of one terminal's DFA, so a tree build can take a trie subtree at
//! once.
//!
//! A component tree's build ([`super::tree`]) spends its time inside open-ended terminals: a
//! JSON string's body accepts almost every token, so its walk would visit most of the
//! vocabulary trie (Gemma 3's has 588k nodes: ~11 ms per walk). The build already takes a
//! subtree in one jump when every byte in it *loops* on the walk's state. That misses the two
//! commonest cases:
//!
//! - **non-ASCII text**: a multi-byte character passes through intermediate DFA states, so no
//!   byte ≥ 0x80 loops, although every whole character does;
//! - **counted repetitions** (`maxLength`, `[^"]{0,128}`): each character moves the DFA to
//!   the next count, so nothing loops, although every character of the subtree moves it to
//!   the *same* next state.
//!
//! [`CharSteps::step`] answers, for a DFA state `s` and the byte set of a trie subtree, the
//! one state that *every whole character* made of those bytes leads `s` to — or [`DEAD`] when
//! they do not all agree, when one dies, or when the middle of a multi-byte character is an
//! accepting state (a boundary there would have to be recorded). The tree build then follows
//! the chain `s → s₁ → s₂ …` for as many characters as the subtree's longest token has
//! (characters, not bytes: [`super::trie::VocabTrie::char_start`]), and takes the subtree when
//! no state of the chain before a token's end accepts (no boundary inside it); each token
//! ends in the chain state of its character count.
//!
//! A **searched `pattern`** defeats that: inside a string that must contain `[0-9a-f]{8}-…`,
//! a hex digit advances a partial match and any other character restarts it, so characters
//! lead to *different* live states. [`CharSteps::targets`] gives the set of states the
//! subtree's characters lead a state to, and the tree build then follows a chain of state
//! *sets* (at most 16 states per length) for the subtrees where the one-state chain failed:
//! taken when no state of any set dies or could end the terminal before a byte of the
//! subtree. For sets of several states it uses only transitions already built (building
//! transitions no token takes cost more than the walk saved, measured on `format: uri`).
//!
//! Exactness: a subtree is only taken when its tokens are well-formed UTF-8 from a character
//! boundary (the trie's `char_start`), so every token is a sequence of whole characters drawn
//! from the subtree's bytes, and every such character moves the state as the chain says.
//! Well-formed multi-byte characters are enumerated by their lead/continuation ranges
//! (Unicode Table 3-7), per lead byte: a DFA that treats some characters apart (a pattern
//! excluding `é`, a `.` refusing U+2028) gets [`DEAD`] for the subtrees that hold their lead
//! byte ([`super::trie::VocabTrie::subtree_leads`]), which the walk goes through byte by byte,
//! and the usual answer for the others.
//!
//! Cost: per DFA state, the transitions of the bytes queries hold (each computed once per
//! grammar: the tree cache lends one memo to every build, `tree::BuildMemo`), plus ~600 for
//! the multi-byte classes when a query holds non-ASCII bytes; memory ~100 bytes per state
//! asked about, kept as long as the grammar's trees.

use crate::grammar::dfa::{DEAD, TerminalDfa};

/// The subtree byte-set bit of every byte ≥ 0x80 (and of DEL, which a clean subtree never
/// holds: [`super::trie::VocabTrie::char_start`]), i.e. of every multi-byte character.
const OTHER_BIT: usize = 127;

/// An inclusive byte range.
type ByteRange = (u8, u8);

/// Well-formed UTF-8 multi-byte sequences: lead byte range, then continuation byte ranges.
const MULTI_BYTE: &[(u8, u8, &[ByteRange])] = &[
    (0xC2, 0xDF, &[(0x80, 0xBF)]),
    (0xE0, 0xE0, &[(0xA0, 0xBF), (0x80, 0xBF)]),
    (0xE1, 0xEC, &[(0x80, 0xBF), (0x80, 0xBF)]),
    (0xED, 0xED, &[(0x80, 0x9F), (0x80, 0xBF)]),
    (0xEE, 0xEF, &[(0x80, 0xBF), (0x80, 0xBF)]),
    (0xF0, 0xF0, &[(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
    (0xF1, 0xF3, &[(0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
    (0xF4, 0xF4, &[(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]),
];

/// Most distinct intermediate states one multi-byte class may reach before the state is
/// declared non-uniform (a DFA that distinguishes many characters gains nothing here).
const MAX_FRONT: usize = 8;

/// One state's character steps, filled in as queries need them: ASCII bytes (0..=126) grouped
/// by target, bit 127 meaning "every multi-byte character" (in the group of their common
/// target, when they have one). Only the bytes a query holds are computed (a lazily built DFA
/// creates a state per new transition; most states are asked about a few bytes).
#[derive(Default)]
struct StateSteps {
    /// Bits whose target is known (in `classes`, or dead).
    known: [u64; 2],
    /// Whether the state accepts: 0 not asked yet, 1 no, 2 yes.
    accepting: u8,
    /// Whether every multi-byte character dies at its lead byte: 0 not asked yet, 1 no, 2 yes.
    multi_dead: u8,
    /// [`multi_byte_targets`], once asked: the target of bit 127, and the lead bytes
    /// ([`super::trie::lead_bit`]) whose characters all step to it.
    multi: Option<(u32, u64)>,
    /// [`CharSteps::loops`], once asked.
    loops: Option<[u64; 2]>,
    /// `(bytes as subtree bits, target)`; targets distinct, never [`DEAD`].
    classes: Vec<([u64; 2], u32)>,
    /// The union of the classes' bytes: the known bits that live.
    live: [u64; 2],
}

/// The indices of the set bits of a subtree byte set, lowest first.
fn bit_indices(bits: [u64; 2]) -> impl Iterator<Item = usize> {
    (0..2).flat_map(move |w| {
        let mut word = bits[w];
        std::iter::from_fn(move || {
            (word != 0).then(|| {
                let bit = w * 64 + word.trailing_zeros() as usize;
                word &= word - 1;
                bit
            })
        })
    })
}

/// [`StateSteps::class`] of a dead bit.
const NO_CLASS: u8 = u8::MAX;

/// Memoised [`CharSteps::step`] answers for one terminal's DFA.
///
/// The answers are facts about the DFA alone, so the tree cache keeps one per terminal for
/// every build of that terminal's components: a counted string (`maxLength`) reaches a new
/// count, hence a new component and a new tree, at every token, and each build used to
/// recompute the multi-byte steps (~600 transitions) of every state on its chains.
#[derive(Default)]
pub(crate) struct CharSteps {
    /// Per page of [`PAGE`] state numbers, per state, its memo. Paged because it is kept as
    /// long as the grammar's trees: a lazily built DFA shared by every grammar of the process
    /// numbers its states as all of them reach states, so a flat vector indexed by state
    /// would hold a slot for every state any grammar built.
    pages: Vec<Option<Box<Page>>>,
    /// Pages and states memoised (for [`CharSteps::memory_bytes`]).
    num_pages: usize,
    states: usize,
    /// [`CharSteps::loops`]' last answer: a build asks it for sibling after sibling, and
    /// siblings share their parent's state (35.4M → 7.9M memo lookups over 250 schemas on
    /// Gemma 3).
    last_loops: Option<(u32, [u64; 2])>,
}

/// States per page of [`CharSteps::pages`].
const PAGE: usize = 64;

/// One page of [`CharSteps::pages`].
type Page = [Option<Box<StateSteps>>; PAGE];

impl CharSteps {
    /// State `s`'s memo, created on first use.
    #[inline]
    fn state(&mut self, s: u32) -> &mut StateSteps {
        let (p, i) = (s as usize / PAGE, s as usize % PAGE);
        // (Two lookups, as the borrow checker wants them: the memo is there on almost every
        // call, and this is asked several times per trie node a chain tries.)
        if matches!(self.pages.get(p), Some(Some(page)) if page[i].is_some()) {
            return (self.pages[p]
                .as_mut()
                .and_then(|page| page[i].as_deref_mut()))
            .expect("checked just above");
        }
        self.new_state(s)
    }

    /// [`CharSteps::state`] when `s` has no memo yet (or its page none).
    #[cold]
    #[inline(never)]
    fn new_state(&mut self, s: u32) -> &mut StateSteps {
        let (p, i) = (s as usize / PAGE, s as usize % PAGE);
        if self.pages.len() <= p {
            self.pages.resize_with(p + 1, || None);
        }
        let page = &mut self.pages[p];
        if page.is_none() {
            self.num_pages += 1;
        }
        let slot = &mut page.get_or_insert_with(|| Box::new([const { None }; PAGE]))[i];
        if slot.is_none() {
            self.states += 1;
        }
        slot.get_or_insert_with(Box::default)
    }

    /// Bytes held (the pages, the per-state memos and their classes).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.pages.capacity() * 8
            + self.num_pages * PAGE * 8
            + self.states * (std::mem::size_of::<StateSteps>() + 4 * 20)
    }

    /// The bytes that loop on `s` when it does not accept, as trie subtree bits (bit 127:
    /// DEL and every byte ≥ 0x80, set when all of them loop); none when `s` accepts.
    #[inline]
    pub(super) fn loops(&mut self, dfa: &TerminalDfa, s: u32) -> [u64; 2] {
        match self.last_loops {
            Some((last, l)) if last == s => l,
            _ => self.loops_memo(dfa, s),
        }
    }

    /// [`CharSteps::loops`] from the state's memo, computed on first use.
    #[inline(never)]
    fn loops_memo(&mut self, dfa: &TerminalDfa, s: u32) -> [u64; 2] {
        let steps = self.state(s);
        let l = *steps.loops.get_or_insert_with(|| {
            let mut m = [0u64; 2];
            if !dfa.is_accepting(s) {
                for c in 0..127u8 {
                    if dfa.next(s, c) == s {
                        let (w, bit) = super::trie::byte_bit(c);
                        m[w] |= bit;
                    }
                }
                if (127..=255u8).all(|c| dfa.next(s, c) == s) {
                    let (w, bit) = super::trie::byte_bit(127);
                    m[w] |= bit;
                }
            }
            m
        });
        self.last_loops = Some((s, l));
        l
    }

    /// Whether `s` accepts (memoised: a lazily built DFA's answer is a few lookups).
    pub(super) fn accepting(&mut self, dfa: &TerminalDfa, s: u32) -> bool {
        let steps = self.state(s);
        if steps.accepting == 0 {
            steps.accepting = 1 + dfa.is_accepting(s) as u8;
        }
        steps.accepting == 2
    }

    /// The state every whole character made of the bytes `sub` (the bits of a *clean* trie
    /// subtree: no DEL, so bit 127 is the multi-byte characters) leads `s` to, or [`DEAD`] when
    /// they do not all lead to one live state (see the module doc).
    /// `s` itself may be accepting: whether a boundary falls before the character is the
    /// caller's question.
    pub(super) fn step(&mut self, dfa: &TerminalDfa, s: u32, sub: [u64; 2], leads: u64) -> u32 {
        let steps = self.state(s);
        if !steps.leads_step_alike(dfa, s, sub, leads) {
            return DEAD;
        }
        let first = if sub[0] != 0 {
            sub[0].trailing_zeros() as usize
        } else if sub[1] != 0 {
            64 + sub[1].trailing_zeros() as usize
        } else {
            return DEAD;
        };
        // The first byte's target, then every other byte of `sub` against it, stopping at the
        // first that differs (a failing query computes few transitions: a lazily built DFA
        // creates a state per new one).
        let c = steps.class(dfa, s, first);
        if c == NO_CLASS {
            return DEAD;
        }
        let (mask, target) = steps.classes[c as usize];
        if (sub[0] & steps.known[0] & !mask[0]) | (sub[1] & steps.known[1] & !mask[1]) != 0 {
            return DEAD;
        }
        let missing = [sub[0] & !steps.known[0], sub[1] & !steps.known[1]];
        for bit in bit_indices(missing) {
            if steps.class(dfa, s, bit) != c {
                return DEAD;
            }
        }
        target
    }

    /// Whether *every* whole character made of the bytes `sub` (the bits of a clean trie
    /// subtree) dies from `s`: then a chain that reached `s` ends there for the subtree's
    /// longer tokens (none of them continues the terminal; whether one could end it at `s`
    /// is the caller's question), where [`CharSteps::step`] only says "no one next state".
    #[cold]
    #[inline(never)]
    pub(super) fn all_die(&mut self, dfa: &TerminalDfa, s: u32, sub: [u64; 2]) -> bool {
        let steps = self.state(s);
        // A known bit that lives answers at once (bit 127's class is not the question here).
        let asked = [sub[0], sub[1] & !(1 << (OTHER_BIT % 64))];
        if (asked[0] & steps.live[0]) | (asked[1] & steps.live[1]) != 0 {
            return false;
        }
        // Known bits left are dead: only the unknown ones, and bit 127, remain.
        let rest = [
            sub[0] & !steps.known[0],
            (sub[1] & !steps.known[1]) | (sub[1] & 1 << (OTHER_BIT % 64)),
        ];
        bit_indices(rest).all(|bit| match bit {
            // A multi-byte character dies at its lead byte or later; all die at the lead
            // byte exactly when no lead byte of a well-formed one lives (memoised).
            OTHER_BIT => {
                if steps.multi_dead == 0 {
                    let dead = MULTI_BYTE
                        .iter()
                        .all(|&(lo, hi, _)| (lo..=hi).all(|b| dfa.next(s, b) == DEAD));
                    steps.multi_dead = 1 + dead as u8;
                }
                steps.multi_dead == 2
            }
            _ => steps.class(dfa, s, bit) == NO_CLASS,
        })
    }

    /// Add to `out` (kept free of duplicates) every state that a whole character made of the
    /// bytes `sub` (the bits of a *clean* trie subtree: no DEL, so bit 127 is the multi-byte
    /// characters) leads `s` to. `false` when one of them dies, when the multi-byte characters
    /// do not share one target, or (with `build` false) when a transition is not built yet.
    /// Stops early, answering `true`, once `out` holds more than `cap` states: the caller
    /// wanted at most `cap` (with `cap` 1 and an empty `out`: "the one state every character
    /// leads `s` to", found without computing the rest once two disagree).
    /// `s` itself may be accepting: whether a boundary falls before the character is the
    /// caller's question.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn targets(
        &mut self,
        dfa: &TerminalDfa,
        s: u32,
        sub: [u64; 2],
        leads: u64,
        build: bool,
        cap: usize,
        out: &mut Vec<u32>,
    ) -> bool {
        let steps = self.state(s);
        if sub == [0; 2] || !steps.leads_step_alike(dfa, s, sub, leads) {
            return false;
        }
        // Bits known already: their classes' targets, and a known bit in no class died.
        let mut covered = [0u64; 2];
        for &(mask, target) in &steps.classes {
            covered[0] |= mask[0];
            covered[1] |= mask[1];
            if (mask[0] & sub[0]) | (mask[1] & sub[1]) != 0 && !out.contains(&target) {
                out.push(target);
                if out.len() > cap {
                    return true;
                }
            }
        }
        if (sub[0] & steps.known[0] & !covered[0]) | (sub[1] & steps.known[1] & !covered[1]) != 0 {
            return false;
        }
        // The rest one by one, stopping at the first that dies or is one target too many (a
        // lazily built DFA creates a state per new transition: a failing query builds few).
        let missing = [sub[0] & !steps.known[0], sub[1] & !steps.known[1]];
        for bit in bit_indices(missing) {
            let class = match build {
                true => steps.class(dfa, s, bit),
                false => match steps.class_if_built(dfa, s, bit) {
                    Some(c) => c,
                    None => return false,
                },
            };
            if class == NO_CLASS {
                return false;
            }
            let target = steps.classes[class as usize].1;
            if !out.contains(&target) {
                out.push(target);
                if out.len() > cap {
                    return true;
                }
            }
        }
        true
    }
}

impl StateSteps {
    /// Whether the multi-byte characters `sub` may hold (bit 127; their lead bytes in
    /// `leads`) all step to bit 127's target: every lead byte is one whose characters do.
    #[inline]
    fn leads_step_alike(&mut self, dfa: &TerminalDfa, s: u32, sub: [u64; 2], leads: u64) -> bool {
        if sub[1] >> 63 == 0 {
            return true;
        }
        let (_, alike) = *self.multi.get_or_insert_with(|| multi_byte_targets(dfa, s));
        leads & !alike == 0
    }

    /// The class of a known bit: the one whose bytes hold it ([`NO_CLASS`]: none, it dies).
    /// (A scan of a few classes; a per-bit index was 128 bytes per state, kept as long as
    /// the grammar's trees.)
    #[inline]
    fn known_class(&self, bit: usize) -> u8 {
        let (w, b) = (bit / 64, 1u64 << (bit % 64));
        match self.classes.iter().position(|c| c.0[w] & b != 0) {
            Some(c) => c as u8,
            None => NO_CLASS,
        }
    }

    /// [`StateSteps::class`] when the bit's transitions are built already, else `None`.
    fn class_if_built(&mut self, dfa: &TerminalDfa, s: u32, bit: usize) -> Option<u8> {
        let (w, b) = (bit / 64, 1u64 << (bit % 64));
        if self.known[w] & b != 0 {
            return Some(self.known_class(bit));
        }
        // The multi-byte characters are computed (and built) as `step` does: asking whether
        // their thousands of transitions are built would cost as much on every query.
        let built = bit == OTHER_BIT || dfa.next_if_built(s, bit as u8).is_some();
        built.then(|| self.class(dfa, s, bit))
    }

    /// The class (index in `classes`) of one bit, its target computed on first use;
    /// [`NO_CLASS`] when it dies.
    fn class(&mut self, dfa: &TerminalDfa, s: u32, bit: usize) -> u8 {
        let (w, b) = (bit / 64, 1u64 << (bit % 64));
        if self.known[w] & b != 0 {
            return self.known_class(bit);
        }
        let target = if bit == OTHER_BIT {
            self.multi
                .get_or_insert_with(|| multi_byte_targets(dfa, s))
                .0
        } else {
            dfa.next(s, bit as u8)
        };
        self.known[w] |= b;
        if target == DEAD {
            return NO_CLASS;
        }
        let c = match self.classes.iter().position(|c| c.1 == target) {
            Some(c) => c,
            None => {
                self.classes.push(([0; 2], target));
                self.classes.len() - 1
            }
        };
        self.classes[c].0[w] |= b;
        self.live[w] |= b;
        // At most 128 bits, so at most 128 classes: an index fits in a byte below NO_CLASS.
        c as u8
    }
}

/// Bit 127's target from `s` and the lead bytes whose characters reach it: per lead byte,
/// the one state all its well-formed characters lead `s` to through non-accepting
/// intermediate states (if any); the target is the one most lead bytes share ([`DEAD`] when
/// none has one), and the mask holds those lead bytes ([`super::trie::lead_bit`]) and the
/// bytes that lead no character. A
/// subtree whose lead bytes are all in the mask steps alike; one holding another lead byte
/// (a `.` that refuses U+2028, lead `0xE2`) is walked byte by byte.
fn multi_byte_targets(dfa: &TerminalDfa, s: u32) -> (u32, u64) {
    // (target, lead-byte mask) per distinct target; completions by (state after the lead
    // byte, row of MULTI_BYTE): most lead bytes of a row lead to one state. Bytes of one
    // class step alike from every state, so each class is stepped once (`after_lead`) and
    // continuation ranges by one byte per class (`ClassReps`).
    let mut by_target: Vec<(u32, u64, u32)> = Vec::new();
    let mut completed: Vec<(u32, usize, u32)> = Vec::new();
    let mut after_lead: Vec<(u8, u32)> = Vec::new();
    let mut reps = ClassReps::default();
    for (row, &(lo, hi, conts)) in MULTI_BYTE.iter().enumerate() {
        for lead in lo..=hi {
            let class = dfa.byte_class(lead);
            let q = match after_lead.iter().find(|e| e.0 == class) {
                Some(e) => e.1,
                None => {
                    let q = dfa.next(s, lead);
                    after_lead.push((class, q));
                    q
                }
            };
            if q == DEAD {
                continue;
            }
            let t = match completed.iter().find(|c| c.0 == q && c.1 == row) {
                Some(c) => c.2,
                None => {
                    let t = complete_character(dfa, q, conts, &mut reps);
                    completed.push((q, row, t));
                    t
                }
            };
            if t == DEAD {
                continue;
            }
            match by_target.iter_mut().find(|e| e.0 == t) {
                Some(e) => {
                    e.1 |= super::trie::lead_bit(lead);
                    e.2 += 1;
                }
                None => by_target.push((t, super::trie::lead_bit(lead), 1)),
            }
        }
    }
    // The first of the most shared (deterministic: rows and lead bytes in order).
    let mut best = (DEAD, 0u64, 0u32);
    for &e in &by_target {
        if e.2 > best.2 {
            best = e;
        }
    }
    (best.0, best.1 | NO_CHARACTER_LEADS)
}

/// The [`super::trie::lead_bit`]s of the bytes that lead no well-formed character (`0xC0`,
/// `0xC1`, `0xF5..`): they constrain nothing, a clean subtree never holds them.
const NO_CHARACTER_LEADS: u64 = !(((1u64 << (0xF5 - 0xC0)) - 1) & !0b11);

/// One byte per byte class of a continuation range (the classes are the DFA's: bytes of one
/// class step alike from every state), per range asked, computed once per DFA query.
#[derive(Default)]
struct ClassReps {
    ranges: Vec<(ByteRange, Vec<u8>)>,
}

impl ClassReps {
    fn of(&mut self, dfa: &TerminalDfa, range: ByteRange) -> &[u8] {
        let i = match self.ranges.iter().position(|r| r.0 == range) {
            Some(i) => i,
            None => {
                let mut seen = [false; 256];
                let reps = (range.0..=range.1)
                    .filter(|&b| !std::mem::replace(&mut seen[dfa.byte_class(b) as usize], true))
                    .collect();
                self.ranges.push((range, reps));
                self.ranges.len() - 1
            }
        };
        &self.ranges[i].1
    }
}

/// The one state every continuation of a character leads `q` (the state after its lead
/// byte) to, `conts` the continuation byte ranges; [`DEAD`] when they disagree, one dies,
/// or an intermediate state accepts (a boundary there would split the character).
fn complete_character(dfa: &TerminalDfa, q: u32, conts: &[ByteRange], reps: &mut ClassReps) -> u32 {
    let mut front: Vec<u32> = vec![q];
    for &range in conts {
        let mut next: Vec<u32> = Vec::with_capacity(2);
        let bytes = reps.of(dfa, range);
        for &q in &front {
            if dfa.is_accepting(q) {
                return DEAD;
            }
            for &byte in bytes {
                let n = dfa.next(q, byte);
                if n == DEAD {
                    return DEAD;
                }
                if !next.contains(&n) {
                    if next.len() == MAX_FRONT {
                        return DEAD;
                    }
                    next.push(n);
                }
            }
        }
        front = next;
    }
    match front[..] {
        [t] => t,
        _ => DEAD,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_syntax::hir::Hir;

    fn dfa(pattern: &str) -> TerminalDfa {
        let hir: Hir = regex_syntax::Parser::new().parse(pattern).unwrap();
        TerminalDfa::new(&hir).unwrap()
    }

    fn bits(bytes: &[u8]) -> [u64; 2] {
        let mut m = [0u64; 2];
        for &b in bytes {
            let (w, bit) = super::super::trie::byte_bit(b);
            m[w] |= bit;
        }
        m
    }

    /// Every lead byte: the subtree may hold any multi-byte character.
    const ALL_LEADS: u64 = u64::MAX;

    /// The lead bytes of `bytes` ([`super::super::trie::lead_bit`]).
    fn leads(bytes: &[u8]) -> u64 {
        bytes
            .iter()
            .fold(0, |m, &b| m | super::super::trie::lead_bit(b))
    }

    /// Run `s` over `text`, byte by byte.
    fn run(d: &TerminalDfa, mut s: u32, text: &str) -> u32 {
        for &b in text.as_bytes() {
            s = d.next(s, b);
        }
        s
    }

    #[test]
    fn every_character_of_an_open_string_body_loops() {
        let d = dfa(r#""[^"\\]*""#);
        let body = d.next(0, b'"');
        let sub = bits("abc é€😀".as_bytes());
        assert_eq!(CharSteps::default().step(&d, body, sub, ALL_LEADS), body);
        for c in ["a", "é", "€", "😀"] {
            assert_eq!(run(&d, body, c), body, "{c:?}");
        }
        // A quote closes the string: not the same target as the body's characters.
        assert_eq!(CharSteps::default().step(&d, body, bits(b"a\""), 0), DEAD);
    }

    #[test]
    fn counted_repetitions_step_to_the_next_count() {
        let d = dfa(r#""[^"]{0,3}""#);
        let s0 = d.next(0, b'"');
        let mut steps = CharSteps::default();
        let sub = bits("xé😀".as_bytes());
        let s1 = steps.step(&d, s0, sub, ALL_LEADS);
        assert_ne!(s1, DEAD);
        for c in ["x", "é", "😀"] {
            assert_eq!(run(&d, s0, c), s1, "{c:?}");
        }
        let s2 = steps.step(&d, s1, sub, ALL_LEADS);
        let s3 = steps.step(&d, s2, sub, ALL_LEADS);
        assert_ne!(s3, DEAD);
        // The fourth character dies.
        assert_eq!(steps.step(&d, s3, sub, ALL_LEADS), DEAD);
    }

    #[test]
    fn a_pattern_that_tells_characters_apart_is_not_uniform() {
        // `é` is excluded: multi-byte characters do not all lead to the same state.
        let d = dfa(r#""[^"é]*""#);
        let body = d.next(0, b'"');
        let mut steps = CharSteps::default();
        let ae = "aé".as_bytes();
        assert_eq!(steps.step(&d, body, bits(ae), leads(ae)), DEAD);
        assert_eq!(steps.step(&d, body, bits(ae), ALL_LEADS), DEAD);
        // ASCII alone still loops, and so do characters of other lead bytes than `é`'s.
        assert_eq!(steps.step(&d, body, bits(b"ab"), 0), body);
        let euro = "a€😀".as_bytes();
        assert_eq!(steps.step(&d, body, bits(euro), leads(euro)), body);
        // Digits and letters lead to different states in `[0-9]+[a-z]*`'s start.
        let d = dfa("[0-9]+[a-z]*");
        assert_eq!(steps_new(&d, 0, b"1a"), DEAD);
        assert_ne!(steps_new(&d, 0, b"12"), DEAD);
    }

    fn steps_new(d: &TerminalDfa, s: u32, bytes: &[u8]) -> u32 {
        CharSteps::default().step(d, s, bits(bytes), leads(bytes))
    }

    #[test]
    fn a_searched_pattern_steps_to_a_set_of_states() {
        // Inside a string that must contain `ab`: `a` starts a partial match, another
        // character restarts it, `b` after `a` completes it.
        let d = dfa(r#""[a-z]*ab[a-z]*""#);
        let body = d.next(0, b'"');
        let mut steps = CharSteps::default();
        let sub = bits(b"abz");
        let mut out = Vec::new();
        assert!(steps.targets(&d, body, sub, 0, true, 16, &mut out));
        let mut want: Vec<u32> = ["a", "b", "z"].iter().map(|c| run(&d, body, c)).collect();
        want.sort_unstable();
        want.dedup();
        out.sort_unstable();
        assert_eq!(out, want);
        assert!(out.len() >= 2);
        // With room for one state it stops at the second, answering "more than one".
        let mut one = Vec::new();
        assert!(CharSteps::default().targets(&d, body, sub, 0, true, 1, &mut one));
        assert_eq!(one.len(), 2);
        // A quote's target dies on nothing, but `\x01` has no transition: not a target set.
        let mut dead = Vec::new();
        assert!(!steps.targets(&d, body, bits(b"a\x01"), 0, true, 16, &mut dead));
    }

    #[test]
    fn without_building_only_built_transitions_answer() {
        let d = dfa(r#""[^"]*ab[^"]*""#);
        let body = d.next(0, b'"');
        // Whatever was built before, once `body` has stepped on `q` the answer is there.
        let after = d.next(body, b'q');
        let mut out = Vec::new();
        assert!(CharSteps::default().targets(&d, body, bits(b"q"), 0, false, 16, &mut out));
        assert_eq!(out, vec![after]);
    }

    /// A pattern's `.` (ECMAScript: no line terminator) refuses U+2028 and U+2029, whose
    /// lead byte is `0xE2`: characters of every other lead byte still step alike, so only
    /// subtrees holding an `0xE2` are walked byte by byte (Snowplow's `^(\d+\.\d+\.\d+.*)$`
    /// took 11 ms per tree over Gemma 3's vocabulary before).
    #[test]
    fn one_lead_byte_told_apart_leaves_the_others_alike() {
        let d = dfa("\"[^\"\u{2028}\u{2029}]*\"");
        let body = d.next(0, b'"');
        let mut steps = CharSteps::default();
        for text in ["éa", "日本", "😀x", "Ж"] {
            let b = text.as_bytes();
            assert_eq!(steps.step(&d, body, bits(b), leads(b)), body, "{text:?}");
            assert_eq!(run(&d, body, text), body, "{text:?}");
        }
        // `–` (U+2013) shares the lead byte of U+2028: a subtree holding it is not alike.
        for text in ["–", "€", "a\u{2028}", "é–"] {
            let b = text.as_bytes();
            assert_eq!(steps.step(&d, body, bits(b), leads(b)), DEAD, "{text:?}");
            let mut out = Vec::new();
            assert!(!steps.targets(&d, body, bits(b), leads(b), true, 16, &mut out));
        }
        assert_eq!(run(&d, body, "\u{2028}"), DEAD);
        assert_eq!(run(&d, body, "–"), body);
    }

    #[test]
    fn no_character_leads_are_the_bytes_outside_the_utf8_table() {
        let leads = MULTI_BYTE.iter().fold(0u64, |m, &(lo, hi, _)| {
            (lo..=hi).fold(m, |m, b| m | super::super::trie::lead_bit(b))
        });
        assert_eq!(NO_CHARACTER_LEADS, !leads);
    }
}
