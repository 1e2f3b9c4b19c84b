//! `domino serve`: the flags of the HTTP server, turned into a [`ServeConfig`].
//!
//! Flag names follow llama-server where it has one: `-m`, `--host`, `--port`,
//! `-np/--parallel`, `-c/--ctx-size`, `-ngl/--n-gpu-layers`, `-t/--threads`, `--api-key`,
//! `--timeout`. llama.cpp's two-letter single-dash flags (`-ngl`, `-np`) are not something
//! clap can declare, so [`super::rewrite_llama_flags`] rewrites them before parsing (one
//! table for every command: [`super::LLAMA_FLAGS`]). The model and
//! method flags are the shared groups ([`ModelArgs`], [`MethodArgs`]).

use crate::cli::args::ModelArgs;
use crate::cli::decode_args::MethodArgs;
use crate::decode::methods::{DEFAULT_DRAFT, Method};
use crate::serve::ServeConfig;
use crate::serve::worker::DecodeSettings;
use std::time::Duration;

/// Serve the model over HTTP, llama-server and OpenAI compatible.
///
/// Endpoints: GET /health, /v1/models, /metrics; POST /v1/chat/completions, /v1/completions,
/// /completion, /tokenize, /detokenize. domino's own request options go in a `"domino"`
/// object (see the README).
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub method: MethodArgs,
    /// Sample first and compute the mask only when the model's token is rejected.
    #[arg(long)]
    pub opportunistic: bool,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 = any free port; the bound address is printed on stderr).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Generation slots: requests generated at once, each in its own context of
    /// ctx-size / N positions (llama.cpp's `-np`). Slots run side by side; they do not share
    /// batches.
    #[arg(long, visible_alias = "np", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..256))]
    pub parallel: u64,
    /// Requests that may wait for a slot; beyond them the server answers 503 with Retry-After.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub queue: usize,
    /// Require `Authorization: Bearer KEY` on every endpoint but /health.
    #[arg(long, value_name = "KEY", env = "DOMINO_API_KEY")]
    pub api_key: Option<String>,
    /// Longest a generation may run, in seconds; past it the partial result is returned,
    /// flagged `"timed_out": true` (0 = no limit).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub timeout: f64,
    /// Largest request body, in bytes (413 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    pub body_limit: usize,
    /// Compiled grammars kept for reuse by later requests.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub grammar_cache: usize,
    /// Time budget for compiling a request's grammar (with its first mask), in seconds
    /// (0 = none): beyond it the compilation stops and the request gets a 400 naming the limit.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::cli::args::DEFAULT_COMPILE_SECS)]
    pub grammar_timeout: f64,
    /// Memory budget for compiling a request's grammar, in MB (0 = none), measured by domino's
    /// counting allocator: beyond it the compilation stops and the request gets a 400.
    #[arg(long, value_name = "MB", default_value_t = crate::cli::args::DEFAULT_COMPILE_MB)]
    pub grammar_memory: u64,
    /// The model's name in responses [default: the model's file name].
    #[arg(long, short = 'a', value_name = "NAME")]
    pub alias: Option<String>,
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        crate::diag::UsageError(format!(
            "{flag} must be a number of seconds >= 0, got {value}"
        ))
        .into()
    })
}

impl ServeArgs {
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        let timeout = seconds(self.timeout, "--timeout")?;
        Ok(ServeConfig {
            model: self.model.config(),
            alias: self.alias.clone(),
            host: self.host.clone(),
            port: self.port,
            parallel: self.parallel as usize,
            queue: self.queue,
            api_key: self.api_key.clone(),
            timeout: (!timeout.is_zero()).then_some(timeout),
            body_limit: self.body_limit,
            grammar_cache: self.grammar_cache,
            grammar_budget: crate::cli::args::budget_of(
                seconds(self.grammar_timeout, "--grammar-timeout")?.as_secs_f64(),
                self.grammar_memory,
            ),
            decode: DecodeSettings {
                method: self.method.method.unwrap_or(Method::Domino),
                k: self.method.k.0,
                opportunistic: self.opportunistic,
                draft: self.method.draft.unwrap_or(DEFAULT_DRAFT),
                draft_threshold: self.method.draft_threshold()?,
                draft_policy: self.method.draft_policy,
            },
        })
    }
}

/// Run `domino serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    crate::serve::run(args.config()?)
}
