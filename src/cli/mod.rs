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
pub mod grammar_test;
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
    version,
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

pub fn main() -> ExitCode {
    let cli = Cli::parse_from(serve::llama_flag_spelling(std::env::args_os().collect()));
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
