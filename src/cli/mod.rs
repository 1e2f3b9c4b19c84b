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
pub mod batch;
pub mod bench;
pub mod completions;
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
    Generate(Box<generate::GenerateArgs>),
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
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the man page, or write one per subcommand with --dir.
    Man(completions::ManArgs),
}

/// llama.cpp's multi-letter single-dash flags, rewritten to their long forms before clap
/// parses the command line (clap's short flags are one character, so `-sys` would otherwise
/// read as `-s -y -s` and `-ngl 0` as `-n gl`). One table, so that every spelling a
/// llama.cpp user types is in one place; the value after the flag is untouched, and
/// `-ngl=5` becomes `--n-gpu-layers=5`. Nothing after `--` is rewritten.
pub const LLAMA_FLAGS: &[(&str, &str)] = &[
    ("-sys", "--system-prompt"),
    ("-ngl", "--n-gpu-layers"),
    ("-np", "--parallel"),
    ("-cnv", "--conversation"),
];

/// The command line with [`LLAMA_FLAGS`] rewritten.
pub fn rewrite_llama_flags(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out = Vec::new();
    let mut rest = false;
    for arg in args {
        if rest {
            out.push(arg);
            continue;
        }
        let rewritten = arg.to_str().and_then(|s| {
            if s == "--" {
                return None;
            }
            LLAMA_FLAGS.iter().find_map(|(short, long)| {
                if s == *short {
                    Some(long.to_string())
                } else {
                    s.strip_prefix(short)
                        .and_then(|v| v.strip_prefix('='))
                        .map(|v| format!("{long}={v}"))
                }
            })
        });
        if arg == "--" {
            rest = true;
        }
        out.push(rewritten.map(Into::into).unwrap_or(arg));
    }
    out
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

/// Parse a command line (llama.cpp spellings rewritten, [`rewrite_llama_flags`]) and record
/// where each constraint flag and `--trigger` stood, so that each trigger can take the
/// constraint written after it ([`args::RegionArgs::resolve`]).
pub fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Cli, clap::Error> {
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().try_get_matches_from(rewrite_llama_flags(args))?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((_, sub)) = matches.subcommand() {
        let (constraint, regions) = match &mut cli.command {
            Command::Generate(g) => (&mut g.decode.constraint, &mut g.decode.regions),
            Command::Mask(m) => (&mut m.constraint, &mut m.regions),
            Command::Repl(r) => (&mut r.constraint, &mut r.regions),
            _ => return Ok(cli),
        };
        constraint.record_positions(sub);
        regions.record_positions(sub);
    }
    Ok(cli)
}

pub fn main() -> ExitCode {
    let cli = parse(std::env::args_os()).unwrap_or_else(|e| e.exit());
    crate::diag::set_verbosity(cli.verbose);
    let result = match cli.command {
        Command::Generate(args) => generate::run(*args),
        Command::Grammar(cmd) => grammar::run(cmd),
        Command::Mask(args) => mask::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Repl(args) => repl::run(args),
        Command::Eval(cmd) => eval::main(cmd),
        Command::Perplexity(args) => perplexity::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Completions(args) => completions::completions(args),
        Command::Man(args) => completions::man(args),
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

    fn rewrite(args: &[&str]) -> Vec<String> {
        rewrite_llama_flags(args.iter().map(|a| a.into()))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn llama_multi_letter_flags_become_long_flags() {
        assert_eq!(
            rewrite(&[
                "domino",
                "generate",
                "-ngl",
                "0",
                "-sys",
                "Be brief.",
                "-p",
                "hi"
            ]),
            [
                "domino",
                "generate",
                "--n-gpu-layers",
                "0",
                "--system-prompt",
                "Be brief.",
                "-p",
                "hi"
            ]
        );
        assert_eq!(rewrite(&["-ngl=5"]), ["--n-gpu-layers=5"]);
        assert_eq!(
            rewrite(&["domino", "serve", "-np", "4"]),
            ["domino", "serve", "--parallel", "4"]
        );
        assert_eq!(
            rewrite(&["domino", "repl", "-cnv"]),
            ["domino", "repl", "--conversation"]
        );
        // Values and anything after `--` are left alone; so are look-alikes.
        assert_eq!(
            rewrite(&["-p", "-sysx", "--", "-sys"]),
            ["-p", "-sysx", "--", "-sys"]
        );
    }

    #[test]
    fn llama_cli_spellings_parse() {
        let cli = Cli::try_parse_from(rewrite_llama_flags(
            [
                "domino",
                "generate",
                "-p",
                "hi",
                "-c",
                "512",
                "-t",
                "1",
                "-ngl",
                "0",
                "--n-predict",
                "7",
                "-j",
                "{}",
                "-sys",
                "S",
                "-e",
                "--seed",
                "-1",
                "--temp",
                "0.5",
                "--top-k",
                "40",
                "--top-p",
                "0.9",
                "--min-p",
                "0.05",
            ]
            .map(Into::into),
        ))
        .unwrap();
        let Command::Generate(g) = cli.command else {
            panic!("not generate")
        };
        assert_eq!(g.prompt_flag.as_deref(), Some("hi"));
        assert_eq!(g.model.ctx, 512);
        assert_eq!(g.model.threads, Some(1));
        assert_eq!(g.model.n_gpu_layers, Some(0));
        assert_eq!(g.max_tokens, 7);
        assert_eq!(g.decode.constraint.json_schema, ["{}"]);
        assert_eq!(g.system_prompt.as_deref(), Some("S"));
        assert!(g.escape);
        assert_eq!(g.sampling.top_k, 40);
        assert_eq!(g.sampling.min_p, 0.05);
        let cli = parse(&[
            "domino",
            "generate",
            "--ctx-size",
            "64",
            "--grammar-file",
            "g.gbnf",
            "--json-schema-file",
            "s",
        ])
        .unwrap();
        let Command::Generate(g) = cli.command else {
            panic!("not generate")
        };
        let err = g.decode.config().unwrap_err();
        assert_eq!(crate::diag::exit_code_for(&err), 2, "{err:#}");
        assert!(
            format!("{err:#}").contains("one constraint at a time"),
            "--grammar-file and --json-schema-file are one constraint each: {err:#}"
        );
        let cli = Cli::try_parse_from([
            "domino",
            "generate",
            "--ctx-size",
            "64",
            "--json-schema-file",
            "s.txt",
            "x",
        ])
        .unwrap();
        let Command::Generate(g) = cli.command else {
            panic!("not generate")
        };
        assert_eq!(g.model.ctx, 64);
        assert_eq!(
            g.decode.constraint.schema,
            [std::path::PathBuf::from("s.txt")]
        );
    }

    #[test]
    fn clap_definitions_are_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        super::parse(args.iter().map(Into::into))
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
    fn each_trigger_pairs_with_the_constraint_written_after_it() {
        use crate::grammar::GrammarSource;
        let plan = |args: &[&str]| {
            let mut argv = vec!["domino", "mask"];
            argv.extend_from_slice(args);
            let Command::Mask(m) = parse(&argv).unwrap().command else {
                panic!("not mask")
            };
            m.regions.resolve(&m.constraint).map(|(_, p)| p.unwrap())
        };
        let p = plan(&[
            "--trigger",
            "<a>",
            "-j",
            "{}",
            "--trigger",
            "<b>",
            "--regex",
            "[a-z]+",
        ])
        .unwrap();
        let begins: Vec<&str> = p.regions.iter().map(|r| r.begin.as_str()).collect();
        assert_eq!(begins, ["<a>", "<b>"]);
        assert!(matches!(p.regions[0].source, GrammarSource::JsonSchema(_)));
        assert!(matches!(&p.regions[1].source, GrammarSource::Regex(r) if r == "[a-z]+"));
        // The same flags in another order pair the other way round.
        let p = plan(&[
            "--trigger",
            "<a>",
            "--regex",
            "[a-z]+",
            "--trigger",
            "<b>",
            "--json",
        ])
        .unwrap();
        assert!(matches!(p.regions[0].source, GrammarSource::Regex(_)));
        // `--json` is the schema of an object or an array.
        assert!(
            matches!(&p.regions[1].source, GrammarSource::JsonSchema(v) if v["type"][0] == "object")
        );
        // One constraint, wherever it stands, is shared.
        for args in [
            &["--json", "--trigger", "<a>", "--trigger", "<b>"][..],
            &["--trigger", "<a>", "--trigger", "<b>", "--json"][..],
        ] {
            let p = plan(args).unwrap();
            assert!(
                p.regions
                    .iter()
                    .all(|r| matches!(r.source, GrammarSource::JsonSchema(_)))
            );
        }
        for (args, says) in [
            (
                &["--json", "--trigger", "a", "--regex", "x", "--trigger", "b"][..],
                "before the first --trigger",
            ),
            (
                &["--trigger", "a", "--regex", "x", "--json", "--trigger", "b"][..],
                "followed by 2 constraints",
            ),
            (
                &["--trigger", "a", "--trigger", "b", "--regex", "x", "--json"][..],
                "no constraint of its own",
            ),
        ] {
            let err = plan(args).unwrap_err();
            assert_eq!(crate::diag::exit_code_for(&err), 2);
            assert!(format!("{err:#}").contains(says), "{args:?}: {err:#}");
        }
    }

    #[test]
    fn ngl_after_a_double_dash_is_left_alone() {
        let args = rewrite_llama_flags(["domino", "-ngl", "--", "-ngl"].map(Into::into));
        assert_eq!(args, ["domino", "--n-gpu-layers", "--", "-ngl"]);
    }

    #[test]
    fn the_version_names_llama_cpp_and_the_backends() {
        let text = version_text();
        assert!(text.contains("llama.cpp: llama-cpp-2 "), "{text}");
        assert!(text.contains("(llama-cpp-sys-2 "), "{text}");
        let backends = text.lines().last().unwrap();
        assert!(backends.starts_with("backends: cpu"), "{text}");
        assert_eq!(backends.contains("vulkan"), cfg!(feature = "vulkan"));
    }
}
