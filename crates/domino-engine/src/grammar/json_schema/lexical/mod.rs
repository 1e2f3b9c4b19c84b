//! Regular languages of JSON's lexical pieces, as `regex-syntax` HIR.
//!
//! Everything here is a regular expression over the *raw bytes* of a JSON text: a whole JSON
//! string (quotes and escapes included), a number, a whitespace run, and the pieces schema
//! keywords turn into (string formats, integer ranges, decimal bounds, `pattern`s).
//!
//! # Soundness choices (every string these accept is valid for the keyword that asked for it)
//! - String escapes are the full JSON set, but a `\uXXXX` escape of a UTF-16 surrogate must
//!   come as a correct high/low pair (serde_json rejects lone surrogates).
//! - Numbers have at most [`MAX_INT_DIGITS`] integer digits and an exponent of at most two
//!   digits, so every number parses to a finite `f64` (serde_json errors on overflow).
//! - Numbers under a bound (`minimum`, ...) are written without exponent.
//! - `pattern`, `format` and length-restricted strings use the shortest escape of each
//!   character only (a `"` as `\"`, a control as its short escape or `\u00XX`, everything else
//!   raw); generic strings accept every escape.
//!
//! # Modules
//! The JSON string, whitespace and literal pieces are here; the rest by concept:
//! - `numbers`: integers and numbers, exact integer ranges and decimal bounds, and the
//!   `multipleOf` languages.
//! - `formats`: the regexes of the compiled `format`s.
//! - `patterns`: ECMA-262 `pattern`s translated to `regex-syntax`, search anchoring, and
//!   the one look-ahead form JSON Schema patterns commonly use.
//! - `encoding`: regexes over decoded string characters turned into regexes over the raw
//!   JSON string content (escapes), and every encoding of a literal string.
//!
//! Their items are re-exported here, so each has one path: `lexical::NAME`.

mod encoding;
mod formats;
mod numbers;
mod patterns;

use crate::grammar::regex_hir::RegexHir;
use regex_syntax::hir::Hir;

pub use encoding::{encode_for_json_string, literal_any_encoding};
pub use formats::{ASSERTED_FORMATS, format_pattern};
pub use numbers::{
    Decimal, MAX_INT_DIGITS, MagBound, integer_pattern, integer_range_pattern,
    multiple_of_patterns, number_pattern, number_range_pattern,
};
pub use patterns::{
    NAME_MATCHER_BYTES, NAME_MATCHER_ENTRIES, anchor_search, has_look, name_matcher,
    split_leading_negative_lookahead, translate_ecma,
};

/// How deep this module's patterns nest groups: the "none of these keys" pattern nests about
/// two groups per character of the longest key (keys are at most 256 characters there), far
/// past regex-syntax's default of 250 (found by the `json_schema` fuzz target: a 90-character
/// required key panicked). Deep but bounded, so the recursive consumers of the HIR stay well
/// within a thread's stack.
const NEST_LIMIT: u32 = 1024;

/// Parse one of this module's own patterns. They are constants or built from escaped pieces,
/// so a failure is a bug in this module.
///
/// The same few patterns (a JSON string, a number, whitespace, common formats) recur in
/// every schema, and parsing one (Unicode classes included) costs tens of microseconds, a
/// noticeable part of compiling a small schema: parsed HIRs are kept process-wide by their
/// text, at most [`HIR_CACHE_ENTRIES`] patterns of at most [`HIR_CACHE_PATTERN_BYTES`]
/// bytes each (the cache is emptied when full).
pub fn hir(pattern: &str) -> Hir {
    (*hir_shared(pattern)).clone()
}

/// [`hir`] without copying the tree: the same shared HIR for the same pattern while it is cached,
/// so the terminals of every grammar that uses a pattern (strings, numbers, formats) are one
/// allocation, which the terminal-DFA cache recognises by address.
pub fn hir_shared(pattern: &str) -> RegexHir {
    static CACHE: SharedHirCache = SharedHirCache::new(
        HIR_CACHE_ENTRIES,
        HIR_CACHE_ENTRIES * HIR_CACHE_PATTERN_BYTES,
    );
    if pattern.len() > HIR_CACHE_PATTERN_BYTES {
        return RegexHir::new(parse(pattern));
    }
    CACHE.get_or_build_hir(pattern, || parse(pattern))
}

fn parse(pattern: &str) -> Hir {
    regex_syntax::ParserBuilder::new()
        .nest_limit(NEST_LIMIT)
        .build()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("internal JSON regex does not parse ({e}): {pattern}"))
}

/// A [`SharedCache`]'s entries and the bytes of their keys.
type ByKey<V> = (std::collections::HashMap<String, V>, usize);

/// A process-wide cache by a text key (a pattern, a key set) of values cheap to clone (a
/// shared [`RegexHir`], a compiled regex); at most `max_entries` entries and `max_key_bytes` bytes
/// of keys, emptied when full. (Used for the JSON lexical patterns, the key-exclusion sets of
/// `keys` and the `patternProperties` name matchers.)
pub(crate) struct SharedCache<V> {
    max_entries: usize,
    max_key_bytes: usize,
    map: std::sync::Mutex<Option<ByKey<V>>>,
}

/// Shared HIRs by text key: the terminal-DFA cache recognises a kept HIR by address.
pub(crate) type SharedHirCache = SharedCache<RegexHir>;

impl<V: Clone> SharedCache<V> {
    pub(crate) const fn new(max_entries: usize, max_key_bytes: usize) -> Self {
        SharedCache {
            max_entries,
            max_key_bytes,
            map: std::sync::Mutex::new(None),
        }
    }

    /// The value kept under `key`, or `build()` kept (a key over a sixteenth of the byte
    /// bound is built and not kept).
    pub(crate) fn get_or_build(&self, key: &str, build: impl FnOnce() -> V) -> V {
        let lock = || self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = lock().as_ref().and_then(|(m, _)| m.get(key)) {
            return v.clone();
        }
        let v = build();
        if key.len() <= self.max_key_bytes / 16 {
            let mut cache = lock();
            let (map, bytes) = cache.get_or_insert_with(Default::default);
            if map.len() >= self.max_entries || *bytes + key.len() > self.max_key_bytes {
                map.clear();
                *bytes = 0;
            }
            *bytes += key.len();
            map.insert(key.to_string(), v.clone());
        }
        v
    }
}

impl SharedHirCache {
    /// [`SharedCache::get_or_build`] for a HIR, kept as [`shared_hir`] makes it.
    pub(crate) fn get_or_build_hir(&self, key: &str, build: impl FnOnce() -> Hir) -> RegexHir {
        self.get_or_build(key, || shared_hir(build()))
    }
}

/// A HIR the front end keeps per process, with its [`RegexHir::facts`] computed now, while
/// its nodes are still cached from being built: lowering's first walk of one, long after it
/// was built, would cost a memory access per node (a key-exclusion set is thousands).
pub(crate) fn shared_hir(hir: Hir) -> RegexHir {
    let hir = RegexHir::new(hir);
    hir.facts();
    hir
}

/// Most patterns [`hir`] keeps parsed.
pub const HIR_CACHE_ENTRIES: usize = 256;
/// Longest pattern (bytes) [`hir`] keeps parsed; longer ones are parsed every time.
pub const HIR_CACHE_PATTERN_BYTES: usize = 4096;

const HEX: &str = "[0-9a-fA-F]";

/// One JSON string character as written in the source (raw or escaped), any escape allowed.
pub fn string_unit_pattern() -> &'static str {
    // (Built once: every string schema's pattern starts from it.)
    static UNIT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        // Non-surrogate \u escapes: first hex digit not d/D, or d followed by 0-7.
        let non_surrogate = format!("(?:[0-9a-cA-CeEfF]{HEX}{{3}}|[dD][0-7]{HEX}{{2}})");
        let pair = format!("[dD][89abAB]{HEX}{{2}}\\\\u[dD][c-fC-F]{HEX}{{2}}");
        format!(r#"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:{non_surrogate}|{pair}))"#)
    });
    &UNIT
}

/// A JSON string with `min..=max` characters (Unicode scalar values, as JSON Schema counts).
pub fn string_pattern(min: u64, max: Option<u64>) -> String {
    let unit = string_unit_pattern();
    match (min, max) {
        (0, None) => format!("\"{unit}*\""),
        (m, None) => format!("\"{unit}{{{m},}}\""),
        (m, Some(x)) => format!("\"{unit}{{{m},{x}}}\""),
    }
}

/// JSON whitespace, `0..=max` bytes.
pub fn whitespace_pattern(max: u32) -> String {
    format!("[ \\t\\n\\r]{{0,{max}}}")
}

/// The JSON text of a value, as a literal regex.
pub fn literal_pattern(text: &str) -> String {
    regex_syntax::escape(text)
}

/// (Tests.) A regex that must match the whole haystack.
#[cfg(test)]
fn full(p: &str) -> regex_automata::meta::Regex {
    regex_automata::meta::Regex::new(&format!("^(?:{p})$")).unwrap()
}

/// (Tests.) [`full`] of an HIR built directly.
#[cfg(test)]
pub(crate) fn full_hir(h: Hir) -> regex_automata::meta::Regex {
    use regex_syntax::hir::Look;
    regex_automata::meta::Regex::builder()
        .build_from_hir(&Hir::concat(vec![
            Hir::look(Look::Start),
            h,
            Hir::look(Look::End),
        ]))
        .unwrap()
}
