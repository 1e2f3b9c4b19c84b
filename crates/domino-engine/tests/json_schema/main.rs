//! JSON Schema front end: generated instances both ways, whitespace policies, errors.
//!
//! Every compiled grammar is checked with an independent, slow matcher over the front end's
//! own output (`GrammarDef`: rules of byte literals, regexes, sequences, alternatives and
//! repetitions), so these tests do not depend on lowering. For each schema:
//! - instances from `instances::Generator` that the `jsonschema` crate accepts must be
//!   accepted by the grammar (laid out by the whitespace policy under test);
//! - mutations of them that `jsonschema` rejects must be rejected by the grammar.
//!
//! `lowered_grammars_agree_with_the_schema` runs the same check through lowering
//! (`grammar::lower`) and the byte-level `ReferenceRecognizer`, the engine's oracle.
//!
//! One test binary in several files, by what each checks: `instances` (generated instances
//! and mutations, lowering, documents sampled from the grammar), `near_misses`, `policies`
//! (whitespace), `errors` (unsupported and hostile schemas), `shipped` (the schemas in
//! `grammars/`), `strings` (format regexes and string bounds); `matcher` is the independent
//! matcher and `corpus` the schemas they share.

#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod errors;
mod instances;
mod keywords;
mod matcher;
mod near_misses;
mod order;
mod policies;
mod sharing;
mod shipped;
mod soundness;
mod strings;

use std::collections::{BTreeSet, HashMap};

use domino_engine::grammar::expr::{Expr, GrammarDef};
use domino_engine::grammar::json_schema::{self, instances::Generator};
use domino_engine::grammar::{CompileOptions, ErrorKind, Location, WhitespacePolicy};
use regex_automata::Anchored;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::start;
use serde_json::{Value, json};

use corpus::corpus;
use matcher::Matcher;

/// Options under test: `Generator::layout` puts whitespace around the root value too, so the
/// flexible policy is checked with trailing whitespace allowed (the default, which ends the
/// document at its root value, is checked in `policies`).
fn opts(ws: WhitespacePolicy) -> CompileOptions {
    CompileOptions {
        whitespace: ws,
        trailing_whitespace: true,
        ..CompileOptions::default()
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("test schema is valid for jsonschema")
}

fn layout(g: &mut Generator, v: &Value, ws: WhitespacePolicy) -> String {
    match ws {
        WhitespacePolicy::Compact => serde_json::to_string(v).unwrap(),
        WhitespacePolicy::Pretty => serde_json::to_string_pretty(v).unwrap(),
        WhitespacePolicy::Flexible => g.layout(v, 20),
    }
}

const POLICIES: [WhitespacePolicy; 3] = [
    WhitespacePolicy::Compact,
    WhitespacePolicy::Flexible,
    WhitespacePolicy::Pretty,
];
