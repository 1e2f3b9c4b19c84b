//! A constraint as the library knows it: where the grammar comes from, how to compile it, and
//! the compiled result the engine runs.
//!
//! Every front door (the `domino` command's flags, the REPL's `:grammar`/`:schema`/`:json`/
//! `:regex` commands, eval, a server) names a constraint the same few ways: a grammar file
//! (the front end chosen by extension), a JSON Schema file, a regex, or "any JSON". A
//! [`ConstraintSpec`] is that choice resolved to a [`GrammarSource`] (files are read when the
//! spec is built, so a missing or malformed file is reported where it was named) plus the
//! [`CompileOptions`]; [`ConstraintSpec::compile`] turns it into the engine's
//! [`CompiledGrammar`], with the engine's scanner limits reported as grammar errors (exit 2),
//! as every other grammar problem is. Keeping this here, below the command line, is what lets
//! the REPL and eval build constraints without depending on clap or on `cli`.

#[cfg(feature = "bench-llguidance")]
pub mod llguidance;

use crate::engine::{CompiledGrammar, EngineError};
use crate::grammar::{CompileOptions, ErrorKind, GrammarError, GrammarSource};
use std::path::Path;
use std::sync::Arc;

/// One constraint, ready to compile (see the module doc).
#[derive(Clone, Debug)]
pub struct ConstraintSpec {
    /// How a person would name it: `grammar FILE`, `schema FILE`, `regex RE` or `json`.
    pub label: String,
    pub source: GrammarSource,
    pub compile: CompileOptions,
}

impl ConstraintSpec {
    /// A grammar file: `.gbnf`, `.lark`, or `.json` (a JSON Schema), by extension.
    pub fn grammar_file(path: &Path, compile: CompileOptions) -> anyhow::Result<ConstraintSpec> {
        Ok(ConstraintSpec {
            label: format!("grammar {}", path.display()),
            source: GrammarSource::from_path(path)?,
            compile,
        })
    }

    /// A JSON Schema file, whatever its extension.
    pub fn schema_file(path: &Path, compile: CompileOptions) -> anyhow::Result<ConstraintSpec> {
        let source = match GrammarSource::from_path(path)? {
            s @ GrammarSource::JsonSchema(_) => s,
            _ => {
                let text = std::fs::read_to_string(path)?;
                let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                    GrammarError::at(
                        e.line() as u32,
                        e.column() as u32,
                        format!("schema is not valid JSON: {e}"),
                    )
                })?;
                GrammarSource::JsonSchema(value)
            }
        };
        Ok(ConstraintSpec {
            label: format!("schema {}", path.display()),
            source,
            compile,
        })
    }

    /// A Rust-regex pattern the whole output must match.
    pub fn regex(pattern: &str, compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: format!("regex {pattern}"),
            source: GrammarSource::Regex(pattern.to_string()),
            compile,
        }
    }

    /// Any JSON document.
    pub fn json(compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: "json".to_string(),
            source: GrammarSource::Json,
            compile,
        }
    }

    /// Compile for the engine. Grammar errors (including the scanner's size limits) carry a
    /// [`GrammarError`], so callers map them to exit code 2. The grammar's warnings (unknown
    /// schema keywords, keywords `lenient` ignored, subsets the compiler chose) are printed on
    /// stderr, one `warning: LABEL: …` line each, so no command loses them silently
    /// (generate, repl, eval, mask, serve all compile here).
    pub fn compile(&self) -> anyhow::Result<Arc<CompiledGrammar>> {
        let ir = self.source.compile(&self.compile)?;
        for w in &ir.warnings {
            eprintln!("warning: {}: {w}", self.label);
        }
        CompiledGrammar::new(ir).map_err(|e| match e {
            EngineError::Lexer(l) => {
                anyhow::Error::new(GrammarError::whole(l.to_string()).with_kind(ErrorKind::Limit))
            }
            other => anyhow::Error::new(other),
        })
    }
}

/// Lookahead `k` as written by a person (`--k`, `:k`): a number, or `inf` (also `∞`) for
/// unbounded, the minimally invasive setting (`None`).
pub fn parse_lookahead(s: &str) -> Result<Option<u32>, String> {
    if s.eq_ignore_ascii_case("inf") || s == "∞" {
        Ok(None)
    } else {
        s.parse::<u32>()
            .map(Some)
            .map_err(|_| format!("expected a number or `inf`, got `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_their_source_and_compile() {
        let spec = ConstraintSpec::regex("[0-9]+", CompileOptions::default());
        assert_eq!(spec.label, "regex [0-9]+");
        assert!(spec.compile().is_ok());
        assert_eq!(
            ConstraintSpec::json(CompileOptions::default()).label,
            "json"
        );
        let bad = ConstraintSpec::regex("(", CompileOptions::default());
        let err = bad.compile().unwrap_err();
        assert!(err.downcast_ref::<GrammarError>().is_some(), "{err:#}");
    }

    #[test]
    fn lookahead_is_a_number_or_inf() {
        assert_eq!(parse_lookahead("inf"), Ok(None));
        assert_eq!(parse_lookahead("∞"), Ok(None));
        assert_eq!(parse_lookahead("3"), Ok(Some(3)));
        assert!(parse_lookahead("many").is_err());
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let err = ConstraintSpec::grammar_file(
            Path::new("does/not/exist.gbnf"),
            CompileOptions::default(),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("does/not/exist.gbnf"),
            "{err:#}"
        );
    }
}
