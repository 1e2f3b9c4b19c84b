//! The Earley parser on grammars produced by the real front ends and lowering (GBNF → IR):
//! random walks that check the parser's invariants, and a timing harness
//! (`cargo test -p domino-engine --test earley -- --ignored --nocapture`).

mod common;
use common::rng::Rng;

use std::sync::Arc;

use regex_syntax::hir::{Hir, Look};

use domino_engine::engine::earley::{Parser, ParserTables};
use domino_engine::grammar::ir::{Grammar, TerminalId};
use domino_engine::grammar::{CompileOptions, GrammarSource};

const JSON_GBNF: &str = r#"
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws     ::= | " " | "\n" [ \t]{0,20}
"#;

const ARITH_GBNF: &str = r#"
root ::= expr
expr ::= term (("+" | "-") term)*
term ::= factor (("*" | "/") factor)*
factor ::= num | "(" expr ")" | "-" factor
num ::= [0-9]+
"#;

/// A grammar whose recursion goes through nested, nullable and ambiguous rules.
const TANGLED_GBNF: &str = r#"
root ::= item*
item ::= "a" item? "b" | list | "(" root ")"
list ::= "[" (item ("," item)*)? "]" | list list
"#;

fn compile(src: &str) -> Grammar {
    GrammarSource::Gbnf(src.to_string())
        .compile(&CompileOptions::default())
        .expect("grammar compiles")
}

/// Random walks over expected terminals, checking: push succeeds exactly for expected
/// terminals; a rejected push changes nothing; a state with nothing expected accepts (sets
/// are prefix-correct over productive rules); truncate restores recorded states; clones are
/// independent.
fn random_walks(name: &str, g: &Grammar, walks: usize, max_len: usize) {
    let tables = Arc::new(ParserTables::new(g));
    let n = tables.num_terminals() as u32;
    assert!(n > 0, "{name}: no terminals");
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for walk in 0..walks {
        let mut p = Parser::new(Arc::clone(&tables));
        let mut history = vec![(
            p.state_fingerprint(),
            p.expected().clone(),
            p.is_accepting(),
        )];
        let mut pushed = Vec::new();
        for _ in 0..max_len {
            let exp: Vec<TerminalId> = p.expected().iter().collect();
            if exp.is_empty() {
                assert!(p.is_accepting(), "{name}: dead end after {pushed:?}");
                break;
            }
            // A terminal that is not expected is rejected without changing anything.
            let other = TerminalId(rng.below(n as usize) as u32);
            if !p.expected().contains(other) {
                assert!(!p.push(other));
                assert_eq!(p.state_fingerprint(), history.last().expect("history").0);
            }
            let t = exp[rng.below(exp.len())];
            assert!(p.push(t), "{name}: expected terminal rejected");
            pushed.push(t.0);
            history.push((
                p.state_fingerprint(),
                p.expected().clone(),
                p.is_accepting(),
            ));
        }
        // Clone, diverge, and truncate back to random depths.
        let snapshot = p.clone();
        let mut q = p.clone();
        let first = q.expected().iter().next();
        if let Some(t) = first {
            assert!(q.push(t));
        }
        for _ in 0..5 {
            let d = rng.below(p.depth() + 1);
            p.truncate(d);
            assert_eq!(p.depth(), d);
            assert_eq!(
                (
                    p.state_fingerprint(),
                    p.expected().clone(),
                    p.is_accepting()
                ),
                history[d],
                "{name} walk {walk}"
            );
        }
        let top = history.len() - 1;
        assert_eq!(snapshot.depth(), top);
        assert_eq!(
            (
                snapshot.state_fingerprint(),
                snapshot.expected().clone(),
                snapshot.is_accepting()
            ),
            history[top]
        );
    }
}

#[test]
fn lowered_grammars_random_walks() {
    for (name, src) in [
        ("json", JSON_GBNF),
        ("arith", ARITH_GBNF),
        ("tangled", TANGLED_GBNF),
    ] {
        let g = compile(src);
        random_walks(name, &g, 200, 400);
    }
}

#[test]
fn lowered_json_accepts_documents_as_terminal_sequences() {
    // Pieces of a document mapped to the lowered grammar's terminals: literals by their
    // bytes, `S`/`N`/`T`/`W` by the terminal that matches a string / number / `true` / a space.
    let g = compile(JSON_GBNF);
    let tables = Arc::new(ParserTables::new(&g));
    let by_literal = |piece: &str| {
        g.terminals
            .iter()
            .position(|t| t.literal.as_deref() == Some(piece.as_bytes()))
            .map(|i| TerminalId(i as u32))
    };
    let by_match = |sample: &str| {
        let hits: Vec<TerminalId> = (0..g.terminals.len())
            .filter(|&i| {
                let re = regex_automata::meta::Regex::builder()
                    .syntax(regex_automata::util::syntax::Config::new().utf8(false))
                    .build_from_hir(&Hir::concat(vec![
                        Hir::look(Look::Start),
                        (*g.terminals[i].hir).clone(),
                        Hir::look(Look::End),
                    ]))
                    .expect("terminal regex");
                re.is_match(sample.as_bytes())
            })
            .map(|i| TerminalId(i as u32))
            .collect();
        assert_eq!(
            hits.len(),
            1,
            "{sample:?} matches {hits:?} of {:?}",
            g.terminals.iter().map(|t| &t.name).collect::<Vec<_>>()
        );
        hits[0]
    };
    let terminal = |piece: &str| match piece {
        "S" => by_match("\"key\""),
        "N" => by_match("-12.5e3"),
        "T" => by_match("true"),
        "W" => by_match(" "),
        _ => by_literal(piece).unwrap_or_else(|| panic!("no terminal for {piece:?}")),
    };
    let run = |doc: &str| -> Option<bool> {
        let mut p = Parser::new(Arc::clone(&tables));
        for piece in doc.split_whitespace() {
            if !p.push(terminal(piece)) {
                return None;
            }
        }
        Some(p.is_accepting())
    };
    assert_eq!(run("{ S : [ N , T , { } ] , S : S }"), Some(true));
    assert_eq!(run("{ W S : W [ N , W T ] W } W"), Some(true));
    assert_eq!(run("[ [ [ N ] ] ]"), Some(true));
    assert_eq!(run("[ [ [ N ] ]"), Some(false), "a proper prefix");
    assert_eq!(run("{ [ }"), None, "a key must follow `{{`");
    assert_eq!(run("[ N , ]"), None);
    assert_eq!(run("[ N N ]"), None);
}

/// This thread's CPU time in ns (Linux `schedstat`; wall-clock elsewhere), so timings on a
/// loaded machine count only the time actually spent running.
fn cpu_ns(wall: std::time::Instant) -> u128 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u128>().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos())
}

/// Timing harness: `cargo test -p domino-engine --test earley bench -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_lowered_json() {
    let g = compile(JSON_GBNF);
    let tables = Arc::new(ParserTables::new(&g));
    eprintln!(
        "lowered json: {} terminals, {} nonterminals, {} dotted items",
        tables.num_terminals(),
        tables.num_nonterminals(),
        tables.num_dotted()
    );
    let mut rng = Rng::new(7);
    let mut seq = Vec::new();
    let mut p = Parser::new(Arc::clone(&tables));
    while seq.len() < 200_000 {
        let exp: Vec<TerminalId> = p.expected().iter().collect();
        if exp.is_empty() || p.depth() > 2000 {
            p.truncate(0);
            seq.push(None);
            continue;
        }
        let t = exp[rng.below(exp.len())];
        assert!(p.push(t));
        seq.push(Some(t));
    }
    let mut p = Parser::new(Arc::clone(&tables));
    let origin = std::time::Instant::now();
    let start = cpu_ns(origin);
    let mut pushes = 0u64;
    let mut depth_sum = 0u64;
    for t in &seq {
        match t {
            Some(t) => {
                p.push(*t);
                pushes += 1;
                depth_sum += p.depth() as u64;
            }
            None => p.truncate(0),
        }
    }
    let ns = (cpu_ns(origin) - start) as f64 / pushes as f64;
    let mut p = Parser::new(Arc::clone(&tables));
    let start = cpu_ns(origin);
    let mut probes = 0u64;
    for t in seq.iter().take(40_000) {
        match t {
            Some(t) => {
                for e in p.expected().clone().iter() {
                    p.push(e);
                    p.pop();
                    probes += 1;
                }
                p.push(*t);
            }
            None => p.truncate(0),
        }
    }
    let probe_ns = (cpu_ns(origin) - start) as f64 / probes as f64;
    eprintln!(
        "lowered json (thread CPU time): push {ns:.0} ns/terminal over {pushes} pushes (mean depth {:.0}); push+pop probe {probe_ns:.0} ns",
        depth_sum as f64 / pushes as f64
    );
}
