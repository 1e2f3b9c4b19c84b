//! Data-driven grammar suite: every directory under `tests/cases/` holding a grammar
//! (`grammar.gbnf`, `grammar.lark` or `pattern.regex`) plus `accept.jsonl` / `reject.jsonl`
//! (one JSON string per line) is parsed, lowered, and run through the reference recognizer:
//! every accept line must be in the language, every reject line must not be.
//! llama.cpp's grammar set has one named test each (`tests/cases/llama_cpp/<name>`).

use domino::grammar::reference::ReferenceRecognizer;
use domino::grammar::{CompileOptions, GrammarSource};
use std::path::{Path, PathBuf};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases")
}

fn read_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str::<String>(l)
                .unwrap_or_else(|e| panic!("{}:{}: not a JSON string: {e}", path.display(), i + 1))
        })
        .collect()
}

fn source_of(dir: &Path) -> Option<GrammarSource> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    if let Some(t) = read("grammar.gbnf") {
        Some(GrammarSource::Gbnf(t))
    } else if let Some(t) = read("grammar.lark") {
        Some(GrammarSource::Lark(t))
    } else {
        read("pattern.regex").map(|t| GrammarSource::Regex(t.trim_end_matches('\n').to_string()))
    }
}

/// Run one case directory; returns the number of strings checked.
fn run_case(dir: &Path) -> usize {
    let source = source_of(dir).unwrap_or_else(|| panic!("{}: no grammar file", dir.display()));
    let grammar = source
        .compile(&CompileOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let rec =
        ReferenceRecognizer::new(&grammar).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let accept = read_lines(&dir.join("accept.jsonl"));
    let reject = read_lines(&dir.join("reject.jsonl"));
    assert!(!accept.is_empty(), "{}: no accept examples", dir.display());
    let mut failures = Vec::new();
    for s in &accept {
        if !rec.accepts(s.as_bytes()) {
            failures.push(format!("should accept {s:?}"));
        }
        // Every prefix of a sentence is viable.
        if !rec.is_viable_prefix(&s.as_bytes()[..s.len() / 2]) {
            failures.push(format!("prefix of {s:?} should be viable"));
        }
    }
    for s in &reject {
        if rec.accepts(s.as_bytes()) {
            failures.push(format!("should reject {s:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}:\n  {}",
        dir.display(),
        failures.join("\n  ")
    );
    accept.len() + reject.len()
}

fn all_case_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![cases_dir()];
    while let Some(d) = stack.pop() {
        for entry in
            std::fs::read_dir(&d).unwrap_or_else(|e| panic!("cannot read {}: {e}", d.display()))
        {
            let p = entry.unwrap().path();
            if p.is_dir() {
                if source_of(&p).is_some() {
                    out.push(p.clone());
                }
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_case_directory_passes() {
    let dirs = all_case_dirs();
    assert!(
        dirs.len() >= 16,
        "expected the full case set, found {}",
        dirs.len()
    );
    let checked: usize = dirs.iter().map(|d| run_case(d)).sum();
    assert!(checked > 100);
}

macro_rules! llama_cpp_case {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            run_case(&cases_dir().join("llama_cpp").join(stringify!($name)));
        }
    )*};
}
llama_cpp_case!(
    arithmetic, c, chess, english, japanese, json, json_arr, list
);

#[test]
fn llama_cpp_set_is_complete() {
    for name in [
        "arithmetic",
        "c",
        "chess",
        "english",
        "japanese",
        "json",
        "json_arr",
        "list",
    ] {
        assert!(
            cases_dir()
                .join("llama_cpp")
                .join(name)
                .join("grammar.gbnf")
                .is_file(),
            "{name}"
        );
    }
}
