//! Tests for the Earley parser: hand-built grammars, a set-semantics oracle over random
//! grammars, Leo linearity by work counters, round trips, fingerprint soundness.
//!
//! This module holds the shared helpers (a compact grammar notation, push helpers, random
//! grammars); the tests are grouped by concern in its submodules.

mod hand_built;
mod oracle;
mod scale;
mod textbook;

use std::sync::Arc;

use regex_syntax::hir::Hir;

use super::*;
use crate::grammar::ir::{Grammar, NonterminalId, Production, Symbol, Terminal, TerminalId};
use crate::test_rng::Rng;

/// Build an IR grammar from a compact notation: rules separated by `;`, `A -> x y | z`,
/// terminals in single quotes (their text is also their name), `ε` or nothing for empty.
/// The first rule's left-hand side is the start symbol.
pub(super) fn grammar(src: &str) -> Grammar {
    let mut terminals: Vec<String> = Vec::new();
    let mut nts: Vec<String> = Vec::new();
    let intern = |v: &mut Vec<String>, s: &str| -> u32 {
        match v.iter().position(|x| x == s) {
            Some(i) => i as u32,
            None => {
                v.push(s.to_string());
                (v.len() - 1) as u32
            }
        }
    };
    let mut productions = Vec::new();
    for rule in src.split(';').map(str::trim).filter(|r| !r.is_empty()) {
        let (lhs, rhs) = rule.split_once("->").expect("rule has ->");
        let lhs = NonterminalId(intern(&mut nts, lhs.trim()));
        for alt in rhs.split('|') {
            let mut syms = Vec::new();
            for tok in alt.split_whitespace() {
                if tok == "ε" {
                    continue;
                }
                if let Some(name) = tok.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')) {
                    syms.push(Symbol::Terminal(TerminalId(intern(&mut terminals, name))));
                } else {
                    syms.push(Symbol::Nonterminal(NonterminalId(intern(&mut nts, tok))));
                }
            }
            productions.push(Production { lhs, rhs: syms });
        }
    }
    Grammar {
        terminals: terminals
            .iter()
            .map(|n| {
                Terminal::new(
                    n.clone(),
                    Hir::literal(n.as_bytes()),
                    Some(n.as_bytes().to_vec()),
                )
            })
            .collect(),
        nonterminals: nts,
        productions,
        start: NonterminalId(0),
        warnings: Vec::new(),
        lexing: Default::default(),
    }
}

fn tid(g: &Grammar, name: &str) -> TerminalId {
    TerminalId(
        g.terminals
            .iter()
            .position(|t| t.name == name)
            .unwrap_or_else(|| panic!("no terminal {name}")) as u32,
    )
}

fn parser(g: &Grammar) -> Parser {
    Parser::new(Arc::new(ParserTables::new(g)))
}

/// Push whitespace-separated terminal names; panics (with the position) on rejection.
fn push_all(p: &mut Parser, g: &Grammar, input: &str) {
    for (i, name) in input.split_whitespace().enumerate() {
        assert!(
            p.push(tid(g, name)),
            "terminal #{i} {name:?} rejected in {input:?}"
        );
    }
}

fn accepts(g: &Grammar, input: &str) -> bool {
    let mut p = parser(g);
    for name in input.split_whitespace() {
        if !p.push(tid(g, name)) {
            return false;
        }
    }
    p.is_accepting()
}

/// The expected terminals' names, sorted.
fn expected_names(p: &Parser, g: &Grammar) -> Vec<String> {
    let mut v: Vec<String> = p
        .expected()
        .iter()
        .map(|t| g.terminals[t.0 as usize].name.clone())
        .collect();
    v.sort();
    v
}

const JSON_RIGHT: &str = "
    value -> object | array | 'S' | 'N' | 'true' | 'false' | 'null';
    object -> '{' '}' | '{' members '}';
    members -> pair | pair ',' members;
    pair -> 'S' ':' value;
    array -> '[' ']' | '[' elements ']';
    elements -> value | value ',' elements";

const JSON_LEFT: &str = "
    value -> object | array | 'S' | 'N' | 'true' | 'false' | 'null';
    object -> '{' '}' | '{' members '}';
    members -> pair | members ',' pair;
    pair -> 'S' ':' value;
    array -> '[' ']' | '[' elements ']';
    elements -> value | elements ',' value";

fn random_grammar(rng: &mut Rng) -> Grammar {
    let nt = 1 + rng.below(4);
    let nterm = 2 + rng.below(2);
    let mut rules = Vec::new();
    for a in 0..nt {
        let mut alts = Vec::new();
        for _ in 0..1 + rng.below(3) {
            let len = rng.below(4);
            let syms: Vec<String> = (0..len)
                .map(|_| {
                    if rng.below(2) == 0 {
                        format!("'{}'", (b'a' + rng.below(nterm) as u8) as char)
                    } else {
                        format!("N{}", rng.below(nt))
                    }
                })
                .collect();
            alts.push(if syms.is_empty() {
                "ε".to_string()
            } else {
                syms.join(" ")
            });
        }
        rules.push(format!("N{a} -> {}", alts.join(" | ")));
    }
    // Make sure every terminal exists in the IR (possibly unused).
    rules.push(format!(
        "Z -> {}",
        (0..nterm)
            .map(|i| format!("'{}'", (b'a' + i as u8) as char))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    grammar(&rules.join(";"))
}
