//! Fuzz the engine's file parsers: the first input byte picks one, the rest is the file.
//! - `tokenizer.json` (Hugging Face) into a [`Vocabulary`];
//! - a saved tree cache (`TreeCache::load`: magic, version, checksum, then the trees) for a
//!   fixed grammar and vocabulary. Fuzzing behind the checksum needs valid checksums, so
//!   half the inputs get theirs recomputed by saving a real cache and splicing the input in.
//! - saved draft statistics (`DraftModel::parse`, the `--draft-stats` file); a file that
//!   loads must save and load back to the same counts.
//! - an eval `results.jsonl` read on `--resume` (the `domino` crate's framing,
//!   `src/eval/jsonl.rs`, compiled here from its source file: that crate links llama.cpp);
//!   what `--resume` keeps (the valid part, plus a newline when it needs one) must read back
//!   as the same records with nothing dropped.
//! Property: no panic, hang or OOM; malformed files are errors.
#![no_main]

use domino_engine::engine::drafts::DraftModel;
use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::{gbnf, lower};
use domino_engine::vocab::{TokenId, Vocabulary, tokenizer_json};
use libfuzzer_sys::fuzz_target;

#[path = "../../src/eval/jsonl.rs"]
mod jsonl;
use std::sync::{Arc, OnceLock};

struct Fixture {
    grammar: Arc<CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    /// A real saved cache (its header and checksum layout seed the spliced inputs).
    saved: Vec<u8>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let def = gbnf::parse("root ::= \"{\" (\"a\" | [0-9]+ | \"bc\")* \"}\"", "root").unwrap();
        let grammar = CompiledGrammar::new(lower::lower(&def).unwrap()).unwrap();
        let tokens: Vec<Vec<u8>> = ["{", "}", "a", "1", "23", "bc", "a}", "{a", ""]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
        let mut special = vec![false; tokens.len()];
        special[tokens.len() - 1] = true;
        let vocab = Arc::new(Vocabulary::new(
            tokens,
            special,
            vec![TokenId(8)],
        ));
        let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
        let mut mask = domino_engine::vocab::TokenSet::new(vocab.len());
        c.compute_mask(&mut mask);
        let path = scratch("fixture");
        c.tree_cache().save(&grammar, &vocab, &path).unwrap();
        let saved = std::fs::read(&path).unwrap();
        Fixture { grammar, vocab, saved }
    })
}

fn scratch(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("domino-fuzz-files-{what}-{}", std::process::id()))
}

/// The checksum `TreeCache::save` appends (FNV-1a 64 of the body, little-endian).
fn checksum(body: &[u8]) -> u64 {
    domino_engine::hash::fnv1a(body)
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    match which % 5 {
        4 => {
            type Record = serde_json::Value;
            if let Ok(read) = jsonl::parse_results::<Record>(rest, "input") {
                let mut kept = rest[..read.valid_len as usize].to_vec();
                if read.needs_newline {
                    kept.push(b'\n');
                }
                let again = jsonl::parse_results::<Record>(&kept, "kept").expect("the kept part reads back");
                assert_eq!(again.records, read.records);
                assert!(!again.dropped_partial_line && !again.needs_newline);
            }
        }
        3 => {
            // The key the seed files carry (`"key": "1234"`), so inputs get past the key check.
            let Ok(text) = std::str::from_utf8(rest) else { return };
            if let Ok(model) = DraftModel::parse(text, 0x1234, "input") {
                let path = scratch("drafts.json");
                model.save(&path).expect("saving loaded counts");
                let again = DraftModel::load(&path, 0x1234).expect("saved counts load back");
                assert!(again == model, "draft counts changed through save and load");
            }
        }
        0 => {
            let path = scratch("tokenizer.json");
            if std::fs::write(&path, rest).is_ok() {
                let _ = tokenizer_json::load(&path);
            }
        }
        _ => {
            let f = fixture();
            let bytes = if which % 5 == 1 {
                rest.to_vec()
            } else {
                // Keep the real header, replace the body's tail with the input, fix the sum.
                let body = &f.saved[..f.saved.len() - 8];
                // Magic, version, grammar hash, vocabulary fingerprint; then the input,
                // mutated from the real body's start when it is a prefix of it.
                let keep = 28.min(body.len());
                let mut b = body[..keep].to_vec();
                b.extend_from_slice(rest);
                let sum = checksum(&b);
                b.extend_from_slice(&sum.to_le_bytes());
                b
            };
            let path = scratch("input");
            if std::fs::write(&path, &bytes).is_err() {
                return;
            }
            let cache = f.grammar.tree_cache(&f.vocab, 0);
            let _ = cache.load(&f.grammar, &f.vocab, &path);
        }
    }
});
