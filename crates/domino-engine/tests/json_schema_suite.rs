//! The public JSON-Schema-Test-Suite (json-schema-org), kept OUTSIDE the project, as a held-out
//! conformance measurement: for each test group, is the schema compiled or refused; for each
//! test of a compiled group, does the grammar's verdict on the document (written compactly by
//! `serde_json`, keys in the document's order) agree with the suite's `valid`?
//!
//! - `pass`: agreement (a valid document accepted, an invalid one rejected);
//! - `blocked`: a valid document rejected (invasive, not unsound);
//! - `UNSOUND`: an invalid document accepted — a soundness bug; the test fails on any;
//! - `refused`: the tests of a group whose schema is refused (unsupported keyword, remote
//!   reference, limit).
//!
//! The verdict is the reference recognizer's ([`ReferenceRecognizer`]), the engine's oracle,
//! over the lowered grammar: what `domino grammar test --schema S --jsonl …` prints.
//!
//! Skipped (passes, printing why) unless `JSON_SCHEMA_TEST_SUITE` names the suite's `tests`
//! folder (the one holding `draft2020-12/`, `draft7/`). The suite is not committed; it ships in
//! the sdist of the Python `jsonschema` package (folder `json/tests`), see
//! `scripts/json-schema-suite`. `JSON_SCHEMA_SUITE_DRAFTS` (default `draft2020-12,draft7`)
//! picks the drafts, `JSON_SCHEMA_SUITE_OPTIONAL=1` adds the `optional/` tests (formats,
//! bignum, …), `JSON_SCHEMA_SUITE_ORDER=schema` measures with schema property order,
//! `JSON_SCHEMA_SUITE_VERBOSE=1` prints every blocked (valid but rejected) document.
//!
//! Run: `JSON_SCHEMA_TEST_SUITE=/path/to/tests cargo test -p domino-engine --release --test
//! json_schema_suite -- --nocapture`

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::grammar::{CompileOptions, GrammarSource, PropertyOrder};
use serde_json::Value;

/// A group whose compile (and recognizer build) takes longer counts as refused (a limit).
const PER_GROUP_LIMIT: Duration = Duration::from_secs(20);

#[derive(Default, Clone, Copy)]
struct Tally {
    groups: usize,
    groups_refused: usize,
    pass: usize,
    blocked: usize,
    unsound: usize,
    refused: usize,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.groups += o.groups;
        self.groups_refused += o.groups_refused;
        self.pass += o.pass;
        self.blocked += o.blocked;
        self.unsound += o.unsound;
        self.refused += o.refused;
    }
    fn tests(&self) -> usize {
        self.pass + self.blocked + self.unsound + self.refused
    }
}

fn files(dir: &Path, optional: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if optional && p.file_name().is_some_and(|n| n == "optional") {
                out.extend(files(&p, false));
                out.extend(files(&p.join("format"), false));
            }
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// Verdict for each document: `Some(accepted)` per test, or `None` when the schema is refused.
fn run_group(schema: Value, docs: Vec<String>, opts: CompileOptions) -> Option<Vec<bool>> {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .stack_size(16 << 20)
        .spawn(move || {
            let r = std::panic::catch_unwind(move || {
                let g = GrammarSource::JsonSchema(schema).compile(&opts).ok()?;
                let rec = ReferenceRecognizer::new(&g).ok()?;
                Some(
                    docs.iter()
                        .map(|d| {
                            let mut s = rec.start();
                            for &b in d.as_bytes() {
                                match rec.feed(&s, b) {
                                    Some(n) => s = n,
                                    None => return false,
                                }
                            }
                            rec.is_accepting(&s)
                        })
                        .collect(),
                )
            });
            let _ = tx.send(r);
        })
        .unwrap();
    match rx.recv_timeout(PER_GROUP_LIMIT) {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => panic!("compile panicked"),
        Err(_) => None,
    }
}

#[test]
fn json_schema_test_suite() {
    let Ok(root) = std::env::var("JSON_SCHEMA_TEST_SUITE") else {
        eprintln!("skipped: JSON_SCHEMA_TEST_SUITE is not set (see this file's docs)");
        return;
    };
    let root = PathBuf::from(root);
    let drafts = std::env::var("JSON_SCHEMA_SUITE_DRAFTS")
        .unwrap_or_else(|_| "draft2020-12,draft7".to_string());
    let optional = std::env::var("JSON_SCHEMA_SUITE_OPTIONAL").is_ok_and(|v| v == "1");
    let order = match std::env::var("JSON_SCHEMA_SUITE_ORDER").as_deref() {
        Ok("schema") => PropertyOrder::Schema,
        _ => PropertyOrder::Any,
    };
    let opts = CompileOptions {
        property_order: order,
        ..CompileOptions::default()
    };
    let verbose = std::env::var("JSON_SCHEMA_SUITE_VERBOSE").is_ok_and(|v| v == "1");
    let mut unsound_cases = Vec::new();
    for draft in drafts.split(',') {
        let dir = root.join(draft);
        assert!(dir.is_dir(), "no suite folder {}", dir.display());
        let meta = match draft {
            "draft7" => Some("http://json-schema.org/draft-07/schema#"),
            "draft6" => Some("http://json-schema.org/draft-06/schema#"),
            "draft4" => Some("http://json-schema.org/draft-04/schema#"),
            "draft2019-09" => Some("https://json-schema.org/draft/2019-09/schema"),
            _ => None,
        };
        let mut per_file: BTreeMap<String, Tally> = BTreeMap::new();
        for f in files(&dir, optional) {
            let name = f
                .strip_prefix(&dir)
                .unwrap()
                .to_string_lossy()
                .trim_end_matches(".json")
                .to_string();
            let groups: Vec<Value> =
                serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
            let t = per_file.entry(name.clone()).or_default();
            for g in groups {
                let mut schema = g["schema"].clone();
                if let (Some(m), Some(uri)) = (schema.as_object_mut(), meta) {
                    m.entry("$schema")
                        .or_insert_with(|| Value::String(uri.to_string()));
                }
                let tests = g["tests"].as_array().cloned().unwrap_or_default();
                let docs: Vec<String> = tests
                    .iter()
                    .map(|t| serde_json::to_string(&t["data"]).unwrap())
                    .collect();
                t.groups += 1;
                match run_group(schema, docs.clone(), opts.clone()) {
                    None => {
                        t.groups_refused += 1;
                        t.refused += tests.len();
                    }
                    Some(verdicts) => {
                        for ((test, doc), accepted) in tests.iter().zip(&docs).zip(verdicts) {
                            let valid = test["valid"].as_bool().unwrap_or(false);
                            match (valid, accepted) {
                                (true, true) | (false, false) => t.pass += 1,
                                (true, false) => {
                                    t.blocked += 1;
                                    if verbose {
                                        println!(
                                            "blocked {draft}/{name}: {} / {}: {doc}",
                                            g["description"], test["description"]
                                        );
                                    }
                                }
                                (false, true) => {
                                    t.unsound += 1;
                                    unsound_cases.push(format!(
                                        "{draft}/{name}: {} / {}: {doc}",
                                        g["description"], test["description"]
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
        let mut total = Tally::default();
        println!(
            "{draft}: {:<40} {:>6} {:>7} {:>5} {:>7} {:>7} {:>7}",
            "file", "groups", "refused", "pass", "blocked", "UNSOUND", "refused"
        );
        for (name, t) in &per_file {
            println!(
                "{draft}: {name:<40} {:>6} {:>7} {:>5} {:>7} {:>7} {:>7}",
                t.groups, t.groups_refused, t.pass, t.blocked, t.unsound, t.refused
            );
            total.add(t);
        }
        println!(
            "{draft} TOTAL: groups {} (refused {}), tests {}: pass {}, blocked {}, UNSOUND {}, refused {}",
            total.groups,
            total.groups_refused,
            total.tests(),
            total.pass,
            total.blocked,
            total.unsound,
            total.refused
        );
    }
    for c in &unsound_cases {
        println!("UNSOUND {c}");
    }
    assert!(
        unsound_cases.is_empty(),
        "{} invalid documents accepted",
        unsound_cases.len()
    );
}
