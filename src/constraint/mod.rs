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

use crate::engine::{CompiledGrammar, EngineError, Options};
use crate::grammar::{CompileOptions, ErrorKind, GrammarError, GrammarSource};
use crate::vocab::Vocabulary;
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

    /// A JSON Schema file, whatever its extension: the flag that named it decides the type.
    pub fn schema_file(path: &Path, compile: CompileOptions) -> anyhow::Result<ConstraintSpec> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read schema file {}: {e}", path.display()))?;
        Self::schema_text(&format!("schema {}", path.display()), &text, compile)
    }

    /// A JSON Schema given as text (inline on the command line, or read from stdin).
    pub fn schema_text(
        label: &str,
        text: &str,
        compile: CompileOptions,
    ) -> anyhow::Result<ConstraintSpec> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            GrammarError::at(
                e.line() as u32,
                e.column() as u32,
                format!("schema is not valid JSON: {e}"),
            )
        })?;
        Ok(ConstraintSpec {
            label: label.to_string(),
            source: GrammarSource::JsonSchema(value),
            compile,
        })
    }

    /// A GBNF grammar given as text (read from stdin).
    pub fn gbnf_text(label: &str, text: &str, compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: label.to_string(),
            source: GrammarSource::Gbnf(text.to_string()),
            compile,
        }
    }

    /// A Rust-regex pattern the whole output must match.
    pub fn regex(pattern: &str, compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: format!("regex {pattern}"),
            source: GrammarSource::Regex(pattern.to_string()),
            compile,
        }
    }

    /// A JSON document: an object or an array, as llama.cpp's `json.gbnf` (`root ::= object`
    /// there; arrays too here) and OpenAI's JSON mode mean it. A prompt such as "A JSON
    /// object describing a dog:" must not be answered with a bare number.
    pub fn json(compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: "json".to_string(),
            source: GrammarSource::JsonSchema(serde_json::json!({"type": ["object", "array"]})),
            compile,
        }
    }

    /// Any JSON value, scalars included (`--json-value`, the schema `{}`).
    pub fn json_value(compile: CompileOptions) -> ConstraintSpec {
        ConstraintSpec {
            label: "json value".to_string(),
            source: GrammarSource::Json,
            compile,
        }
    }

    /// Compile for the engine. Grammar errors (including the scanner's size limits) carry a
    /// [`GrammarError`], so callers map them to exit code 2. The grammar's warnings (unknown
    /// schema keywords, keywords `lenient` ignored, subsets the compiler chose) are printed on
    /// stderr, one `warning: LABEL: …` line each, so no command loses them silently
    /// (generate, repl, eval, mask, serve all compile here).
    ///
    /// The whole compilation runs under `self.compile.budget` (see
    /// [`crate::engine::budget`]); over it, the error names the stage and the limit. Use
    /// [`ConstraintSpec::compile_for`] to bound the first mask too.
    pub fn compile(&self) -> anyhow::Result<Arc<CompiledGrammar>> {
        let _budget = self.compile.budget.enter();
        let ir = self.source.compile(&self.compile)?;
        for w in &ir.warnings {
            eprintln!("warning: {}: {w}", self.label);
        }
        CompiledGrammar::new(ir).map_err(|e| match e {
            EngineError::Lexer(l) => {
                anyhow::Error::new(GrammarError::whole(l.to_string()).with_kind(ErrorKind::Limit))
            }
            EngineError::Budget(b) => anyhow::Error::new(GrammarError::from(b)),
            other => anyhow::Error::new(other),
        })
    }

    /// [`ConstraintSpec::compile`], then the first mask over `vocab` (its token trees), all
    /// under one budget: what a server or a command that must not hang on a grammar calls.
    pub fn compile_for(
        &self,
        vocab: &Arc<Vocabulary>,
        opts: Options,
    ) -> anyhow::Result<Arc<CompiledGrammar>> {
        let _budget = self.compile.budget.enter();
        let grammar = self.compile()?;
        grammar.prepare(vocab, opts).map_err(|e| match e {
            EngineError::Budget(b) => anyhow::Error::new(GrammarError::from(b)),
            EngineError::TreeLimit { .. } => {
                anyhow::Error::new(GrammarError::whole(e.to_string()).with_kind(ErrorKind::Limit))
            }
            other => anyhow::Error::new(other),
        })?;
        Ok(grammar)
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
    fn json_is_an_object_or_array_and_json_value_any_value() {
        let doc = ConstraintSpec::json(CompileOptions::default());
        let any = ConstraintSpec::json_value(CompileOptions::default());
        let accepts = |spec: &ConstraintSpec, text: &str| {
            let r = crate::grammar::reference::ReferenceRecognizer::new(
                &spec.source.compile(&spec.compile).unwrap(),
            )
            .unwrap();
            let mut s = r.start();
            for &b in text.as_bytes() {
                match r.feed(&s, b) {
                    Some(next) => s = next,
                    None => return false,
                }
            }
            r.is_accepting(&s)
        };
        for text in ["{}", "[1]", "{\"a\": 1}"] {
            assert!(accepts(&doc, text), "{text}");
            assert!(accepts(&any, text), "{text}");
        }
        for text in ["12", "\"x\"", "null"] {
            assert!(!accepts(&doc, text), "{text}");
            assert!(accepts(&any, text), "{text}");
        }
    }

    #[test]
    fn a_schema_file_is_a_schema_whatever_its_extension() {
        let dir = std::env::temp_dir().join(format!("domino-spec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("schema.txt");
        std::fs::write(&path, r#"{"type": "integer"}"#).unwrap();
        let spec = ConstraintSpec::schema_file(&path, CompileOptions::default()).unwrap();
        assert!(matches!(spec.source, GrammarSource::JsonSchema(_)));
        std::fs::write(&path, "root ::= [0-9]+").unwrap();
        let err = ConstraintSpec::schema_file(&path, CompileOptions::default()).unwrap_err();
        assert!(format!("{err:#}").contains("not valid JSON"), "{err:#}");
        std::fs::remove_dir_all(&dir).ok();
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
