//! Fuzz the regex front end (Rust-regex syntax → GrammarDef → lowering) and the per-terminal
//! DFA construction it feeds: no pattern may panic, overflow the stack, hang or exhaust
//! memory (run with libFuzzer's `-rss_limit_mb`); errors are values.
#![no_main]

use domino_engine::grammar::dfa::TerminalDfa;
use domino_engine::grammar::{lower, regex};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else { return };
    let Ok(def) = regex::parse(pattern) else { return };
    let Ok(grammar) = lower::lower(&def) else { return };
    for t in grammar.terminals.iter().take(16) {
        let _ = TerminalDfa::for_terminal(t);
    }
});
