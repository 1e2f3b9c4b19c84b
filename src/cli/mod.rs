//! The `domino` command line: clap definitions and one handler module per subcommand.
//!
//! This is the top layer: every clap definition lives here (no library module depends on
//! clap or on `cli`), and each handler turns its flags into the library's plain
//! configurations ([`crate::repl::ReplConfig`], [`crate::eval::RunOptions`],
//! [`crate::decode::methods::DecoderConfig`], [`crate::constraint::ConstraintSpec`],
//! [`crate::models::ModelConfig`]) and calls the library.
//!
//! Conventions (the ecosystem's): the result goes to stdout, logs and progress to stderr;
//! `--format json` for machines; exit code 0 on success, 1 for runtime errors, 2 for usage
//! and grammar errors; `NO_COLOR` is respected.

pub mod args;
pub mod bench;
pub mod decode_args;
pub mod eval;
pub mod generate;
pub mod grammar;
pub mod mask;
pub mod perplexity;
pub mod repl;
pub mod serve;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Constrained decoding that never costs the model accuracy — and often makes it faster.
///
/// domino runs GGUF models through llama.cpp and constrains their output to JSON, JSON
/// Schema, GBNF or Lark grammars, or regexes, with masks that block no token the grammar
/// could still accept (bridge tokens such as ` "` included).
#[derive(Parser, Debug)]
#[command(
    name = "domino",
    version = version_text(),
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// More log output on stderr (-v: info, -vv: debug, including llama.cpp's own logs).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate text from a prompt, optionally constrained by a grammar or schema.
    Generate(generate::GenerateArgs),
    /// Check grammars and schemas, or convert a schema to GBNF.
    #[command(subcommand)]
    Grammar(grammar::GrammarCommand),
    /// Show which tokens a grammar allows after a prefix.
    Mask(mask::MaskArgs),
    /// Benchmarks: mask computation speed.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Interactive shell: prompts generated under a switchable constraint, with token heat.
    Repl(repl::ReplArgs),
    /// Evaluate methods on GSM8K / CoNLL-2003 (accuracy, invasiveness) and throughput.
    #[command(subcommand)]
    Eval(eval::EvalCommand),
    /// Perplexity of a text file (or of a JSON Lines field) under the model.
    Perplexity(perplexity::PerplexityArgs),
    /// Serve the model over HTTP (llama-server and OpenAI compatible).
    Serve(serve::ServeArgs),
}

/// `domino --version`: domino's version, the llama.cpp it runs and the backends compiled in
/// (`cpu`, then each GPU feature: `cuda`, `vulkan`, `metal`).
pub fn version_text() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\nllama.cpp: {}\nbackends: {}",
            env!("CARGO_PKG_VERSION"),
            crate::runtime::device::llama_cpp_version(),
            crate::runtime::device::compiled_backends().join(", ")
        )
    })
}

/// llama-cli spells `--n-gpu-layers` as `-ngl`, which clap cannot take as a short flag (one
/// character): rewrite `-ngl` and `-ngl=N` to `--n-gpu-layers` before clap sees them (not
/// after a `--`, where arguments are positional).
pub fn rewrite_llama_cli_flags<I, T>(args: I) -> Vec<std::ffi::OsString>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString>,
{
    let mut after_dashdash = false;
    args.into_iter()
        .map(|arg| {
            let arg: std::ffi::OsString = arg.into();
            if after_dashdash {
                return arg;
            }
            match arg.to_str() {
                Some("--") => {
                    after_dashdash = true;
                    arg
                }
                Some("-ngl") => "--n-gpu-layers".into(),
                Some(s) if s.starts_with("-ngl=") => format!("--n-gpu-layers={}", &s[5..]).into(),
                _ => arg,
            }
        })
        .collect()
}

pub fn main() -> ExitCode {
    // -ngl in every command, then serve's own llama-server spellings (-np).
    let cli = Cli::parse_from(serve::llama_flag_spelling(rewrite_llama_cli_flags(
        std::env::args_os(),
    )));
    crate::diag::set_verbosity(cli.verbose);
    let result = match cli.command {
        Command::Generate(args) => generate::run(args),
        Command::Grammar(cmd) => grammar::run(cmd),
        Command::Mask(args) => mask::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Repl(args) => repl::run(args),
        Command::Eval(cmd) => eval::main(cmd),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Broken pipe on stdout (e.g. `| head`) is not an error worth reporting.
            if err.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {err:#}");
            ExitCode::from(crate::diag::exit_code_for(&err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(rewrite_llama_cli_flags(args.iter().copied()))
    }

    fn n_gpu_layers(cli: &Cli) -> Option<u32> {
        match &cli.command {
            Command::Generate(a) => a.model.n_gpu_layers,
            Command::Repl(a) => a.model.n_gpu_layers,
            Command::Perplexity(a) => a.model.n_gpu_layers,
            Command::Eval(_) => Some(u32::MAX), // checked through Debug below
            _ => None,
        }
    }

    #[test]
    fn ngl_is_accepted_in_every_spelling_and_command() {
        for spelling in [
            &["-ngl", "7"][..],
            &["-ngl=7"][..],
            &["--ngl", "7"][..],
            &["--n-gpu-layers", "7"][..],
            &["--n-gpu-layers=7"][..],
        ] {
            for command in [
                &["generate", "x"][..],
                &["repl"][..],
                &["perplexity", "f.txt"][..],
            ] {
                let args: Vec<&str> = ["domino"]
                    .iter()
                    .chain(command)
                    .chain(spelling)
                    .copied()
                    .collect();
                let cli = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
                assert_eq!(n_gpu_layers(&cli), Some(7), "{args:?}");
            }
            let args: Vec<&str> = ["domino", "eval", "gsm8k"]
                .iter()
                .chain(spelling)
                .copied()
                .collect();
            let cli = parse(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
            assert!(
                format!("{cli:?}").contains("n_gpu_layers: Some(7)"),
                "{args:?}"
            );
        }
        let cli = parse(&["domino", "generate", "x"]).unwrap();
        assert_eq!(n_gpu_layers(&cli), None);
    }

    #[test]
    fn ngl_after_a_double_dash_is_left_alone() {
        let args = rewrite_llama_cli_flags(["domino", "-ngl", "--", "-ngl"]);
        assert_eq!(args, ["domino", "--n-gpu-layers", "--", "-ngl"]);
    }

    #[test]
    fn the_version_names_llama_cpp_and_the_backends() {
        let text = version_text();
        assert!(text.contains("llama.cpp: llama-cpp-sys-2 "), "{text}");
        let backends = text.lines().last().unwrap();
        assert!(backends.starts_with("backends: cpu"), "{text}");
        assert_eq!(backends.contains("vulkan"), cfg!(feature = "vulkan"));
    }
}
