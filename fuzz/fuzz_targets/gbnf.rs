//! Fuzz the GBNF front end, lowering and the reference recognizer: no input may panic,
//! overflow the stack or hang; errors are values.
#![no_main]

use domino_engine::grammar::{gbnf, lower, reference::ReferenceRecognizer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(def) = gbnf::parse(text, "root") else { return };
    let _ = domino_engine::grammar::print::to_gbnf(&def);
    let Ok(grammar) = lower::lower(&def) else { return };
    if grammar.terminals.len() > 200 {
        return; // keep iterations fast
    }
    if let Ok(rec) = ReferenceRecognizer::new(&grammar) {
        // Feed the input itself: exercises scanning on related bytes.
        let _ = rec.accepts(&data[..data.len().min(64)]);
    }
});
