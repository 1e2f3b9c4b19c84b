//! The compile budget stops every stage of a compilation with an error that names the stage
//! and the limit: a budget of zero seconds is armed right before each stage, so the stage's
//! own checkpoints (not an earlier stage's) must notice it.

use domino_engine::budget::{self, Budget, Limit};
use domino_engine::engine::{CompiledGrammar, EngineError, Options};
use domino_engine::grammar::{CompileOptions, ErrorKind, GrammarSource, gbnf, lower};
use domino_engine::lexer::{LexerError, Scanner};
use domino_engine::vocab::Vocabulary;
use std::sync::Arc;
use std::time::Duration;

const ZERO: Budget = Budget {
    time: Some(Duration::ZERO),
    max_bytes: None,
};

/// 600 rules (enough for the cheap checkpoints, which look every 256th call) over distinct
/// literal terminals, with recursion so nothing is promoted away.
fn grammar_text() -> String {
    let mut g = String::from("root ::= r0\n");
    for i in 0..600 {
        g.push_str(&format!(
            "r{i} ::= \"w{i}x\" r{} | \"(\" r{i} \")\"\n",
            i + 1
        ));
    }
    g.push_str("r600 ::= \"end\"\n");
    g
}

fn assert_time_limit(e: &budget::BudgetExceeded, stage: &str) {
    assert_eq!(e.stage, stage);
    assert_eq!(e.limit, Limit::Time(Duration::ZERO));
}

#[test]
fn parsing_stops() {
    let text = grammar_text();
    let _b = ZERO.enter();
    let e = gbnf::parse(&text, "root").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(
        e.message
            .contains("time budget of 0.0 s (while building the grammar's rules (parsing))"),
        "{e}"
    );
}

#[test]
fn lowering_stops() {
    let def = gbnf::parse(&grammar_text(), "root").unwrap();
    let _b = ZERO.enter();
    let e = lower::lower(&def).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(
        e.message.contains("while building the lowered grammar"),
        "{e}"
    );
}

#[test]
fn the_scanner_stops() {
    let ir = lower::lower(&gbnf::parse(&grammar_text(), "root").unwrap()).unwrap();
    let _b = ZERO.enter();
    match Scanner::new(&ir) {
        Err(LexerError::Budget(e)) => assert_time_limit(&e, "the scanner's terminal DFAs"),
        other => panic!("expected a budget error, got {:?}", other.err()),
    }
}

#[test]
fn the_engine_grammar_stops_at_the_parser_tables() {
    let ir = lower::lower(&gbnf::parse(&grammar_text(), "root").unwrap()).unwrap();
    let _b = ZERO.enter();
    match CompiledGrammar::new(ir) {
        Err(EngineError::Budget(e)) => assert_time_limit(&e, "the parser tables"),
        other => panic!("expected a budget error, got {:?}", other.err()),
    }
}

#[test]
fn the_token_trees_and_first_mask_stop() {
    let ir = lower::lower(&gbnf::parse(&grammar_text(), "root").unwrap()).unwrap();
    let grammar = CompiledGrammar::new(ir).unwrap();
    // A vocabulary of 3,000 tokens that all walk into the grammar's terminals.
    let pieces: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("w{}x", i % 700).into_bytes())
        .chain(std::iter::once(b"(".to_vec()))
        .collect();
    let n = pieces.len();
    let vocab = Arc::new(Vocabulary::new(pieces, vec![false; n], vec![]));
    {
        let _b = ZERO.enter();
        match grammar.prepare(&vocab, Options::default()) {
            Err(EngineError::Budget(e)) => assert_time_limit(&e, "the token trees"),
            other => panic!("expected a budget error, got {other:?}"),
        }
    }
    // The same preparation with time to spare succeeds on a fresh compile.
    let ir = lower::lower(&gbnf::parse(&grammar_text(), "root").unwrap()).unwrap();
    let grammar = CompiledGrammar::new(ir).unwrap();
    let _b = Budget::DEFAULT.enter();
    grammar.prepare(&vocab, Options::default()).unwrap();
}

#[test]
fn compile_options_carry_the_budget() {
    let opts = CompileOptions {
        budget: ZERO,
        ..CompileOptions::default()
    };
    let e = GrammarSource::Gbnf(grammar_text())
        .compile(&opts)
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(e.to_string().contains("--compile-timeout"), "{e}");
    // Without a budget armed afterwards, compiling works again.
    GrammarSource::Gbnf(grammar_text())
        .compile(&CompileOptions::default())
        .unwrap();
}

#[test]
fn a_budget_within_limits_changes_nothing() {
    let _b = Budget::DEFAULT.enter();
    let ir = GrammarSource::Gbnf(grammar_text())
        .compile(&CompileOptions::default())
        .unwrap();
    CompiledGrammar::new(ir).unwrap();
    assert!(budget::exceeded().is_none());
}

/// A 20,000-value string enum (past the 4,096 limit for mixed values) is one trie terminal
/// and means exactly its values.
#[test]
fn a_large_string_enum_is_one_trie_terminal() {
    use domino_engine::grammar::reference::ReferenceRecognizer;
    let values: Vec<String> = (0..20_000).map(|i| format!("v{i}")).collect();
    let schema = serde_json::json!({"type": "string", "enum": values});
    let ir = GrammarSource::JsonSchema(schema)
        .compile(&CompileOptions::default())
        .unwrap();
    assert!(ir.terminals.len() < 8, "{} terminals", ir.terminals.len());
    let r = ReferenceRecognizer::new(&ir).unwrap();
    assert!(r.accepts(b"\"v0\""));
    assert!(r.accepts(b"\"v19999\""));
    assert!(!r.accepts(b"\"v20000\""));
    assert!(!r.accepts(b"\"v\""));
    assert!(r.is_viable_prefix(b"\"v1999"));
}
