//! GBNF front end: llama.cpp's grammar format (see llama.cpp `grammars/README.md`).
//!
//! Supported: `name ::= alternatives` rules, `|`, grouping `( )`, postfix `*` `+` `?`
//! `{m}` `{m,}` `{m,n}` (and `{,n}`), string literals `"..."` and character classes
//! `[...]` / `[^...]` with ranges and the escapes `\n \t \r \\ \" \[ \] \- \^ \xHH \uHHHH
//! \UHHHHHHHH`, `.` (any Unicode scalar value), `#` comments, rule names made of letters,
//! digits, `-` and `_`. The start rule is `root` unless another is asked for.
//!
//! Semantics follow llama.cpp: grammars are over Unicode scalar values, so `\xHH` in a
//! literal is the code point U+00HH (its UTF-8 encoding), and a class matches one UTF-8
//! encoded scalar value. A rule defined twice keeps its *last* definition (llama.cpp
//! overwrites silently; we also record a warning).
//!
//! Deliberate leniency over llama.cpp: newlines are whitespace everywhere, not only inside
//! parentheses; a rule ends where the next `name ::=` begins. So an alternative may start
//! with `|` on a new line (the paper's listings are written that way). Every grammar
//! llama.cpp accepts is read the same.
//!
//! # Invariants
//! - The parser recurses only through parentheses, and nesting deeper than
//!   [`MAX_EXPR_DEPTH`] is a [`ErrorKind::Limit`] error; every produced [`Expr`] tree is at
//!   most `MAX_EXPR_DEPTH` deep.
//! - Every `Ref` in the output names a defined rule; undefined names are reported with the
//!   position of their first use.

use super::expr::{Expr, GrammarDef, MAX_EXPR_DEPTH, Rule, RuleId, RuleKind, Span};
use super::{ErrorKind, GrammarError};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};
use std::collections::HashMap;

/// Parse GBNF `text` with start rule `start`.
pub fn parse(text: &str, start: &str) -> Result<GrammarDef, GrammarError> {
    let mut p = Parser {
        cur: Cursor::new(text),
        names: HashMap::new(),
        slots: Vec::new(),
        warnings: Vec::new(),
    };
    p.grammar()?;
    p.finish(start)
}

/// A character cursor that tracks 1-based line and column (shared with the Lark parser).
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    text: &'a str,
    pub pos: usize,
    pub line: u32,
    pub column: u32,
}

impl<'a> Cursor<'a> {
    pub fn new(text: &'a str) -> Self {
        Cursor {
            text,
            pos: 0,
            line: 1,
            column: 1,
        }
    }
    pub fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }
    pub fn peek_at(&self, n: usize) -> Option<char> {
        self.text[self.pos..].chars().nth(n)
    }
    pub fn rest(&self) -> &'a str {
        &self.text[self.pos..]
    }
    pub fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }
    pub fn eat(&mut self, s: &str) -> bool {
        if self.rest().starts_with(s) {
            for _ in s.chars() {
                self.bump();
            }
            true
        } else {
            false
        }
    }
    pub fn span(&self) -> Span {
        Span {
            line: self.line,
            column: self.column,
        }
    }
    pub fn error(&self, message: impl Into<String>) -> GrammarError {
        GrammarError::at(self.line, self.column, message)
    }
}

/// Error at a span.
pub(crate) fn error_at(span: Span, message: impl Into<String>) -> GrammarError {
    GrammarError::at(span.line, span.column, message)
}

/// An expression with its tree depth, so depth limits are checked while building.
pub(crate) struct Built {
    pub expr: Expr,
    pub depth: usize,
}

impl Built {
    pub fn leaf(expr: Expr) -> Built {
        Built { expr, depth: 1 }
    }
}

fn check_depth(depth: usize, span: Span) -> Result<usize, GrammarError> {
    if depth > MAX_EXPR_DEPTH {
        Err(error_at(
            span,
            format!("expression nested deeper than {MAX_EXPR_DEPTH} levels"),
        )
        .with_kind(ErrorKind::Limit))
    } else {
        Ok(depth)
    }
}

/// `Seq` of the items, collapsing the 0- and 1-element cases.
pub(crate) fn make_seq(mut items: Vec<Built>, span: Span) -> Result<Built, GrammarError> {
    match items.len() {
        0 => Ok(Built::leaf(Expr::Empty)),
        1 => Ok(items.pop().unwrap()),
        _ => {
            let depth = check_depth(1 + items.iter().map(|b| b.depth).max().unwrap_or(0), span)?;
            Ok(Built {
                expr: Expr::Seq(items.into_iter().map(|b| b.expr).collect()),
                depth,
            })
        }
    }
}

/// `Alt` of the alternatives, collapsing the 1-element case.
pub(crate) fn make_alt(mut alts: Vec<Built>, span: Span) -> Result<Built, GrammarError> {
    if alts.len() == 1 {
        return Ok(alts.pop().unwrap());
    }
    let depth = check_depth(1 + alts.iter().map(|b| b.depth).max().unwrap_or(0), span)?;
    Ok(Built {
        expr: Expr::Alt(alts.into_iter().map(|b| b.expr).collect()),
        depth,
    })
}

pub(crate) fn make_repeat(
    inner: Built,
    min: u32,
    max: Option<u32>,
    span: Span,
) -> Result<Built, GrammarError> {
    if let Some(max) = max {
        if max < min {
            return Err(error_at(
                span,
                format!("repetition {{{min},{max}}}: maximum below minimum"),
            ));
        }
    }
    if min > MAX_REPEAT || max.is_some_and(|m| m > MAX_REPEAT) {
        return Err(error_at(
            span,
            format!("repetition bound above the limit of {MAX_REPEAT}"),
        )
        .with_kind(ErrorKind::Limit));
    }
    let depth = check_depth(inner.depth + 1, span)?;
    Ok(Built {
        expr: Expr::Repeat {
            expr: Box::new(inner.expr),
            min,
            max,
        },
        depth,
    })
}

/// Largest repetition bound accepted (`{m,n}`), so a typo cannot ask for a billion copies.
pub const MAX_REPEAT: u32 = 100_000;

/// The class of every Unicode scalar value (`.`).
pub(crate) fn any_char() -> Hir {
    Hir::class(Class::Unicode(ClassUnicode::new([ClassUnicodeRange::new(
        '\0',
        char::MAX,
    )])))
}

/// Is `c` allowed in a GBNF rule name?
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

struct Parser<'a> {
    cur: Cursor<'a>,
    /// Rule name -> index into `slots`.
    names: HashMap<String, usize>,
    /// One slot per name seen: (name, definition, first use).
    slots: Vec<Slot>,
    warnings: Vec<String>,
}

struct Slot {
    name: String,
    def: Option<(Expr, Span)>,
    first_use: Span,
}

impl<'a> Parser<'a> {
    fn slot(&mut self, name: &str, span: Span) -> usize {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let i = self.slots.len();
        self.slots.push(Slot {
            name: name.to_string(),
            def: None,
            first_use: span,
        });
        self.names.insert(name.to_string(), i);
        i
    }

    /// Skip whitespace (newlines included) and `#` comments.
    fn ws(&mut self) {
        while let Some(c) = self.cur.peek() {
            if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
                self.cur.bump();
            } else if c == '#' {
                while let Some(c) = self.cur.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.cur.bump();
                }
            } else {
                break;
            }
        }
    }

    fn name(&mut self) -> Option<String> {
        let start = self.cur.pos;
        while self.cur.peek().is_some_and(is_name_char) {
            self.cur.bump();
        }
        (self.cur.pos > start).then(|| self.cur.rest_from(start).to_string())
    }

    /// Does a `name ::=` start here? (Ends the current rule.)
    fn at_rule_start(&self) -> bool {
        let mut probe = Parser {
            cur: self.cur.clone(),
            names: HashMap::new(),
            slots: Vec::new(),
            warnings: Vec::new(),
        };
        if probe.name().is_none() {
            return false;
        }
        probe.ws();
        probe.cur.rest().starts_with("::=")
    }

    fn grammar(&mut self) -> Result<(), GrammarError> {
        self.ws();
        while self.cur.peek().is_some() {
            crate::grammar::budget_over("the grammar's rules (parsing)")?;
            let span = self.cur.span();
            let Some(name) = self.name() else {
                return Err(self.cur.error(format!(
                    "expected a rule name, found {:?}",
                    self.cur.peek().unwrap()
                )));
            };
            self.ws();
            if !self.cur.eat("::=") {
                return Err(self
                    .cur
                    .error(format!("expected `::=` after rule name `{name}`")));
            }
            self.ws();
            let body = self.alternates(0)?;
            let i = self.slot(&name, span);
            if let Some((_, old)) = &self.slots[i].def {
                self.warnings.push(format!(
                    "{}:{}: rule `{name}` redefined (first defined at {}:{}); the last definition is used",
                    span.line, span.column, old.line, old.column
                ));
            }
            self.slots[i].def = Some((body.expr, span));
            self.ws();
        }
        Ok(())
    }

    fn alternates(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        let mut alts = vec![self.sequence(nest)?];
        while self.cur.peek() == Some('|') {
            self.cur.bump();
            self.ws();
            alts.push(self.sequence(nest)?);
        }
        make_alt(alts, span)
    }

    fn sequence(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.cur.peek() {
                None | Some('|') | Some(')') => break,
                Some(c) if is_name_char(c) && self.at_rule_start() => break,
                _ => {}
            }
            let item_span = self.cur.span();
            let mut item = self.primary(nest)?;
            // Postfix operators bind to the primary just before them.
            loop {
                match self.cur.peek() {
                    Some('*') => {
                        self.cur.bump();
                        item = make_repeat(item, 0, None, item_span)?;
                    }
                    Some('+') => {
                        self.cur.bump();
                        item = make_repeat(item, 1, None, item_span)?;
                    }
                    Some('?') => {
                        self.cur.bump();
                        item = make_repeat(item, 0, Some(1), item_span)?;
                    }
                    Some('{') => {
                        let (min, max) = self.braces()?;
                        item = make_repeat(item, min, max, item_span)?;
                    }
                    _ => break,
                }
            }
            items.push(item);
        }
        make_seq(items, span)
    }

    /// `{m}`, `{m,}`, `{m,n}`, `{,n}`.
    fn braces(&mut self) -> Result<(u32, Option<u32>), GrammarError> {
        let open = self.cur.span();
        self.cur.bump();
        self.inline_ws();
        let min = self.int()?;
        self.inline_ws();
        let result = if self.cur.peek() == Some(',') {
            self.cur.bump();
            self.inline_ws();
            let max = if self.cur.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.int()?
            } else {
                None
            };
            (min.unwrap_or(0), max)
        } else {
            match min {
                Some(m) => (m, Some(m)),
                None => return Err(self.cur.error("expected a number in `{...}` repetition")),
            }
        };
        self.inline_ws();
        if self.cur.peek() != Some('}') {
            return Err(error_at(open, "unterminated `{` repetition (expected `}`)"));
        }
        self.cur.bump();
        Ok(result)
    }

    fn inline_ws(&mut self) {
        while matches!(self.cur.peek(), Some(' ' | '\t')) {
            self.cur.bump();
        }
    }

    fn int(&mut self) -> Result<Option<u32>, GrammarError> {
        let span = self.cur.span();
        let start = self.cur.pos;
        while self.cur.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.cur.bump();
        }
        if self.cur.pos == start {
            return Ok(None);
        }
        let digits = self.cur.rest_from(start);
        match digits.parse::<u32>() {
            Ok(n) if n <= MAX_REPEAT => Ok(Some(n)),
            _ => Err(error_at(
                span,
                format!("repetition bound {digits} above the limit of {MAX_REPEAT}"),
            )
            .with_kind(ErrorKind::Limit)),
        }
    }

    fn primary(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        match self.cur.peek() {
            Some('"') => {
                let bytes = self.literal()?;
                Ok(Built::leaf(Expr::Bytes(bytes)))
            }
            Some('[') => Ok(Built::leaf(Expr::Regex(Hir::class(Class::Unicode(self.class()?)).into()))),
            Some('.') => {
                self.cur.bump();
                Ok(Built::leaf(Expr::Regex(any_char().into())))
            }
            Some('(') => {
                if nest + 1 > MAX_EXPR_DEPTH {
                    return Err(self
                        .cur
                        .error(format!("groups nested deeper than {MAX_EXPR_DEPTH} levels"))
                        .with_kind(ErrorKind::Limit));
                }
                self.cur.bump();
                self.ws();
                let inner = self.alternates(nest + 1)?;
                self.ws();
                if self.cur.peek() != Some(')') {
                    return Err(match self.cur.peek() {
                        None => error_at(span, "unclosed `(` (end of input before `)`)"),
                        Some(c) => self.cur.error(format!(
                            "expected `)` to close the group opened at {}:{}, found {c:?}",
                            span.line, span.column
                        )),
                    });
                }
                self.cur.bump();
                Ok(inner)
            }
            Some(c) if is_name_char(c) => {
                let name = self.name().unwrap();
                let i = self.slot(&name, span);
                Ok(Built::leaf(Expr::Ref(RuleId(i as u32))))
            }
            Some('<') | Some('!') if matches!(self.cur.peek_at(if self.cur.peek() == Some('!') { 1 } else { 0 }), Some('<')) => {
                Err(self.cur.error(
                    "token references (`<...>`, `!<...>`) are not supported: domino grammars describe text, not token ids",
                ))
            }
            Some(c) => Err(self.cur.error(format!("unexpected {c:?}: expected a literal, class, `.`, `(` or rule name"))),
            None => Err(self.cur.error("unexpected end of input")),
        }
    }

    /// One possibly escaped character inside a literal or class.
    fn char_or_escape(&mut self, in_class: bool) -> Result<char, GrammarError> {
        let span = self.cur.span();
        let c = self
            .cur
            .bump()
            .ok_or_else(|| self.cur.error("unexpected end of input"))?;
        if c != '\\' {
            return Ok(c);
        }
        let e = self
            .cur
            .bump()
            .ok_or_else(|| error_at(span, "unterminated escape at end of input"))?;
        let hex = |p: &mut Self, n: usize| -> Result<char, GrammarError> {
            let mut v: u32 = 0;
            for _ in 0..n {
                match p.cur.peek().and_then(|c| c.to_digit(16)) {
                    Some(d) => {
                        p.cur.bump();
                        v = v * 16 + d;
                    }
                    None => {
                        return Err(error_at(
                            span,
                            format!("bad escape: `\\{e}` needs {n} hex digits"),
                        ));
                    }
                }
            }
            char::from_u32(v).ok_or_else(|| {
                error_at(
                    span,
                    format!("bad escape: U+{v:X} is not a Unicode scalar value"),
                )
            })
        };
        Ok(match e {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            '\\' | '"' | '[' | ']' => e,
            '-' | '^' if in_class => e,
            'x' => hex(self, 2)?,
            'u' => hex(self, 4)?,
            'U' => hex(self, 8)?,
            other => return Err(error_at(span, format!("bad escape `\\{other}`"))),
        })
    }

    fn literal(&mut self) -> Result<Vec<u8>, GrammarError> {
        let span = self.cur.span();
        self.cur.bump();
        let mut out = String::new();
        loop {
            match self.cur.peek() {
                None | Some('\n') => return Err(error_at(span, "unterminated string literal")),
                Some('"') => {
                    self.cur.bump();
                    return Ok(out.into_bytes());
                }
                _ => out.push(self.char_or_escape(false)?),
            }
        }
    }

    fn class(&mut self) -> Result<ClassUnicode, GrammarError> {
        let span = self.cur.span();
        self.cur.bump();
        let negated = if self.cur.peek() == Some('^') {
            self.cur.bump();
            true
        } else {
            false
        };
        let mut class = ClassUnicode::empty();
        loop {
            match self.cur.peek() {
                None => {
                    return Err(error_at(
                        span,
                        "unterminated character class (expected `]`)",
                    ));
                }
                Some(']') => {
                    self.cur.bump();
                    break;
                }
                _ => {
                    let lo_span = self.cur.span();
                    let lo = self.char_or_escape(true)?;
                    let hi = if self.cur.peek() == Some('-')
                        && self.cur.peek_at(1).is_some_and(|c| c != ']')
                    {
                        self.cur.bump();
                        let hi = self.char_or_escape(true)?;
                        if hi < lo {
                            return Err(error_at(
                                lo_span,
                                format!("bad class range {lo:?}-{hi:?}: end before start"),
                            ));
                        }
                        hi
                    } else {
                        lo
                    };
                    class.push(ClassUnicodeRange::new(lo, hi));
                }
            }
        }
        if negated {
            class.negate();
        }
        Ok(class)
    }

    fn finish(self, start: &str) -> Result<GrammarDef, GrammarError> {
        let Parser {
            slots,
            names,
            mut warnings,
            ..
        } = self;
        let Some(&start_slot) = names.get(start) else {
            return Err(GrammarError::whole(format!(
                "the grammar has no start rule `{start}`"
            )));
        };
        if slots[start_slot].def.is_none() {
            let u = slots[start_slot].first_use;
            return Err(error_at(
                u,
                format!("the start rule `{start}` is used but never defined"),
            ));
        }
        // Report the undefined name used first in the text.
        if let Some(undefined) = slots
            .iter()
            .filter(|s| s.def.is_none())
            .min_by_key(|s| (s.first_use.line, s.first_use.column))
        {
            return Err(error_at(
                undefined.first_use,
                format!("undefined rule `{}`", undefined.name),
            ));
        }
        let rules = slots
            .into_iter()
            .map(|s| {
                let (expr, span) = s.def.unwrap();
                Rule {
                    name: s.name,
                    expr,
                    kind: RuleKind::Syntactic,
                    span,
                    pointer: None,
                }
            })
            .collect();
        warnings.shrink_to_fit();
        Ok(GrammarDef {
            rules,
            start: RuleId(start_slot as u32),
            ignore: Vec::new(),
            warnings,
            lexing: Default::default(),
        })
    }
}

impl<'a> Cursor<'a> {
    /// The text between byte offset `start` and the cursor.
    pub fn rest_from(&self, start: usize) -> &'a str {
        &self.text[start..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule<'g>(g: &'g GrammarDef, name: &str) -> &'g Rule {
        g.rules.iter().find(|r| r.name == name).unwrap()
    }

    #[test]
    fn parses_basic_rules() {
        let g = parse(
            "root ::= \"a\" b* | [x-z]+\nb ::= (\"c\" | .){2,3}\n",
            "root",
        )
        .unwrap();
        assert_eq!(g.rules.len(), 2);
        assert!(matches!(rule(&g, "root").expr, Expr::Alt(ref v) if v.len() == 2));
        assert!(matches!(
            rule(&g, "b").expr,
            Expr::Repeat {
                min: 2,
                max: Some(3),
                ..
            }
        ));
    }

    #[test]
    fn escapes_in_literals_mean_code_points() {
        let g = parse(r#"root ::= "\x41\u00e9\n\"\\\U0001F600""#, "root").unwrap();
        match &g.rules[0].expr {
            Expr::Bytes(b) => assert_eq!(b, "Aé\n\"\\😀".as_bytes()),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn alternatives_may_continue_on_new_lines() {
        let g = parse("root ::= \"a\"\n  | \"b\" # comment\nx ::= \"c\"\n", "root").unwrap();
        assert!(matches!(rule(&g, "root").expr, Expr::Alt(ref v) if v.len() == 2));
    }

    #[test]
    fn undefined_rule_is_named_with_position() {
        let e = parse("root ::= \"a\"\n  foo-bar", "root").unwrap_err();
        assert_eq!(
            e.location,
            super::super::Location::LineColumn { line: 2, column: 3 }
        );
        assert!(e.message.contains("foo-bar"), "{e}");
    }

    #[test]
    fn token_references_are_a_clear_error() {
        assert!(
            parse("root ::= <think> \"a\"", "root")
                .unwrap_err()
                .message
                .contains("token references")
        );
        assert!(
            parse("root ::= !<[12]>", "root")
                .unwrap_err()
                .message
                .contains("token references")
        );
    }

    #[test]
    fn missing_start_rule() {
        let e = parse("a ::= \"x\"", "root").unwrap_err();
        assert!(e.message.contains("root"));
    }

    #[test]
    fn bad_escape_and_unterminated() {
        assert!(
            parse(r#"root ::= "\q""#, "root")
                .unwrap_err()
                .message
                .contains("bad escape")
        );
        assert!(
            parse("root ::= \"abc", "root")
                .unwrap_err()
                .message
                .contains("unterminated")
        );
        assert!(
            parse("root ::= [abc", "root")
                .unwrap_err()
                .message
                .contains("unterminated")
        );
        assert!(
            parse("root ::= (\"a\"", "root")
                .unwrap_err()
                .message
                .contains("unclosed")
        );
    }

    #[test]
    fn deep_nesting_is_a_limit_error() {
        let text = format!("root ::= {}\"a\"{}", "(".repeat(60_000), ")".repeat(60_000));
        let e = parse(&text, "root").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Limit);
    }

    #[test]
    fn duplicate_rule_keeps_last_definition() {
        let g = parse("root ::= \"a\"\nroot ::= \"b\"", "root").unwrap();
        assert!(matches!(&g.rules[0].expr, Expr::Bytes(b) if b == b"b"));
        assert_eq!(g.warnings.len(), 1);
    }

    #[test]
    fn negated_class() {
        let g = parse(r#"root ::= [^"\\a-c]"#, "root").unwrap();
        let Expr::Regex(h) = &g.rules[0].expr else {
            panic!()
        };
        let Some(Class::Unicode(c)) = (match h.kind() {
            regex_syntax::hir::HirKind::Class(c) => Some(c.clone()),
            _ => None,
        }) else {
            panic!()
        };
        assert!(
            !c.ranges()
                .iter()
                .any(|r| r.start() <= 'b' && 'b' <= r.end())
        );
        assert!(
            c.ranges()
                .iter()
                .any(|r| r.start() <= 'd' && 'd' <= r.end())
        );
    }
}
