//! `type: integer` / `number`: the bound keywords (`minimum`, `maximum`, and both forms of
//! `exclusiveMinimum`/`exclusiveMaximum`) and `multipleOf`, compiled to one number terminal
//! (exact ranges from [`lexical::integer_range_pattern`] / [`lexical::number_range_pattern`]),
//! intersected with the `multipleOf` languages where a range alone cannot say it.

use serde_json::{Map, Value};

use super::{Compiler, MAX_CONSTRAINED_STATES, ir, join_ptr, lexical};
use crate::grammar::GrammarError;
use crate::grammar::expr::Expr;

/// A numeric bound: the value and whether it is inclusive.
type Bound = (f64, bool);

impl Compiler<'_> {
    /// Whether the root declares draft 4 (`$schema` naming `draft-04`), where `1.0` is not
    /// an integer.
    pub(super) fn draft4(&self) -> bool {
        self.root
            .get("$schema")
            .and_then(Value::as_str)
            .is_some_and(|s| s.contains("draft-04"))
    }

    /// Tightest lower and upper bounds (value, inclusive) from the four bound keywords
    /// (draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` included).
    fn bounds(
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<(Option<Bound>, Option<Bound>), GrammarError> {
        let num = |k: &str| -> Result<Option<f64>, GrammarError> {
            match obj.get(k) {
                None | Some(Value::Bool(_)) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                    GrammarError::at_pointer(join_ptr(ptr, k), format!("`{k}` must be a number"))
                }),
            }
        };
        let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let mut lo: Option<(f64, bool)> = num("minimum")?.map(|x| (x, !flag("exclusiveMinimum")));
        let mut hi: Option<(f64, bool)> = num("maximum")?.map(|x| (x, !flag("exclusiveMaximum")));
        if let Some(x) = num("exclusiveMinimum")? {
            if lo.is_none_or(|(l, _)| x >= l) {
                lo = Some((x, false));
            }
        }
        if let Some(x) = num("exclusiveMaximum")? {
            if hi.is_none_or(|(h, _)| x <= h) {
                hi = Some((x, false));
            }
        }
        Ok((lo, hi))
    }

    /// The `multipleOf` languages for `k` (see [`lexical::multiple_of_patterns`]); empty
    /// after reporting `k` as unsupported.
    fn multiple_patterns(&mut self, k: f64, ptr: &str) -> Result<Vec<String>, GrammarError> {
        match lexical::multiple_of_patterns(k) {
            Some(p) => Ok(p),
            None => {
                self.unsupported(
                    ptr,
                    "multipleOf",
                    format!("multipleOf {k} (compiled: integers, 10^-n, and c/10^n where c divides 10^n)"),
                )?;
                Ok(Vec::new())
            }
        }
    }

    pub(super) fn number(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        integer: bool,
    ) -> Result<Expr, GrammarError> {
        let (lo, hi) = Self::bounds(obj, ptr)?;
        let mut integer = integer;
        let mut max_frac = None;
        let mut multiple_pow10 = None;
        let mut multiple: Vec<String> = Vec::new();
        if let Some(m) = obj.get("multipleOf") {
            let Some(k) = m.as_f64().filter(|k| *k > 0.0) else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "multipleOf"),
                    "`multipleOf` must be a positive number",
                ));
            };
            if k.fract() == 0.0 {
                if k != 1.0 {
                    let n = (k.log10().round()) as i32;
                    if 10f64.powi(n) == k && (1..=18).contains(&n) && lo.is_none() && hi.is_none() {
                        multiple_pow10 = Some(n as usize);
                    } else {
                        multiple = self.multiple_patterns(k, ptr)?;
                    }
                }
                integer = true;
            } else if integer && (1.0 / k).fract() == 0.0 {
                // Every integer is a multiple of 1/n.
            } else {
                let n = (-k.log10()).round() as i32;
                if (1..=9).contains(&n) && (10f64.powi(-n) - k).abs() < k * 1e-9 {
                    max_frac = Some(n as u32);
                } else {
                    multiple = self.multiple_patterns(k, ptr)?;
                }
            }
        }
        // The number terminal, intersected with the `multipleOf` languages if any.
        let multiple_key = multiple.join("\u{0}");
        let mut finish = |c: &mut Self, name: &str, p: String| -> Result<Expr, GrammarError> {
            if multiple.is_empty() {
                return c.lex(name, p);
            }
            let and = std::mem::take(&mut multiple)
                .iter()
                .map(|m| lexical::hir(m))
                .collect();
            let key = format!("{p}\u{0}{multiple_key}");
            match c.constrained(
                name,
                key,
                lexical::hir(&p),
                ir::Constraints {
                    and,
                    and_not: Vec::new(),
                },
            )? {
                Some(e) => Ok(e),
                None => {
                    c.unsupported(ptr, "multipleOf", format!("multipleOf with these bounds needs more than {MAX_CONSTRAINED_STATES} automaton states"))?;
                    c.lex(name, p)
                }
            }
        };
        // Draft 6 and later: an integer is a number with a zero fractional part, so `1.0`
        // is one (draft 4 says it is not, and its validators reject it).
        let zero_fraction = !self.draft4();
        let whole = |p: String| -> String {
            if zero_fraction {
                format!(r"(?:{p})(?:\.0+)?")
            } else {
                p
            }
        };
        if let Some(n) = multiple_pow10 {
            return self.lex(
                "multiple",
                whole(format!(
                    "(?:0|-?[1-9][0-9]{{0,{}}}0{{{n}}})",
                    lexical::MAX_INT_DIGITS as usize - 1 - n
                )),
            );
        }
        // Bounds far outside what the grammar can write are no bounds.
        let far = 1e60;
        let lo = lo.filter(|(x, _)| *x > -far);
        let hi = hi.filter(|(x, _)| *x < far);
        if lo.is_some_and(|(x, _)| x >= far) || hi.is_some_and(|(x, _)| x <= -far) {
            return Err(GrammarError::at_pointer(
                ptr,
                "numeric bounds exclude every number this grammar can write",
            ));
        }
        if integer {
            if lo.is_none() && hi.is_none() {
                return finish(self, "integer", whole(lexical::integer_pattern()));
            }
            let big = 1e37;
            if lo.is_some_and(|(x, _)| x.abs() > big) || hi.is_some_and(|(x, _)| x.abs() > big) {
                self.unsupported(ptr, "minimum", "integer bounds beyond 1e37")?;
                return finish(self, "integer", whole(lexical::integer_pattern()));
            }
            let ilo = lo.map(|(x, inc)| {
                if inc {
                    x.ceil() as i128
                } else {
                    x.floor() as i128 + 1
                }
            });
            let ihi = hi.map(|(x, inc)| {
                if inc {
                    x.floor() as i128
                } else {
                    x.ceil() as i128 - 1
                }
            });
            return match lexical::integer_range_pattern(ilo, ihi) {
                Some(p) => finish(self, "integer-range", whole(p)),
                None => Err(GrammarError::at_pointer(
                    ptr,
                    "no integer satisfies minimum/maximum",
                )),
            };
        }
        if lo.is_none() && hi.is_none() && max_frac.is_none() {
            return finish(self, "number", lexical::number_pattern());
        }
        let dec = |b: Option<(f64, bool)>| {
            b.and_then(|(x, inc)| lexical::Decimal::from_f64(x).map(|d| (d, inc)))
        };
        match lexical::number_range_pattern(dec(lo), dec(hi), max_frac) {
            Some(p) => finish(self, "number-range", p),
            None => Err(GrammarError::at_pointer(
                ptr,
                "no number satisfies the numeric bounds",
            )),
        }
    }
}
