//! `domino generate`: load a model, build the prompt, run [`crate::decode::generate`], and
//! print the text as it streams (or one JSON object with `--format json`).
//!
//! This handler only parses, resolves paths and prints; the loop lives in `decode`.

use crate::cli::args::{ModelArgs, OutputFormat, SamplingArgs};
use crate::decode::{FinishReason, GenerationRequest, GenerationResult, Utf8Stream};
use anyhow::Context;
use std::io::{IsTerminal, Read, Write};
use std::path::PathBuf;

/// Generate text from a prompt.
///
/// The text streams to stdout as it is produced; with `--format json` one object
/// `{"text", "tokens", "logprobs", "finish_reason", "complete", "stats"}` is printed at the end.
#[derive(clap::Args, Debug)]
#[command(after_help = AFTER_HELP)]
pub struct GenerateArgs {
    /// The prompt (also -p; read from stdin when no prompt, -f or --batch is given).
    #[arg(value_name = "PROMPT")]
    pub prompt: Option<String>,
    /// The prompt, as llama-cli's -p.
    #[arg(
        short = 'p',
        long = "prompt",
        id = "prompt_flag",
        value_name = "TEXT",
        conflicts_with = "prompt",
        help_heading = "Prompt"
    )]
    pub prompt_flag: Option<String>,
    /// Read the prompt from a file.
    #[arg(short = 'f', long = "file", value_name = "FILE", conflicts_with_all = ["prompt", "prompt_flag"], help_heading = "Prompt")]
    pub prompt_file: Option<PathBuf>,
    /// Process escapes (\n, \r, \t, \', \", \\, \xHH) in the prompt and system prompt.
    #[arg(short = 'e', long = "escape", help_heading = "Prompt")]
    pub escape: bool,
    /// System prompt (also -sys); implies --chat.
    #[arg(long, value_name = "TEXT", help_heading = "Prompt")]
    pub system_prompt: Option<String>,
    /// Wrap the prompt in the model's chat template as one user turn.
    #[arg(long, help_heading = "Prompt")]
    pub chat: bool,
    /// Maximum number of tokens to generate; -1 = no limit but the context (as llama-cli).
    #[arg(
        short = 'n',
        long,
        visible_alias = "n-predict",
        value_name = "N",
        default_value_t = 256,
        value_parser = parse_max_tokens,
        allow_negative_numbers = true,
        help_heading = "Output"
    )]
    pub max_tokens: usize,
    /// Output: streamed text, or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text, help_heading = "Output")]
    pub format: OutputFormat,
    #[command(flatten)]
    pub batch: crate::cli::batch::BatchArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub decode: crate::cli::decode_args::DecodeArgs,
    /// Tools the model may call: a JSON file with OpenAI's `tools` array (or bare function
    /// objects). The calls are written in the chat template's tool syntax (Hermes/Qwen,
    /// Llama 3.x, Mistral; others get the generic `<tool_call>` syntax), their arguments
    /// constrained by each function's `parameters`; implies --chat. With --format json the
    /// calls are printed as `tool_calls`.
    #[arg(long, value_name = "FILE", help_heading = "Tools", conflicts_with_all = ["constraint", "reasoning", "trigger", "tags"])]
    pub tools: Option<PathBuf>,
    /// auto (free text or calls), required (at least one call), none, or a function name.
    #[arg(
        long,
        value_name = "auto|required|none|NAME",
        default_value = "auto",
        requires = "tools",
        help_heading = "Tools"
    )]
    pub tool_choice: String,
    /// Allow several tool calls in one answer (OpenAI's `parallel_tool_calls`, default
    /// true); `--parallel-tool-calls false`: at most one.
    #[arg(
        long,
        value_name = "BOOL",
        default_value_t = true,
        num_args = 0..=1,
        default_missing_value = "true",
        action = clap::ArgAction::Set,
        requires = "tools",
        help_heading = "Tools"
    )]
    pub parallel_tool_calls: bool,
}

/// `--tools FILE` read and checked, with `--tool-choice`.
pub fn read_tools(
    path: &std::path::Path,
    choice: &str,
) -> anyhow::Result<(
    Vec<crate::decode::tools::Tool>,
    crate::decode::tools::ToolChoice,
)> {
    use crate::decode::tools::{ToolChoice, parse_tools};
    let usage = |m: String| -> anyhow::Error { crate::diag::UsageError(m).into() };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the tools file {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("{}: not JSON: {e}", path.display())))?;
    let tools = parse_tools(&value).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    let choice = ToolChoice::parse(choice)
        .checked(&tools)
        .map_err(|e| usage(format!("--tool-choice: {e}")))?;
    Ok((tools, choice))
}

const AFTER_HELP: &str = "\
Examples:
  domino generate -p 'The capital of France is' -n 16
  domino generate --json --chat 'Describe a cat as JSON.'
  domino generate -j '{\"type\":\"object\",\"required\":[\"name\"]}' --chat -p 'A person:'
  domino generate --batch prompts.jsonl -o results.jsonl --resume --json --chat

Exit codes: 0 success; 1 runtime error; 2 usage or grammar error; 3 --strict and the token
limit cut a constrained output short.";

/// The prompt: the argument, `-p`, `-f FILE`, or all of stdin; escapes processed with `-e`.
pub fn read_prompt(args: &GenerateArgs) -> anyhow::Result<String> {
    let text = if let Some(p) = args.prompt.as_ref().or(args.prompt_flag.as_ref()) {
        p.clone()
    } else if let Some(path) = &args.prompt_file {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the prompt file {}", path.display()))?
    } else {
        if args.decode.constraint.reads_stdin() {
            return Err(crate::diag::UsageError(
                "stdin holds the grammar or schema (`-`): give the prompt as an argument, -p or -f"
                    .into(),
            )
            .into());
        }
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the prompt from stdin")?;
        s
    };
    Ok(if args.escape {
        process_escapes(&text)
    } else {
        text
    })
}

/// llama.cpp's `-e`: `\n`, `\r`, `\t`, `\'`, `\"`, `\\` and `\xHH` become the characters they
/// name; any other backslash is kept as written.
pub fn process_escapes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let rest: String = chars.clone().skip(1).take(2).collect();
                match u8::from_str_radix(&rest, 16) {
                    Ok(b) if rest.len() == 2 && b.is_ascii() => {
                        out.push(b as char);
                        chars.next();
                        chars.next();
                    }
                    _ => {
                        out.push('\\');
                        continue;
                    }
                }
            }
            _ => {
                out.push('\\');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The prompt's tokens: raw, or through the chat template (with the system prompt).
pub fn prompt_tokens(
    model: &crate::runtime::Model,
    prompt: &str,
    system: Option<&str>,
    chat: bool,
) -> anyhow::Result<Vec<crate::vocab::TokenId>> {
    use crate::runtime::ChatMessage;
    Ok(match system {
        Some(system) => {
            model.chat_tokens(&[ChatMessage::system(system), ChatMessage::user(prompt)])?
        }
        None => model.prompt_tokens(prompt, chat)?,
    })
}

/// `-n N`: a token count, or `-1` for no limit but the context (llama-cli's meaning).
pub fn parse_max_tokens(s: &str) -> Result<usize, String> {
    if s.trim() == "-1" {
        return Ok(usize::MAX);
    }
    s.trim().parse::<usize>().map_err(|_| {
        format!("`{s}` is not a token count (a whole number >= 0, or -1 for no limit)")
    })
}

/// Say so, loudly, when the token limit cut a constrained output short: the output is not a
/// whole document of the grammar (a JSON object missing its closing brace, say). A warning on
/// stderr, or with `strict` an [`Incomplete`](crate::diag::Incomplete) error (exit code 3).
pub fn check_complete(
    constrained: bool,
    result: &GenerationResult,
    max_tokens: usize,
    strict: bool,
    what: &str,
) -> anyhow::Result<()> {
    if !constrained || result.finish_reason != FinishReason::Length {
        return Ok(());
    }
    // Length means the token limit or, before it, a full context.
    let message = if result.tokens.len() < max_tokens {
        format!(
            "{what}the context filled up after {} generated tokens, before the grammar was \
             complete: it is not a valid document; raise -c/--ctx-size",
            result.tokens.len()
        )
    } else {
        format!(
            "{what}the token limit ({max_tokens}, -n) cut the output short before the grammar \
             was complete: it is not a valid document; raise -n/--max-tokens"
        )
    };
    if strict {
        return Err(crate::diag::Incomplete(message).into());
    }
    eprintln!("warning: {message} (--strict makes this an error)");
    Ok(())
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
    if args.batch.batch.is_some() {
        return crate::cli::batch::run(args);
    }
    let sampling = args.sampling.config()?;
    let mut decode_config = args.decode.config()?;
    let tools = args
        .tools
        .as_deref()
        .map(|p| read_tools(p, &args.tool_choice))
        .transpose()?;
    let prompt = read_prompt(&args)?;
    let mut system = args.system_prompt.as_deref().map(|s| {
        if args.escape {
            process_escapes(s)
        } else {
            s.to_string()
        }
    });
    let model = args.model.load()?;
    let chat = args.chat || system.is_some() || tools.is_some();
    let mut syntax = None;
    if let Some((tools, choice)) = &tools {
        use crate::decode::tools;
        let found = tools::Syntax::detect(model.chat_template().ok().as_deref());
        crate::log!(1, "tool-call syntax: {}", found.as_str());
        if *choice != tools::ToolChoice::None {
            let text = tools::instructions(tools, choice, found);
            system = Some(match system {
                Some(s) => format!("{s}\n\n{text}"),
                None => text,
            });
        }
        decode_config.regions = tools::tag_plan(tools, choice, found, args.parallel_tool_calls);
        if decode_config.regions.is_some() && args.decode.method.method.is_none() {
            decode_config.method = crate::decode::methods::Method::Domino;
        }
        syntax = Some(found);
    }
    // A chat template's assistant header is the template's, not the user's text: only raw
    // prompts are healed.
    decode_config.token_healing &= !chat;
    let mut decoder = crate::decode::methods::Decoder::new(&decode_config, &model)?;
    let prompt_tokens = prompt_tokens(&model, &prompt, system.as_deref(), chat)?;
    if prompt_tokens.is_empty() {
        return Err(crate::diag::UsageError(
            "the prompt is empty (give it as an argument or on stdin)".into(),
        )
        .into());
    }
    let mut session = model.session(args.model.session_options())?;
    crate::log!(
        1,
        "prompt: {} tokens; context {}; {} threads; seed {}",
        prompt_tokens.len(),
        session.n_ctx(),
        session.threads(),
        args.sampling.seed
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
            let mut json = result_json(&result);
            if let (Some((tools, _)), Some(syntax)) = (&tools, syntax) {
                let parsed = crate::decode::tools::parse_calls(&result.text(), tools, syntax)
                    .map_err(|e| anyhow::anyhow!("the output's tool calls: {e}"))?;
                json["content"] = parsed.content.into();
                json["tool_calls"] = parsed
                    .calls
                    .iter()
                    .map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments}))
                    .collect();
                json["tool_syntax"] = syntax.as_str().into();
            }
            serde_json::to_writer(&mut out, &json)?;
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
    if s.healed_tokens > 0 {
        crate::log!(
            1,
            "token healing: {} prompt token(s) {:?} backed off and re-written",
            s.healed_tokens,
            s.healed_text
        );
    }
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
    let constrained = decode_config.source.is_some() || decode_config.regions.is_some();
    check_complete(
        constrained,
        &result,
        args.max_tokens,
        args.decode.constraint.strict,
        "",
    )
}

#[cfg(test)]
mod tests {
    use super::parse_max_tokens;

    #[test]
    fn max_tokens_takes_counts_and_minus_one() {
        assert_eq!(parse_max_tokens("7"), Ok(7));
        assert_eq!(parse_max_tokens("0"), Ok(0));
        assert_eq!(parse_max_tokens("-1"), Ok(usize::MAX));
        assert!(parse_max_tokens("-2").is_err());
        assert!(parse_max_tokens("x").is_err());
    }
}
