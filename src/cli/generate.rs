//! `domino generate`: load a model, build the prompt, run [`crate::decode::generate`], and
//! print the text as it streams (or one JSON object with `--format json`).
//!
//! This handler only parses, resolves paths and prints; the loop lives in `decode`.

use crate::cli::args::{ModelArgs, OutputFormat, SamplingArgs};
use crate::decode::{GenerationRequest, GenerationResult, Utf8Stream};
use anyhow::Context;
use std::io::{IsTerminal, Read, Write};

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
