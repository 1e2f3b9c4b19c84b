//! Lark front end: the subset of Lark's grammar language used by the DOMINO paper (Listing 7)
//! and llguidance.
//!
//! Supported:
//! - rules `name: alternatives` (lowercase names; a leading `?` or `!` and a `.priority`
//!   are accepted and ignored: they choose between parses, not what is accepted) and
//!   terminals `NAME: ...` (UPPERCASE; [`RuleKind::Lexical`], so each becomes exactly one
//!   terminal and must be regular; a terminal priority `NAME.2` is refused);
//! - string literals `"..."` with Python escapes and the `i` flag, character ranges
//!   `"a".."z"`, regexes `/.../flags` (flags `i`, `s`, `m`, `x`, `u`, `l`);
//! - `|` (also at the start of a continuation line), `( )`, `[ ]` (optional), postfix
//!   `?` `*` `+`, `~ n` and `~ n..m`, llguidance's `{n}` `{m,n}` `{m,}` `{,n}` (on rules and
//!   terminals alike); aliases `-> name` are accepted and ignored;
//! - `%ignore EXPR`, `%import common.NAME` / `%import common (A, B)` for Lark's common
//!   terminals (WS, WS_INLINE, NUMBER, INT, SIGNED_NUMBER, ESCAPED_STRING, CNAME, …, see
//!   [`COMMON`]); `//` comments. The start rule is `start` unless another is asked for.
//!
//! The language is defined by Lark's lexer: the grammar is marked
//! [`crate::grammar::ir::Lexing::Greedy`] (longest match decided by the next byte, string
//! literals before regexes; the rule is in [`crate::lexer::greedy`]), and lowering keeps every
//! Lark terminal a terminal (no promotion). `intx;` is one identifier, never `int x;`.
//!
//! Refused with an error naming the construct and its line:column (`Unsupported`):
//! llguidance's dialect extensions `%json { … }`, `%regex { … }`, `%llguidance { … }`,
//! special tokens `<|name|>` / `<[id]>`, lexeme intersection `&` and negation `~A`; Lark's
//! `%declare`, `%override`, `%extend`, templates and terminal priorities. Other directives
//! are errors too. The user-facing page is `docs/lark-dialect.md`.
//!
//! # Invariants
//! Same as [`super::gbnf`]: nesting is bounded by [`MAX_EXPR_DEPTH`] (a `Limit` error), and
//! every reference in the output names a defined rule.

use super::expr::{Expr, GrammarDef, MAX_EXPR_DEPTH, Rule, RuleId, RuleKind, Span};
use super::gbnf::{Built, Cursor, error_at, make_alt, make_repeat, make_seq};
use super::regex::{Flags, parse_hir, reject_looks};
use super::{ErrorKind, GrammarError};
use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir};
use std::collections::{HashMap, HashSet};

/// Lark's `common` terminals that `%import common.X` can bring in (name, definition).
pub const COMMON: &[(&str, &str)] = &[
    ("DIGIT", r#""0".."9""#),
    ("HEXDIGIT", r#""a".."f" | "A".."F" | DIGIT"#),
    ("INT", "DIGIT+"),
    ("SIGNED_INT", r#"["+"|"-"] INT"#),
    ("DECIMAL", r#"INT "." INT? | "." INT"#),
    ("_EXP", r#"("e"|"E") SIGNED_INT"#),
    ("FLOAT", "INT _EXP | DECIMAL _EXP?"),
    ("SIGNED_FLOAT", r#"["+"|"-"] FLOAT"#),
    ("NUMBER", "FLOAT | INT"),
    ("SIGNED_NUMBER", r#"["+"|"-"] NUMBER"#),
    ("ESCAPED_STRING", r#"/"([^"\\\n]|\\.)*"/"#),
    ("LCASE_LETTER", r#""a".."z""#),
    ("UCASE_LETTER", r#""A".."Z""#),
    ("LETTER", "UCASE_LETTER | LCASE_LETTER"),
    ("WORD", "LETTER+"),
    ("CNAME", r#"("_"|LETTER) ("_"|LETTER|DIGIT)*"#),
    ("WS_INLINE", r#"(" "|/\t/)+"#),
    ("WS", r"/[ \t\f\r\n]/+"),
    ("CR", r"/\r/"),
    ("LF", r"/\n/"),
    ("NEWLINE", "(CR? LF)+"),
    ("SH_COMMENT", r"/#[^\n]*/"),
    ("CPP_COMMENT", r"/\/\/[^\n]*/"),
    ("C_COMMENT", r"/\/\*([^*]|\*+[^*\/])*\*+\//"),
];

/// The error for one of llguidance's directives we do not support.
fn unsupported_directive(word: &str) -> String {
    match word {
        "json" => "inline JSON Schemas `%json { … }` (llguidance's Lark dialect) are not supported; give the schema as its own grammar (`--schema`)".into(),
        "regex" => "`%regex { … }` (llguidance's Lark dialect) is not supported; write the terminal as a /regex/".into(),
        "llguidance" => "`%llguidance { … }` headers are not supported (their options have no domino equivalent); remove the header".into(),
        other => format!("directive `%{other}` is not supported (only %ignore and %import)"),
    }
}

/// Parse Lark `text` with start rule `start`.
pub fn parse(text: &str, start: &str) -> Result<GrammarDef, GrammarError> {
    let mut p = Parser::new(text);
    p.statements()?;
    // Bring in the imported common terminals (and what they use), parsed from their own
    // text so user positions stay exact.
    let mut wanted: Vec<String> = p
        .imports
        .iter()
        .filter(|n| !p.is_defined(n))
        .cloned()
        .collect();
    let mut added: HashSet<String> = HashSet::new();
    while let Some(name) = wanted.pop() {
        if !added.insert(name.clone()) || p.is_defined(&name) {
            continue;
        }
        let Some((_, def)) = COMMON.iter().find(|(n, _)| *n == name) else {
            continue;
        };
        let mut sub = Parser::new(def);
        // Share the name table so references line up.
        std::mem::swap(&mut sub.names, &mut p.names);
        std::mem::swap(&mut sub.slots, &mut p.slots);
        let body = sub.alternates(0);
        std::mem::swap(&mut sub.names, &mut p.names);
        std::mem::swap(&mut sub.slots, &mut p.slots);
        let body =
            body.map_err(|e| GrammarError::whole(format!("internal error in common.{name}: {e}")))?;
        let i = p.slot(&name, Span::default());
        p.slots[i].def = Some((body.expr, Span::default(), RuleKind::Lexical));
        for s in &p.slots {
            if s.def.is_none() {
                wanted.push(s.name.clone());
            }
        }
    }
    p.finish(start)
}

struct Slot {
    name: String,
    def: Option<(Expr, Span, RuleKind)>,
    first_use: Span,
}

struct Parser<'a> {
    cur: Cursor<'a>,
    names: HashMap<String, usize>,
    slots: Vec<Slot>,
    imports: Vec<String>,
    ignore: Vec<Expr>,
    warnings: Vec<String>,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}
fn is_terminal_name(name: &str) -> bool {
    name.trim_start_matches('_')
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase())
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            cur: Cursor::new(text),
            names: HashMap::new(),
            slots: Vec::new(),
            imports: Vec::new(),
            ignore: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn is_defined(&self, name: &str) -> bool {
        self.names
            .get(name)
            .is_some_and(|&i| self.slots[i].def.is_some())
    }

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

    /// Skip whitespace, newlines and `//` comments.
    fn ws(&mut self) {
        loop {
            match self.cur.peek() {
                Some(' ' | '\t' | '\r' | '\n') => {
                    self.cur.bump();
                }
                Some('/') if self.cur.peek_at(1) == Some('/') => {
                    while self.cur.peek().is_some_and(|c| c != '\n') {
                        self.cur.bump();
                    }
                }
                _ => break,
            }
        }
    }

    fn inline_ws(&mut self) {
        while matches!(self.cur.peek(), Some(' ' | '\t')) {
            self.cur.bump();
        }
    }

    fn name(&mut self) -> Option<String> {
        if !self.cur.peek().is_some_and(is_name_start) {
            return None;
        }
        let start = self.cur.pos;
        while self.cur.peek().is_some_and(is_name_char) {
            self.cur.bump();
        }
        Some(self.cur.rest_from(start).to_string())
    }

    /// Does a definition (`?name.2:`) or a directive start here?
    fn at_statement_start(&self) -> bool {
        let mut probe = Parser::new("");
        probe.cur = self.cur.clone();
        if probe.cur.peek() == Some('%') {
            return true;
        }
        if matches!(probe.cur.peek(), Some('?' | '!')) {
            probe.cur.bump();
        }
        if probe.name().is_none() {
            return false;
        }
        if probe.cur.peek() == Some('.')
            && probe
                .cur
                .peek_at(1)
                .is_some_and(|c| c.is_ascii_digit() || c == '-')
        {
            probe.cur.bump();
            while probe
                .cur
                .peek()
                .is_some_and(|c| c.is_ascii_digit() || c == '-')
            {
                probe.cur.bump();
            }
        }
        probe.inline_ws();
        probe.cur.peek() == Some(':')
    }

    fn statements(&mut self) -> Result<(), GrammarError> {
        self.ws();
        while let Some(c) = self.cur.peek() {
            let span = self.cur.span();
            if c == '%' {
                self.directive()?;
            } else {
                if matches!(c, '?' | '!') {
                    self.cur.bump();
                }
                let Some(name) = self.name() else {
                    return Err(self.cur.error(format!(
                        "expected a rule or terminal definition, found {c:?}"
                    )));
                };
                if self.cur.peek() == Some('{') {
                    return Err(self
                        .cur
                        .error("rule templates (`name{...}`) are not supported"));
                }
                if self.cur.peek() == Some('.') {
                    if is_terminal_name(&name) {
                        return Err(self.cur.error(format!(
                            "terminal priority `{name}.N` is not supported: Lark grammars are lexed greedily (longest match, then string literals before regexes; see docs/lark-dialect.md), with no terminal priorities"
                        )).with_kind(ErrorKind::Unsupported));
                    }
                    self.cur.bump();
                    while self
                        .cur
                        .peek()
                        .is_some_and(|c| c.is_ascii_digit() || c == '-')
                    {
                        self.cur.bump();
                    }
                }
                self.inline_ws();
                if self.cur.peek() != Some(':') {
                    return Err(self.cur.error(format!("expected `:` after `{name}`")));
                }
                self.cur.bump();
                self.ws();
                let body = self.alternates(0)?;
                let kind = if is_terminal_name(&name) {
                    RuleKind::Lexical
                } else {
                    RuleKind::Syntactic
                };
                let i = self.slot(&name, span);
                if let Some((_, old, _)) = &self.slots[i].def {
                    return Err(error_at(
                        span,
                        format!(
                            "`{name}` is defined twice (first at {}:{})",
                            old.line, old.column
                        ),
                    ));
                }
                self.slots[i].def = Some((body.expr, span, kind));
            }
            self.ws();
        }
        Ok(())
    }

    fn directive(&mut self) -> Result<(), GrammarError> {
        let span = self.cur.span();
        self.cur.bump();
        let word = self.name().unwrap_or_default();
        self.inline_ws();
        match word.as_str() {
            "ignore" => {
                let e = self.alternates(0)?;
                self.ignore.push(e.expr);
                Ok(())
            }
            "import" => {
                let module_span = self.cur.span();
                let mut path = String::new();
                while self.cur.peek().is_some_and(|c| is_name_char(c) || c == '.') {
                    path.push(self.cur.bump().unwrap());
                }
                self.inline_ws();
                let names: Vec<String> = if self.cur.peek() == Some('(') {
                    self.cur.bump();
                    let mut names = Vec::new();
                    loop {
                        self.ws();
                        match self.name() {
                            Some(n) => names.push(n),
                            None => {
                                return Err(self.cur.error("expected a name in `%import` list"));
                            }
                        }
                        self.ws();
                        match self.cur.bump() {
                            Some(',') => continue,
                            Some(')') => break,
                            _ => {
                                return Err(self
                                    .cur
                                    .error("expected `,` or `)` in `%import` list"));
                            }
                        }
                    }
                    if path != "common" {
                        return Err(error_at(
                            module_span,
                            format!("only `%import common` is supported, not `{path}`"),
                        ));
                    }
                    names
                } else {
                    match path.split_once('.') {
                        Some(("common", name)) if !name.contains('.') => vec![name.to_string()],
                        _ => {
                            return Err(error_at(
                                module_span,
                                format!("only `%import common.NAME` is supported, not `{path}`"),
                            ));
                        }
                    }
                };
                self.inline_ws();
                if self.cur.rest().starts_with("->") {
                    return Err(self.cur.error("`%import ... -> alias` is not supported"));
                }
                for n in names {
                    if !COMMON.iter().any(|(c, _)| *c == n) {
                        return Err(error_at(
                            module_span,
                            format!("`common.{n}` is not one of the supported common terminals"),
                        ));
                    }
                    self.imports.push(n);
                }
                Ok(())
            }
            "json" | "regex" | "llguidance" | "lark" | "declare" | "override" | "extend" => {
                Err(error_at(span, unsupported_directive(&word)).with_kind(ErrorKind::Unsupported))
            }
            other => Err(error_at(
                span,
                format!("directive `%{other}` is not supported (only %ignore and %import)"),
            )),
        }
    }

    fn alternates(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        let mut alts = vec![self.sequence(nest)?];
        loop {
            self.ws();
            if self.cur.peek() == Some('|') {
                self.cur.bump();
                alts.push(self.sequence(nest)?);
            } else {
                break;
            }
        }
        make_alt(alts, span)
    }

    fn sequence(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.cur.peek() {
                None | Some('|' | ')' | ']') => break,
                Some('%')
                    if self.cur.rest().starts_with("%json")
                        || self.cur.rest().starts_with("%regex") =>
                {
                    let word = if self.cur.rest().starts_with("%json") {
                        "json"
                    } else {
                        "regex"
                    };
                    return Err(self
                        .cur
                        .error(unsupported_directive(word))
                        .with_kind(ErrorKind::Unsupported));
                }
                Some('&') => {
                    return Err(self
                        .cur
                        .error("lexeme intersection `A & B` (llguidance's Lark dialect) is not supported; write one regex for the terminal")
                        .with_kind(ErrorKind::Unsupported));
                }
                Some(_) if self.at_statement_start() => break,
                Some('-') if self.cur.peek_at(1) == Some('>') => {
                    // Alias: `-> name`; ignored.
                    self.cur.bump();
                    self.cur.bump();
                    self.inline_ws();
                    if self.name().is_none() {
                        return Err(self.cur.error("expected an alias name after `->`"));
                    }
                    continue;
                }
                _ => {}
            }
            let item_span = self.cur.span();
            let mut item = self.atom(nest)?;
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
                        // llguidance's `x{n}`, `x{m,n}`, `x{m,}` (and `x{,n}`).
                        self.cur.bump();
                        self.inline_ws();
                        let lo = if self.cur.peek() == Some(',') {
                            0
                        } else {
                            self.int()?
                        };
                        self.inline_ws();
                        let hi = if self.cur.eat(",") {
                            self.inline_ws();
                            if self.cur.peek() == Some('}') {
                                None
                            } else {
                                Some(self.int()?)
                            }
                        } else {
                            Some(lo)
                        };
                        self.inline_ws();
                        if !self.cur.eat("}") {
                            return Err(self
                                .cur
                                .error("expected `}` to close a repetition `{m,n}`"));
                        }
                        if hi.is_some_and(|h| h < lo) {
                            return Err(error_at(
                                item_span,
                                format!(
                                    "repetition `{{{lo},{}}}` has its maximum below its minimum",
                                    hi.unwrap_or(0)
                                ),
                            ));
                        }
                        item = make_repeat(item, lo, hi, item_span)?;
                    }
                    _ => {
                        // `~ n` / `~ n..m` (may be preceded by spaces).
                        let save = self.cur.clone();
                        self.inline_ws();
                        if self.cur.peek() == Some('~')
                            && self.cur.rest()[1..]
                                .trim_start_matches([' ', '\t'])
                                .starts_with(|c: char| c.is_ascii_digit())
                        {
                            self.cur.bump();
                            self.inline_ws();
                            let lo = self.int()?;
                            let hi = if self.cur.eat("..") { self.int()? } else { lo };
                            item = make_repeat(item, lo, Some(hi), item_span)?;
                        } else {
                            self.cur = save;
                            break;
                        }
                    }
                }
            }
            items.push(item);
        }
        make_seq(items, span)
    }

    fn int(&mut self) -> Result<u32, GrammarError> {
        let span = self.cur.span();
        let start = self.cur.pos;
        while self.cur.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.cur.bump();
        }
        let digits = self.cur.rest_from(start);
        if digits.is_empty() {
            return Err(error_at(span, "expected a number after `~`"));
        }
        digits
            .parse::<u32>()
            .ok()
            .filter(|&n| n <= super::gbnf::MAX_REPEAT)
            .ok_or_else(|| {
                error_at(
                    span,
                    format!(
                        "repetition bound {digits} above the limit of {}",
                        super::gbnf::MAX_REPEAT
                    ),
                )
                .with_kind(ErrorKind::Limit)
            })
    }

    fn atom(&mut self, nest: usize) -> Result<Built, GrammarError> {
        let span = self.cur.span();
        match self.cur.peek() {
            Some('"') => {
                let s = self.string()?;
                // `"a".."z"`: a character range.
                if self.cur.rest().starts_with("..") && self.cur.peek_at(2) == Some('"') {
                    self.cur.bump();
                    self.cur.bump();
                    let t = self.string()?;
                    let (mut a, mut b) = (s.chars(), t.chars());
                    let (Some(lo), None, Some(hi), None) = (a.next(), a.next(), b.next(), b.next())
                    else {
                        return Err(error_at(
                            span,
                            "a range `\"a\"..\"z\"` needs single characters",
                        ));
                    };
                    if hi < lo {
                        return Err(error_at(span, "range end before its start"));
                    }
                    let class = ClassUnicode::new([ClassUnicodeRange::new(lo, hi)]);
                    return Ok(Built::leaf(Expr::Regex(Hir::class(Class::Unicode(class)).into())));
                }
                if self.cur.peek() == Some('i') && !self.cur.peek_at(1).is_some_and(is_name_char) {
                    self.cur.bump();
                    let flags = Flags {
                        case_insensitive: true,
                        ..Flags::default()
                    };
                    let hir = parse_hir(&regex_syntax::escape(&s), flags, span)?;
                    return Ok(Built::leaf(Expr::Regex(hir.into())));
                }
                Ok(Built::leaf(Expr::Bytes(s.into_bytes())))
            }
            Some('/') => Ok(Built::leaf(Expr::Regex(self.regex()?.into()))),
            Some(c @ ('(' | '[')) => {
                if nest + 1 > MAX_EXPR_DEPTH {
                    return Err(self
                        .cur
                        .error(format!("groups nested deeper than {MAX_EXPR_DEPTH} levels"))
                        .with_kind(ErrorKind::Limit));
                }
                self.cur.bump();
                let inner = self.alternates(nest + 1)?;
                self.ws();
                let close = if c == '(' { ')' } else { ']' };
                if self.cur.peek() != Some(close) {
                    return Err(match self.cur.peek() {
                        None => error_at(
                            span,
                            format!("unclosed `{c}` (end of input before `{close}`)"),
                        ),
                        Some(x) => self.cur.error(format!(
                            "expected `{close}` to close `{c}` opened at {}:{}, found {x:?}",
                            span.line, span.column
                        )),
                    });
                }
                self.cur.bump();
                if c == '[' {
                    make_repeat(inner, 0, Some(1), span)
                } else {
                    Ok(inner)
                }
            }
            Some(c) if is_name_start(c) => {
                let name = self.name().unwrap();
                let i = self.slot(&name, span);
                Ok(Built::leaf(Expr::Ref(RuleId(i as u32))))
            }
            Some('<') => Err(self
                .cur
                .error("special tokens (`<|name|>`, `<[id]>`, llguidance's Lark dialect) are not supported: a grammar here constrains text, not token ids")
                .with_kind(ErrorKind::Unsupported)),
            Some('~') => Err(self
                .cur
                .error("lexeme negation `~A` (llguidance's Lark dialect) is not supported; write one regex for the terminal")
                .with_kind(ErrorKind::Unsupported)),
            Some(c) => Err(self.cur.error(format!(
                "unexpected {c:?}: expected a string, /regex/, `(`, `[` or a name"
            ))),
            None => Err(self.cur.error("unexpected end of input")),
        }
    }

    /// A `"..."` literal with Python-style escapes.
    fn string(&mut self) -> Result<String, GrammarError> {
        let span = self.cur.span();
        self.cur.bump();
        let mut out = String::new();
        loop {
            match self.cur.bump() {
                None | Some('\n') => return Err(error_at(span, "unterminated string literal")),
                Some('"') => return Ok(out),
                Some('\\') => {
                    let esc = self.cur.span();
                    let e = self
                        .cur
                        .bump()
                        .ok_or_else(|| error_at(span, "unterminated string literal"))?;
                    let hex = |p: &mut Self, n: usize| -> Result<char, GrammarError> {
                        let mut v = 0u32;
                        for _ in 0..n {
                            let d = p.cur.peek().and_then(|c| c.to_digit(16)).ok_or_else(|| {
                                error_at(esc, format!("bad escape: `\\{e}` needs {n} hex digits"))
                            })?;
                            p.cur.bump();
                            v = v * 16 + d;
                        }
                        char::from_u32(v).ok_or_else(|| {
                            error_at(
                                esc,
                                format!("bad escape: U+{v:X} is not a Unicode scalar value"),
                            )
                        })
                    };
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'f' => '\x0c',
                        '0' => '\0',
                        '\\' | '"' | '\'' => e,
                        'x' => hex(self, 2)?,
                        'u' => hex(self, 4)?,
                        'U' => hex(self, 8)?,
                        other => return Err(error_at(esc, format!("bad escape `\\{other}`"))),
                    });
                }
                Some(c) => out.push(c),
            }
        }
    }

    /// `/pattern/flags`.
    fn regex(&mut self) -> Result<Hir, GrammarError> {
        let span = self.cur.span();
        self.cur.bump();
        let body_span = self.cur.span();
        let mut pattern = String::new();
        loop {
            match self.cur.bump() {
                None | Some('\n') => return Err(error_at(span, "unterminated /regex/")),
                Some('/') => break,
                Some('\\') => match self.cur.bump() {
                    Some('/') => pattern.push('/'),
                    Some(c) => {
                        pattern.push('\\');
                        pattern.push(c);
                    }
                    None => return Err(error_at(span, "unterminated /regex/")),
                },
                Some(c) => pattern.push(c),
            }
        }
        let mut flags = Flags::default();
        while let Some(c) = self.cur.peek() {
            match c {
                'i' => flags.case_insensitive = true,
                's' => flags.dot_matches_new_line = true,
                'm' => flags.multi_line = true,
                'x' => flags.ignore_whitespace = true,
                'u' | 'l' => {}
                _ if is_name_char(c) => {
                    return Err(self.cur.error(format!("unknown regex flag `{c}`")));
                }
                _ => break,
            }
            self.cur.bump();
        }
        let hir = parse_hir(&pattern, flags, body_span)?;
        reject_looks(&hir, span)?;
        Ok(hir)
    }

    fn finish(self, start: &str) -> Result<GrammarDef, GrammarError> {
        let Parser {
            slots,
            names,
            ignore,
            warnings,
            ..
        } = self;
        let Some(&start_slot) = names.get(start).filter(|&&i| slots[i].def.is_some()) else {
            return Err(GrammarError::whole(format!(
                "the grammar has no start rule `{start}`"
            )));
        };
        if let Some(undefined) = slots
            .iter()
            .filter(|s| s.def.is_none())
            .min_by_key(|s| (s.first_use.line, s.first_use.column))
        {
            return Err(error_at(
                undefined.first_use,
                format!("undefined rule or terminal `{}`", undefined.name),
            ));
        }
        let rules = slots
            .into_iter()
            .map(|s| {
                let (expr, span, kind) = s.def.unwrap();
                Rule {
                    name: s.name,
                    expr,
                    kind,
                    span,
                    pointer: None,
                }
            })
            .collect();
        Ok(GrammarDef {
            rules,
            start: RuleId(start_slot as u32),
            ignore,
            warnings,
            lexing: crate::grammar::ir::Lexing::Greedy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{lower, reference::ReferenceRecognizer};

    fn rec(text: &str) -> ReferenceRecognizer {
        ReferenceRecognizer::new(&lower::lower(&parse(text, "start").unwrap()).unwrap()).unwrap()
    }

    #[test]
    fn rules_terminals_ignore_and_common() {
        let r = rec(
            "start: pair (\",\" pair)*\npair: NAME \"=\" value\n    | NAME\n?value: SIGNED_NUMBER | ESCAPED_STRING | \"true\"i\nNAME: /[a-z_]+/\n%import common.SIGNED_NUMBER\n%import common (ESCAPED_STRING, WS)\n%ignore WS // spaces\n",
        );
        assert!(r.accepts(b"a=1, b = \"x y\",c=TRUE , d"));
        assert!(r.accepts(b"  a = -2.5e3  "));
        assert!(!r.accepts(b"a b"));
        assert!(!r.accepts(b"a=\"x"));
    }

    #[test]
    fn optional_brackets_ranges_and_tilde() {
        let r = rec("start: [\"-\"] D ~ 2..3 \"!\"\nD: \"0\"..\"9\"");
        assert!(r.accepts(b"-12!"));
        assert!(r.accepts(b"123!"));
        assert!(!r.accepts(b"1!"));
        assert!(!r.accepts(b"1234!"));
    }

    #[test]
    fn errors() {
        assert!(
            parse("start: foo", "start")
                .unwrap_err()
                .message
                .contains("foo")
        );
        assert!(parse("start: \"a\"\n%import other.X", "start").is_err());
        assert!(
            parse("start: /a(/", "start")
                .unwrap_err()
                .message
                .contains("regex")
        );
        let deep = format!("start: {}\"a\"{}", "(".repeat(60_000), ")".repeat(60_000));
        assert_eq!(parse(&deep, "start").unwrap_err().kind, ErrorKind::Limit);
        let e = lower::lower(&parse("start: A\nA: \"x\" A \"x\" | \"y\"", "start").unwrap())
            .unwrap_err();
        assert!(e.message.contains("not regular"), "{e}");
    }
}
