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

/// A file under `../shared/` (the machine's shared data and tokenizers, beside the
/// repository or one of its ancestors); panics naming it when missing.
pub fn shared(rel: &str) -> PathBuf {
    repo_root()
        .ancestors()
        .map(|a| a.join("shared").join(rel))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("missing ../shared/{rel} next to the repository"))
}

/// SmolLM2's tokenizer.json from `../shared/tokenizers`, as a command-line argument.
pub fn smollm2_tokenizer() -> String {
    shared("tokenizers/SmolLM2-135M-Instruct.tokenizer.json")
        .display()
        .to_string()
}

/// A scratch directory unique to this test process and `name`.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("domino-test-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}
