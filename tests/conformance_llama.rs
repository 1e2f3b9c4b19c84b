//! The conformance cases (`tests/cases/`, format in `tests/cases/README.md`) through
//! llama.cpp's own grammar sampler, on the default model's vocabulary: the same cases the
//! engine suite (`crates/domino-engine/tests/conformance.rs`) runs through the reference
//! recognizer and the engine, here checked against the implementation we are compared with.
//!
//! Where it applies: GBNF cases (the file as written, or our printed form where llama.cpp's
//! stricter parser refuses it, as `--method llama-grammar` does), and Lark / regex / JSON Schema
//! cases whose grammar prints to GBNF. An accept string, tokenized by the model, must pass
//! token by token (each token keeps a finite logit after the sampler's `apply`, then is
//! accepted) and end where an end-of-generation token is allowed; a reject string must meet a
//! refused token or end where end-of-generation is refused. llama.cpp has no public way to
//! ask "does this grammar accept this string" without a vocabulary, so the default model is
//! loaded once (no decoding: the test is bounded by the grammar sampler alone).

#[path = "../crates/domino-engine/tests/common/cases.rs"]
mod cases;
mod common;

use cases::{Case, CaseKind};
use domino::grammar::{CompileOptions, GrammarError, GrammarSource, lower, print};
use domino::runtime::{Model, ModelOptions};
use domino::vocab::TokenId;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

/// Cases llama.cpp cannot run, with the reason: the test fails if any other case has no GBNF
/// that llama.cpp parses, or if one of these starts to parse.
const NOT_FOR_LLAMA_CPP: &[&str] = &[
    // llama.cpp's grammar parser refuses left-recursive rules (each of these has one:
    // `tail ::= (tail "d")?`, `?expr: expr ("+"|"-") term`, `expr ::= term | expr [-+] term`).
    "cases/gbnf_left_recursion",
    "cases/gbnf_nullable_loops",
    "cases/lark_ignore",
    "llama_cpp/c",
    // Lark's greedy lexing (a literal wins against a regex: `true=true` is no pair) has no
    // GBNF form, so Lark grammars are not printed for llama.cpp.
    "cases/lark_key_values",
    // A `pattern` with `maxLength` and a `format`: terminals that are intersections of regular
    // languages, which GBNF cannot express (`domino grammar convert` says so).
    "cases/schema_formats_patterns",
];

/// The case's grammar as GBNF that llama.cpp parses, and its root rule; `None` where GBNF
/// cannot say it or llama.cpp refuses what we print.
fn gbnf_for(model: &Model, case: &Case) -> Option<(String, String)> {
    let parses = |text: &str| LlamaSampler::grammar(model.llama(), text, "root").is_ok();
    if let GrammarSource::Gbnf(text) = &case.source
        && parses(text)
    {
        return Some((text.clone(), "root".into()));
    }
    let printed = || -> Result<String, GrammarError> {
        let def = case.source.parse(&CompileOptions::default())?;
        print::to_gbnf(&def).or_else(|_| print::ir_to_gbnf(&lower::lower(&def)?))
    };
    printed()
        .ok()
        .filter(|g| parses(g))
        .map(|g| (g, "root".into()))
}

/// Does llama.cpp's grammar sampler allow `token` now?
fn allowed(sampler: &mut LlamaSampler, token: TokenId) -> bool {
    let mut one = LlamaTokenDataArray::new(
        vec![LlamaTokenData::new(LlamaToken(token.0 as i32), 0.0, 0.0)],
        false,
    );
    sampler.apply(&mut one);
    one.data[0].logit() != f32::NEG_INFINITY
}

/// Run `text` through a fresh sampler: `Ok(eos_allowed)` when every token passed, `Err(i)`
/// when token `i` was refused.
fn walk(model: &Model, gbnf: &str, root: &str, text: &str) -> Result<bool, usize> {
    let mut sampler = LlamaSampler::grammar(model.llama(), gbnf, root)
        .unwrap_or_else(|e| panic!("llama.cpp refused a grammar it parsed before: {e}"));
    for (i, t) in model.tokenize(text, false, false).into_iter().enumerate() {
        if !allowed(&mut sampler, t) || sampler.try_accept(LlamaToken(t.0 as i32)).is_err() {
            return Err(i);
        }
    }
    let eog = model.vocabulary().eog_tokens().to_vec();
    Ok(eog.into_iter().any(|e| allowed(&mut sampler, e)))
}

/// The failures of one case under llama.cpp.
fn check_case(model: &Model, case: &Case, gbnf: &str, root: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for s in &case.accept {
        match walk(model, gbnf, root, s) {
            Ok(true) => {}
            Ok(false) => failures.push(format!("accept {s:?}: end of generation refused")),
            Err(i) => failures.push(format!("accept {s:?}: token {i} refused")),
        }
    }
    for s in &case.reject {
        if walk(model, gbnf, root, s) == Ok(true) {
            failures.push(format!("reject {s:?}: accepted"));
        }
    }
    failures
}

#[test]
fn every_case_passes_through_llama_cpp_grammar_sampler() {
    let model = Model::load(common::require_default_model(), ModelOptions::default())
        .expect("load the default model");
    let all = cases::all(&common::repo_root().join("tests/cases"));
    let mut ran = Vec::new();
    let mut failures = Vec::new();
    let mut not_run = Vec::new();
    for case in &all {
        let Some((gbnf, root)) = gbnf_for(&model, case) else {
            not_run.push(case.name());
            continue;
        };
        for f in check_case(&model, case, &gbnf, &root) {
            failures.push(format!("{}: {f}", case.name()));
        }
        ran.push(case.kind);
    }
    assert!(
        failures.is_empty(),
        "llama.cpp disagrees:\n  {}",
        failures.join("\n  ")
    );
    let mut expected = NOT_FOR_LLAMA_CPP.to_vec();
    expected.sort_unstable();
    not_run.sort_unstable();
    assert_eq!(
        not_run, expected,
        "the cases with no GBNF llama.cpp parses are exactly NOT_FOR_LLAMA_CPP (update it, with \
         the reason, if that is expected)"
    );
    // No Lark case: Lark grammars lex greedily (a literal wins against a regex), which has no
    // GBNF form, so none is printed for llama.cpp (see NOT_FOR_LLAMA_CPP).
    for kind in [CaseKind::Gbnf, CaseKind::Regex, CaseKind::JsonSchema] {
        assert!(ran.contains(&kind), "no {kind:?} case ran under llama.cpp");
    }
}
