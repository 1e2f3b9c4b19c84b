//! Which model to run and how: the default model's location, and the model settings every
//! front door shares ([`ModelConfig`]: file, context size, threads, GPU layers).
//!
//! The lookup order of the model file is defined here once: an explicit path, else the
//! default file ([`DEFAULT_MODEL_FILE`], as `scripts/setup` writes it) under `models/` in the
//! current directory, else under the source tree this binary was built from. (`$DOMINO_MODEL`
//! is read by the command line, which fills the explicit path from it.)

use crate::runtime::{Model, ModelOptions, SessionOptions};
use std::path::PathBuf;

/// The default model's file name, as `scripts/setup` writes it under `models/`.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The default model: `models/DEFAULT_MODEL_FILE` under the current directory if it exists,
/// else under the source tree if it exists there, else the (missing) local path, so the
/// error names where the file was expected.
pub fn default_model_path() -> PathBuf {
    let local = PathBuf::from("models").join(DEFAULT_MODEL_FILE);
    if local.exists() {
        return local;
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("models")
        .join(DEFAULT_MODEL_FILE);
    if built.exists() { built } else { local }
}

/// A model to load and the context to run it in.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The GGUF file; `None` = [`default_model_path`].
    pub path: Option<PathBuf>,
    /// Context size in tokens (prompt + output).
    pub ctx: u32,
    /// CPU threads; `None` = physical cores.
    pub threads: Option<u32>,
    /// Layers to offload to the GPU; `None` = the runtime's default (all in GPU builds).
    pub n_gpu_layers: Option<u32>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            path: None,
            ctx: SessionOptions::default().n_ctx,
            threads: None,
            n_gpu_layers: None,
        }
    }
}

impl ModelConfig {
    /// The model file this configuration names (see the module doc).
    pub fn model_path(&self) -> PathBuf {
        self.path.clone().unwrap_or_else(default_model_path)
    }

    /// Load the model (logged at `-v`).
    pub fn load(&self) -> anyhow::Result<Model> {
        let path = self.model_path();
        let mut options = ModelOptions::default();
        if let Some(n) = self.n_gpu_layers {
            options.n_gpu_layers = n;
        }
        let start = std::time::Instant::now();
        let model = Model::load(&path, options)?;
        crate::log!(
            1,
            "loaded {} ({}) in {:.0} ms",
            path.display(),
            model.name(),
            start.elapsed().as_secs_f64() * 1000.0
        );
        crate::log!(1, "{}", model.offload());
        Ok(model)
    }

    pub fn session_options(&self) -> SessionOptions {
        SessionOptions {
            n_ctx: self.ctx,
            threads: self.threads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_path_wins_over_the_default() {
        let config = ModelConfig {
            path: Some(PathBuf::from("/elsewhere/m.gguf")),
            ..Default::default()
        };
        assert_eq!(config.model_path(), PathBuf::from("/elsewhere/m.gguf"));
        let default = ModelConfig::default().model_path();
        assert!(default.ends_with(PathBuf::from("models").join(DEFAULT_MODEL_FILE)));
    }
}
