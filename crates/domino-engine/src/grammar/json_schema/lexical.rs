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

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, Look};

/// At most this many digits before the decimal point (so no number overflows an `f64`).
pub const MAX_INT_DIGITS: u32 = 64;

/// Parse one of this module's own patterns. They are constants or built from escaped pieces,
/// so a failure is a bug in this module.
pub fn hir(pattern: &str) -> Hir {
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("internal JSON regex does not parse ({e}): {pattern}"))
}

const HEX: &str = "[0-9a-fA-F]";

/// One JSON string character as written in the source (raw or escaped), any escape allowed.
pub fn string_unit_pattern() -> String {
    // Non-surrogate \u escapes: first hex digit not d/D, or d followed by 0-7.
    let non_surrogate = format!("(?:[0-9a-cA-CeEfF]{HEX}{{3}}|[dD][0-7]{HEX}{{2}})");
    let pair = format!("[dD][89abAB]{HEX}{{2}}\\\\u[dD][c-fC-F]{HEX}{{2}}");
    format!(r#"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u(?:{non_surrogate}|{pair}))"#)
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

/// JSON integers. Not `-0`: serde_json reads it as the float `-0.0`, which `jsonschema` does
/// not count as an integer.
pub fn integer_pattern() -> String {
    format!("(?:0|-?[1-9][0-9]{{0,{}}})", MAX_INT_DIGITS - 1)
}

pub fn number_pattern() -> String {
    format!(
        "-?(?:0|[1-9][0-9]{{0,{}}})(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]{{1,2}})?",
        MAX_INT_DIGITS - 1
    )
}

/// JSON whitespace, `0..=max` bytes.
pub fn whitespace_pattern(max: u32) -> String {
    format!("[ \\t\\n\\r]{{0,{max}}}")
}

/// The JSON text of a value, as a literal regex.
pub fn literal_pattern(text: &str) -> String {
    regex_syntax::escape(text)
}

// ---------------------------------------------------------------------------------------
// Integer ranges
// ---------------------------------------------------------------------------------------

/// Regex for the decimal digit strings (no leading zeros, no sign) of the integers in
/// `lo..=hi` (`hi: None` = unbounded, capped at [`MAX_INT_DIGITS`] digits). `lo <= hi`.
fn nonneg_range(lo: u128, hi: Option<u128>) -> String {
    let mut alts = Vec::new();
    let lo_s = lo.to_string();
    let max_len = hi
        .map(|h| h.to_string().len())
        .unwrap_or(MAX_INT_DIGITS as usize);
    for len in lo_s.len()..=max_len {
        let start = if len == lo_s.len() {
            lo
        } else {
            pow10(len - 1)
        };
        let end_full = pow10(len) - 1;
        if hi.is_none() && len > lo_s.len() {
            // Every longer length is unbounded: one alternative covers them all.
            alts.push(format!("[1-9][0-9]{{{},{}}}", len - 1, MAX_INT_DIGITS - 1));
            break;
        }
        let end = match hi {
            Some(h) if h < end_full => h,
            _ => end_full,
        };
        if start > end {
            continue;
        }
        alts.push(same_len_range(&start.to_string(), &end.to_string()));
    }
    if alts.len() == 1 {
        alts.pop().unwrap()
    } else {
        format!("(?:{})", alts.join("|"))
    }
}

fn pow10(n: usize) -> u128 {
    10u128.pow(n as u32)
}

/// Digit strings of one length between `x` and `y` inclusive (same length, `x <= y`).
fn same_len_range(x: &str, y: &str) -> String {
    let (xb, yb) = (x.as_bytes(), y.as_bytes());
    let n = xb.len();
    if n == 0 {
        return String::new();
    }
    let (x0, y0) = (xb[0] - b'0', yb[0] - b'0');
    if n == 1 {
        return digit_class(x0, y0);
    }
    let rest = n - 1;
    if x0 == y0 {
        return format!("{}{}", x0, same_len_range(&x[1..], &y[1..]));
    }
    if x[1..].bytes().all(|b| b == b'0') && y[1..].bytes().all(|b| b == b'9') {
        return format!("{}[0-9]{{{rest}}}", digit_class(x0, y0));
    }
    let mut alts = Vec::new();
    alts.push(format!(
        "{}{}",
        x0,
        same_len_range(&x[1..], &"9".repeat(rest))
    ));
    if x0 + 1 < y0 {
        alts.push(format!("{}[0-9]{{{rest}}}", digit_class(x0 + 1, y0 - 1)));
    }
    alts.push(format!(
        "{}{}",
        y0,
        same_len_range(&"0".repeat(rest), &y[1..])
    ));
    format!("(?:{})", alts.join("|"))
}

fn digit_class(a: u8, b: u8) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("[{a}-{b}]")
    }
}

/// Regex for the JSON integers in `lo..=hi` (either side may be open). `None` when empty.
pub fn integer_range_pattern(lo: Option<i128>, hi: Option<i128>) -> Option<String> {
    if let (Some(l), Some(h)) = (lo, hi) {
        if l > h {
            return None;
        }
    }
    let mut alts = Vec::new();
    // Negative part: magnitudes in max(1, -hi) ..= -lo.
    if lo.is_none_or(|l| l < 0) {
        let mag_lo = match hi {
            Some(h) if h < 0 => h.unsigned_abs(),
            _ => 1,
        };
        let mag_hi = lo.map(|l| l.unsigned_abs());
        alts.push(format!("-{}", nonneg_range(mag_lo, mag_hi)));
    }
    // Non-negative part: max(0, lo) ..= hi.
    if hi.is_none_or(|h| h >= 0) {
        let l = lo.map(|l| l.max(0) as u128).unwrap_or(0);
        alts.push(nonneg_range(l, hi.map(|h| h as u128)));
    }
    Some(if alts.len() == 1 {
        alts.pop().unwrap()
    } else {
        format!("(?:{})", alts.join("|"))
    })
}

// ---------------------------------------------------------------------------------------
// Decimal bounds for `type: number`
// ---------------------------------------------------------------------------------------

/// A non-negative decimal bound: integer part and fraction digits (trailing zeros dropped).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decimal {
    pub negative: bool,
    pub int: u128,
    pub frac: String,
}

impl Decimal {
    /// From a schema number. `None` when it is too large to matter (beyond every number the
    /// grammar can write, handled by the caller as "no bound") or not finite.
    pub fn from_f64(x: f64) -> Option<Decimal> {
        if !x.is_finite() {
            return None;
        }
        // Display for f64 never uses an exponent and prints the shortest round-trip digits.
        let text = format!("{}", x.abs());
        let (int_s, frac_s) = text.split_once('.').unwrap_or((&text, ""));
        if int_s.len() > 38 {
            return None;
        }
        let int: u128 = int_s.parse().ok()?;
        let frac = frac_s.trim_end_matches('0').to_string();
        Some(Decimal {
            negative: x < 0.0 && (int != 0 || !frac.is_empty()),
            int,
            frac,
        })
    }

    pub fn is_zero(&self) -> bool {
        self.int == 0 && self.frac.is_empty()
    }
}

/// A bound on a magnitude: the decimal and whether it is inclusive.
#[derive(Clone, Debug)]
pub struct MagBound {
    pub int: u128,
    pub frac: String,
    pub inclusive: bool,
}

/// Fraction digit strings `D` (possibly empty, meaning no fraction) with `0.D` inside the
/// bounds on the fraction; `max_digits` caps the length. Returns `(empty_ok, nonempty)`.
fn frac_set(
    lo: Option<(&[u8], bool)>,
    hi: Option<(&[u8], bool)>,
    max_digits: Option<u32>,
) -> (bool, Option<String>) {
    // A lower bound whose digits are exhausted, inclusive, is no bound any more.
    let lo = lo.filter(|(l, incl)| !(l.is_empty() && *incl));
    let zeros = |max: Option<u32>| match max {
        None => "0+".to_string(),
        Some(m) => format!("0{{1,{m}}}"),
    };
    if let Some((h, h_incl)) = hi {
        if h.is_empty() {
            // Only an all-zero rest stays below an exhausted upper bound (and only if inclusive).
            let lo_ok = lo.is_none_or(|(l, incl)| incl && l.iter().all(|&d| d == b'0'));
            return if h_incl && lo_ok {
                (true, (max_digits != Some(0)).then(|| zeros(max_digits)))
            } else {
                (false, None)
            };
        }
    }
    if let (Some((l, false)), None) = (lo, hi) {
        if l.is_empty() {
            // Strictly above an exhausted bound: some non-zero digit must follow.
            let ne = match max_digits {
                None => Some("[0-9]*[1-9][0-9]*".to_string()),
                Some(0) => None,
                Some(m) => Some(format!(
                    "(?:{})",
                    (0..m)
                        .map(|j| format!("0{{{j}}}[1-9][0-9]{{0,{}}}", m - 1 - j))
                        .collect::<Vec<_>>()
                        .join("|")
                )),
            };
            return (false, ne);
        }
    }
    // Is the empty fraction (value 0) inside?
    let empty_ok = lo.is_none_or(|(l, incl)| incl && l.iter().all(|&d| d == b'0'))
        && hi.is_none_or(|(h, incl)| incl || h.iter().any(|&d| d != b'0'));
    if max_digits == Some(0) {
        return (empty_ok, None);
    }
    let next_max = max_digits.map(|m| m - 1);
    let any_digits = |max: Option<u32>| match max {
        None => "[0-9]*".to_string(),
        Some(m) => format!("[0-9]{{0,{m}}}"),
    };
    if lo.is_none() && hi.is_none() {
        return (true, Some(format!("[0-9]{}", any_digits(next_max))));
    }
    // A bound whose remaining digits are exhausted behaves as zeros from here on.
    let lo_d = lo.map(|(l, _)| l.first().map(|d| d - b'0').unwrap_or(0));
    let hi_d = hi.map(|(h, _)| h.first().map(|d| d - b'0').unwrap_or(0));
    // Exhausted inclusive lower bound: everything from here on is >= 0: no lower bound.
    // Exhausted strict lower bound: the rest must be non-zero: keep it as a bound of "" strict.
    let mut alts = Vec::new();
    let mut d = 0u8;
    while d <= 9 {
        // Classify digit d against both bounds; consecutive digits with the same outcome
        // share one class.
        let class_of = |d: u8| -> Option<(u8, u8)> {
            let l = match lo_d {
                None => 1,
                Some(l) if d < l => return None,
                Some(l) if d == l => 0,
                Some(_) => 1,
            };
            let h = match hi_d {
                None => 1,
                Some(h) if d > h => return None,
                Some(h) if d == h => 0,
                Some(_) => 1,
            };
            Some((l, h))
        };
        let Some(kind) = class_of(d) else {
            d += 1;
            continue;
        };
        let mut e = d;
        while e < 9 && class_of(e + 1) == Some(kind) {
            e += 1;
        }
        let next_lo = if kind.0 == 0 {
            let (l, incl) = lo.unwrap();
            let rest = if l.is_empty() { l } else { &l[1..] };
            if rest.is_empty() && incl {
                None
            } else {
                Some((rest, incl))
            }
        } else {
            None
        };
        let next_hi = if kind.1 == 0 {
            let (h, incl) = hi.unwrap();
            Some((if h.is_empty() { h } else { &h[1..] }, incl))
        } else {
            None
        };
        // An exhausted strict lower bound equal so far, with an exhausted upper bound: the
        // remaining digits must be both zero and non-zero: nothing.
        let (tail_empty, tail_ne) = frac_set(next_lo, next_hi, next_max);
        let tail = match (tail_empty, tail_ne) {
            (true, None) => Some(String::new()),
            (true, Some(t)) => Some(format!("(?:{t})?")),
            (false, Some(t)) => Some(t),
            (false, None) => None,
        };
        if let Some(t) = tail {
            alts.push(format!("{}{t}", digit_class(d, e)));
        }
        d = e + 1;
    }
    let ne = match alts.len() {
        0 => None,
        1 => alts.pop(),
        _ => Some(format!("(?:{})", alts.join("|"))),
    };
    (empty_ok, ne)
}

fn frac_pattern(set: (bool, Option<String>)) -> Option<String> {
    match set {
        (true, None) => Some(String::new()),
        (true, Some(ne)) => Some(format!("(?:\\.{ne})?")),
        (false, Some(ne)) => Some(format!("\\.{ne}")),
        (false, None) => None,
    }
}

/// Magnitudes (non-negative decimals, no exponent, no sign) within `lo` / `hi`.
fn magnitude_pattern(
    lo: &MagBound,
    hi: Option<&MagBound>,
    max_frac: Option<u32>,
) -> Option<String> {
    let any_frac = frac_pattern(frac_set(None, None, max_frac)).unwrap();
    let mut alts = Vec::new();
    let lo_f = (lo.frac.as_bytes(), lo.inclusive);
    match hi {
        None => {
            alts.push(format!("{}{any_frac}", nonneg_range(lo.int + 1, None)));
            if let Some(f) = frac_pattern(frac_set(Some(lo_f), None, max_frac)) {
                alts.push(format!("{}{f}", lo.int));
            }
        }
        Some(hi) => {
            let hi_f = (hi.frac.as_bytes(), hi.inclusive);
            if lo.int > hi.int {
                return None;
            }
            if lo.int == hi.int {
                let f = frac_pattern(frac_set(Some(lo_f), Some(hi_f), max_frac))?;
                alts.push(format!("{}{f}", lo.int));
            } else {
                if lo.int + 1 < hi.int {
                    alts.push(format!(
                        "{}{any_frac}",
                        nonneg_range(lo.int + 1, Some(hi.int - 1))
                    ));
                }
                if let Some(f) = frac_pattern(frac_set(Some(lo_f), None, max_frac)) {
                    alts.push(format!("{}{f}", lo.int));
                }
                if let Some(f) = frac_pattern(frac_set(None, Some(hi_f), max_frac)) {
                    alts.push(format!("{}{f}", hi.int));
                }
            }
        }
    }
    match alts.len() {
        0 => None,
        1 => alts.pop(),
        _ => Some(format!("(?:{})", alts.join("|"))),
    }
}

/// JSON numbers `x` with `lo <= x` (or `<`) and `x <= hi` (or `<`), written without exponent,
/// with at most `max_frac` fraction digits. `None` when no number qualifies.
pub fn number_range_pattern(
    lo: Option<(Decimal, bool)>,
    hi: Option<(Decimal, bool)>,
    max_frac: Option<u32>,
) -> Option<String> {
    let mut alts = Vec::new();
    let zero = MagBound {
        int: 0,
        frac: String::new(),
        inclusive: true,
    };
    // Negative side: x < 0, magnitude m = -x.
    if lo.as_ref().is_none_or(|(l, _)| l.negative) {
        // m > max(0, -hi) ... m <= -lo
        let m_lo = match &hi {
            Some((h, incl)) if h.negative => MagBound {
                int: h.int,
                frac: h.frac.clone(),
                inclusive: *incl,
            },
            _ => MagBound {
                int: 0,
                frac: String::new(),
                inclusive: false,
            },
        };
        let m_hi = lo.as_ref().map(|(l, incl)| MagBound {
            int: l.int,
            frac: l.frac.clone(),
            inclusive: *incl,
        });
        if let Some(p) = magnitude_pattern(&m_lo, m_hi.as_ref(), max_frac) {
            alts.push(format!("-{p}"));
        }
    }
    // Non-negative side: x >= 0.
    let hi_allows_nonneg = hi
        .as_ref()
        .is_none_or(|(h, incl)| !h.negative && (*incl || !h.is_zero()));
    if hi_allows_nonneg {
        let m_lo = match &lo {
            Some((l, incl)) if !l.negative => MagBound {
                int: l.int,
                frac: l.frac.clone(),
                inclusive: *incl,
            },
            _ => zero.clone(),
        };
        let m_hi = hi.as_ref().map(|(h, incl)| MagBound {
            int: h.int,
            frac: h.frac.clone(),
            inclusive: *incl,
        });
        if let Some(p) = magnitude_pattern(&m_lo, m_hi.as_ref(), max_frac) {
            alts.push(p);
        }
    }
    match alts.len() {
        0 => None,
        1 => alts.pop(),
        _ => Some(format!("(?:{})", alts.join("|"))),
    }
}

// ---------------------------------------------------------------------------------------
// Formats
// ---------------------------------------------------------------------------------------

/// Formats the `jsonschema` crate asserts. Those with a pattern here are compiled; the rest
/// are reported unsupported. Any other format name is an annotation (constrains nothing).
pub const ASSERTED_FORMATS: &[&str] = &[
    "date",
    "date-time",
    "time",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
    "uuid",
    "duration",
];

/// The regex (over the decoded string, all ASCII) for a supported format.
pub fn format_pattern(format: &str) -> Option<String> {
    let date = "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))";
    let time = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
    // Single inner hyphens only: IDNA rejects `--` in the third and fourth places.
    let label = "[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,3}";
    let h16 = "[0-9a-fA-F]{1,4}";
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    let pchar = "(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})";
    Some(match format {
        "date" => date.to_string(),
        "time" => time.to_string(),
        "date-time" => format!("{date}T{time}"),
        "uuid" => "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}".to_string(),
        "ipv4" => format!("{octet}(?:\\.{octet}){{3}}"),
        "ipv6" => [
            format!("(?:{h16}:){{7}}{h16}"),
            format!("(?:{h16}:){{1,7}}:"),
            format!("(?:{h16}:){{1,6}}:{h16}"),
            format!("(?:{h16}:){{1,5}}(?::{h16}){{1,2}}"),
            format!("(?:{h16}:){{1,4}}(?::{h16}){{1,3}}"),
            format!("(?:{h16}:){{1,3}}(?::{h16}){{1,4}}"),
            format!("(?:{h16}:){{1,2}}(?::{h16}){{1,5}}"),
            format!("{h16}:(?::{h16}){{1,6}}"),
            format!(":(?:(?::{h16}){{1,7}}|:)"),
        ]
        .join("|"),
        "hostname" => format!("{label}(?:\\.{label}){{0,8}}"),
        // Conservative: dot-separated atoms, then alphanumeric labels (single inner hyphens)
        // and an alphabetic top-level label.
        // Every address this writes is also a valid internationalized address (RFC 6531
        // extends RFC 5321), so `idn-email` shares the conservative ASCII subset.
        "email" | "idn-email" => "[A-Za-z0-9_+-]{1,32}(?:\\.[A-Za-z0-9_+-]{1,32}){0,4}@(?:[A-Za-z0-9]{1,20}(?:-[A-Za-z0-9]{1,20}){0,3}\\.){1,4}[A-Za-z]{2,8}".to_string(),
        "uri" => format!(
            "[A-Za-z][A-Za-z0-9+.-]{{0,15}}:(?://(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{{2}})+(?::[0-9]{{1,5}})?(?:/{pchar}*)*|(?:/{pchar}+)(?:/{pchar}*)*|{pchar}+(?:/{pchar}*)*)?(?:\\?(?:{pchar}|[/?])*)?(?:#(?:{pchar}|[/?])*)?"
        ),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------
// Decoded-string regexes -> raw JSON string content
// ---------------------------------------------------------------------------------------

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
    use regex_syntax::hir::HirKind;
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
            rep.sub = Box::new(encode_for_json_string(&rep.sub));
            Hir::repetition(rep)
        }
        HirKind::Capture(cap) => encode_for_json_string(&cap.sub),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(encode_for_json_string).collect()),
        HirKind::Alternation(parts) => {
            Hir::alternation(parts.iter().map(encode_for_json_string).collect())
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
    for r in escaped.ranges() {
        for c in r.start()..=r.end() {
            alts.push(encode_char(c));
        }
    }
    Hir::alternation(alts)
}

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
                parts.insert(0, any.clone());
            }
            if !end {
                parts.push(any.clone());
            }
            Hir::concat(parts)
        }
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn full(p: &str) -> Regex {
        Regex::new(&format!("^(?:{p})$")).unwrap()
    }

    #[test]
    fn integer_ranges_are_exact() {
        for (lo, hi) in [
            (Some(0), Some(0)),
            (Some(-15), Some(7)),
            (Some(3), Some(117)),
            (Some(-250), Some(-13)),
            (Some(10), None),
            (None, Some(-3)),
            (Some(99), Some(1000)),
        ] {
            let re = full(&integer_range_pattern(lo, hi).unwrap());
            for x in -1200i128..1200 {
                let want = lo.is_none_or(|l| x >= l) && hi.is_none_or(|h| x <= h);
                assert_eq!(re.is_match(&x.to_string()), want, "{x} in {lo:?}..={hi:?}");
            }
            assert!(!re.is_match("007"));
        }
        assert!(integer_range_pattern(Some(5), Some(4)).is_none());
    }

    #[test]
    fn number_ranges_are_exact() {
        let dec = |x: f64| Decimal::from_f64(x).unwrap();
        let cases: Vec<(Option<(f64, bool)>, Option<(f64, bool)>, Option<u32>)> = vec![
            (Some((0.0, true)), None, None),
            (Some((0.0, false)), None, None),
            (Some((0.5, true)), Some((2.25, false)), None),
            (Some((-1.5, false)), Some((1.0, true)), None),
            (None, Some((99.99, true)), Some(2)),
            (Some((-90.0, true)), Some((90.0, true)), None),
            (Some((0.1, true)), Some((0.3, true)), None),
            (None, Some((-0.25, false)), None),
        ];
        for (lo, hi, mf) in cases {
            let p = number_range_pattern(
                lo.map(|(x, i)| (dec(x), i)),
                hi.map(|(x, i)| (dec(x), i)),
                mf,
            )
            .unwrap();
            let re = full(&p);
            for i in -3000i64..3000 {
                for text in [
                    format!("{}", i as f64 / 20.0),
                    format!("{:.3}", i as f64 / 7.0),
                    format!("{}", i / 10),
                ] {
                    let x: f64 = text.parse().unwrap();
                    if text.starts_with("-0") && x == 0.0 {
                        continue;
                    }
                    let digits = text
                        .split_once('.')
                        .map(|(_, f)| f.len() as u32)
                        .unwrap_or(0);
                    let want = lo.is_none_or(|(l, inc)| if inc { x >= l } else { x > l })
                        && hi.is_none_or(|(h, inc)| if inc { x <= h } else { x < h })
                        && mf.is_none_or(|m| digits <= m);
                    assert_eq!(
                        re.is_match(&text),
                        want,
                        "{text} with {lo:?} {hi:?} {mf:?}: {p}"
                    );
                }
            }
        }
    }

    #[test]
    fn formats_parse_and_match_examples() {
        for (f, ok, bad) in [
            ("date", "2024-02-28", "2024-02-30"),
            (
                "date-time",
                "2024-01-31T23:59:59.5+01:00",
                "2024-01-31 23:59:59",
            ),
            ("time", "12:00:00Z", "24:00:00Z"),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567"),
            ("ipv4", "192.168.0.255", "256.1.1.1"),
            ("ipv6", "2001:db8::1", "2001:db8:::1"),
            ("email", "a.b@example.com", "a@b"),
            ("uri", "https://example.com:8080/a/b?x=1#f", "no scheme"),
        ] {
            let re = full(&format_pattern(f).unwrap());
            assert!(re.is_match(ok), "{f} {ok}");
            assert!(!re.is_match(bad), "{f} {bad}");
        }
    }

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

/// Regexes whose intersection is the JSON numbers (without exponent) that are multiples of
/// `k`: `k = c / 10^n` exactly in decimal, with `c` an integer. Supported: integer `k` (the
/// divisibility of the digit string by `c`'s factor coprime to 10 through its residue
/// automaton, by `c`'s 2- and 5-part through the last digits) and fractional `k` whose `c`
/// divides `10^n` (then only the first `n` fraction digits matter). `None` otherwise, or when
/// the residue automaton's expression would be too large.
pub fn multiple_of_patterns(k: f64) -> Option<Vec<String>> {
    let text = format!("{k}");
    if text.contains(['e', 'E']) || k <= 0.0 {
        return None;
    }
    let (int_part, frac_part) = text.split_once('.').unwrap_or((&text, ""));
    let n = frac_part.len() as u32;
    let c: u64 = format!("{int_part}{frac_part}")
        .trim_start_matches('0')
        .parse()
        .ok()?;
    if c == 0 || n > 9 || c > 1_000_000 {
        return None;
    }
    if n == 0 {
        // Integers that are multiples of c: split c = 2^a 5^b m.
        let (mut m, mut a, mut b) = (c, 0u32, 0u32);
        while m % 2 == 0 {
            m /= 2;
            a += 1;
        }
        while m % 5 == 0 {
            m /= 5;
            b += 1;
        }
        let mut out = Vec::new();
        let p = c / m; // 2^a 5^b
        if p > 1 {
            // Divisibility by p depends on the last t digits only.
            let t = a.max(b);
            let modulus = 10u64.pow(t);
            if modulus / p > 1000 {
                return None;
            }
            let mut alts = Vec::new();
            for v in (0..modulus).step_by(p as usize) {
                alts.push(format!("[0-9]*{v:0width$}", width = t as usize)); // at least t digits
                alts.push(format!("{v}")); // fewer digits: the number itself
            }
            out.push(format!("-?(?:{})", alts.join("|")));
        }
        if m > 1 {
            out.push(format!("-?(?:{})", digits_multiple_of(m)?));
        }
        return Some(out);
    }
    let scale = 10u64.pow(n);
    if scale % c != 0 {
        return None;
    }
    // x = D.F is a multiple of c/10^n iff F's first n digits (zero padded) are a multiple
    // of c and the rest are zeros (10^n · D is always a multiple of c).
    let mut alts = Vec::new();
    for f in (0..scale).step_by(c as usize) {
        let s = format!("{f:0width$}", width = n as usize);
        let p = s.trim_end_matches('0');
        alts.push(if p.is_empty() {
            "0+".to_string()
        } else {
            format!("{p}0*")
        });
    }
    Some(vec![format!("-?[0-9]+(?:\\.(?:{}))?", alts.join("|"))])
}

/// Regex over decimal digit strings whose value is a multiple of `m` (`gcd(m, 10) = 1`), by
/// state elimination on the residue automaton (state `r` reading digit `d` goes to
/// `(10 r + d) mod m`). `None` when the expression would be large.
fn digits_multiple_of(m: u64) -> Option<String> {
    const MAX_LEN: usize = 20_000;
    if m > 13 {
        return None;
    }
    let m = m as usize;
    let class = |ds: &[usize]| -> Option<String> {
        match ds.len() {
            0 => None,
            1 => Some(ds[0].to_string()),
            _ => Some(format!(
                "[{}]",
                ds.iter().map(|d| d.to_string()).collect::<String>()
            )),
        }
    };
    // r[i][j]: the expression for one step from i to j (None: no string).
    let mut r: Vec<Vec<Option<String>>> = (0..m)
        .map(|i| {
            (0..m)
                .map(|j| {
                    class(
                        &(0..10)
                            .filter(|d| (10 * i + d) % m == j)
                            .collect::<Vec<_>>(),
                    )
                })
                .collect()
        })
        .collect();
    let alt = |a: Option<String>, b: Option<String>| match (a, b) {
        (None, x) | (x, None) => x,
        (Some(x), Some(y)) => Some(format!("(?:{x}|{y})")),
    };
    for k in (1..m).rev() {
        let loop_k = r[k][k]
            .clone()
            .map(|l| format!("(?:{l})*"))
            .unwrap_or_default();
        for i in 0..k {
            for j in 0..k {
                if let (Some(a), Some(b)) = (&r[i][k], &r[k][j]) {
                    let through = Some(format!("{a}{loop_k}{b}"));
                    r[i][j] = alt(r[i][j].take(), through);
                    if r[i][j].as_ref().is_some_and(|s| s.len() > MAX_LEN) {
                        return None;
                    }
                }
            }
        }
    }
    r[0][0].take().map(|x| format!("(?:{x})+"))
}
