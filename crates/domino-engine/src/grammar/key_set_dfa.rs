//! The DFA of an object key that is none of a set of names, built from the names' trie.
//!
//! # Why
//! `additionalProperties` gives every object with named properties a terminal for "a JSON
//! string that is none of these keys" (the JSON Schema front end's `key_except`). Its HIR
//! spells the key trie with the ways of leaving it at every node, and the scanner compiled
//! that HIR into a Thompson NFA for a lazy DFA: on the slowest JSONSchemaBench schemas those
//! NFAs were nine tenths of building the scanner's terminal DFAs (428 key sets over the 30
//! schemas ranked 6–35 by time to first mask, about 110 µs each). The language is simple
//! enough to write its DFA down directly: one state per byte-trie node, and a fixed automaton
//! for the rest of the string once it has left the trie.
//!
//! # The language
//! For names whose characters are all *ordinary* — printable ASCII (`0x20..=0x7f`) other than
//! `"`, `\` and `/`, each spelled only raw — the key-exclusion HIR
//! (`json_schema::keys::except_hir`) is `"` (E | D·any) `"`:
//! - E: a path of the trie that is not a whole name, then the closing quote;
//! - D: a path of the trie, then one character that leaves it — an ASCII character that is
//!   not a child (nor `"` or `\`), any non-ASCII character, a short escape, or the `\u00XX`
//!   escape of a control character;
//! - any: any JSON string characters (raw, short escapes, `\u` escapes of scalar values,
//!   surrogate pairs), as `lexical::string_unit_pattern`.
//!
//! [`KeySetDfa`] is that language's DFA: state 0 before the opening quote, states
//! `1..=nodes` the trie nodes (1 is the root), then a fixed automaton for the rest of the
//! string (`Fixed`). Names with other characters (non-ASCII, control characters, `"`, `\`,
//! `/`: the HIR spells their alternative spellings specially) keep the HIR's lazy DFA
//! ([`KeySetDfa::new`] returns `None`).
//!
//! A terminal gets this DFA when its language is a key set kept as its names
//! ([`crate::grammar::regex_hir::RegexHir::key_set`], which the front end makes for ordinary
//! names): [`crate::grammar::dfa::TerminalDfa::for_terminal`] builds it from the names, and
//! the key set's HIR is never built unless something else reads it.
//!
//! # Example
//! ```
//! use domino_engine::grammar::dfa::DEAD;
//! use domino_engine::grammar::key_set_dfa::KeySetDfa;
//!
//! let names: Vec<Vec<char>> = ["id", "name"].iter().map(|n| n.chars().collect()).collect();
//! let dfa = KeySetDfa::new(&names).expect("plain ASCII names");
//! let accepts = |text: &str| {
//!     let mut s = 0;
//!     for &b in text.as_bytes() {
//!         s = dfa.next(s, b);
//!         if s == DEAD {
//!             return false;
//!         }
//!     }
//!     dfa.is_accepting(s)
//! };
//! assert!(accepts(r#""nam""#) && accepts(r#""names""#) && accepts(r#""x\u00e9""#));
//! assert!(!accepts(r#""name""#) && !accepts(r#""id""#) && !accepts(r#""id"#));
//! // A first character off the trie may not be a `\u` escape of a printable character
//! // (it could spell a name's), later ones may.
//! assert!(!accepts(r#""\u0069d""#) && accepts(r#""x\u0069d""#));
//! ```
//!
//! # Invariants
//! - Every state can reach the accepting state (a trie node can always leave the trie or
//!   close), as [`super::dfa::TerminalDfa`] requires.
//! - Bytes of one class ([`KeySetDfa::class`]) step alike from every state: each byte that is
//!   a trie child has a class of its own, the others are grouped by their transitions from
//!   the fixed states and by how they leave the trie.
//! - The language equals the HIR's: tested against the eager DFA of `except_hir` on random
//!   name sets (this module's tests), and through it every mask against the reference
//!   recognizer.
//! - State numbers depend only on the sorted names, so persisted data may name a state by
//!   its number.

use super::dfa::DEAD;

/// The fixed states after the trie nodes, numbered from `nodes + 1` in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Fixed {
    /// Between characters, the trie left: any character or the closing quote.
    Free,
    /// `\` leaving the trie: a short escape letter, or `u` of a control character's escape.
    DevEscape,
    /// `\u`, `\u0`, `\u00`, `\u00[01]` leaving the trie.
    DevU1,
    DevU2,
    DevU3,
    DevU4,
    /// `\` after the trie was left: any escape.
    Escape,
    /// `\u`: four hex digits of a non-surrogate, or a surrogate pair.
    U,
    /// Hex digits still to read before the character ends.
    Hex3,
    Hex2,
    Hex1,
    /// `\u` then `d`/`D`: `[0-7]` (a non-surrogate) or `[89abAB]` (a high surrogate).
    D,
    /// A high surrogate's last two hex digits, then `\u`, `d`/`D`, `[c-fC-F]` (its low one).
    Pair2,
    Pair1,
    PairBackslash,
    PairU,
    PairD,
    PairC,
    /// UTF-8: continuation bytes still to read.
    Cont1,
    Cont2,
    Cont3,
    /// UTF-8 lead bytes whose second byte is restricted (overlongs, surrogates, > U+10FFFF).
    AfterE0,
    AfterED,
    AfterF0,
    AfterF4,
    /// The closing quote was read.
    Accept,
}

/// Number of [`Fixed`] states.
const FIXED: usize = Fixed::Accept as usize + 1;
const ALL_FIXED: [Fixed; FIXED] = [
    Fixed::Free,
    Fixed::DevEscape,
    Fixed::DevU1,
    Fixed::DevU2,
    Fixed::DevU3,
    Fixed::DevU4,
    Fixed::Escape,
    Fixed::U,
    Fixed::Hex3,
    Fixed::Hex2,
    Fixed::Hex1,
    Fixed::D,
    Fixed::Pair2,
    Fixed::Pair1,
    Fixed::PairBackslash,
    Fixed::PairU,
    Fixed::PairD,
    Fixed::PairC,
    Fixed::Cont1,
    Fixed::Cont2,
    Fixed::Cont3,
    Fixed::AfterE0,
    Fixed::AfterED,
    Fixed::AfterF0,
    Fixed::AfterF4,
    Fixed::Accept,
];

/// The state a UTF-8 lead byte leads to (`None`: not a lead byte of a scalar value).
fn utf8_lead(b: u8) -> Option<Fixed> {
    Some(match b {
        0xC2..=0xDF => Fixed::Cont1,
        0xE0 => Fixed::AfterE0,
        0xE1..=0xEC | 0xEE..=0xEF => Fixed::Cont2,
        0xED => Fixed::AfterED,
        0xF0 => Fixed::AfterF0,
        0xF1..=0xF3 => Fixed::Cont3,
        0xF4 => Fixed::AfterF4,
        _ => return None,
    })
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

/// The letters of JSON's short escapes.
fn is_short_escape(b: u8) -> bool {
    matches!(b, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't')
}

/// A raw character byte that is one character by itself (printable ASCII but `"` and `\`).
fn is_raw_ascii(b: u8) -> bool {
    (0x20..=0x7f).contains(&b) && b != b'"' && b != b'\\'
}

/// Transition of a fixed state (`None`: dead).
fn fixed_next(f: Fixed, b: u8) -> Option<Fixed> {
    use Fixed::*;
    let on = |ok: bool, to: Fixed| ok.then_some(to);
    match f {
        Free => match b {
            b'"' => Some(Accept),
            b'\\' => Some(Escape),
            _ if is_raw_ascii(b) => Some(Free),
            _ => utf8_lead(b),
        },
        DevEscape => match b {
            b'u' => Some(DevU1),
            _ => on(is_short_escape(b), Free),
        },
        DevU1 => on(b == b'0', DevU2),
        DevU2 => on(b == b'0', DevU3),
        DevU3 => on(b == b'0' || b == b'1', DevU4),
        DevU4 => on(is_hex(b), Free),
        Escape => match b {
            b'u' => Some(U),
            _ => on(is_short_escape(b), Free),
        },
        U => match b {
            b'd' | b'D' => Some(D),
            _ => on(is_hex(b), Hex3),
        },
        Hex3 => on(is_hex(b), Hex2),
        Hex2 => on(is_hex(b), Hex1),
        Hex1 => on(is_hex(b), Free),
        D => match b {
            b'0'..=b'7' => Some(Hex2),
            b'8' | b'9' | b'a' | b'b' | b'A' | b'B' => Some(Pair2),
            _ => None,
        },
        Pair2 => on(is_hex(b), Pair1),
        Pair1 => on(is_hex(b), PairBackslash),
        PairBackslash => on(b == b'\\', PairU),
        PairU => on(b == b'u', PairD),
        PairD => on(b == b'd' || b == b'D', PairC),
        PairC => on(matches!(b, b'c'..=b'f' | b'C'..=b'F'), Hex2),
        Cont1 => on((0x80..=0xBF).contains(&b), Free),
        Cont2 => on((0x80..=0xBF).contains(&b), Cont1),
        Cont3 => on((0x80..=0xBF).contains(&b), Cont2),
        AfterE0 => on((0xA0..=0xBF).contains(&b), Cont1),
        AfterED => on((0x80..=0x9F).contains(&b), Cont1),
        AfterF0 => on((0x90..=0xBF).contains(&b), Cont2),
        AfterF4 => on((0x80..=0x8F).contains(&b), Cont2),
        Accept => None,
    }
}

/// How a trie node leaves the trie on byte `b` that is not one of its children (`"` is
/// decided by the node: it closes a key that is not a name).
fn leave_trie(b: u8) -> Option<Fixed> {
    match b {
        b'\\' => Some(Fixed::DevEscape),
        _ if is_raw_ascii(b) => Some(Fixed::Free),
        _ => utf8_lead(b),
    }
}

/// The byte classes of every key set before its child bytes are split off: bytes grouped by
/// their transitions from every fixed state and by how they leave the trie, `"` alone (trie
/// nodes treat it by whether they spell a name). Computed once per process.
fn base_classes() -> &'static [u8; 256] {
    static BASE: std::sync::OnceLock<[u8; 256]> = std::sync::OnceLock::new();
    BASE.get_or_init(|| {
        type Signature = (bool, [Option<Fixed>; FIXED], Option<Fixed>);
        let mut signatures: Vec<Signature> = Vec::new();
        let mut classes = [0u8; 256];
        for b in 0..=255u8 {
            let sig = (
                b == b'"',
                ALL_FIXED.map(|f| fixed_next(f, b)),
                leave_trie(b),
            );
            classes[b as usize] = match signatures.iter().position(|s| *s == sig) {
                Some(c) => c as u8,
                None => {
                    signatures.push(sig);
                    (signatures.len() - 1) as u8
                }
            };
        }
        classes
    })
}

/// Whether [`KeySetDfa::new`] builds the DFA of these names: every name is spelled with
/// ordinary characters only (see the module doc).
pub fn from_trie(names: &[Vec<char>]) -> bool {
    names.iter().flatten().all(|&c| {
        let c = c as u32;
        (0x20..=0x7f).contains(&c) && !matches!(c, 0x22 | 0x5c | 0x2f)
    })
}

/// The DFA of a JSON string (quotes included) that is none of a set of names (see the module
/// doc). State 0 is the start.
#[derive(Debug)]
pub struct KeySetDfa {
    /// Trie nodes.
    nodes: u32,
    /// Node `i`'s children (node `i` is state `i`, `1..=nodes`): bytes
    /// `child_byte[child_start[i - 1]..child_start[i]]`, ascending, to the states in
    /// `child_state` at the same positions.
    child_start: Box<[u32]>,
    child_byte: Box<[u8]>,
    child_state: Box<[u32]>,
    /// Per node: it spells a whole name (the closing quote is refused there).
    is_name: Box<[bool]>,
    /// Byte → class (see the module doc's invariants), numbered by first byte.
    classes: [u8; 256],
    /// Number of classes.
    num_classes: u8,
}

impl KeySetDfa {
    /// The DFA for a key that is none of `names` (sorted, deduplicated; the empty name
    /// refuses `""`); `None` when some name has a character that is not ordinary.
    pub fn new(names: &[Vec<char>]) -> Option<Self> {
        if !from_trie(names) {
            return None;
        }
        // The names are sorted: a node's children come in ascending byte order, and each
        // name shares with the previous one exactly their common prefix.
        let mut child_start: Vec<u32> = vec![0];
        let mut child_byte: Vec<u8> = Vec::new();
        let mut child_state: Vec<u32> = Vec::new();
        // Children per node, gathered in creation order and laid out after.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut is_name = vec![false];
        let mut path: Vec<u32> = vec![1]; // states along the previous name
        let mut prev: &[char] = &[];
        for name in names {
            let common = name.iter().zip(prev).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &c in &name[common..] {
                let parent = *path.last().expect("the root is on every path");
                children.push(Vec::new());
                is_name.push(false);
                let state = children.len() as u32;
                children[parent as usize - 1].push((c as u8, state));
                path.push(state);
            }
            is_name[*path.last().expect("the root is on every path") as usize - 1] = true;
            prev = name;
        }
        for c in &children {
            for &(b, s) in c {
                child_byte.push(b);
                child_state.push(s);
            }
            child_start.push(child_byte.len() as u32);
        }
        // Classes: a child byte is a class of its own; the other bytes are grouped as
        // [`base_classes`] groups them, numbered again by first byte.
        let base = base_classes();
        let mut own = [false; 256];
        for &b in &child_byte {
            own[b as usize] = true;
        }
        let mut classes = [0u8; 256];
        let mut number_of_base = [u8::MAX; 256];
        let mut num_classes = 0u8;
        for b in 0..=255u8 {
            let slot = if own[b as usize] {
                None
            } else {
                Some(&mut number_of_base[base[b as usize] as usize])
            };
            classes[b as usize] = match slot {
                Some(n) if *n != u8::MAX => *n,
                slot => {
                    let c = num_classes;
                    num_classes += 1;
                    if let Some(n) = slot {
                        *n = c;
                    }
                    c
                }
            };
        }
        Some(KeySetDfa {
            nodes: is_name.len() as u32,
            child_start: child_start.into(),
            child_byte: child_byte.into(),
            child_state: child_state.into(),
            is_name: is_name.into(),
            classes,
            num_classes,
        })
    }

    /// The state number of a fixed state.
    fn fixed(&self, f: Fixed) -> u32 {
        self.nodes + 1 + f as u32
    }

    /// The first state after the trie's: the tail automaton (`Free` then the other fixed
    /// states, in `ALL_FIXED`'s order) is the same in every key set, numbered from here, and
    /// `Free` — the trie left, any string characters still to come — is this state itself.
    pub fn tail_start(&self) -> u32 {
        self.fixed(Fixed::Free)
    }

    #[inline]
    pub fn next(&self, s: u32, b: u8) -> u32 {
        if s == 0 {
            return if b == b'"' { 1 } else { DEAD };
        }
        if s <= self.nodes {
            let i = s as usize - 1;
            let (lo, hi) = (
                self.child_start[i] as usize,
                self.child_start[i + 1] as usize,
            );
            if let Ok(k) = self.child_byte[lo..hi].binary_search(&b) {
                return self.child_state[lo + k];
            }
            if b == b'"' {
                return if self.is_name[i] {
                    DEAD
                } else {
                    self.fixed(Fixed::Accept)
                };
            }
            return leave_trie(b).map_or(DEAD, |f| self.fixed(f));
        }
        match ALL_FIXED.get((s - self.nodes - 1) as usize) {
            Some(&f) => fixed_next(f, b).map_or(DEAD, |t| self.fixed(t)),
            None => DEAD,
        }
    }

    #[inline]
    pub fn is_accepting(&self, s: u32) -> bool {
        s == self.fixed(Fixed::Accept)
    }

    pub fn num_states(&self) -> usize {
        self.nodes as usize + 1 + FIXED
    }

    /// Byte → class: bytes of one class step alike from every state.
    #[inline]
    pub fn class(&self, b: u8) -> u8 {
        self.classes[b as usize]
    }

    /// Number of byte classes.
    pub fn num_classes(&self) -> usize {
        self.num_classes as usize
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.child_start.len() * 4
            + self.child_byte.len()
            + self.child_state.len() * 4
            + self.is_name.len()
    }
}

#[cfg(test)]
pub(crate) mod tests;
