//! Object keys: a key that is none of the named properties (for `additionalProperties`, so a
//! document never repeats a named key with a value that escapes its schema), a matcher for
//! `patternProperties` patterns (with a leading `(?!…)` exclusion), and what is known about a
//! pattern without building its automaton (matches every key, literal prefixes that no two
//! patterns share).

use super::{Compiler, lexical};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, RuleKind};
use crate::grammar::regex_hir::RegexHir;
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition};

impl Compiler<'_> {
    /// A JSON string key that is none of `names` (and not empty if `non_empty`): raw
    /// characters and short escapes, `\u` escapes only for control characters.
    pub(super) fn key_except(
        &mut self,
        names: &[&str],
        non_empty: bool,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let cache_key = format!("except:{non_empty}:{}", names.join("\u{0}"));
        if let Some(&id) = self.lexical.get(&cache_key) {
            return Ok(Expr::Ref(id));
        }
        if names.iter().any(|n| n.chars().count() > 256) {
            self.unsupported(
                ptr,
                "additionalProperties",
                "a property name longer than 256 characters",
            )?;
        }
        let mut keys: Vec<Vec<char>> = names
            .iter()
            .filter(|n| n.chars().count() <= 256)
            .map(|n| n.chars().collect())
            .collect();
        if non_empty {
            keys.push(Vec::new());
        }
        keys.sort();
        keys.dedup();
        // (A key set kept as its names stays a terminal of its own: `Rule::is_standalone`.)
        let hir = shared_except_hir(&cache_key, keys);
        let id = self.add_rule("key", Expr::Regex(hir), RuleKind::Lexical)?;
        self.lexical.insert(cache_key, id);
        Ok(Expr::Ref(id))
    }
}

/// Does a key match a `patternProperties` pattern (`neg`: the strings a leading `(?!X)`
/// excludes)?
pub(super) struct KeyMatcher {
    pub(super) pos: regex_automata::meta::Regex,
    pub(super) neg: Option<regex_automata::meta::Regex>,
}

impl KeyMatcher {
    pub(super) fn is_match(&self, key: &str) -> bool {
        self.pos.is_match(key) && !self.neg.as_ref().is_some_and(|n| n.is_match(key))
    }
}

/// Most key sets [`shared_except_hir`] keeps, and the most bytes of names they may hold.
pub const EXCEPT_CACHE_ENTRIES: usize = 1024;
/// See [`EXCEPT_CACHE_ENTRIES`].
pub const EXCEPT_CACHE_BYTES: usize = 4 << 20;

/// The key set of `keys` (sorted, deduplicated), kept per process by `cache_key` (the sorted
/// names): names that are all ordinary give a [`RegexHir::key_set`] (its HIR built only if
/// something reads it, its terminal DFA the names' trie: [`crate::grammar::key_set_dfa`]),
/// others their [`except_hir`] at once. The same objects recur across the schemas a server
/// sees (a Kubernetes `ObjectMeta`, a tool's arguments): one shared value also shares its
/// trie DFA, or lets the terminal-DFA cache find the HIR's DFA by address.
/// Bounded by [`EXCEPT_CACHE_ENTRIES`] and [`EXCEPT_CACHE_BYTES`] (emptied when full).
fn shared_except_hir(cache_key: &str, keys: Vec<Vec<char>>) -> RegexHir {
    static CACHE: lexical::SharedHirCache =
        lexical::SharedHirCache::new(EXCEPT_CACHE_ENTRIES, EXCEPT_CACHE_BYTES);
    CACHE.get_or_build(cache_key, || {
        if crate::grammar::key_set_dfa::from_trie(&keys) {
            RegexHir::key_set(keys).expect("ordinary names")
        } else {
            lexical::shared_hir(except_hir(&keys))
        }
    })
}

/// The JSON string (quotes included) of a string not in `keys`: [`except_regex`]'s language,
/// built as HIR directly. Parsing the pattern text was most of a typical schema's lowering
/// (the pattern spells a character class and the escape forms at every trie node).
///
/// # Shape: `"` (E | (D | T·COMMON)·any) `"`
/// A string not in `keys` either ends inside the key trie without completing a key (`E`), or
/// leaves the trie with one character after some path of it, and then anything may follow.
/// The characters that leave the trie at a node are every character but the node's children:
/// at almost every node that is the same set of non-ASCII characters and escapes (`COMMON`)
/// plus the ASCII characters that are not children. So `D` is the trie with one ASCII class
/// per node, `T` the trie's paths to the nodes where `COMMON` leaves it, and `COMMON` is
/// written once. Writing the whole deviation at every node (as [`except_regex`] does) gave an
/// NFA about 20 states per trie node, most of it the UTF-8 of a negated class; compiling and
/// determinising those NFAs was the largest single cost of compiling Kubernetes schemas. A node
/// with a child that is non-ASCII, a control character or a short-escape character spells its
/// whole deviation itself (and is left out of `T`).
pub(crate) fn except_hir(keys: &[Vec<char>]) -> Hir {
    static UNIT: std::sync::OnceLock<Hir> = std::sync::OnceLock::new();
    static COMMON: std::sync::OnceLock<Hir> = std::sync::OnceLock::new();
    let unit = UNIT.get_or_init(|| lexical::hir(lexical::string_unit_pattern()));
    let common = COMMON.get_or_init(common_deviation);
    let any = Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(unit.clone()),
    });
    let parts = except_parts_hir(keys, 0, 0, keys.len());
    let mut leave = vec![parts.dev];
    if let Some(t) = parts.to_common {
        leave.push(Hir::concat(vec![t, common.clone()]));
    }
    let dev = Hir::concat(vec![Hir::alternation(leave), any]);
    let content = match parts.ends {
        Some(e) => Hir::alternation(vec![e, dev]),
        None => dev,
    };
    let quote = || Hir::literal(*b"\"");
    Hir::concat(vec![quote(), content, quote()])
}

/// The deviation shared by every ordinary trie node: a non-ASCII character, a short escape,
/// or the `\u00XX` escape of a control character.
fn common_deviation() -> Hir {
    let shorts: Vec<(char, char)> = SHORT_ESCAPES.iter().map(|&(_, e)| (e, e)).collect();
    Hir::alternation(vec![
        class(&[('\u{80}', '\u{10FFFF}')]),
        Hir::concat(vec![lit("\\"), class(&shorts)]),
        control_escapes(),
    ])
}

/// A Unicode class of these ranges.
fn class(ranges: &[(char, char)]) -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new(
        ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)),
    )))
}

fn lit(s: &str) -> Hir {
    Hir::literal(s.as_bytes())
}

/// `\u00XX` for every control character.
fn control_escapes() -> Hir {
    Hir::concat(vec![
        lit("\\u00"),
        class(&[('0', '1')]),
        class(&[('0', '9'), ('a', 'f'), ('A', 'F')]),
    ])
}

/// Whether a node with these children spells its whole deviation itself: a child that is
/// non-ASCII, a control character or written with a short escape takes its character out of
/// [`common_deviation`].
fn is_special(child_chars: &[char]) -> bool {
    child_chars
        .iter()
        .any(|&c| !c.is_ascii() || (c as u32) < 0x20 || SHORT_ESCAPES.iter().any(|s| s.0 == c))
}

/// The parts of [`except_hir`] for the keys `keys[lo..hi]`, which share their first `depth`
/// characters.
struct ExceptParts {
    /// `E`: the rests that end here or deeper without completing a key (`None`: none).
    ends: Option<Hir>,
    /// `D`: the rests that leave the trie with one character this subtree spells itself
    /// (an ASCII class at ordinary nodes, the whole deviation at special ones).
    dev: Hir,
    /// `T`: the paths to the ordinary nodes of this subtree, where [`common_deviation`]
    /// leaves the trie (`None`: every node is special).
    to_common: Option<Hir>,
}

/// [`except_parts`] as HIR, with the deviations shared by ordinary nodes factored out (see
/// [`except_hir`]).
fn except_parts_hir(keys: &[Vec<char>], depth: usize, lo: usize, hi: usize) -> ExceptParts {
    let mut ends = Vec::new();
    let mut alts = Vec::new();
    let mut to_common = Vec::new();
    if !keys[lo..hi].iter().any(|k| k.len() == depth) {
        ends.push(Hir::empty());
    }
    let children = trie_children(keys, depth, lo, hi);
    let child_chars: Vec<char> = children.iter().map(|x| x.0).collect();
    let special = is_special(&child_chars);
    if !special {
        to_common.push(Hir::empty());
    }
    // `enc · part`, without the constructor's work when `part` is empty (a leaf's rests):
    // `Hir::concat` drops an empty part, so the result is the same HIR.
    let then = |enc: &Hir, part: Hir| {
        if matches!(part.kind(), HirKind::Empty) {
            enc.clone()
        } else {
            Hir::concat(vec![enc.clone(), part])
        }
    };
    for &(c, a, b) in &children {
        let enc = char_literal(c);
        let sub = except_parts_hir(keys, depth + 1, a, b);
        if let Some(e) = sub.ends {
            ends.push(then(&enc, e));
        }
        if let Some(t) = sub.to_common {
            to_common.push(then(&enc, t));
        }
        alts.push(Hir::concat(vec![enc, sub.dev]));
    }
    if !special {
        // The ASCII characters that leave the trie here (the rest is `COMMON`): the gaps
        // between the children (ascending, as the keys are sorted), `"` and `\` in
        // `' '..='\u{7f}'`.
        let mut excluded: Vec<u32> = child_chars.iter().map(|&c| c as u32).collect();
        excluded.extend([u32::from(b'"'), u32::from(b'\\')]);
        excluded.sort_unstable();
        let mut ranges = Vec::with_capacity(excluded.len() + 1);
        let mut from = 0x20u32;
        for x in excluded {
            if x > from {
                ranges.push(ClassUnicodeRange::new(
                    char::from_u32(from).expect("ASCII"),
                    char::from_u32(x - 1).expect("ASCII"),
                ));
            }
            from = from.max(x + 1);
        }
        if from <= 0x7f {
            ranges.push(ClassUnicodeRange::new(
                char::from_u32(from).expect("ASCII"),
                '\u{7f}',
            ));
        }
        if !ranges.is_empty() {
            alts.push(Hir::class(Class::Unicode(ClassUnicode::new(ranges))));
        }
    } else {
        alts.push(special_deviation(&child_chars));
    }
    ExceptParts {
        ends: (!ends.is_empty()).then(|| Hir::alternation(ends)),
        dev: Hir::alternation(alts),
        to_common: (!to_common.is_empty()).then(|| Hir::alternation(to_common)),
    }
}

/// How a key's character is spelled inside the JSON string, as a literal: [`json_escape`]
/// for `"`, `\` and control characters, else the character's UTF-8 (no `String`).
fn char_literal(c: char) -> Hir {
    if c == '"' || c == '\\' || (c as u32) < 0x20 {
        lit(&json_escape(c))
    } else {
        Hir::literal(c.encode_utf8(&mut [0; 4]).as_bytes())
    }
}

/// The whole deviation of a special node (see [`is_special`]): every raw character but the
/// children, `"`, `\\` and control characters; the short escapes of characters that are not
/// children; the `\u00XX` escapes of control characters that are not children.
fn special_deviation(child_chars: &[char]) -> Hir {
    let mut excluded = vec![('"', '"'), ('\\', '\\'), ('\0', '\x1f')];
    excluded.extend(child_chars.iter().map(|&c| (c, c)));
    let mut raw = ClassUnicode::new(excluded.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)));
    raw.negate();
    let mut other = vec![Hir::class(Class::Unicode(raw))];
    let allowed_shorts: Vec<(char, char)> = SHORT_ESCAPES
        .iter()
        .filter(|(c, _)| !child_chars.contains(c))
        .map(|&(_, e)| (e, e))
        .collect();
    if !allowed_shorts.is_empty() {
        other.push(Hir::concat(vec![lit("\\"), class(&allowed_shorts)]));
    }
    let hex_digit = |d: u32| {
        let h = char::from_digit(d, 16).unwrap();
        if h.is_ascii_digit() {
            lit(&h.to_string())
        } else {
            class(&[(h, h), (h.to_ascii_uppercase(), h.to_ascii_uppercase())])
        }
    };
    if !child_chars.iter().any(|&c| (c as u32) < 0x20) {
        other.push(control_escapes());
    } else {
        for cp in 0u32..0x20 {
            if !child_chars.contains(&char::from_u32(cp).unwrap()) {
                other.push(Hir::concat(vec![
                    lit("\\u00"),
                    hex_digit(cp >> 4),
                    hex_digit(cp & 15),
                ]));
            }
        }
    }
    Hir::alternation(other)
}

/// JSON's short escapes: the character and the letter after the backslash.
const SHORT_ESCAPES: [(char, char); 8] = [
    ('"', '"'),
    ('\\', '\\'),
    ('/', '/'),
    ('\u{8}', 'b'),
    ('\u{c}', 'f'),
    ('\n', 'n'),
    ('\r', 'r'),
    ('\t', 't'),
];

/// How a key's character is spelled inside the JSON string: the escape (without quotes) for
/// `"`, `\\` and control characters, else the character itself.
fn json_escape(c: char) -> String {
    if c == '"' || c == '\\' || (c as u32) < 0x20 {
        // Strip exactly one quote from each end (the escape of `"` is `\"`, whose quote
        // must stay).
        let quoted = serde_json::to_string(&c.to_string()).unwrap();
        quoted[1..quoted.len() - 1].to_string()
    } else {
        c.to_string()
    }
}

/// The children of a trie node: `(next character, lo, hi)` for each group of `keys[lo..hi]`
/// (sorted, sharing their first `depth` characters) by the character at `depth`.
fn trie_children(
    keys: &[Vec<char>],
    depth: usize,
    lo: usize,
    hi: usize,
) -> Vec<(char, usize, usize)> {
    let mut children = Vec::new();
    let mut i = lo;
    while i < hi {
        if keys[i].len() == depth {
            i += 1;
            continue;
        }
        let c = keys[i][depth];
        let mut j = i;
        while j < hi && keys[j].len() > depth && keys[j][depth] == c {
            j += 1;
        }
        children.push((c, i, j));
        i = j;
    }
    children
}

/// (Tests: the reference [`except_hir`] is checked against.) Regex (raw JSON string content)
/// for strings not in `keys`: `E | D·any`, where `E` (the
/// strings that end inside the key trie without being a key) and `D` (a path of the trie,
/// then a character that leaves it) are both finite tries ([`except_parts`]). The tail
/// `any` is written once: repeating it after every trie node, as the direct recursion
/// would, makes the unminimised DFA one copy of the string automaton per node (~2,000
/// states for 70 keys, ~20 ms to determinise) where this one has about one state per node.
#[cfg(test)]
fn except_regex(keys: &[Vec<char>]) -> String {
    let any = format!("{}*", lexical::string_unit_pattern());
    let (ends, dev) = except_parts(keys, 0, 0, keys.len());
    match ends {
        Some(e) => format!("(?:{e}|{dev}{any})"),
        None => format!("(?:{dev}{any})"),
    }
}

/// For the keys `keys[lo..hi]`, which share their first `depth` characters (already
/// matched): `E`, the rests that end here or deeper without completing a key (`None`: no
/// string), and `D`, the rests that leave the trie with one character (any string may then
/// follow). The strings not in the keys are exactly `E ∪ D·any`.
#[cfg(test)]
fn except_parts(
    keys: &[Vec<char>],
    depth: usize,
    lo: usize,
    hi: usize,
) -> (Option<String>, String) {
    let mut ends = Vec::new();
    let mut alts = Vec::new();
    // Ending here is fine unless some key ends here.
    let ends_here = keys[lo..hi].iter().any(|k| k.len() == depth);
    if !ends_here {
        ends.push(String::new());
    }
    // Children: groups of keys by their next character.
    let mut children: Vec<(char, usize, usize)> = Vec::new();
    let mut i = lo;
    while i < hi {
        if keys[i].len() == depth {
            i += 1;
            continue;
        }
        let c = keys[i][depth];
        let mut j = i;
        while j < hi && keys[j].len() > depth && keys[j][depth] == c {
            j += 1;
        }
        children.push((c, i, j));
        i = j;
    }
    for &(c, a, b) in &children {
        let enc = if c == '"' || c == '\\' || (c as u32) < 0x20 {
            // The JSON escape without its quotes: strip exactly one from each end (the
            // escape of `"` is `\"`, whose quote must stay).
            let quoted = serde_json::to_string(&c.to_string()).unwrap();
            quoted[1..quoted.len() - 1].to_string()
        } else {
            c.to_string()
        };
        let (e, d) = except_parts(keys, depth + 1, a, b);
        let enc = regex_syntax::escape(&enc);
        if let Some(e) = e {
            ends.push(format!("{enc}{e}"));
        }
        alts.push(format!("{enc}{d}"));
    }
    // Any other first character, then anything.
    let child_chars: Vec<char> = children.iter().map(|x| x.0).collect();
    let mut raw_excl = String::from("\"\\\\\\x00-\\x1f");
    for &c in &child_chars {
        if !(c == '"' || c == '\\' || (c as u32) < 0x20) {
            raw_excl.push_str(&regex_syntax::escape(&c.to_string()));
        }
    }
    let mut other = vec![format!("[^{raw_excl}]")];
    let shorts: Vec<(char, char)> = vec![
        ('"', '"'),
        ('\\', '\\'),
        ('/', '/'),
        ('\u{8}', 'b'),
        ('\u{c}', 'f'),
        ('\n', 'n'),
        ('\r', 'r'),
        ('\t', 't'),
    ];
    let allowed_shorts: String = shorts
        .iter()
        .filter(|(c, _)| !child_chars.contains(c))
        .map(|(_, e)| regex_syntax::escape(&e.to_string()))
        .collect();
    if !allowed_shorts.is_empty() {
        other.push(format!("\\\\[{allowed_shorts}]"));
    }
    // `\u00XX` for the control characters that are not children (a child's control
    // character is written only as the child spells it, so its `\u` forms are no key here).
    if !child_chars.iter().any(|&c| (c as u32) < 0x20) {
        other.push("\\\\u00[01][0-9a-fA-F]".to_string());
    } else {
        let hex = |d: u32| {
            let h = char::from_digit(d, 16).unwrap();
            if h.is_ascii_digit() {
                h.to_string()
            } else {
                format!("[{}{}]", h, h.to_ascii_uppercase())
            }
        };
        for cp in 0u32..0x20 {
            if !child_chars.contains(&char::from_u32(cp).unwrap()) {
                other.push(format!("\\\\u00{}{}", hex(cp >> 4), hex(cp & 15)));
            }
        }
    }
    alts.push(format!("(?:{})", other.join("|")));
    let ends = (!ends.is_empty()).then(|| format!("(?:{})", ends.join("|")));
    (ends, format!("(?:{})", alts.join("|")))
}

/// `Some(non_empty)` when a `patternProperties` pattern matches every key (`non_empty`: every
/// non-empty key); `None` otherwise (or when that is not recognised).
pub(super) fn match_all_kind(p: &str) -> Option<bool> {
    match p {
        "" | ".*" | "^.*$" | "^.*" | ".*$" | "^" | "$" | "(.*)" | "^(.*)$" => Some(false),
        "." | ".+" | "^.+$" | "^.+" | ".{1,}" | "^.{1,}$" | "(.+)" | "^(.+)$" => Some(true),
        _ => None,
    }
}

/// Whether a pattern (searched, as JSON Schema does) matches every string: it has no end
/// anchor and, after an optional start anchor, matches the empty string.
///
/// Memoised process-wide by pattern, as [`lexical::name_matcher`] is and with its bounds:
/// each `patternProperties` pattern is asked once per object that has it, and a family of
/// schemas repeats its few patterns hundreds of times (the answer parsed the pattern and
/// built its searched HIR each time: 1 % of compiling the slowest schemas).
pub(super) fn search_matches_everything(p: &str) -> bool {
    static ANSWERS: lexical::SharedCache<bool> =
        lexical::SharedCache::new(lexical::NAME_MATCHER_ENTRIES, lexical::NAME_MATCHER_BYTES);
    ANSWERS.get_or_build(p, || search_matches_everything_uncached(p))
}

fn search_matches_everything_uncached(p: &str) -> bool {
    let Ok(t) = lexical::translate_ecma(p) else {
        return false;
    };
    let Ok(h) = regex_syntax::ParserBuilder::new()
        .nest_limit(100)
        .build()
        .parse(&t)
    else {
        return false;
    };
    let any = lexical::hir("(?s:.)*");
    let searched = lexical::anchor_search(&h, &any);
    if lexical::has_look(&searched) {
        return false;
    }
    // `.*` X `.*` with X matching "" is everything only if X was not end-anchored: then the
    // search form ends with `.*` and starts with `.*` or X directly.
    let body = t.strip_prefix('^').unwrap_or(&t);
    if body.ends_with('$') {
        return false;
    }
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(body)
        .is_ok_and(|b| {
            b.properties().minimum_len() == Some(0) && b.properties().look_set().is_empty()
        })
}

/// Whether anchored patterns start with literal prefixes no two of which are prefixes of each
/// other (so no key matches two of them).
pub(super) fn prefixes_disjoint(patterns: &[&str]) -> bool {
    let prefix = |p: &str| -> Option<String> {
        let rest = p.strip_prefix('^')?;
        let rest = rest.strip_prefix('(').unwrap_or(rest);
        let lit: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if lit.is_empty() { None } else { Some(lit) }
    };
    let mut pre = Vec::new();
    for p in patterns {
        match prefix(p) {
            Some(x) => pre.push(x),
            None => return false,
        }
    }
    for i in 0..pre.len() {
        for j in 0..pre.len() {
            if i != j && pre[j].starts_with(&pre[i]) {
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct recursion (the tail repeated after every trie node): the reference.
    fn except_regex_direct(keys: &[Vec<char>], depth: usize, lo: usize, hi: usize) -> String {
        let any = format!("{}*", lexical::string_unit_pattern());
        let mut alts = Vec::new();
        // Ending here is fine unless some key ends here.
        let ends_here = keys[lo..hi].iter().any(|k| k.len() == depth);
        if !ends_here {
            alts.push(String::new());
        }
        // Children: groups of keys by their next character.
        let mut children: Vec<(char, usize, usize)> = Vec::new();
        let mut i = lo;
        while i < hi {
            if keys[i].len() == depth {
                i += 1;
                continue;
            }
            let c = keys[i][depth];
            let mut j = i;
            while j < hi && keys[j].len() > depth && keys[j][depth] == c {
                j += 1;
            }
            children.push((c, i, j));
            i = j;
        }
        for &(c, a, b) in &children {
            let enc = if c == '"' || c == '\\' || (c as u32) < 0x20 {
                // The JSON escape without its quotes: strip exactly one from each end (the
                // escape of `"` is `\"`, whose quote must stay).
                let quoted = serde_json::to_string(&c.to_string()).unwrap();
                quoted[1..quoted.len() - 1].to_string()
            } else {
                c.to_string()
            };
            alts.push(format!(
                "{}{}",
                regex_syntax::escape(&enc),
                except_regex_direct(keys, depth + 1, a, b)
            ));
        }
        // Any other first character, then anything.
        let child_chars: Vec<char> = children.iter().map(|x| x.0).collect();
        let mut raw_excl = String::from("\"\\\\\\x00-\\x1f");
        for &c in &child_chars {
            if !(c == '"' || c == '\\' || (c as u32) < 0x20) {
                raw_excl.push_str(&regex_syntax::escape(&c.to_string()));
            }
        }
        let mut other = vec![format!("[^{raw_excl}]")];
        let shorts: Vec<(char, char)> = vec![
            ('"', '"'),
            ('\\', '\\'),
            ('/', '/'),
            ('\u{8}', 'b'),
            ('\u{c}', 'f'),
            ('\n', 'n'),
            ('\r', 'r'),
            ('\t', 't'),
        ];
        let allowed_shorts: String = shorts
            .iter()
            .filter(|(c, _)| !child_chars.contains(c))
            .map(|(_, e)| regex_syntax::escape(&e.to_string()))
            .collect();
        if !allowed_shorts.is_empty() {
            other.push(format!("\\\\[{allowed_shorts}]"));
        }
        // `\u00XX` for the control characters that are not children (a child's control
        // character is written only as the child spells it, so its `\u` forms are no key here).
        if !child_chars.iter().any(|&c| (c as u32) < 0x20) {
            other.push("\\\\u00[01][0-9a-fA-F]".to_string());
        } else {
            let hex = |d: u32| {
                let h = char::from_digit(d, 16).unwrap();
                if h.is_ascii_digit() {
                    h.to_string()
                } else {
                    format!("[{}{}]", h, h.to_ascii_uppercase())
                }
            };
            for cp in 0u32..0x20 {
                if !child_chars.contains(&char::from_u32(cp).unwrap()) {
                    other.push(format!("\\\\u00{}{}", hex(cp >> 4), hex(cp & 15)));
                }
            }
        }
        alts.push(format!("(?:{}){any}", other.join("|")));
        format!("(?:{})", alts.join("|"))
    }

    /// The factored regex (`E | D·any`) matches exactly the strings the direct recursion
    /// matches, on random strings over the keys' characters, escapes and other characters.
    #[test]
    fn factored_except_regex_equals_the_direct_recursion() {
        let sets: Vec<Vec<&str>> = vec![
            vec![],
            vec![""],
            vec!["a"],
            vec!["a", "ab", "abc", "b"],
            vec![
                "name", "names", "id", "\"q\"", "a\\b", "x/y", "tab\t", "\u{1}c",
            ],
            vec!["death_message_type", "exhaustion", "effects", "scaling"],
            // Special nodes (non-ASCII, `/`, control children) beside ordinary ones.
            vec!["é", "éa", "ax", "a/", "a/b", "n\u{1}", "ne", "xé", "x"],
        ];
        let pieces = [
            "a", "b", "c", "n", "x", "/", "\\/", "\\\"", "\\\\", "\\t", "\\u0001", "\\u0041",
            "\\n", "é", "y", "e", "s", "_", "\\u001F", "中", "😀", "\u{7f}", "~",
        ];
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for names in sets {
            let mut keys: Vec<Vec<char>> = names.iter().map(|n| n.chars().collect()).collect();
            keys.sort();
            keys.dedup();
            let full =
                |re: String| regex_automata::meta::Regex::new(&format!("^(?:{re})$")).unwrap();
            let direct = full(except_regex_direct(&keys, 0, 0, keys.len()));
            let factored = full(except_regex(&keys));
            let mut probes: Vec<String> = names.iter().map(|n| n.to_string()).collect();
            for _ in 0..3000 {
                let len = next() % 8;
                let s: String = (0..len)
                    .map(|_| pieces[(next() % pieces.len() as u64) as usize])
                    .collect();
                probes.push(s);
            }
            // The HIR built directly, quotes included.
            let built = lexical::full_hir(except_hir(&keys));
            for p in &probes {
                assert_eq!(
                    direct.is_match(p),
                    factored.is_match(p),
                    "{names:?} on {p:?}"
                );
                assert_eq!(
                    direct.is_match(p),
                    built.is_match(&format!("\"{p}\"")),
                    "{names:?} on {p:?} (HIR)"
                );
            }
        }
    }
}
