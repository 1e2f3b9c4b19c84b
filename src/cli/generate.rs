//! `domino generate`: load a model, build the prompt, run [`crate::decode::generate`], and
//! print the text as it streams (or one JSON object with `--format json`).
//!
//! This handler only parses, resolves paths and prints; the loop lives in `decode`.

use crate::cli::args::OutputFormat;
use crate::decode::{GenerationRequest, GenerationResult, SamplingConfig, Utf8Stream};
use crate::runtime::{Model, ModelOptions, SessionOptions};
use anyhow::Context;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

/// The default model's file name, as `scripts/setup` writes it under `models/`.
pub const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Model and context flags, shared with other subcommands that run a model.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// GGUF model file [default: $DOMINO_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf
    /// under the current directory, else under the domino source tree]
    #[arg(short = 'm', long, value_name = "FILE", env = "DOMINO_MODEL")]
    pub model: Option<PathBuf>,
    /// Context size in tokens (prompt + output).
    #[arg(long, value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(16..))]
    pub ctx: u32,
    /// CPU threads [default: physical cores]. On a machine that is already busy use 1:
    /// llama.cpp's threads wait for each other by spinning, which collapses under
    /// oversubscription (measured: 2 threads < 1 token/s vs 1 thread 17 tokens/s at load 13 on 2 cores).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Layers to offload to the GPU [default: all in GPU builds (--features cuda|vulkan|metal), else 0]
    #[arg(long, value_name = "N")]
    pub n_gpu_layers: Option<u32>,
}

impl ModelArgs {
    /// The model path: the flag (or `$DOMINO_MODEL`), else the default file under the
    /// current directory, else under the source tree this binary was built from.
    pub fn model_path(&self) -> PathBuf {
        if let Some(p) = &self.model {
            return p.clone();
        }
        let local = PathBuf::from("models").join(DEFAULT_MODEL_FILE);
        if local.exists() {
            return local;
        }
        let built = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(DEFAULT_MODEL_FILE);
        if built.exists() { built } else { local }
    }

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
        Ok(model)
    }

    pub fn session_options(&self) -> SessionOptions {
        SessionOptions {
            n_ctx: self.ctx,
            threads: self.threads,
        }
    }
}

/// Sampling flags.
#[derive(clap::Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy (always the most likely token).
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    pub temp: f32,
    /// Keep only the K most likely tokens (0 = off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub top_k: usize,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass (1 = off).
    #[arg(long, value_name = "P", default_value_t = 1.0)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the best one (0 = off).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub min_p: f32,
    /// Random seed for sampling.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    pub fn config(&self) -> anyhow::Result<SamplingConfig> {
        let config = SamplingConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            seed: self.seed,
        };
        config.validate().map_err(|e| crate::diag::UsageError(e))?;
        Ok(config)
    }
}

/// Generate text from a prompt.
///
/// The text streams to stdout as it is produced; with `--format json` one object
/// `{"text", "tokens", "logprobs", "finish_reason", "stats"}` is printed at the end.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// The prompt (read from stdin when omitted).
    pub prompt: Option<String>,
    /// Maximum number of tokens to generate.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 256)]
    pub max_tokens: usize,
    /// Wrap the prompt in the model's chat template as one user turn.
    #[arg(long)]
    pub chat: bool,
    /// Output: streamed text, or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub decode: crate::cli::decode_args::DecodeArgs,
}

/// The prompt argument, or all of stdin.
pub fn read_prompt(prompt: &Option<String>) -> anyhow::Result<String> {
    match prompt {
        Some(p) => Ok(p.clone()),
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading the prompt from stdin")?;
            Ok(s)
        }
    }
}

/// The JSON object of `--format json`.
pub fn result_json(result: &GenerationResult) -> serde_json::Value {
    serde_json::json!({
        "text": result.text(),
        "tokens": result.tokens.iter().map(|t| t.0).collect::<Vec<_>>(),
        "logprobs": result.logprobs,
        "finish_reason": result.finish_reason,
        "complete": result.finish_reason != crate::decode::FinishReason::Length,
        "stats": result.stats,
    })
}

pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let sampling = args.sampling.config()?;
    let decode_config = args.decode.config()?;
    let prompt = read_prompt(&args.prompt)?;
    let model = args.model.load()?;
    let mut decoder = crate::decode::methods::Decoder::new(&decode_config, &model)?;
    let prompt_tokens = model.prompt_tokens(&prompt, args.chat)?;
    if prompt_tokens.is_empty() {
        return Err(crate::diag::UsageError(
            "the prompt is empty (give it as an argument or on stdin)".into(),
        )
        .into());
    }
    let mut session = model.session(args.model.session_options())?;
    crate::log!(
        1,
        "prompt: {} tokens; context {}; {} threads",
        prompt_tokens.len(),
        session.n_ctx(),
        session.threads()
    );
    let request = GenerationRequest {
        prompt: prompt_tokens,
        max_tokens: args.max_tokens,
        sampling,
        logprobs: args.format == OutputFormat::Json,
    };

    let stdout = std::io::stdout();
    let result = match args.format {
        OutputFormat::Json => {
            let result = decoder.generate(&mut session, &request, &mut |_, _| Ok(()))?;
            let mut out = stdout.lock();
            serde_json::to_writer(&mut out, &result_json(&result))?;
            writeln!(out)?;
            result
        }
        OutputFormat::Text => {
            let mut utf8 = Utf8Stream::new();
            let mut text = String::new();
            let mut out = stdout.lock();
            let result = decoder.generate(&mut session, &request, &mut |_, bytes| {
                text.clear();
                utf8.push(bytes, &mut text);
                out.write_all(text.as_bytes())?;
                out.flush()?;
                Ok(())
            })?;
            text.clear();
            utf8.finish(&mut text);
            out.write_all(text.as_bytes())?;
            // End the line for a terminal; a pipe gets exactly the generated text.
            if std::io::stdout().is_terminal() && !result.bytes.ends_with(b"\n") {
                writeln!(out)?;
            }
            out.flush()?;
            result
        }
    };
    decoder.save_draft_stats()?;
    if args.decode.stats {
        eprintln!(
            "{}",
            crate::cli::decode_args::stats_line(decoder.method(), &result)
        );
    }
    let s = &result.stats;
    crate::log!(
        1,
        "finish: {}; {} prompt tokens in {:.0} ms; {} tokens in {:.0} ms ({:.1} tokens/s); {} forward passes",
        result.finish_reason.as_str(),
        s.prompt_tokens,
        s.prompt_ms,
        s.generated_tokens,
        s.decode_ms,
        s.tokens_per_s,
        s.forward_passes
    );
    Ok(())
}
