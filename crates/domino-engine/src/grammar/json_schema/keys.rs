//! Object keys: a key that is none of the named properties (for `additionalProperties`, so a
//! document never repeats a named key with a value that escapes its schema), a matcher for
//! `patternProperties` patterns (with a leading `(?!…)` exclusion), and what is known about a
//! pattern without building its automaton (matches every key, literal prefixes that no two
//! patterns share).

use super::{Compiler, lexical};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, RuleKind};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Repetition};

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
        let hir = except_hir(&keys);
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

/// The JSON string (quotes included) of a string not in `keys`: [`except_regex`]'s language,
/// built as HIR directly. Parsing the pattern text was most of a typical schema's lowering
/// (the pattern spells a character class and the escape forms at every trie node).
fn except_hir(keys: &[Vec<char>]) -> Hir {
    static UNIT: std::sync::OnceLock<Hir> = std::sync::OnceLock::new();
    let unit = UNIT.get_or_init(|| lexical::hir(&lexical::string_unit_pattern()));
    let any = Hir::repetition(Repetition {
        min: 0,
        max: None,
        greedy: true,
        sub: Box::new(unit.clone()),
    });
    let (ends, dev) = except_parts_hir(keys, 0, 0, keys.len());
    let content = match ends {
        Some(e) => Hir::alternation(vec![e, Hir::concat(vec![dev, any])]),
        None => Hir::concat(vec![dev, any]),
    };
    let quote = || Hir::literal(*b"\"");
    Hir::concat(vec![quote(), content, quote()])
}

/// [`except_parts`] as HIR.
fn except_parts_hir(keys: &[Vec<char>], depth: usize, lo: usize, hi: usize) -> (Option<Hir>, Hir) {
    let class = |ranges: &[(char, char)]| {
        Hir::class(Class::Unicode(ClassUnicode::new(
            ranges.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)),
        )))
    };
    let lit = |s: &str| Hir::literal(s.as_bytes());
    let mut ends = Vec::new();
    let mut alts = Vec::new();
    if !keys[lo..hi].iter().any(|k| k.len() == depth) {
        ends.push(Hir::empty());
    }
    let children = trie_children(keys, depth, lo, hi);
    for &(c, a, b) in &children {
        let enc = lit(&json_escape(c));
        let (e, d) = except_parts_hir(keys, depth + 1, a, b);
        if let Some(e) = e {
            ends.push(Hir::concat(vec![enc.clone(), e]));
        }
        alts.push(Hir::concat(vec![enc, d]));
    }
    let child_chars: Vec<char> = children.iter().map(|x| x.0).collect();
    let mut excluded = vec![('"', '"'), ('\\', '\\'), ('\0', '\x1f')];
    excluded.extend(child_chars.iter().map(|&c| (c, c)));
    let mut raw = ClassUnicode::new(excluded.iter().map(|&(a, b)| ClassUnicodeRange::new(a, b)));
    raw.negate();
    let mut other = vec![Hir::class(Class::Unicode(raw))];
    // The escapes are the same at almost every node (keys rarely contain `"`, `\\`, `/` or
    // control characters): built once per process for that case.
    static ALL_SHORTS: std::sync::OnceLock<Hir> = std::sync::OnceLock::new();
    static ALL_CONTROLS: std::sync::OnceLock<Hir> = std::sync::OnceLock::new();
    let allowed_shorts: Vec<(char, char)> = SHORT_ESCAPES
        .iter()
        .filter(|(c, _)| !child_chars.contains(c))
        .map(|&(_, e)| (e, e))
        .collect();
    let shorts = || Hir::concat(vec![lit("\\"), class(&allowed_shorts)]);
    if allowed_shorts.len() == SHORT_ESCAPES.len() {
        other.push(ALL_SHORTS.get_or_init(shorts).clone());
    } else if !allowed_shorts.is_empty() {
        other.push(shorts());
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
        other.push(
            ALL_CONTROLS
                .get_or_init(|| {
                    Hir::concat(vec![
                        lit("\\u00"),
                        class(&[('0', '1')]),
                        class(&[('0', '9'), ('a', 'f'), ('A', 'F')]),
                    ])
                })
                .clone(),
        );
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
    alts.push(Hir::alternation(other));
    let ends = (!ends.is_empty()).then(|| Hir::alternation(ends));
    (ends, Hir::alternation(alts))
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
pub(super) fn search_matches_everything(p: &str) -> bool {
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
        ];
        let pieces = [
            "a", "b", "c", "n", "x", "/", "\\/", "\\\"", "\\\\", "\\t", "\\u0001", "\\u0041",
            "\\n", "é", "y", "e", "s", "_", "\\u001F",
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
            let built = regex_automata::meta::Regex::builder()
                .build_from_hir(&Hir::concat(vec![
                    Hir::look(regex_syntax::hir::Look::Start),
                    except_hir(&keys),
                    Hir::look(regex_syntax::hir::Look::End),
                ]))
                .unwrap();
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
