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
//! [`constraint`] turns a named grammar, schema or regex into a compiled constraint, and
//! [`models`] says which model file to load and how; [`diag`] holds errors, exit codes and
//! logging; [`memory`] is the counting allocator that lets compile budgets measure memory.
//!
//! # Layers
//! Dependencies point one way (`scripts/check-layers` enforces it): `cli` → {`serve`,
//! `repl`, `eval`} → `decode` → `runtime` → `diag` → the engine, with [`constraint`]
//! (→ `diag`, engine) usable from `decode` up and [`models`] (→ `runtime`) from `repl`,
//! `eval` and `serve` up. Only `cli` knows clap; only `runtime` knows llama.cpp.
//!
//! The engine ([`grammar`], [`lexer`], [`vocab`], [`engine`]) is its own crate,
//! `domino-engine`, re-exported here: it depends on neither llama.cpp nor clap and can be
//! embedded elsewhere.

pub mod cli;
pub mod constraint;
pub mod decode;
pub mod diag;
pub mod eval;
pub mod memory;
pub mod models;
pub mod repl;
pub mod runtime;
pub mod serve;

// The engine crate's modules, at the paths the rest of domino has always used.
pub use domino_engine::{engine, grammar, lexer, vocab};
