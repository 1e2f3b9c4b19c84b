//! Helpers shared by the integration tests: where the models and data live, and loud
//! failures when they are missing (tests that need them never skip silently).
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root (the crate's manifest directory).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The default model's path, where `scripts/setup` puts it.
pub fn default_model_path() -> PathBuf {
    repo_root()
        .join("models")
        .join("SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// The default model's path; panics with the fix when it is missing.
pub fn require_default_model() -> PathBuf {
    let p = default_model_path();
    assert!(
        p.is_file(),
        "the default model {} is missing: run scripts/setup (it downloads SmolLM2-135M-Instruct Q4_1)",
        p.display()
    );
    p
}

/// The optional large-vocabulary model (`scripts/setup --gemma`).
pub fn gemma_model_path() -> PathBuf {
    repo_root().join("models").join("gemma-3-270m-Q4_K_M.gguf")
}

/// The Gemma model's path; panics with the fix when it is missing (tests using it are
/// `#[ignore]`d and run with `cargo test -- --ignored` after `scripts/setup --gemma`).
pub fn require_gemma_model() -> PathBuf {
    let p = gemma_model_path();
    assert!(
        p.is_file(),
        "{} is missing: run scripts/setup --gemma",
        p.display()
    );
    p
}

/// The shared evaluation data (`../shared/data` next to the repository); panics when missing.
pub fn shared_data_dir() -> PathBuf {
    let p = repo_root().join("..").join("shared").join("data");
    assert!(
        p.is_dir(),
        "shared data folder {} is missing (see the README)",
        p.display()
    );
    p
}

/// A scratch directory unique to this test process and `name`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("domino-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

/// Does `hir` match all of `bytes` (anchored both ends)? Through the lexer's single-language
/// DFA (not its product construction, which the constrained checks below stand apart from).
pub fn full_match(hir: &regex_syntax::hir::Hir, bytes: &[u8]) -> bool {
    use std::collections::HashMap;
    thread_local! {
        static DFAS: std::cell::RefCell<HashMap<String, Option<domino::grammar::dfa::TerminalDfa>>> = Default::default();
    }
    DFAS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let dfa = cache
            .entry(hir.to_string())
            .or_insert_with(|| domino::grammar::dfa::TerminalDfa::new(hir).ok());
        let Some(dfa) = dfa else { return false };
        let mut s = 0u32;
        for &b in bytes {
            s = dfa.next(s, b);
            if s == domino::grammar::dfa::DEAD {
                return false;
            }
        }
        dfa.is_accepting(s)
    })
}

/// Is `bytes` in `hir` ∩ every `and` ∖ every `and_not` (an `Expr::Constrained` leaf)?
pub fn constrained_match(
    hir: &regex_syntax::hir::Hir,
    constraints: &domino::grammar::ir::Constraints,
    bytes: &[u8],
) -> bool {
    full_match(hir, bytes)
        && constraints.and.iter().all(|h| full_match(h, bytes))
        && !constraints.and_not.iter().any(|h| full_match(h, bytes))
}

/// A string of a constrained terminal: samples of its base language (from `generator`) until
/// one satisfies the constraints (rejection sampling; `None` when none does within the budget).
pub fn sample_constrained(
    generator: &mut domino::grammar::json_schema::instances::Generator,
    hir: &regex_syntax::hir::Hir,
    constraints: &domino::grammar::ir::Constraints,
) -> Option<String> {
    (0..400)
        .map(|_| generator.sample(hir))
        .find(|x| constrained_match(hir, constraints, x.as_bytes()))
}
