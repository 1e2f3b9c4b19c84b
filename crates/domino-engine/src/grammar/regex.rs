//! Regex front end: a Rust-`regex`-syntax pattern that the *whole* output must match.
//!
//! The pattern becomes a one-rule [`GrammarDef`] whose rule is [`RuleKind::Lexical`], so
//! lowering turns it into exactly one terminal. A leading `^`/`\A` and a trailing `$`/`\z`
//! are redundant (the match is always whole) and are stripped; any other anchor, word
//! boundary or look-around is rejected with a clear error, because it has no meaning for a
//! constraint that describes the whole text. Patterns are Unicode-aware and must only match
//! valid UTF-8 (as in the `regex` crate).
//!
//! [`parse_hir`] is shared with the Lark front end (`/re/flags`).

use super::expr::{Expr, GrammarDef, MAX_EXPR_DEPTH, Rule, RuleId, RuleKind, Span};
use super::{ErrorKind, GrammarError};
use regex_syntax::hir::{Hir, HirKind, Look};

/// Parse `pattern` into a one-rule grammar.
pub fn parse(pattern: &str) -> Result<GrammarDef, GrammarError> {
    let hir = parse_hir(pattern, Flags::default(), Span { line: 1, column: 1 })?;
    let hir = strip_whole_match_anchors(hir);
    reject_looks(&hir, Span { line: 1, column: 1 })?;
    Ok(GrammarDef {
        rules: vec![Rule {
            name: "REGEX".into(),
            expr: Expr::Regex(hir.into()),
            kind: RuleKind::Lexical,
            span: Span { line: 1, column: 1 },
            pointer: None,
        }],
        start: RuleId(0),
        ignore: Vec::new(),
        warnings: Vec::new(),
        lexing: Default::default(),
    })
}

/// Regex flags (Lark's `/re/imsx`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags {
    pub case_insensitive: bool,
    pub dot_matches_new_line: bool,
    pub multi_line: bool,
    pub ignore_whitespace: bool,
}

/// Parse a pattern to HIR with `flags`; errors are positioned relative to `origin` (the
/// pattern's first character in the surrounding grammar text).
pub fn parse_hir(pattern: &str, flags: Flags, origin: Span) -> Result<Hir, GrammarError> {
    let mut parser = regex_syntax::ParserBuilder::new()
        .utf8(true)
        .unicode(true)
        .case_insensitive(flags.case_insensitive)
        .dot_matches_new_line(flags.dot_matches_new_line)
        .multi_line(flags.multi_line)
        .ignore_whitespace(flags.ignore_whitespace)
        // Keep the HIR shallow: our own walks over it recurse.
        .nest_limit((MAX_EXPR_DEPTH / 2) as u32)
        .build();
    parser.parse(pattern).map_err(|e| {
        let (span, msg) = match &e {
            regex_syntax::Error::Parse(p) => (Some(*p.span()), p.kind().to_string()),
            regex_syntax::Error::Translate(t) => (Some(*t.span()), t.kind().to_string()),
            _ => (None, e.to_string()),
        };
        let (line, column) = match span {
            Some(s) if s.start.line == 1 => {
                (origin.line, origin.column + s.start.column as u32 - 1)
            }
            Some(s) => (origin.line + s.start.line as u32 - 1, s.start.column as u32),
            None => (origin.line, origin.column),
        };
        let nest_limit = matches!(&e, regex_syntax::Error::Parse(p)
            if matches!(p.kind(), regex_syntax::ast::ErrorKind::NestLimitExceeded(_)));
        let kind = if nest_limit {
            ErrorKind::Limit
        } else {
            ErrorKind::Invalid
        };
        GrammarError::at(line, column, format!("bad regex: {msg}")).with_kind(kind)
    })
}

/// Remove a leading start anchor and a trailing end anchor (the match is whole anyway), also
/// in each branch of a top-level alternation (`^a$|^b$`) and inside top-level groups.
pub fn strip_whole_match_anchors(hir: Hir) -> Hir {
    strip_anchors(hir, true, true)
}

fn strip_anchors(hir: Hir, start: bool, end: bool) -> Hir {
    let is_start = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::Start));
    let is_end = |h: &Hir| matches!(h.kind(), HirKind::Look(Look::End));
    match hir.kind() {
        HirKind::Concat(items) => {
            let mut items = items.clone();
            if start && items.first().is_some_and(is_start) {
                items.remove(0);
            }
            if end && items.last().is_some_and(is_end) {
                items.pop();
            }
            let n = items.len();
            if n > 0 {
                // `^(a|b)$`: the group at either end may carry the anchors of its branches.
                let last = items.pop().unwrap();
                let last = strip_anchors(last, start && n == 1, end);
                items.push(last);
                if n > 1 {
                    let first = items.remove(0);
                    items.insert(0, strip_anchors(first, start, false));
                }
            }
            Hir::concat(items)
        }
        HirKind::Alternation(branches) => Hir::alternation(
            branches
                .iter()
                .map(|b| strip_anchors(b.clone(), start, end))
                .collect(),
        ),
        HirKind::Capture(c) => strip_anchors((*c.sub).clone(), start, end),
        _ if (start && is_start(&hir)) || (end && is_end(&hir)) => Hir::empty(),
        _ => hir,
    }
}

/// Error if `hir` contains an anchor, word boundary or other look-around.
pub fn reject_looks(hir: &Hir, at: Span) -> Result<(), GrammarError> {
    // Explicit stack: the HIR may be deep.
    let mut stack = vec![hir];
    while let Some(h) = stack.pop() {
        match h.kind() {
            HirKind::Look(look) => {
                let what = match look {
                    Look::Start
                    | Look::End
                    | Look::StartLF
                    | Look::EndLF
                    | Look::StartCRLF
                    | Look::EndCRLF => "anchors other than a leading `^` and a trailing `$`",
                    _ => "word boundaries",
                };
                return Err(GrammarError::at(
                    at.line,
                    at.column,
                    format!("unsupported in a constraint regex: {what} ({look:?})"),
                )
                .with_kind(ErrorKind::Invalid));
            }
            HirKind::Repetition(r) => stack.push(&r.sub),
            HirKind::Capture(c) => stack.push(&c.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v.iter()),
            HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_whole_match_anchors() {
        let g = parse("^[a-z]+$").unwrap();
        let Expr::Regex(h) = &g.rules[0].expr else {
            panic!()
        };
        assert!(!h.to_string().contains('^'));
    }

    #[test]
    fn strips_anchors_in_branches_and_groups() {
        for p in ["^a$|^b$", "^(a|b)$", "(^a$)|(^b)", "^(?:^a|b$)$"] {
            let g = parse(p).unwrap_or_else(|e| panic!("{p}: {e}"));
            let Expr::Regex(h) = &g.rules[0].expr else {
                panic!()
            };
            assert!(
                !h.to_string().contains('^') && !h.to_string().contains('$'),
                "{p}: {h}"
            );
        }
        assert!(parse("a|^b|c$d").is_err());
    }

    #[test]
    fn rejects_inner_anchors_and_boundaries() {
        assert!(parse("a^b").is_err());
        assert!(
            parse(r"\bfoo")
                .unwrap_err()
                .message
                .contains("word boundaries")
        );
        assert!(parse("(?=x)").unwrap_err().message.contains("bad regex"));
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let pat = format!("{}a{}", "(".repeat(60_000), ")".repeat(60_000));
        assert_eq!(parse(&pat).unwrap_err().kind, ErrorKind::Limit);
    }
}
