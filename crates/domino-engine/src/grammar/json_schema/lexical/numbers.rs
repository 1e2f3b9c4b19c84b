//! Numbers: the JSON integer and number languages (bounded so that every number parses to a
//! finite `f64`), exact integer ranges, decimal bounds for `type: number` (written without
//! exponent), and the `multipleOf` languages (a residue automaton for integer factors coprime
//! to 10, the last digits for factors of powers of 10, the fraction digits for `c/10^n`).

/// At most this many digits before the decimal point (so no number overflows an `f64`).
pub const MAX_INT_DIGITS: u32 = 64;

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

#[cfg(test)]
mod tests {
    use super::super::full;
    use super::*;

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
        // (lower bound, upper bound, most fraction digits); a bound is (value, inclusive).
        type Bound = Option<(f64, bool)>;
        let cases: Vec<(Bound, Bound, Option<u32>)> = vec![
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
}
