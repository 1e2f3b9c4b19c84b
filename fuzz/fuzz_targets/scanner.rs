//! Fuzz scanner building and walking: a GBNF grammar (the input up to the first NUL) is
//! lowered and compiled (`CompiledGrammar::new`: follow sets, terminal DFAs, the lazy
//! product scanner), then the rest of the input is walked through the scanner byte by
//! byte. Properties: no panic/hang/OOM; a state reached is never the start state after a
//! byte (invariant 1 of `lexer`), and every terminal accepting in a state is live in it.
#![no_main]

use domino_engine::engine::CompiledGrammar;
use domino_engine::grammar::{gbnf, lower};
use domino_engine::lexer::{DEAD, ScanState, Scanner};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (text, input) = (&data[..split], data.get(split + 1..).unwrap_or(&[]));
    let Ok(text) = std::str::from_utf8(text) else { return };
    let Ok(def) = gbnf::parse(text, "root") else { return };
    let Ok(g) = lower::lower(&def) else { return };
    if g.terminals.len() > 64 {
        return; // keep iterations fast
    }
    let Ok(cg) = CompiledGrammar::new(g) else { return };
    let sc = cg.scanner();
    let mut s = Scanner::START;
    for &b in input.iter().take(256) {
        let next = sc.next(s, b);
        if next == DEAD {
            s = Scanner::START;
            continue;
        }
        let n = ScanState(next);
        assert_ne!(n, Scanner::START, "a byte never leads back to the start state");
        // Every terminal that accepts here is still live here.
        let live = sc.live_terminals(sc.live_set(n));
        for t in sc.accepting(n) {
            assert!(live.contains(t), "accepting {t:?} not live in {n:?}");
        }
        s = n;
    }
});
