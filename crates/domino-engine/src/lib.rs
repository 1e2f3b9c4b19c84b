//! # domino-engine
//!
//! The DOMINO constrained-decoding engine (Beurer-Kellner, Fischer, Vechev, 2024) as a
//! library that knows nothing of llama.cpp or of a command line: everything a token mask
//! needs, and nothing else.
//!
//! The pipeline: a grammar source (GBNF, Lark, regex, JSON Schema — [`grammar`]) is parsed
//! and lowered to one IR of BNF productions over regular terminals; [`lexer`] compiles the
//! terminals into one scanner DFA; [`engine`] precomputes, per scanner state, a subterminal
//! tree that aligns every vocabulary token ([`vocab`]) with the terminals it spans, and at
//! decode time walks that tree against an Earley parser to produce exact token masks.
//!
//! This crate is what the `domino` command, its HTTP server and any future C ABI or Python
//! package wrap. It builds and tests in seconds, without cmake or a C++ compiler.
//!
//! ```
//! use domino_engine::engine::{CompiledGrammar, Constraint, Options};
//! use domino_engine::grammar::{CompileOptions, GrammarSource};
//! use domino_engine::vocab::{TokenId, Vocabulary};
//! use std::sync::Arc;
//!
//! // A toy vocabulary: a few byte strings, no end-of-generation token.
//! let pieces: Vec<Vec<u8>> = ["{", "}", "\"", "a", "\"a", ":", "1", " "]
//!     .iter().map(|s| s.as_bytes().to_vec()).collect();
//! let specials = vec![false; pieces.len()];
//! let vocab = Arc::new(Vocabulary::new(pieces, specials, vec![]));
//! let ir = GrammarSource::Regex(r#"\{"a":1\}"#.into())
//!     .compile(&CompileOptions::default())
//!     .unwrap();
//! let grammar = CompiledGrammar::new(ir).unwrap();
//! let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
//! assert!(c.allows(TokenId(0)));   // "{"
//! assert!(!c.allows(TokenId(1)));  // "}" cannot start the document
//! c.commit(TokenId(0)).unwrap();
//! assert!(c.allows(TokenId(4)));    // the bridge token `"a` (quote, then the key)
//! ```

pub mod budget;
pub mod engine;
pub mod grammar;
pub mod hash;
pub mod lexer;
pub(crate) mod segmented;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod vocab;
