//! `pattern`s: ECMA-262 regexes (as JSON Schema writes them) translated to `regex-syntax`
//! syntax, search semantics made explicit (leading `^` / trailing `$` removed, the
//! unanchored sides matching anything), and the leading negative look-ahead `^(?!X)REST` split
//! into a pattern and an exclusion.

use regex_syntax::hir::{Hir, Look};

/// Whether `h` contains any look-around assertion (anchor, word boundary).
pub fn has_look(h: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Look(_) => true,
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Repetition(r) => has_look(&r.sub),
        HirKind::Capture(c) => has_look(&c.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_look),
    }
}

/// Remove a leading `^` / trailing `$` from a top-level concatenation (or each branch of a
/// top-level alternation) and make the unanchored sides match anything (JSON Schema patterns
/// search). `any` is "any string" in the target alphabet. Other look-arounds are left in
/// place for the caller to reject.
pub fn anchor_search(h: &Hir, any: &Hir) -> Hir {
    // (Branches are kept in a list: `Hir::alternation` would factor the anchors back out.)
    let mut branches = Vec::new();
    distribute_anchored_alternations(h, 0, &mut branches);
    Hir::alternation(
        branches
            .iter()
            .map(|b| anchor_search_inner(b, any))
            .collect(),
    )
}

/// `^(?:a$|b$)` and the like: push a concatenation into a first or last alternation that
/// holds anchors, so that every anchor ends up at the edge of a top-level branch.
fn distribute_anchored_alternations(h: &Hir, depth: usize, out: &mut Vec<Hir>) {
    use regex_syntax::hir::HirKind;
    if depth > 8 || out.len() > 256 {
        out.push(h.clone());
        return;
    }
    match h.kind() {
        HirKind::Capture(c) if has_look(&c.sub) => {
            distribute_anchored_alternations(&c.sub, depth + 1, out)
        }
        HirKind::Alternation(bs) => {
            for b in bs {
                distribute_anchored_alternations(b, depth + 1, out);
            }
        }
        HirKind::Concat(parts) => {
            let strip = |p: &Hir| -> Hir {
                match p.kind() {
                    HirKind::Capture(c) => (*c.sub).clone(),
                    _ => p.clone(),
                }
            };
            for (i, p) in parts.iter().enumerate() {
                let inner = strip(p);
                if let HirKind::Alternation(bs) = inner.kind() {
                    if bs.iter().any(has_look) && bs.len() <= 64 {
                        for b in bs {
                            let mut v = parts[..i].to_vec();
                            v.push(b.clone());
                            v.extend_from_slice(&parts[i + 1..]);
                            distribute_anchored_alternations(&Hir::concat(v), depth + 1, out);
                        }
                        return;
                    }
                }
            }
            out.push(h.clone());
        }
        _ => out.push(h.clone()),
    }
}

fn anchor_search_inner(h: &Hir, any: &Hir) -> Hir {
    use regex_syntax::hir::HirKind;
    let is_start = |h: &Hir| {
        matches!(
            h.kind(),
            HirKind::Look(Look::Start) | HirKind::Look(Look::StartLF)
        )
    };
    let is_end = |h: &Hir| {
        matches!(
            h.kind(),
            HirKind::Look(Look::End) | HirKind::Look(Look::EndLF)
        )
    };
    match h.kind() {
        HirKind::Capture(c) => anchor_search_inner(&c.sub, any),
        _ => {
            let mut parts: Vec<Hir> = match h.kind() {
                HirKind::Concat(v) => v.clone(),
                _ => vec![h.clone()],
            };
            // A single capture group around everything: look inside (`^(a|b)$` is common).
            if parts.len() == 1 {
                if let HirKind::Capture(c) = parts[0].kind() {
                    if has_look(&c.sub) {
                        return anchor_search_inner(&c.sub, any);
                    }
                }
            }
            let start = parts.first().is_some_and(is_start);
            if start {
                parts.remove(0);
            }
            let end = parts.last().is_some_and(is_end);
            if end {
                parts.pop();
            }
            if !start {
                shrink_edge_repetitions(&mut parts, true);
                parts.insert(0, any.clone());
            }
            if !end {
                shrink_edge_repetitions(&mut parts, false);
                parts.push(any.clone());
            }
            Hir::concat(parts)
        }
    }
}

/// On a side left open (matching anything beyond), a repetition at that edge needs only its
/// minimum: `any · X{m,n} · P` and `any · X{m} · P` are the same language (a longer run of `X`
/// is `X{m}` preceded by more of "anything"), and `X{0,n}` / `X*` there vanish. So
/// `[A-Za-z0-9]{1,255}` searched anywhere is one character of the class, not a 255-state
/// counter the lexer would determinise (200 ms for one JSONSchemaBench key pattern).
/// Captures at the edge are looked through; repeated while the new edge is a repetition.
fn shrink_edge_repetitions(parts: &mut Vec<Hir>, front: bool) {
    use regex_syntax::hir::{HirKind, Repetition};
    loop {
        let edge = if front { parts.first() } else { parts.last() };
        let Some(mut edge) = edge else { return };
        while let HirKind::Capture(c) = edge.kind() {
            edge = &c.sub;
        }
        let HirKind::Repetition(r) = edge.kind() else {
            return;
        };
        if r.min == 0 {
            if front {
                parts.remove(0);
            } else {
                parts.pop();
            }
            continue;
        }
        if r.max == Some(r.min) {
            return;
        }
        let exact = Hir::repetition(Repetition {
            min: r.min,
            max: Some(r.min),
            greedy: r.greedy,
            sub: r.sub.clone(),
        });
        if front {
            parts[0] = exact;
        } else {
            *parts.last_mut().expect("an edge") = exact;
        }
        return;
    }
}

/// A matcher for property names against an ECMA-262 `pattern` (`patternProperties`), `None`
/// when the pattern cannot be translated or compiled. Memoised process-wide by pattern:
/// schemas of one family repeat theirs (each WashingtonPost schema tests the same few
/// hundred times). Built without the meta engine's full DFA, which it would determinise for
/// a handful of names: that was a tenth of those schemas' compile.
pub fn name_matcher(pattern: &str) -> Option<regex_automata::meta::Regex> {
    static MATCHERS: super::SharedCache<Option<regex_automata::meta::Regex>> =
        super::SharedCache::new(NAME_MATCHER_ENTRIES, NAME_MATCHER_BYTES);
    MATCHERS.get_or_build(pattern, || {
        let t = translate_ecma(pattern).ok()?;
        regex_automata::meta::Regex::builder()
            .configure(regex_automata::meta::Config::new().dfa(false))
            .build(&t)
            .ok()
    })
}

/// Most patterns [`name_matcher`] keeps compiled, and the most bytes of pattern text.
pub const NAME_MATCHER_ENTRIES: usize = 4096;
/// See [`NAME_MATCHER_ENTRIES`].
pub const NAME_MATCHER_BYTES: usize = 1 << 20;

/// Translate an ECMA-262 regex (as JSON Schema uses) into `regex-syntax` syntax: `\d`, `\w`
/// and their negations are ASCII in ECMA; `.` excludes all line terminators; `\/` is a plain
/// slash. Returns an error message for ECMA features with no regular equivalent.
pub fn translate_ecma(pattern: &str) -> Result<String, String> {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    return Err("pattern ends with a lone backslash".into());
                };
                // `\s`: the characters both ECMA and Unicode call white space (so the
                // grammar is a subset whichever definition the validator uses).
                const SPACE: &str = r"\t\n\x0B\x0C\r \u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}";
                const NOT_SPACE: &str = r"\t\n\x0B\x0C\r \u{85}\u{A0}\u{1680}\u{2000}-\u{200A}\u{2028}\u{2029}\u{202F}\u{205F}\u{3000}\u{FEFF}";
                let space_class;
                let repl: Option<&str> = match (e, in_class) {
                    ('s', false) => {
                        space_class = format!("[{SPACE}]");
                        Some(&space_class)
                    }
                    ('s', true) => Some(SPACE),
                    ('S', _) => {
                        space_class = format!("[^{NOT_SPACE}]");
                        Some(&space_class)
                    }
                    ('d', false) => Some("[0-9]"),
                    ('D', false) => Some("[^0-9]"),
                    ('w', false) => Some("[A-Za-z0-9_]"),
                    ('W', false) => Some("[^A-Za-z0-9_]"),
                    ('d', true) => Some("0-9"),
                    ('w', true) => Some("A-Za-z0-9_"),
                    ('D', true) => Some("[^0-9]"),
                    ('W', true) => Some("[^A-Za-z0-9_]"),
                    _ => None,
                };
                if let Some(r) = repl {
                    out.push_str(r);
                } else if e.is_ascii_digit() && e != '0' && !in_class {
                    return Err(format!("backreference \\{e} is not regular"));
                } else if e == 'c' {
                    return Err("control escape \\c is not supported".into());
                } else if e == 'u' && chars.peek() != Some(&'{') {
                    // ECMA \uXXXX -> \u{XXXX}
                    let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                    if hex.len() != 4 || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                        return Err(format!("bad \\u escape \\u{hex}"));
                    }
                    out.push_str(&format!("\\u{{{hex}}}"));
                } else if e.is_ascii_alphanumeric() || e == '\\' {
                    out.push('\\');
                    out.push(e);
                } else {
                    out.push_str(&regex_syntax::escape(&e.to_string()));
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    out.push(chars.next().unwrap());
                }
                // ECMA `[]` matches nothing and `[^]` anything; a leading `]` closes the class.
                if chars.peek() == Some(&']') {
                    chars.next();
                    in_class = false;
                    if out.ends_with('^') {
                        out.truncate(out.len() - 2);
                        out.push_str("(?s:.)");
                    } else {
                        out.truncate(out.len() - 1);
                        out.push_str("[^\\x00-\\x{10FFFF}]");
                    }
                }
            }
            '[' if in_class => out.push_str("\\["),
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            '.' if !in_class => out.push_str("[^\\n\\r\\u{2028}\\u{2029}]"),
            '(' if !in_class && chars.peek() == Some(&'?') => {
                chars.next();
                match chars.peek() {
                    Some(':') => out.push_str("(?"),
                    Some('<') => {
                        // (?<name> is a named group; (?<= and (?<! are look-behind.
                        let mut look = chars.clone();
                        look.next();
                        if matches!(look.peek(), Some('=') | Some('!')) {
                            return Err("look-behind is not regular".into());
                        }
                        out.push_str("(?P");
                    }
                    Some('=') | Some('!') => return Err("look-ahead is not regular".into()),
                    _ => return Err("unknown group syntax (?".into()),
                }
            }
            '&' | '~' | '-' if in_class && chars.peek() == Some(&c) => {
                // regex-syntax reads `&&`, `--`, `~~` as class set operators; ECMA as two
                // literal characters.
                chars.next();
                out.push('\\');
                out.push(c);
                out.push('\\');
                out.push(c);
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

/// `^(?!X)REST` (a negative look-ahead at the start, the one look-around JSON Schema patterns
/// commonly use) as `("^(?:X)", "^REST")`: a string matches the pattern exactly when it
/// matches the second and not the first (both with search semantics). `None` for any other
/// shape.
pub fn split_leading_negative_lookahead(pattern: &str) -> Option<(String, String)> {
    let body = pattern.strip_prefix("^(?!")?;
    let mut depth = 1usize;
    let mut in_class = false;
    let mut chars = body.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '(' if !in_class => depth += 1,
            ')' if !in_class => {
                depth -= 1;
                if depth == 0 {
                    let (x, rest) = (&body[..i], &body[i + 1..]);
                    if x.contains("(?")
                        || rest.contains("(?=")
                        || rest.contains("(?!")
                        || rest.contains("(?<")
                    {
                        return None; // nested look-arounds
                    }
                    return Some((format!("^(?:{x})"), format!("^{rest}")));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::{full, hir};
    use super::*;

    #[test]
    fn ecma_translation() {
        assert_eq!(translate_ecma(r"^\d+\/x$").unwrap(), r"^[0-9]+/x$");
        assert!(translate_ecma(r"(a)\1").is_err());
        assert!(translate_ecma(r"(?=a)").is_err());
        let any = hir("(?s:.)*");
        let h = anchor_search(&hir(&translate_ecma(r"^$|^\d{1,3}$").unwrap()), &any);
        assert!(
            !has_look(&h),
            "{:?} -> {h:?}",
            hir(&translate_ecma(r"^$|^\d{1,3}$").unwrap())
        );
        let h = anchor_search(&hir(&translate_ecma(r"^(?:ab|cd$)").unwrap()), &any);
        assert!(!has_look(&h));
        let t = translate_ecma(r"[\w-]+").unwrap();
        assert!(full(&t).is_match("a-b_c"));
        let t = translate_ecma(r"^[a-c_]+$").unwrap();
        assert!(full(&t).is_match("ab_c") && !full(&t).is_match("-"));
    }

    /// Searching a pattern (JSON Schema semantics) equals the full match of what
    /// [`anchor_search`] makes of it, edge repetitions shrunk to their minimum included.
    #[test]
    fn anchor_search_keeps_search_semantics_with_shrunk_edges() {
        let any = hir("(?s:.)*");
        let mut words: Vec<String> = vec![String::new()];
        for len in 1..=6 {
            let mut next = Vec::new();
            for w in words.iter().filter(|w| w.len() == len - 1) {
                for c in ['a', 'b', '1', '-'] {
                    next.push(format!("{w}{c}"));
                }
            }
            words.extend(next);
        }
        words.push("a".repeat(40));
        words.push(format!("-{}-", "ab".repeat(9)));
        for p in [
            "[a-z0-9]{1,255}",
            "(a{2,5})",
            "^a{2,}",
            "b*1{0,3}",
            "[0-9]{3,}$",
            "(ab){1,3}-(b1){2,4}",
            "^(?:a|b){2,3}-?",
            "a+-b+",
            "x*",
        ] {
            let searched = anchor_search(&hir(p), &any);
            let shrunk = full(&searched.to_string());
            let reference = regex_automata::meta::Regex::new(p).unwrap();
            for w in &words {
                assert_eq!(
                    shrunk.is_match(w.as_str()),
                    reference.is_match(w.as_str()),
                    "pattern {p:?} on {w:?} (searched as {searched})"
                );
            }
        }
        // The counter is gone: one class character between two "anything"s.
        let h = anchor_search(&hir("[a-z0-9]{1,255}"), &any).to_string();
        assert!(!h.contains("255"), "{h}");
    }
}
