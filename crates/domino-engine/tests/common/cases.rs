//! The data-driven conformance cases under `tests/cases/` (the format is documented in
//! `tests/cases/README.md`): one directory per case, holding a grammar (`grammar.gbnf`,
//! `grammar.lark`, `pattern.regex` or `schema.json`) with `accept.jsonl` and `reject.jsonl`.
//!
//! Loading a case checks the case itself: every example line parses, there is at least one
//! accept example, and for a JSON Schema case every accept document validates and every reject
//! document fails validation with the `jsonschema` crate (so a case cannot be wrong about the
//! schema). Shared by the engine suite (`crates/domino-engine/tests/conformance.rs`) and the
//! llama.cpp suite (`tests/conformance_llama.rs`, which includes this file by path).

use domino_engine::grammar::GrammarSource;
use std::path::{Path, PathBuf};

/// Which front end a case exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaseKind {
    Gbnf,
    Lark,
    Regex,
    JsonSchema,
}

/// One case directory, loaded and checked.
pub struct Case {
    pub dir: PathBuf,
    pub kind: CaseKind,
    pub source: GrammarSource,
    /// Strings in the language (for a JSON Schema case: documents, as written on their line).
    pub accept: Vec<String>,
    /// Strings outside the language.
    pub reject: Vec<String>,
}

impl Case {
    /// The case's name: its directory relative to the cases folder's parent (`cases/json`).
    pub fn name(&self) -> String {
        let parent = self.dir.parent().and_then(Path::parent);
        match parent {
            Some(p) => self
                .dir
                .strip_prefix(p)
                .unwrap_or(&self.dir)
                .display()
                .to_string(),
            None => self.dir.display().to_string(),
        }
    }
}

/// The grammar file of `dir`, if it holds one: which kind, and its path.
fn grammar_file(dir: &Path) -> Option<(CaseKind, PathBuf)> {
    [
        (CaseKind::Gbnf, "grammar.gbnf"),
        (CaseKind::Lark, "grammar.lark"),
        (CaseKind::Regex, "pattern.regex"),
        (CaseKind::JsonSchema, "schema.json"),
    ]
    .into_iter()
    .map(|(kind, name)| (kind, dir.join(name)))
    .find(|(_, p)| p.is_file())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The non-blank lines of a `.jsonl` file, each parsed as JSON.
fn read_jsonl(path: &Path) -> Vec<(String, serde_json::Value)> {
    read(path)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let v = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON: {e}", path.display(), i + 1));
            (l.trim().to_string(), v)
        })
        .collect()
}

/// Lines that are JSON strings: the strings.
fn strings(path: &Path) -> Vec<String> {
    read_jsonl(path)
        .into_iter()
        .enumerate()
        .map(|(i, (_, v))| match v {
            serde_json::Value::String(s) => s,
            other => panic!(
                "{}:{}: expected a JSON string, got {other}",
                path.display(),
                i + 1
            ),
        })
        .collect()
}

/// JSON documents checked against the schema: valid ones for `accept.jsonl`, invalid ones for
/// `reject.jsonl`; returns the lines as written.
fn documents(path: &Path, schema: &jsonschema::Validator, valid: bool) -> Vec<String> {
    read_jsonl(path)
        .into_iter()
        .map(|(line, doc)| {
            assert_eq!(
                schema.is_valid(&doc),
                valid,
                "{}: {line} should {}validate against schema.json (jsonschema)",
                path.display(),
                if valid { "" } else { "not " }
            );
            line
        })
        .collect()
}

/// Load the case in `dir`; `None` when `dir` holds no grammar file. Panics on a malformed case.
pub fn load(dir: &Path) -> Option<Case> {
    let (kind, file) = grammar_file(dir)?;
    let text = read(&file);
    let (accept_path, reject_path) = (dir.join("accept.jsonl"), dir.join("reject.jsonl"));
    let (source, accept, reject) = match kind {
        CaseKind::Gbnf => (
            GrammarSource::Gbnf(text),
            strings(&accept_path),
            strings(&reject_path),
        ),
        CaseKind::Lark => (
            GrammarSource::Lark(text),
            strings(&accept_path),
            strings(&reject_path),
        ),
        CaseKind::Regex => (
            GrammarSource::Regex(text.trim_end_matches('\n').to_string()),
            strings(&accept_path),
            strings(&reject_path),
        ),
        CaseKind::JsonSchema => {
            let schema: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: not JSON: {e}", file.display()));
            let validator = jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{}: not a valid schema: {e}", file.display()));
            let accept = documents(&accept_path, &validator, true);
            let reject = documents(&reject_path, &validator, false);
            (GrammarSource::JsonSchema(schema), accept, reject)
        }
    };
    assert!(!accept.is_empty(), "{}: no accept examples", dir.display());
    Some(Case {
        dir: dir.to_path_buf(),
        kind,
        source,
        accept,
        reject,
    })
}

/// Every case under `cases_dir` (searched recursively), sorted by directory.
pub fn all(cases_dir: &Path) -> Vec<Case> {
    let mut dirs = Vec::new();
    let mut stack = vec![cases_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot read {}: {e}", d.display()))
        {
            let p = entry.unwrap().path();
            if p.is_dir() {
                dirs.push(p.clone());
                stack.push(p);
            }
        }
    }
    dirs.sort();
    dirs.iter().filter_map(|d| load(d)).collect()
}
