//! # domino
//!
//! Minimally invasive, fast constrained decoding for GGUF language models, after the DOMINO
//! paper (Beurer-Kellner, Fischer, Vechev, 2024).
//!
//! The pipeline: a grammar source (GBNF, Lark, regex, JSON Schema — [`grammar`]) is parsed
//! and lowered to one IR of BNF productions over regular terminals; [`lexer`] compiles the
//! terminals into one scanner DFA; [`engine`] precomputes, per scanner state, a subterminal
//! tree that aligns every vocabulary token ([`vocab`]) with the terminals it spans, and at
//! decode time walks that tree against an Earley parser to produce exact token masks.
//! [`runtime`] drives llama.cpp; [`decode`] runs the generation loop (sampling, masking,
//! opportunistic checks, speculative drafts, baselines); [`eval`] reproduces the paper's
//! tables; [`repl`] is the interactive shell; [`cli`] is the `domino` command.
//!
//! `engine` never depends on `runtime`: it is pure Rust and can be embedded elsewhere.

pub mod cli;
pub mod decode;
pub mod engine;
pub mod eval;
pub mod grammar;
pub mod lexer;
pub mod repl;
pub mod runtime;
pub mod vocab;
