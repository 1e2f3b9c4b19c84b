//! Fuzz the JSON Schema compiler on arbitrary JSON: unsupported or invalid schemas are
//! error values, never panics or hangs.
#![no_main]

use domino_engine::grammar::{CompileOptions, json_schema, lower};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    for lenient in [false, true] {
        let opts = CompileOptions { lenient, ..CompileOptions::default() };
        if let Ok(def) = json_schema::compile(&schema, &opts) {
            let _ = lower::lower(&def);
        }
    }
});
