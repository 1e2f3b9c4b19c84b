//! Printing grammars as GBNF text that [`super::gbnf::parse`] reads back to the same language.
//!
//! [`to_gbnf`] prints a front end's [`GrammarDef`] (used by `domino grammar convert --schema
//! F --to gbnf`); [`ir_to_gbnf`] prints a lowered [`Grammar`] (each terminal inlined as a
//! GBNF expression), for inspecting what the engine sees.
//!
//! Regular expressions (HIR) are translated structurally: literals, Unicode classes as
//! `[...]` ranges, concatenation, alternation and counted repetition. GBNF works on Unicode
//! scalar values, so byte classes beyond ASCII (from `(?-u)` patterns) cannot be printed and
//! are an error; so are look-around assertions (front ends never produce them).
//!
//! The start rule is printed as `root`; rule names are sanitised to GBNF's name characters
//! and made unique.

use super::GrammarError;
use super::expr::{Expr, GrammarDef};
use super::ir::{Grammar, Symbol};
use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::HashSet;
use std::fmt::Write;

/// Print a `GrammarDef` as GBNF (start rule first, named `root`).
pub fn to_gbnf(def: &GrammarDef) -> Result<String, GrammarError> {
    if def.lexing == super::ir::Lexing::Greedy {
        return Err(greedy_error());
    }
    if !def.ignore.is_empty() {
        return Err(GrammarError::whole(
            "grammars with %ignore cannot be printed as GBNF (GBNF has no ignore); print the lowered grammar instead",
        ));
    }
    let names = unique_names(
        def.rules.iter().map(|r| r.name.as_str()),
        def.start.0 as usize,
    );
    let mut out = String::new();
    let mut order: Vec<usize> = (0..def.rules.len()).collect();
    order.sort_by_key(|&i| i != def.start.0 as usize);
    for i in order {
        let mut body = String::new();
        print_expr(&def.rules[i].expr, &names, &mut body, Prec::Alt)?;
        writeln!(out, "{} ::= {body}", names[i]).unwrap();
    }
    Ok(out)
}

/// Print a lowered grammar as GBNF (terminals inlined). A grammar with constrained terminals
/// (see [`crate::grammar::ir::Constraints`]) has no GBNF equivalent: an error.
pub fn ir_to_gbnf(g: &Grammar) -> Result<String, GrammarError> {
    if g.lexing == super::ir::Lexing::Greedy {
        return Err(greedy_error());
    }
    ir_to_text(g, false)
}

/// GBNF has llama.cpp's character-level semantics: a Lark grammar's greedy lexing (see
/// [`crate::lexer::greedy`]) cannot be written in it, and printing it anyway would change
/// its language (`intx;` would become `int x;`).
fn greedy_error() -> GrammarError {
    GrammarError::whole(
        "a Lark grammar cannot be printed as GBNF: Lark's greedy lexing (longest match, keywords before identifiers) has no GBNF form, and llama.cpp's character-level GBNF would accept more (print the lowered grammar with `--to ir` to read it)",
    )
}

/// Print a lowered grammar for reading (`domino grammar convert --to ir`): GBNF, except that
/// a constrained terminal is a rule `<name> ::= <base>` followed by a comment line per
/// constraint (`# and: …`, `# and not: …`), and a first comment says the text is then not
/// equivalent GBNF.
pub fn ir_to_annotated_text(g: &Grammar) -> Result<String, GrammarError> {
    ir_to_text(g, true)
}

fn ir_to_text(g: &Grammar, annotate: bool) -> Result<String, GrammarError> {
    let names = unique_names(
        g.nonterminals.iter().map(|s| s.as_str()),
        g.start.0 as usize,
    );
    let mut terms = Vec::with_capacity(g.terminals.len());
    let mut constrained = String::new();
    let mut used: HashSet<String> = names.iter().cloned().collect();
    for t in &g.terminals {
        let mut s = String::new();
        print_hir(&t.hir, &mut s, Prec::Atom)?;
        if t.constraints.is_empty() {
            terms.push(s);
            continue;
        }
        if !annotate {
            return Err(constrained_error(&format!("terminal `{}`", t.name)));
        }
        let base: String = t
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        let mut name = format!("{base}-constrained");
        let mut k = 1;
        while !used.insert(name.clone()) {
            name = format!("{base}-constrained-{k}");
            k += 1;
        }
        writeln!(constrained, "{name} ::= {s}").unwrap();
        for (label, hs) in [
            ("and", &t.constraints.and),
            ("and not", &t.constraints.and_not),
        ] {
            for h in hs {
                let mut c = String::new();
                print_hir(h, &mut c, Prec::Atom)?;
                writeln!(constrained, "#   {label}: {c}").unwrap();
            }
        }
        terms.push(name);
    }
    let mut out = String::new();
    if g.lexing == super::ir::Lexing::Greedy {
        out.push_str("# Lark grammar: its terminals are lexed greedily (longest match, string literals\n# before regexes), which this GBNF text does not say: it is NOT equivalent GBNF.\n");
    }
    if !constrained.is_empty() {
        out.push_str("# Rules marked `-constrained` are intersections (`and`) and differences (`and not`) of\n# the languages below them: this text is NOT equivalent GBNF.\n");
    }
    let mut order: Vec<usize> = (0..g.nonterminals.len()).collect();
    order.sort_by_key(|&i| i != g.start.0 as usize);
    for i in order {
        let alts: Vec<String> = g
            .productions
            .iter()
            .filter(|p| p.lhs.0 as usize == i)
            .map(|p| {
                if p.rhs.is_empty() {
                    return "\"\"".to_string();
                }
                p.rhs
                    .iter()
                    .map(|s| match s {
                        Symbol::Terminal(t) => terms[t.0 as usize].clone(),
                        Symbol::Nonterminal(n) => names[n.0 as usize].clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        writeln!(out, "{} ::= {}", names[i], alts.join(" | ")).unwrap();
    }
    out.push_str(&constrained);
    Ok(out)
}

/// GBNF-safe, unique names; the start rule is `root`.
fn unique_names<'a>(names: impl Iterator<Item = &'a str>, start: usize) -> Vec<String> {
    let mut used: HashSet<String> = HashSet::new();
    used.insert("root".into());
    names
        .enumerate()
        .map(|(i, n)| {
            if i == start {
                return "root".to_string();
            }
            let mut base: String = n
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            if base.is_empty() {
                base = "rule".into();
            }
            let mut name = base.clone();
            let mut k = 1;
            while !used.insert(name.clone()) {
                name = format!("{base}-{k}");
                k += 1;
            }
            name
        })
        .collect()
}

/// GBNF has no intersection or difference: a constrained terminal (a `pattern` with length
/// bounds, a key matching a pattern but no named property) cannot be printed.
fn constrained_error(what: &str) -> GrammarError {
    GrammarError::whole(format!(
        "{what} is an intersection or difference of regular languages (a `pattern` with length \
         bounds or a `format`, keys matching a pattern but no named property, `not: {{enum}}`, \
         `multipleOf`), which GBNF cannot express"
    ))
    .with_kind(super::ErrorKind::Unsupported)
}

/// Binding strength of the context an expression is printed in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Prec {
    Alt,
    Seq,
    Atom,
}

fn print_expr(e: &Expr, names: &[String], out: &mut String, ctx: Prec) -> Result<(), GrammarError> {
    match e {
        Expr::Empty => out.push_str("\"\""),
        Expr::Bytes(b) => print_literal(&String::from_utf8_lossy(b), out),
        Expr::Regex(h) => print_hir(h, out, ctx)?,
        Expr::Constrained { .. } => return Err(constrained_error("a string or key terminal")),
        Expr::Ref(r) => out.push_str(&names[r.0 as usize]),
        Expr::Seq(v) => {
            let paren = ctx > Prec::Seq && v.len() > 1;
            if paren {
                out.push('(');
            }
            if v.is_empty() {
                out.push_str("\"\"");
            }
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print_expr(x, names, out, Prec::Atom)?;
            }
            if paren {
                out.push(')');
            }
        }
        Expr::Alt(v) => {
            let count: usize = v
                .iter()
                .map(|x| match x {
                    Expr::RefPairs(pairs) => pairs.len(),
                    _ => 1,
                })
                .sum();
            let paren = ctx > Prec::Alt && count > 1;
            if paren {
                out.push('(');
            }
            if v.is_empty() {
                out.push_str("[^\\x00-\\U0010FFFF]"); // matches nothing
            }
            // (Pairs among the alternatives read as alternatives of their own.)
            let alts = v.iter().flat_map(|x| match x {
                Expr::RefPairs(pairs) => pairs.iter().map(|&[a, b]| Err([a, b])).collect(),
                x => vec![Ok(x)],
            });
            for (i, x) in alts.enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                match x {
                    Ok(x) => print_expr(x, names, out, Prec::Seq)?,
                    Err([a, b]) => {
                        print_expr(&Expr::Ref(a), names, out, Prec::Atom)?;
                        out.push(' ');
                        print_expr(&Expr::Ref(b), names, out, Prec::Atom)?;
                    }
                }
            }
            if paren {
                out.push(')');
            }
        }
        Expr::Repeat { expr, min, max } => {
            print_expr(expr, names, out, Prec::Atom)?;
            print_repeat(*min, *max, out);
        }
        Expr::RefPairs(pairs) => print_expr(&Expr::ref_pairs_expanded(pairs), names, out, ctx)?,
    }
    Ok(())
}

fn print_repeat(min: u32, max: Option<u32>, out: &mut String) {
    match (min, max) {
        (0, None) => out.push('*'),
        (1, None) => out.push('+'),
        (0, Some(1)) => out.push('?'),
        (m, None) => write!(out, "{{{m},}}").unwrap(),
        (m, Some(n)) if m == n => write!(out, "{{{m}}}").unwrap(),
        (m, Some(n)) => write!(out, "{{{m},{n}}}").unwrap(),
    }
}

fn escape_char(c: char, in_class: bool, out: &mut String) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        '\\' => out.push_str("\\\\"),
        '"' if !in_class => out.push_str("\\\""),
        ']' | '[' | '-' | '^' if in_class => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(out, "\\x{:02X}", c as u32).unwrap(),
        // Invisible or unassigned-looking code points are escaped so the text stays readable.
        c if (0x80..0xA0).contains(&(c as u32))
            || matches!(c as u32, 0x2028 | 0x2029 | 0xFEFF | 0xE000..=0xF8FF | 0xFFF0..=0xFFFF) =>
        {
            write!(out, "\\u{:04X}", c as u32).unwrap()
        }
        c if (c as u32) >= 0xF0000 || (0xE0000..=0xE0FFF).contains(&(c as u32)) => {
            write!(out, "\\U{:08X}", c as u32).unwrap()
        }
        c => out.push(c),
    }
}

fn print_literal(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        escape_char(c, false, out);
    }
    out.push('"');
}

fn print_hir(h: &Hir, out: &mut String, ctx: Prec) -> Result<(), GrammarError> {
    match h.kind() {
        HirKind::Empty => out.push_str("\"\""),
        HirKind::Literal(l) => match std::str::from_utf8(&l.0) {
            Ok(s) => print_literal(s, out),
            Err(_) => {
                return Err(GrammarError::whole(
                    "a byte literal that is not UTF-8 cannot be printed as GBNF",
                ));
            }
        },
        HirKind::Class(Class::Unicode(c)) => {
            if c.ranges().is_empty() {
                out.push_str("[^\\x00-\\U0010FFFF]");
            } else {
                out.push('[');
                for r in c.ranges() {
                    escape_char(r.start(), true, out);
                    if r.end() != r.start() {
                        out.push('-');
                        escape_char(r.end(), true, out);
                    }
                }
                out.push(']');
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            if c.ranges().iter().any(|r| r.end() >= 0x80) {
                return Err(GrammarError::whole(
                    "a byte class beyond ASCII cannot be printed as GBNF (GBNF matches code points)",
                ));
            }
            out.push('[');
            for r in c.ranges() {
                escape_char(r.start() as char, true, out);
                if r.end() != r.start() {
                    out.push('-');
                    escape_char(r.end() as char, true, out);
                }
            }
            out.push(']');
        }
        HirKind::Look(l) => {
            return Err(GrammarError::whole(format!(
                "look-around {l:?} cannot be printed as GBNF"
            )));
        }
        HirKind::Repetition(r) => {
            print_hir(&r.sub, out, Prec::Atom)?;
            print_repeat(r.min, r.max, out);
        }
        HirKind::Capture(c) => print_hir(&c.sub, out, ctx)?,
        HirKind::Concat(v) => {
            let paren = ctx > Prec::Seq;
            if paren {
                out.push('(');
            }
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print_hir(x, out, Prec::Atom)?;
            }
            if paren {
                out.push(')');
            }
        }
        HirKind::Alternation(v) => {
            let paren = ctx > Prec::Alt;
            if paren {
                out.push('(');
            }
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push_str(" | ");
                }
                print_hir(x, out, Prec::Seq)?;
            }
            if paren {
                out.push(')');
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{gbnf, lark, lower, reference::ReferenceRecognizer, regex};

    fn same_language(a: &GrammarDef, b: &GrammarDef, samples: &[&str]) {
        let ra = ReferenceRecognizer::new(&lower::lower(a).unwrap()).unwrap();
        let rb = ReferenceRecognizer::new(&lower::lower(b).unwrap()).unwrap();
        for s in samples {
            assert_eq!(ra.accepts(s.as_bytes()), rb.accepts(s.as_bytes()), "{s:?}");
        }
    }

    #[test]
    fn gbnf_round_trip() {
        let src = "root ::= item (\",\" item){0,3}\nitem ::= [a-c\\]\\-]+ | \"q\\\"\\n\" | num\nnum ::= \"-\"? [0-9]{1,2}";
        let def = gbnf::parse(src, "root").unwrap();
        let text = to_gbnf(&def).unwrap();
        let back = gbnf::parse(&text, "root").unwrap();
        same_language(
            &def,
            &back,
            &[
                "a",
                "a,b",
                "]-a,q\"\n,-12",
                "a,b,c,a",
                "a,b,c,a,b",
                "-123",
                "",
                "q",
            ],
        );
    }

    #[test]
    fn regex_and_lark_print() {
        let def = regex::parse(r"(?i)[a-z]{2,3}(\d|é|\.)+x?").unwrap();
        let text = to_gbnf(&def).unwrap();
        let back = gbnf::parse(&text, "root").unwrap();
        same_language(&def, &back, &["ab1", "ABé.", "abcd1", "ab", "ab٣x", "Ab.x"]);
        // Lark's greedy lexing has no GBNF form: refused, never printed with a wider language.
        let def = lark::parse("start: \"a\" B\nB: /[0-9]+/", "start").unwrap();
        assert!(to_gbnf(&def).unwrap_err().message.contains("greedy"));
        let g = lower::lower(&def).unwrap();
        assert!(ir_to_gbnf(&g).is_err());
        assert!(ir_to_annotated_text(&g).unwrap().starts_with("# Lark"));
    }

    #[test]
    fn ir_prints() {
        let def = gbnf::parse("root ::= \"(\" root \")\" | [a-z]*", "root").unwrap();
        let g = lower::lower(&def).unwrap();
        let back = gbnf::parse(&ir_to_gbnf(&g).unwrap(), "root").unwrap();
        same_language(&def, &back, &["", "((ab))", "(a", "a)"]);
    }
}
