//! `type: string`: `minLength`/`maxLength`, `pattern` (ECMA-262, searched), `format` (the
//! compiled ones from [`lexical::format_pattern`]; unknown formats are annotations), both
//! together (an intersection), `not: {enum}` exclusions, and strings longer than one
//! terminal ([`STRING_BLOCK`] characters at a time). Length bounds on a pattern are made
//! exact by rewriting its repetitions where possible (`constrain_length`), else by
//! intersecting with a length-counting language.

use regex_syntax::hir::Hir;
use serde_json::{Map, Value};

use super::{
    Compiler, MAX_CONSTRAINED_STATES, STRING_BLOCK, as_u64, excluded_strings, ir, join_ptr, lexical,
};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, RuleKind};

/// Shorter maxima tried, longest first, for a `format` whose own `maxLength` makes the
/// intersection too large (see `string`).
const FORMAT_LENGTH_CAPS: [u64; 3] = [128, 64, 32];

impl Compiler<'_> {
    pub(super) fn string(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let min = obj
            .get("minLength")
            .map(|v| as_u64(v, ptr, "minLength"))
            .transpose()?;
        let max = obj
            .get("maxLength")
            .map(|v| as_u64(v, ptr, "maxLength"))
            .transpose()?;
        // `not: {enum: [...]}` of strings: every encoding of those strings is excluded.
        let and_not: Vec<Hir> = match obj.get("not").and_then(excluded_strings) {
            Some(words) if !words.is_empty() => {
                let alts = words
                    .iter()
                    .map(|w| lexical::literal_any_encoding(w))
                    .collect();
                vec![quoted(Hir::alternation(alts))]
            }
            _ => Vec::new(),
        };
        let exclusion_key = if and_not.is_empty() {
            String::new()
        } else {
            format!(":not:{}", obj["not"])
        };
        if let (Some(a), Some(b)) = (min, max) {
            if a > b {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "minLength"),
                    format!("minLength {a} > maxLength {b}"),
                ));
            }
        }
        let pattern = match obj.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "pattern"),
                    "`pattern` must be a string",
                ));
            }
        };
        let mut format = match obj.get("format") {
            Some(Value::String(f)) => Some(f.clone()),
            _ => None,
        };
        if let Some(f) = &format {
            if lexical::format_pattern(f).is_none() {
                if lexical::ASSERTED_FORMATS.contains(&f.as_str()) {
                    self.unsupported(ptr, "format", format!("format `{f}` is not compiled"))?;
                }
                format = None; // unknown formats are annotations
            }
        }
        // `format` together with `pattern`: the string must match both (an intersection).
        let format_and = if pattern.is_some() {
            format.take()
        } else {
            None
        };

        let decoded: Option<(Hir, &str)> = if let Some(p) = &pattern {
            let translated = match lexical::translate_ecma(p) {
                Ok(t) => t,
                Err(why) => {
                    self.unsupported(ptr, "pattern", format!("pattern `{p}`: {why}"))?;
                    return self.generic_string(min, max, ptr);
                }
            };
            let parsed = regex_syntax::ParserBuilder::new()
                .nest_limit(100)
                .build()
                .parse(&translated);
            match parsed {
                Ok(h) => {
                    let any = lexical::hir("(?s:.)*");
                    let h = lexical::anchor_search(&h, &any);
                    if lexical::has_look(&h) {
                        self.unsupported(
                            ptr,
                            "pattern",
                            format!("pattern `{p}` has anchors or word boundaries inside"),
                        )?;
                        return self.generic_string(min, max, ptr);
                    }
                    Some((h, "pattern"))
                }
                Err(e) => {
                    self.unsupported(
                        ptr,
                        "pattern",
                        format!("pattern `{p}` does not parse as a regex: {e}"),
                    )?;
                    return self.generic_string(min, max, ptr);
                }
            }
        } else {
            format
                .as_ref()
                .map(|f| (lexical::hir(&lexical::format_pattern(f).unwrap()), "format"))
        };
        let Some((h, kw)) = decoded else {
            if !and_not.is_empty() {
                return self.string_except(min, max, and_not, exclusion_key, ptr);
            }
            return self.generic_string(min, max, ptr);
        };
        let key = format!(
            "{kw}:{}:{:?}:{:?}:{}{exclusion_key}",
            pattern.as_deref().or(format.as_deref()).unwrap_or(""),
            min,
            max,
            format_and.as_deref().unwrap_or("")
        );
        let mut and = Vec::new();
        if let Some(f) = &format_and {
            and.push(quoted(lexical::encode_for_json_string(&lexical::hir(
                &lexical::format_pattern(f).unwrap(),
            ))));
        }
        // Length bounds on a pattern/format: nothing to do when the regex already implies
        // them, a rewrite of the regex when its one variable part is a repeated
        // single-character class, else an intersection with "min..=max characters".
        let mut split = None;
        let mut too_long = false;
        let h = if min.is_some() || max.is_some() {
            match constrain_length(&h, min.unwrap_or(0), max) {
                Some((h, true)) => h,
                other => {
                    split = other.map(|(h, _)| h);
                    // A bound the regex does not imply needs a length counter up to it: past
                    // the state limit the intersection cannot fit (and its DFA is costly).
                    let bound = max.unwrap_or(0).max(min.unwrap_or(0));
                    if bound > MAX_CONSTRAINED_STATES as u64 {
                        too_long = true;
                    } else {
                        and.push(lexical::hir(&lexical::string_pattern(
                            min.unwrap_or(0),
                            max,
                        )));
                    }
                    h
                }
            }
        } else {
            h
        };
        let full = quoted(lexical::encode_for_json_string(&h));
        if and.is_empty() && and_not.is_empty() && !too_long {
            return self.lex_hir(kw, key, full);
        }
        let constraints = ir::Constraints { and, and_not };
        // The reach of a product that failed for its size: capped at that many characters
        // or more, the same product fails too (see `TerminalDfa::product_reach`).
        let mut reach: Option<u64> = None;
        let built = if too_long {
            None
        } else {
            match self.constrained_reach(kw, key.clone(), full.clone(), constraints)? {
                Ok(e) => Some(e),
                Err(r) => {
                    reach = r.map(|r| r as u64);
                    None
                }
            }
        };
        match built {
            Some(e) => Ok(e),
            None if format_and.is_none() && split.is_some() && exclusion_key.is_empty() => {
                // Too many states for the exact intersection: split the length budget
                // between the pattern's repeated parts (sound, but a subset).
                self.warnings.push(format!(
                    "at {}: length bounds with `{kw}` are split between its repeated parts (a subset of the valid strings)",
                    if ptr.is_empty() { "/" } else { ptr }
                ));
                let full = quoted(lexical::encode_for_json_string(&split.unwrap()));
                self.lex_hir(kw, key, full)
            }
            None if kw == "format" && exclusion_key.is_empty() && max.is_some() => {
                // A format (already a conservative regex) whose maximum is too long to count
                // up to: generate its strings up to a shorter maximum (sound, but a subset).
                for cap in FORMAT_LENGTH_CAPS {
                    let lo = min.unwrap_or(0);
                    if lo > cap || max.is_some_and(|m| m < cap) {
                        continue;
                    }
                    // Every product tried so far counted up to a higher cap with the same
                    // `full`, the only other part: one that failed with reach `r` fails
                    // capped anywhere from `r` up (an e-mail address with `maxLength: 255`
                    // failed at every cap, four products and 80 ms, for one warning).
                    if reach.is_some_and(|r| cap >= r) {
                        continue;
                    }
                    let and = vec![lexical::hir(&lexical::string_pattern(lo, Some(cap)))];
                    let constraints = ir::Constraints {
                        and,
                        and_not: Vec::new(),
                    };
                    let capped = self.constrained_reach(
                        kw,
                        format!("{key}:cap{cap}"),
                        full.clone(),
                        constraints,
                    )?;
                    if let Err(r) = &capped {
                        reach = match (reach, r) {
                            (Some(a), Some(b)) => Some(a.min(*b as u64)),
                            (a, b) => a.or(b.map(|b| b as u64)),
                        };
                    }
                    if let Ok(e) = capped {
                        self.warnings.push(format!(
                            "at {}: `format` with maxLength {}: strings longer than {cap} characters are not generated (a subset of the valid strings)",
                            if ptr.is_empty() { "/" } else { ptr },
                            max.unwrap()
                        ));
                        return Ok(e);
                    }
                }
                self.unsupported(
                    ptr,
                    "maxLength",
                    format!("`format` with length bounds has more than {MAX_CONSTRAINED_STATES} automaton states"),
                )?;
                self.lex_hir(kw, key, full)
            }
            None => {
                let feature = if format_and.is_some() {
                    "format"
                } else if max.is_some() {
                    "maxLength"
                } else {
                    "minLength"
                };
                self.unsupported(
                    ptr,
                    feature,
                    format!(
                        "`{kw}` with {} has more than {MAX_CONSTRAINED_STATES} automaton states",
                        if format_and.is_some() {
                            "`format`"
                        } else {
                            "length bounds"
                        }
                    ),
                )?;
                self.lex_hir(kw, key, full)
            }
        }
    }

    /// A string with length bounds minus the strings in `and_not` (`not: {enum: [...]}`).
    fn string_except(
        &mut self,
        min: Option<u64>,
        max: Option<u64>,
        and_not: Vec<Hir>,
        exclusion_key: String,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let (lo, hi) = (min.unwrap_or(0), max);
        if lo > STRING_BLOCK || hi.is_some_and(|m| m > STRING_BLOCK) {
            self.unsupported(
                ptr,
                "not",
                format!("`not` with strings longer than {STRING_BLOCK} characters"),
            )?;
            return self.generic_string(min, max, ptr);
        }
        let hir = lexical::hir(&lexical::string_pattern(lo, hi));
        let key = format!("string:{lo}:{hi:?}{exclusion_key}");
        match self.constrained(
            "string",
            key,
            hir,
            ir::Constraints {
                and: Vec::new(),
                and_not,
            },
        )? {
            Some(e) => Ok(e),
            None => {
                self.unsupported(ptr, "not", format!("the excluded strings need more than {MAX_CONSTRAINED_STATES} automaton states"))?;
                self.generic_string(min, max, ptr)
            }
        }
    }

    /// A string with only length bounds. Up to [`STRING_BLOCK`] characters it is one terminal;
    /// longer maxima are `"` FULL^k PART `"` with FULL exactly `STRING_BLOCK` characters and
    /// PART shorter (unambiguous, exact), the quotes lexed with the first and last pieces.
    fn generic_string(
        &mut self,
        min: Option<u64>,
        max: Option<u64>,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let min = min.unwrap_or(0);
        match max {
            None if min <= STRING_BLOCK => self.lex("string", lexical::string_pattern(min, None)),
            Some(m) if m <= STRING_BLOCK => {
                self.lex("string", lexical::string_pattern(min, Some(m)))
            }
            _ => {
                if min >= STRING_BLOCK {
                    self.unsupported(
                        ptr,
                        "minLength",
                        format!("minLength above {STRING_BLOCK} with a long or absent maxLength"),
                    )?;
                    return self.lex(
                        "string",
                        lexical::string_pattern(0, max.map(|m| m.min(STRING_BLOCK))),
                    );
                }
                // The quotes belong to the first and last pieces: `"` FULL^k PART `"` is
                // lexed as OPEN (`"` + a block) FULL^(k-1) CLOSE (a part + `"`), or as one
                // short string. A quote of its own was a terminal that ends at once, so the
                // first mask inside the string walked the vocabulary from the scanner's start
                // state, byte by byte (5–6 ms on SmolLM2); inside OPEN it is one terminal's
                // walk, which takes whole subtrees at once.
                let unit = lexical::string_unit_pattern();
                let b = STRING_BLOCK;
                let open = self.lex("string-open-block", format!("\"{unit}{{{b}}}"))?;
                let full = self.lex("string-block", format!("{unit}{{{b}}}"))?;
                let close =
                    |c: &mut Self, hi: u64| c.lex("string-close", format!("{unit}{{0,{hi}}}\""));
                // OPEN, then `lo..=hi` (`None`: unbounded) more blocks, then CLOSE.
                let blocks = |lo: u32, hi: Option<u32>, close: Expr| {
                    let mut seq = vec![open.clone()];
                    if hi != Some(0) {
                        seq.push(Expr::Repeat {
                            expr: Box::new(full.clone()),
                            min: lo,
                            max: hi,
                        });
                    }
                    seq.push(close);
                    Expr::Seq(seq)
                };
                let mut alts = vec![self.lex("string", lexical::string_pattern(min, Some(b - 1)))?];
                match max {
                    None => alts.push(blocks(0, None, close(self, b - 1)?)),
                    Some(m) => {
                        let k = (m / b) as u32;
                        let r = m % b;
                        if k >= 2 {
                            alts.push(blocks(0, Some(k - 2), close(self, b - 1)?));
                        }
                        alts.push(blocks(k - 1, Some(k - 1), close(self, r)?));
                    }
                }
                let id = self.add_rule("long-string", Expr::Alt(alts), RuleKind::Syntactic)?;
                Ok(Expr::Ref(id))
            }
        }
    }
}

/// A whole JSON string: `"` + `content` (raw string content) + `"`.
pub(super) fn quoted(content: Hir) -> Hir {
    Hir::concat(vec![
        Hir::literal(b"\"".to_vec()),
        content,
        Hir::literal(b"\"".to_vec()),
    ])
}

/// Restrict a decoded-string regex to lengths `min..=max` (characters). The regex must be a
/// concatenation of fixed-length pieces and repetitions of fixed-length pieces (or already
/// imply the bounds). With one repetition the result is exact; with several, the length
/// budget is split between them (a subset; `exact` is false). `None` when not expressible.
fn constrain_length(h: &Hir, min: u64, max: Option<u64>) -> Option<(Hir, bool)> {
    use regex_syntax::hir::{HirKind, Repetition};
    let (lo, hi) = char_len(h);
    if lo >= min && (max.is_none() || hi.is_some_and(|h| max.is_some_and(|m| h <= m))) {
        return Some((h.clone(), true));
    }
    let unwrap = |h: &Hir| -> Hir {
        match h.kind() {
            HirKind::Capture(c) => (*c.sub).clone(),
            _ => h.clone(),
        }
    };
    let h = &unwrap(h);
    if let HirKind::Alternation(branches) = h.kind() {
        // Each branch on its own; branches that cannot meet the bounds are dropped.
        let mut kept = Vec::new();
        let mut exact = true;
        for b in branches {
            match constrain_length(b, min, max) {
                Some((b2, e)) => {
                    kept.push(b2);
                    exact &= e;
                }
                None => {
                    let (a, hb) = char_len(b);
                    let impossible = max.is_some_and(|m| a > m) || hb.is_some_and(|x| x < min);
                    if !impossible {
                        return None;
                    }
                }
            }
        }
        return if kept.is_empty() {
            None
        } else {
            Some((Hir::alternation(kept), exact))
        };
    }
    let mut parts: Vec<Hir> = Vec::new();
    let top: Vec<Hir> = match h.kind() {
        HirKind::Concat(v) => v.clone(),
        _ => vec![h.clone()],
    };
    for p in top {
        match unwrap(&p).kind() {
            HirKind::Concat(v) => parts.extend(v.iter().cloned()),
            _ => parts.push(p),
        }
    }
    // (index, repetition, width of one repetition)
    let mut reps: Vec<(usize, Repetition, u64)> = Vec::new();
    // Longest possible length of everything but the repetitions' optional parts.
    let mut fixed_hi = 0u64;
    let mut other_var = false;
    for (i, p) in parts.iter().enumerate() {
        let (a, b) = char_len(p);
        if Some(a) == b {
            fixed_hi += a;
            continue;
        }
        match unwrap(p).kind() {
            HirKind::Repetition(r) => {
                let (w, wmax) = char_len(&r.sub);
                if wmax != Some(w) || w == 0 {
                    return None;
                }
                fixed_hi += r.min as u64 * w;
                reps.push((i, r.clone(), w));
            }
            _ => {
                fixed_hi += b?;
                other_var = true;
            }
        }
    }
    if reps.is_empty() {
        return None;
    }
    let k = reps.len() as u64;
    let mut new_bounds: Vec<(u64, Option<u64>)> = reps
        .iter()
        .map(|(_, r, _)| (r.min as u64, r.max.map(|x| x as u64)))
        .collect();
    if let Some(m) = max {
        if fixed_hi > m {
            return None;
        }
        let slack = m - fixed_hi;
        for (j, (_, r, w)) in reps.iter().enumerate() {
            let share = if j == 0 {
                slack - (k - 1) * (slack / k)
            } else {
                slack / k
            };
            let extra = share / w;
            let cap = r.min as u64 + extra;
            new_bounds[j].1 = Some(new_bounds[j].1.map_or(cap, |x| x.min(cap)));
        }
    }
    // Lengthen the minimum where needed, first repetition first.
    let mut deficit = min.saturating_sub(lo);
    for (j, (_, _, w)) in reps.iter().enumerate() {
        if deficit == 0 {
            break;
        }
        let room = new_bounds[j].1.map_or(u64::MAX, |x| x - new_bounds[j].0);
        let add = deficit.div_ceil(*w).min(room);
        new_bounds[j].0 += add;
        deficit = deficit.saturating_sub(add * w);
    }
    if deficit > 0 {
        return None;
    }
    for (j, (i, r, _)) in reps.iter().enumerate() {
        let (a, b) = new_bounds[j];
        if b.is_some_and(|b| b < a || b > 100_000) || a > 100_000 {
            return None;
        }
        parts[*i] = Hir::repetition(Repetition {
            min: a as u32,
            max: b.map(|x| x as u32),
            greedy: true,
            sub: r.sub.clone(),
        });
    }
    let out = Hir::concat(parts);
    let (lo2, hi2) = char_len(&out);
    let within = lo2 >= min && max.is_none_or(|m| hi2.is_some_and(|h| h <= m));
    within.then_some((out, k == 1 && !other_var))
}

/// Length range in characters of a decoded-string regex.
fn char_len(h: &Hir) -> (u64, Option<u64>) {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(l) => {
            let n = String::from_utf8_lossy(&l.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(r) => {
            let (a, b) = char_len(&r.sub);
            (
                a.saturating_mul(r.min as u64),
                match (b, r.max) {
                    (Some(0), _) => Some(0),
                    (Some(b), Some(m)) => Some(b.saturating_mul(m as u64)),
                    _ => None,
                },
            )
        }
        HirKind::Capture(c) => char_len(&c.sub),
        HirKind::Concat(v) => v.iter().fold((0, Some(0)), |(a, b), p| {
            let (x, y) = char_len(p);
            (a + x, b.zip(y).map(|(b, y)| b + y))
        }),
        HirKind::Alternation(v) => {
            let mut lo = u64::MAX;
            let mut hi = Some(0);
            for p in v {
                let (x, y) = char_len(p);
                lo = lo.min(x);
                hi = hi.zip(y).map(|(h, y)| h.max(y));
            }
            (lo, hi)
        }
    }
}
