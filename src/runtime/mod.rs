//! The llama.cpp runtime: load a GGUF model, read its vocabulary, run forward passes.
//!
//! This is the only module that talks to `llama-cpp-2`. It offers three things:
//!
//! - [`Model`]: a loaded GGUF file ([`Model::load`]) with its tokenizer, chat template and
//!   [`Vocabulary`](crate::vocab::Vocabulary) (exact bytes per token, end-of-generation ids,
//!   special flags). [`load_vocabulary`] reads only the vocabulary (no weights).
//! - [`Session`]: one llama context (KV cache) over a model. [`Session::decode`] appends a
//!   batch of tokens and computes logits only at the batch positions asked for
//!   ([`LogitsAt`]); [`Session::logits`] reads them; [`Session::truncate`] removes the tail
//!   of the KV cache (speculation and opportunistic checks roll back with it).
//! - [`LlamaGrammar`]: llama.cpp's GBNF sampler, for the `llama-grammar` baseline.
//! - [`RuntimeError`]: every failure of llama.cpp as a value with a clear message (missing
//!   file, not a GGUF, context overflow, …); nothing here panics on user input.
//!
//! Invariants: the llama backend is initialised once per process ([`backend`]);
//! `Session::n_past()` always equals the number of positions in the KV cache; logits are
//! readable only for positions of the latest decode that asked for them, and only until
//! the next `decode` or `truncate`.
//!
//! GPU offload: the cargo features `cuda`, `vulkan` and `metal` build llama.cpp with that
//! backend; [`ModelOptions::default`] then offloads every layer, [`Model::offload`] says
//! where they went, and a GPU build with no usable device falls back to the CPU with a
//! warning ([`device`]).

pub mod device;
mod grammar;
mod model;
mod session;
mod shared;

pub use grammar::LlamaGrammar;

pub use device::{Device, Offload};
pub use model::{ChatMessage, Model, ModelOptions, load_vocabulary};
pub use session::{LogitsAt, SequenceContext, Session, SessionOptions, physical_cores};
pub use shared::{BatchPart, SharedSession, Slot};

use llama_cpp_2::llama_backend::LlamaBackend;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The llama.cpp this binary links, as the Rust bindings that vendor it name it (llama.cpp
/// itself exposes no version to Rust). Kept equal to `Cargo.lock` by a test, so that a run's
/// record (`run.json`) names the llama.cpp that produced it.
pub const LLAMA_CPP_VERSION: &str = "llama-cpp-2 0.1.160 (llama-cpp-sys-2 0.1.161)";

/// Whether this binary was built with a GPU backend (a cargo feature `cuda`, `vulkan`, `metal`).
pub const GPU_BUILD: bool = cfg!(any(feature = "cuda", feature = "vulkan", feature = "metal"));

static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();

/// The process-wide llama.cpp backend, initialised on first use.
///
/// llama.cpp's own log lines (model loading, context creation, …) are silenced unless the
/// CLI runs with `-vv`; the verbosity is read once, at initialisation.
pub fn backend() -> Result<&'static LlamaBackend, RuntimeError> {
    let result = BACKEND.get_or_init(|| match LlamaBackend::init() {
        Ok(mut backend) => {
            if crate::diag::verbosity() < 2 {
                backend.void_logs();
            }
            Ok(backend)
        }
        Err(e) => Err(e.to_string()),
    });
    result
        .as_ref()
        .map_err(|e| RuntimeError::Backend(e.clone()))
}

/// A failure of the runtime, with what the user needs to fix it.
#[derive(Debug, Clone, PartialEq)]
pub enum RuntimeError {
    /// llama.cpp's backend could not be initialised.
    Backend(String),
    /// The model path does not exist.
    ModelNotFound(PathBuf),
    /// The model path exists but is not a GGUF file (wrong magic bytes, a directory, …).
    NotGguf { path: PathBuf, reason: String },
    /// llama.cpp refused the file (truncated, unsupported architecture, out of memory, …).
    LoadFailed { path: PathBuf, reason: String },
    /// A llama context could not be created (out of memory, bad parameters).
    ContextFailed(String),
    /// A decode would need more positions than the context holds.
    ContextOverflow {
        n_past: usize,
        n_tokens: usize,
        n_ctx: usize,
    },
    /// A decode was asked for with no tokens.
    EmptyBatch,
    /// A logits position outside the batch.
    LogitsPosition { position: usize, batch_len: usize },
    /// A token id outside the vocabulary.
    TokenOutOfRange { token: u32, n_vocab: usize },
    /// llama.cpp's decode failed.
    Decode(String),
    /// `truncate(n)` with `n` beyond the current length, or the KV cache refused the removal.
    Truncate(String),
    /// The model has no chat template (base models such as Gemma 3 270M).
    NoChatTemplate { model: String },
    /// The chat template could not be applied.
    ChatTemplate(String),
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::Backend(e) => write!(f, "could not initialise llama.cpp: {e}"),
            RuntimeError::ModelNotFound(p) => {
                write!(
                    f,
                    "model file not found: {} (run scripts/setup to fetch the default model, or pass -m PATH)",
                    p.display()
                )
            }
            RuntimeError::NotGguf { path, reason } => {
                write!(f, "{} is not a GGUF model file: {reason}", path.display())
            }
            RuntimeError::LoadFailed { path, reason } => {
                write!(f, "llama.cpp could not load {}: {reason}", path.display())
            }
            RuntimeError::ContextFailed(e) => write!(f, "could not create a llama context: {e}"),
            RuntimeError::ContextOverflow {
                n_past,
                n_tokens,
                n_ctx,
            } => write!(
                f,
                "context overflow: {n_past} positions in use + {n_tokens} new tokens > context size {n_ctx} (raise --ctx)"
            ),
            RuntimeError::EmptyBatch => write!(f, "decode called with no tokens"),
            RuntimeError::LogitsPosition {
                position,
                batch_len,
            } => {
                write!(
                    f,
                    "logits requested at batch position {position}, but the batch has {batch_len} tokens"
                )
            }
            RuntimeError::TokenOutOfRange { token, n_vocab } => {
                write!(
                    f,
                    "token id {token} is outside the vocabulary (size {n_vocab})"
                )
            }
            RuntimeError::Decode(e) => write!(f, "llama.cpp decode failed: {e}"),
            RuntimeError::Truncate(e) => write!(f, "KV cache truncation failed: {e}"),
            RuntimeError::NoChatTemplate { model } => write!(
                f,
                "model {model} has no chat template (a base model?): drop --chat and write the prompt yourself"
            ),
            RuntimeError::ChatTemplate(e) => write!(f, "could not apply the chat template: {e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

#[cfg(test)]
mod version_tests {
    /// `LLAMA_CPP_VERSION` names the binding versions `Cargo.lock` resolves.
    #[test]
    fn llama_cpp_version_matches_cargo_lock() {
        let lock =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).unwrap();
        let version_of = |name: &str| {
            let at = lock
                .find(&format!("name = \"{name}\"\nversion = \""))
                .unwrap_or_else(|| panic!("{name} not in Cargo.lock"));
            let rest = &lock[at..];
            let v = rest.split("version = \"").nth(1).unwrap();
            v[..v.find('"').unwrap()].to_string()
        };
        let want = format!(
            "llama-cpp-2 {} (llama-cpp-sys-2 {})",
            version_of("llama-cpp-2"),
            version_of("llama-cpp-sys-2")
        );
        assert_eq!(super::LLAMA_CPP_VERSION, want);
    }
}
