//! From decoded string characters to raw JSON string content: a regex over the characters of
//! a string (a `pattern`, a `format`) becomes a regex over what is written between the quotes,
//! with the characters that must be escaped as their shortest escapes; and every encoding of a
//! literal string (for excluding it from a language whose strings may use any escape).

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};

use super::hir;

/// The shortest JSON escapes of a character that cannot appear raw in a string.
fn escapes_of(c: char) -> Vec<String> {
    match c {
        '"' => vec!["\\\"".into()],
        '\\' => vec!["\\\\".into()],
        '\u{8}' => vec!["\\b".into()],
        '\u{c}' => vec!["\\f".into()],
        '\n' => vec!["\\n".into()],
        '\r' => vec!["\\r".into()],
        '\t' => vec!["\\t".into()],
        c => vec![
            format!("\\u{:04x}", c as u32),
            format!("\\u{:04X}", c as u32),
        ],
    }
}

fn needs_escape(c: char) -> bool {
    c == '"' || c == '\\' || (c as u32) < 0x20
}

/// Turn a regex over decoded string characters into a regex over the raw JSON string content
/// (between the quotes): characters that must be escaped become their escapes.
pub fn encode_for_json_string(h: &Hir) -> Hir {
    encode(h, true)
}

/// [`encode_for_json_string`]; `shortcut`: return a node that [`changes_when_encoded`] says
/// nothing about as it is (off only in the test that checks the shortcut).
fn encode(h: &Hir, shortcut: bool) -> Hir {
    use regex_syntax::hir::HirKind;
    // Most patterns and formats have nothing to escape: rebuilding them node by node (a
    // literal one character at a time) only to get the same HIR back was 4 % of compiling
    // the slowest schemas.
    if shortcut && !changes_when_encoded(h) {
        return h.clone();
    }
    let encode = |x: &Hir| encode(x, shortcut);
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => h.clone(),
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => Hir::concat(s.chars().map(encode_char).collect()),
            Err(_) => h.clone(),
        },
        HirKind::Class(Class::Unicode(cls)) => encode_class(cls),
        HirKind::Class(Class::Bytes(_)) => h.clone(),
        HirKind::Repetition(rep) => {
            let mut rep = rep.clone();
            rep.sub = Box::new(encode(&rep.sub));
            Hir::repetition(rep)
        }
        HirKind::Capture(cap) => encode(&cap.sub),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(encode).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.iter().map(encode).collect()),
    }
}

/// Whether [`encode_for_json_string`] would return something other than `h` itself: a
/// character that must be escaped (in a literal or a class), or a capture group (encoding
/// drops them).
fn changes_when_encoded(h: &Hir) -> bool {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Bytes(_)) => false,
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => s.chars().any(needs_escape),
            Err(_) => false,
        },
        HirKind::Class(Class::Unicode(cls)) => cls.ranges().iter().any(|r| {
            r.start() <= '\u{1f}'
                || (r.start() <= '"' && '"' <= r.end())
                || (r.start() <= '\\' && '\\' <= r.end())
        }),
        HirKind::Repetition(rep) => changes_when_encoded(&rep.sub),
        HirKind::Capture(_) => true,
        HirKind::Concat(parts) | HirKind::Alternation(parts) => {
            parts.iter().any(changes_when_encoded)
        }
    }
}

fn encode_char(c: char) -> Hir {
    if needs_escape(c) {
        Hir::alternation(
            escapes_of(c)
                .iter()
                .map(|e| Hir::literal(e.as_bytes().to_vec()))
                .collect(),
        )
    } else {
        let mut buf = [0u8; 4];
        Hir::literal(c.encode_utf8(&mut buf).as_bytes().to_vec())
    }
}

fn encode_class(cls: &ClassUnicode) -> Hir {
    let mut raw = cls.clone();
    let forbidden = ClassUnicode::new([
        ClassUnicodeRange::new('\u{0}', '\u{1f}'),
        ClassUnicodeRange::new('"', '"'),
        ClassUnicodeRange::new('\\', '\\'),
    ]);
    raw.difference(&forbidden);
    let mut escaped = cls.clone();
    escaped.intersect(&forbidden);
    let mut alts = Vec::new();
    if !raw.ranges().is_empty() {
        alts.push(Hir::class(Class::Unicode(raw)));
    }
    // Characters with a `\u` escape only, by first hex digit after `\u00` (0 or 1): their
    // last digits as one class (both cases of a-f: a code point below 0x20 has at most one
    // letter, so "all lower or all upper" is "that letter in either case"). One class
    // instead of two literals per character: a `pattern` with `.` has 27 of them, and a
    // `maxLength` copies the string unit up to 256 times (the DFA is the same; `.*`'s NFA
    // went from 351 to 39 states, and every ε-closure walked the 54 alternatives).
    let mut last_digits: [Vec<ClassUnicodeRange>; 2] = Default::default();
    for r in escaped.ranges() {
        for c in r.start()..=r.end() {
            if matches!(c, '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t') {
                alts.push(encode_char(c));
                continue;
            }
            let d = char::from_digit(c as u32 & 0xf, 16).expect("a hex digit");
            let ranges = &mut last_digits[(c as u32 >> 4) as usize];
            ranges.push(ClassUnicodeRange::new(d, d));
            let upper = d.to_ascii_uppercase();
            ranges.push(ClassUnicodeRange::new(upper, upper));
        }
    }
    for (first, ranges) in last_digits.into_iter().enumerate() {
        if !ranges.is_empty() {
            alts.push(Hir::concat(vec![
                Hir::literal(format!("\\u00{first}").into_bytes()),
                Hir::class(Class::Unicode(ClassUnicode::new(ranges))),
            ]));
        }
    }
    Hir::alternation(alts)
}

/// Every way to write the string `s` as JSON string content (between the quotes): each
/// character raw (unless it must be escaped), as a short escape where one exists, or as a
/// `\u` escape in any hex case (a surrogate pair beyond the BMP). For excluding values
/// exactly from a language whose strings may use any escape.
pub fn literal_any_encoding(s: &str) -> Hir {
    let hex_ci = |d: char| {
        if d.is_ascii_digit() {
            d.to_string()
        } else {
            format!("[{}{}]", d.to_ascii_lowercase(), d.to_ascii_uppercase())
        }
    };
    let u_escape = |unit: u32| -> String {
        let h = format!("{unit:04x}");
        format!("\\\\u{}", h.chars().map(hex_ci).collect::<String>())
    };
    let mut re = String::new();
    for c in s.chars() {
        let mut alts: Vec<String> = Vec::new();
        if !needs_escape(c) {
            alts.push(regex_syntax::escape(c.encode_utf8(&mut [0u8; 4])));
        }
        let short = match c {
            '"' => Some("\\\\\""),
            '\\' => Some("\\\\\\\\"),
            '/' => Some("\\\\/"),
            '\u{8}' => Some("\\\\b"),
            '\u{c}' => Some("\\\\f"),
            '\n' => Some("\\\\n"),
            '\r' => Some("\\\\r"),
            '\t' => Some("\\\\t"),
            _ => None,
        };
        alts.extend(short.map(str::to_string));
        let mut units = [0u16; 2];
        alts.push(
            c.encode_utf16(&mut units)
                .iter()
                .map(|&u| u_escape(u as u32))
                .collect(),
        );
        re.push_str(&format!("(?:{})", alts.join("|")));
    }
    hir(&re)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shortcut (a regex with nothing to escape is its own encoding) gives what encoding
    /// it node by node gives, on every format and on patterns with and without characters to
    /// escape, captures and anchors.
    #[test]
    fn the_unchanged_shortcut_equals_the_full_encoding() {
        let mut patterns: Vec<String> = super::super::ASSERTED_FORMATS
            .iter()
            .filter_map(|f| super::super::format_pattern(f))
            .collect();
        patterns.extend(
            [
                "[a-z]+",
                "\\d{3}-\\d{4}",
                "(?:ab|cd)*x",
                "(ab)+",
                "[^\"]",
                "a\"b",
                "\\\\",
                "(?s:.)*",
                ".",
                "[\\x00-\\x1f]",
                "[ -~]{2,5}",
                "\\u{e9}t\\u{e9}",
                "\\t|x",
                "^abc$",
                "(?:(a)|b)c",
            ]
            .map(String::from),
        );
        let mut unchanged = 0;
        for p in &patterns {
            let h = super::super::hir(p);
            let full = encode(&h, false);
            assert_eq!(encode_for_json_string(&h), full, "{p}");
            if !changes_when_encoded(&h) {
                assert_eq!(full, h, "{p}: the shortcut would return it unchanged");
                unchanged += 1;
            }
        }
        assert!(unchanged >= 4 && unchanged < patterns.len(), "{unchanged}");
    }

    /// A class's escaped characters are written exactly as `escapes_of` lists them: every
    /// 2- and 6-byte escape over the digits and letters involved is tried.
    #[test]
    fn escaped_classes_match_exactly_the_listed_escapes() {
        let hex = "0123456789abcdefABCDEF";
        let mut probes: Vec<String> = "\"\\/bfnrtu".chars().map(|c| format!("\\{c}")).collect();
        for a in "01".chars() {
            for b in hex.chars() {
                probes.push(format!("\\u00{a}{b}"));
            }
        }
        for pattern in [
            "[\\x00-\\x1f]",
            "[\\x05-\\x0c\\x1a\\\\]",
            "[^a]",
            "\\x0b",
            "[\\x10-\\x1f\"]",
        ] {
            let cls = match super::super::hir(pattern).kind() {
                regex_syntax::hir::HirKind::Class(Class::Unicode(c)) => c.clone(),
                regex_syntax::hir::HirKind::Literal(_) => {
                    ClassUnicode::new([ClassUnicodeRange::new('\u{b}', '\u{b}')])
                }
                k => panic!("{k:?}"),
            };
            let re = super::super::full_hir(encode_class(&cls));
            for p in &probes {
                let want = cls
                    .ranges()
                    .iter()
                    .flat_map(|r| r.start()..=r.end())
                    .any(|c| needs_escape(c) && escapes_of(c).contains(p));
                assert_eq!(re.is_match(p.as_bytes()), want, "{pattern} on {p}");
            }
        }
    }
}
