//! Fuzz the Lark front end and lowering: errors are values, never panics.
#![no_main]

use domino_engine::grammar::{lark, lower};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(def) = lark::parse(text, "start") {
        let _ = lower::lower(&def);
    }
});
