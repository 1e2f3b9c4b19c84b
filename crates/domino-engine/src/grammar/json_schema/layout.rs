//! Layout: where whitespace goes under each [`WhitespacePolicy`] (`Flexible`, `Compact`,
//! `Pretty` up to [`MAX_PRETTY_DEPTH`] levels), the separators and brackets of containers,
//! and the two value grammars that are pure layout: any JSON value (the schema `{}`), and one
//! concrete value (an `enum`/`const` entry) written out.

use serde_json::Value;

use super::{Compiler, MAX_PRETTY_DEPTH, lexical};
use crate::grammar::expr::{Expr, RuleKind};
use crate::grammar::{GrammarError, WhitespacePolicy};

/// The flexible layout's rules, made on first use ([`Compiler::ws`], `sep`, `colon`).
#[derive(Default)]
pub(super) struct LayoutMemo {
    ws: Option<Expr>,
    sep: Option<Expr>,
    colon: Option<Expr>,
}

/// Layout of structural characters at one nesting depth.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Flexible,
    Compact,
    Pretty(u32),
}

impl Compiler<'_> {
    fn style(&self, d: u32) -> Style {
        match self.opts.whitespace {
            WhitespacePolicy::Flexible => Style::Flexible,
            WhitespacePolicy::Compact => Style::Compact,
            WhitespacePolicy::Pretty if d <= MAX_PRETTY_DEPTH => Style::Pretty(d),
            WhitespacePolicy::Pretty => Style::Compact,
        }
    }

    /// Depth of a container's children (only pretty printing distinguishes depths).
    pub(super) fn child(&self, d: u32) -> u32 {
        match self.opts.whitespace {
            WhitespacePolicy::Pretty => (d + 1).min(MAX_PRETTY_DEPTH + 1),
            _ => 0,
        }
    }

    pub(super) fn ws(&mut self) -> Expr {
        // (The flexible layout's pieces are the same at every depth: made once, not per
        // object and array, each a pattern formatted and hashed to find its rule.)
        if let Some(e) = &self.layout_memo.ws {
            return e.clone();
        }
        let pattern = lexical::whitespace_pattern(self.opts.max_whitespace);
        let e = self.lex("ws", pattern).unwrap_or(Expr::Empty);
        self.layout_memo.ws = Some(e.clone());
        e
    }

    fn newline(d: u32) -> Expr {
        Expr::Bytes(format!("\n{}", "  ".repeat(d as usize)).into_bytes())
    }

    /// After `{`/`[` before the first member.
    pub(super) fn lead(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            Style::Compact => Expr::Empty,
            Style::Pretty(d) => Self::newline(d + 1),
        }
    }

    /// Between members (the comma included). Flexible: one terminal for the comma and the
    /// whitespace after it (the same language as `"," ws`, one symbol instead of a byte and
    /// a nullable nonterminal in each of an object's member alternatives, of which an
    /// any-order object has `N·2^(N-1)`).
    pub(super) fn sep(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => {
                if let Some(e) = &self.layout_memo.sep {
                    return e.clone();
                }
                let ws = lexical::whitespace_pattern(self.opts.max_whitespace);
                let e = self
                    .lex("comma", format!(",{ws}"))
                    .unwrap_or_else(|_| Expr::Seq(vec![Expr::Bytes(b",".to_vec()), self.ws()]));
                self.layout_memo.sep = Some(e.clone());
                e
            }
            Style::Compact => Expr::Bytes(b",".to_vec()),
            Style::Pretty(d) => {
                Expr::Bytes(format!(",\n{}", "  ".repeat(d as usize + 1)).into_bytes())
            }
        }
    }

    /// After the last member, before `}`/`]`.
    pub(super) fn trail(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Pretty(d) => Self::newline(d),
            _ => Expr::Empty,
        }
    }

    /// Inside an empty container.
    pub(super) fn empty_inner(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            _ => Expr::Empty,
        }
    }

    /// After a key. Flexible: one terminal for `ws ":" ws` (see [`Self::sep`]).
    pub(super) fn colon(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => {
                if let Some(e) = &self.layout_memo.colon {
                    return e.clone();
                }
                let ws = lexical::whitespace_pattern(self.opts.max_whitespace);
                let e = self.lex("colon", format!("{ws}:{ws}")).unwrap_or_else(|_| {
                    Expr::Seq(vec![self.ws(), Expr::Bytes(b":".to_vec()), self.ws()])
                });
                self.layout_memo.colon = Some(e.clone());
                e
            }
            Style::Compact => Expr::Bytes(b":".to_vec()),
            Style::Pretty(_) => Expr::Bytes(b": ".to_vec()),
        }
    }

    /// After a member value (before `,` or the closing bracket).
    pub(super) fn after_value(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            _ => Expr::Empty,
        }
    }

    /// Any JSON value (the schema `{}` / `true`), one shared rule per depth.
    pub(super) fn any(&mut self, d: u32) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.any_rules.get(&d) {
            return Ok(Expr::Ref(id));
        }
        let id = self.add_rule("any", Expr::Empty, RuleKind::Syntactic)?;
        self.any_rules.insert(d, id);
        let cd = self.child(d);
        let child = self.any(cd)?;
        let string = self.lex("string", lexical::string_pattern(0, None))?;
        let number = self.lex("number", lexical::number_pattern())?;
        // Object: "{" (empty | lead member (sep member)* trail) "}"
        let colon = self.colon(d);
        let after = self.after_value(d);
        let member = Expr::Seq(vec![string.clone(), colon, child.clone(), after.clone()]);
        let object = self.container(b'{', b'}', member, d);
        let item = Expr::Seq(vec![child, after]);
        let array = self.container(b'[', b']', item, d);
        let body = Expr::Alt(vec![
            object,
            array,
            string,
            number,
            Expr::Bytes(b"true".to_vec()),
            Expr::Bytes(b"false".to_vec()),
            Expr::Bytes(b"null".to_vec()),
        ]);
        self.rules[id.0 as usize].expr = body;
        Ok(Expr::Ref(id))
    }

    /// `open (empty | lead member (sep member)* trail) close` for homogeneous members.
    fn container(&mut self, open: u8, close: u8, member: Expr, d: u32) -> Expr {
        let empty = self.empty_inner(d);
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        Expr::Seq(vec![
            Expr::Bytes(vec![open]),
            Expr::Alt(vec![
                empty,
                Expr::Seq(vec![
                    lead,
                    member.clone(),
                    Expr::Repeat {
                        expr: Box::new(Expr::Seq(vec![sep, member])),
                        min: 0,
                        max: None,
                    },
                    trail,
                ]),
            ]),
            Expr::Bytes(vec![close]),
        ])
    }

    /// One concrete JSON value, laid out by the whitespace policy.
    pub(super) fn literal(&mut self, v: &Value, d: u32) -> Expr {
        match v {
            Value::Array(items) if !items.is_empty() => {
                let cd = self.child(d);
                let mut seq = vec![Expr::Bytes(b"[".to_vec()), self.lead(d)];
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        seq.push(self.sep(d));
                    }
                    seq.push(self.literal(item, cd));
                    seq.push(self.after_value(d));
                }
                seq.push(self.trail(d));
                seq.push(Expr::Bytes(b"]".to_vec()));
                Expr::Seq(seq)
            }
            Value::Object(members) if !members.is_empty() => {
                let cd = self.child(d);
                let mut seq = vec![Expr::Bytes(b"{".to_vec()), self.lead(d)];
                for (i, (k, item)) in members.iter().enumerate() {
                    if i > 0 {
                        seq.push(self.sep(d));
                    }
                    seq.push(Expr::Bytes(
                        Value::String(k.clone()).to_string().into_bytes(),
                    ));
                    seq.push(self.colon(d));
                    seq.push(self.literal(item, cd));
                    seq.push(self.after_value(d));
                }
                seq.push(self.trail(d));
                seq.push(Expr::Bytes(b"}".to_vec()));
                Expr::Seq(seq)
            }
            Value::Array(_) => {
                let e = self.empty_inner(d);
                Expr::Seq(vec![
                    Expr::Bytes(b"[".to_vec()),
                    e,
                    Expr::Bytes(b"]".to_vec()),
                ])
            }
            Value::Object(_) => {
                let e = self.empty_inner(d);
                Expr::Seq(vec![
                    Expr::Bytes(b"{".to_vec()),
                    e,
                    Expr::Bytes(b"}".to_vec()),
                ])
            }
            // Draft 4: `42.0` is not an integer, so an integral value keeps its one spelling
            // (a sibling `type: integer` would reject the others).
            Value::Number(n) if self.draft4() && n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                Expr::Bytes(n.to_string().into_bytes())
            }
            Value::Number(n) => match number_spellings(n) {
                Some(pattern) => self
                    .lex("number-value", pattern)
                    .unwrap_or_else(|_| Expr::Bytes(n.to_string().into_bytes())),
                None => Expr::Bytes(n.to_string().into_bytes()),
            },
            scalar => Expr::Bytes(scalar.to_string().into_bytes()),
        }
    }
}

/// Every plain decimal spelling of the number `n` (JSON Schema compares numbers by value:
/// `const: -2.0` admits `-2`, `0` admits `0.0`): its shortest decimal digits with any number
/// of trailing fraction zeros. Exponent spellings (`2e0`) are not generated (a subset).
/// `None` (the number as written) for integers beyond 2^53 and numbers whose plain decimal
/// form is longer than 40 characters.
pub(super) fn number_spellings(n: &serde_json::Number) -> Option<String> {
    // Integers beyond 2^53 are not all f64s: `N.0` might parse to another value.
    const EXACT: u64 = 1 << 53;
    let text = if let Some(i) = n.as_i64() {
        if i.unsigned_abs() > EXACT {
            return None;
        }
        i.to_string()
    } else if n.as_u64().is_some() {
        return None;
    } else {
        // Rust's `Display` of an f64: the shortest digits that round-trip, never an exponent.
        format!("{}", n.as_f64()?)
    };
    if text.len() > 40 || text.contains(['e', 'E', 'i', 'N']) {
        return None;
    }
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let frac = frac.trim_end_matches('0');
    let int = regex_syntax::escape(int);
    Some(if frac.is_empty() {
        format!(r"{int}(?:\.0+)?")
    } else {
        format!(r"{int}\.{frac}0*")
    })
}
