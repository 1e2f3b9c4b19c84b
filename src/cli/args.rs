//! Argument groups shared by several subcommands.

use crate::grammar::{CompileOptions, GrammarSource, WhitespacePolicy};
use clap::Args;
use std::path::PathBuf;

/// `--format text|json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// Which constraint to apply: exactly one of `--grammar`, `--schema`, `--regex`, `--json`.
#[derive(Args, Debug, Clone, Default)]
pub struct ConstraintArgs {
    /// Grammar file: .gbnf (llama.cpp GBNF), .lark (Lark subset) or .json (JSON Schema).
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub grammar: Option<PathBuf>,
    /// JSON Schema file the output must validate against.
    #[arg(long, value_name = "FILE", group = "constraint")]
    pub schema: Option<PathBuf>,
    /// Rust-regex pattern the whole output must match.
    #[arg(long, value_name = "RE", group = "constraint")]
    pub regex: Option<String>,
    /// Any JSON document.
    #[arg(long, group = "constraint")]
    pub json: bool,
    /// Start rule of a grammar (default: `root` for GBNF, `start` for Lark).
    #[arg(long, value_name = "RULE")]
    pub start: Option<String>,
    /// Whitespace between JSON tokens for --schema/--json.
    #[arg(long, value_parser = crate::cli::args::whitespace_parser(), default_value_t = WhitespacePolicy::Flexible)]
    pub whitespace: WhitespacePolicy,
    /// Longest run of whitespace bytes the flexible policy allows.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_whitespace: u32,
    /// Warn about unsupported schema keywords and ignore them instead of failing.
    #[arg(long)]
    pub lenient: bool,
}

impl ConstraintArgs {
    /// The chosen source, or `None` when no constraint flag was given.
    pub fn source(&self) -> anyhow::Result<Option<GrammarSource>> {
        Ok(if let Some(p) = &self.grammar {
            Some(GrammarSource::from_path(p)?)
        } else if let Some(p) = &self.schema {
            match GrammarSource::from_path(p)? {
                s @ GrammarSource::JsonSchema(_) => Some(s),
                _ => {
                    let text = std::fs::read_to_string(p)?;
                    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                        crate::grammar::GrammarError::at(
                            e.line() as u32,
                            e.column() as u32,
                            format!("schema is not valid JSON: {e}"),
                        )
                    })?;
                    Some(GrammarSource::JsonSchema(value))
                }
            }
        } else if let Some(r) = &self.regex {
            Some(GrammarSource::Regex(r.clone()))
        } else if self.json {
            Some(GrammarSource::Json)
        } else {
            None
        })
    }

    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            start: self.start.clone(),
            whitespace: self.whitespace,
            max_whitespace: self.max_whitespace,
            lenient: self.lenient,
        }
    }
}

/// Lookahead `k`: a number or `inf`.
pub fn parse_k(s: &str) -> Result<Option<u32>, String> {
    if s.eq_ignore_ascii_case("inf") || s == "∞" {
        Ok(None)
    } else {
        s.parse::<u32>()
            .map(Some)
            .map_err(|_| format!("expected a number or `inf`, got `{s}`"))
    }
}

/// `--whitespace flexible|compact|pretty`: the engine's [`WhitespacePolicy`] on the command
/// line (the engine crate does not depend on clap, so the parser lives here).
pub fn whitespace_parser() -> impl clap::builder::TypedValueParser<Value = WhitespacePolicy> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(WhitespacePolicy::ALL.map(|p| p.as_str()))
        .map(|s| s.parse::<WhitespacePolicy>().expect("a possible value"))
}
