//! JSONSchemaBench development subset: every schema compiles (or fails with a clear error)
//! within a time bound, with no panic; prints ok/unsupported/error counts per subset.
//!
//! Data: `../shared/data/jsonschemabench/*.jsonl` relative to the repository root (override
//! with `DOMINO_DATA`, the folder holding `jsonschemabench/`). Missing data fails the test loudly.
//!
//! Run: `cargo test -p domino-engine --test json_schema_bench -- --nocapture`

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use domino_engine::grammar::expr::{Expr, GrammarDef};
use domino_engine::grammar::json_schema::{self, instances::Generator};
use domino_engine::grammar::{CompileOptions, ErrorKind, WhitespacePolicy};
use serde_json::Value;

/// Compile + lower + scanner within this, or the schema counts as a limit (a schema that
/// never finishes would still fail the test: see `HANG`).
const PER_SCHEMA_LIMIT: Duration = Duration::from_secs(10);
/// Past this, a schema is a hang: a test failure.
const HANG: Duration = Duration::from_secs(120);

fn data_dir() -> PathBuf {
    // `../shared/data` from the repository root (searched upwards: see `common::shared_dir`).
    let base = std::env::var("DOMINO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| common::shared_dir().join("data"));
    let dir = base.join("jsonschemabench");
    assert!(
        dir.is_dir(),
        "JSONSchemaBench data missing: {} (see ../shared/data/README.md)",
        dir.display()
    );
    dir
}

/// The subset's `*.jsonl` files, sorted (at least one).
fn data_files() -> Vec<PathBuf> {
    let dir = data_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .jsonl files in {}", dir.display());
    files
}

#[derive(Default)]
struct Counts {
    ok: usize,
    unsupported: usize,
    error: usize,
    limit: usize,
}

#[test]
fn jsonschemabench_dev_subset_compiles() {
    let files = data_files();
    let mut per_subset: BTreeMap<String, Counts> = BTreeMap::new();
    let mut features: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut slowest = (Duration::ZERO, String::new());
    for file in &files {
        let subset = file.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        let counts = per_subset.entry(subset.clone()).or_default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let item: Value = serde_json::from_str(line).expect("data line is JSON");
            let id = item["id"].as_str().unwrap_or("?").to_string();
            let schema = item["schema"].clone();
            // Compile, lower and build the engine's scanner in a worker thread (panics are
            // caught; a hang trips the time bound). "ok" means the engine can run the grammar.
            let (tx, rx) = mpsc::channel();
            let started = Instant::now();
            std::thread::Builder::new()
                .stack_size(8 << 20)
                .spawn(move || {
                    let r = std::panic::catch_unwind(|| {
                        let def = json_schema::compile(&schema, &CompileOptions::default())?;
                        let g = domino_engine::grammar::lower::lower(&def)?;
                        domino_engine::lexer::Scanner::new(&g).map_err(|e| {
                            domino_engine::grammar::GrammarError::whole(format!("scanner: {e}"))
                                .with_kind(ErrorKind::Limit)
                        })?;
                        Ok::<usize, domino_engine::grammar::GrammarError>(def.rules.len())
                    });
                    let _ = tx.send(r);
                })
                .unwrap();
            let result = rx.recv_timeout(HANG);
            let took = started.elapsed();
            if took > slowest.0 {
                slowest = (took, format!("{subset}/{id}"));
            }
            if result.is_ok() && took > PER_SCHEMA_LIMIT {
                counts.limit += 1;
                failures.push(format!("{subset}/{id}: limit: took {took:?}"));
                continue;
            }
            match result {
                Err(_) => {
                    panic!(
                        "{subset}/{id}: compile did not finish within {HANG:?} (or its thread died)"
                    )
                }
                Ok(Err(_)) => panic!("{subset}/{id}: compile panicked"),
                Ok(Ok(Ok(_rules))) => counts.ok += 1,
                Ok(Ok(Err(e))) => match e.kind {
                    ErrorKind::Unsupported => {
                        let f = e
                            .feature
                            .clone()
                            .expect("unsupported errors name their keyword");
                        assert!(!f.is_empty());
                        *features.entry(f).or_default() += 1;
                        counts.unsupported += 1;
                        failures.push(format!("{subset}/{id}: unsupported: {e}"));
                    }
                    ErrorKind::Limit => {
                        counts.limit += 1;
                        failures.push(format!("{subset}/{id}: limit: {e}"));
                    }
                    ErrorKind::Invalid => {
                        counts.error += 1;
                        failures.push(format!("{subset}/{id}: error: {e}"));
                    }
                },
            }
        }
    }
    let mut total = Counts::default();
    eprintln!(
        "{:<18} {:>5} {:>5} {:>11} {:>5} {:>5}",
        "subset", "total", "ok", "unsupported", "error", "limit"
    );
    for (name, c) in &per_subset {
        let n = c.ok + c.unsupported + c.error + c.limit;
        eprintln!(
            "{name:<18} {n:>5} {:>5} {:>11} {:>5} {:>5}",
            c.ok, c.unsupported, c.error, c.limit
        );
        total.ok += c.ok;
        total.unsupported += c.unsupported;
        total.error += c.error;
        total.limit += c.limit;
    }
    let n = total.ok + total.unsupported + total.error + total.limit;
    eprintln!(
        "{:<18} {n:>5} {:>5} {:>11} {:>5} {:>5}",
        "TOTAL", total.ok, total.unsupported, total.error, total.limit
    );
    eprintln!(
        "ok rate {:.1}%; slowest compile {:?} ({})",
        100.0 * total.ok as f64 / n as f64,
        slowest.0,
        slowest.1
    );
    eprintln!("unsupported by keyword: {features:?}");
    for f in &failures {
        eprintln!("  {f}");
    }
    assert!(
        n >= 800,
        "expected the whole development subset, got {n} schemas"
    );
    // "ok" = the engine can run it (compiled, lowered, scanner built): 831 of 872 (95.3 %).
    // The scanner is lazy, so schemas whose full product has millions of states run too
    // (`jsonschemabench_grammar_samples_validate` pushes samples through the engine).
    // This ratchet keeps what we have.
    let rate = total.ok as f64 / n as f64;
    assert!(
        rate >= 0.952,
        "ok rate {:.1}% fell below the floor",
        100.0 * rate
    );
}

/// Random documents drawn from the grammar itself (a random walk over the `GrammarDef`).
fn sample_def(
    def: &GrammarDef,
    g: &mut Generator,
    e: &Expr,
    depth: usize,
    out: &mut String,
) -> bool {
    if depth > 80 || out.len() > 200_000 {
        return false;
    }
    match e {
        Expr::Empty => true,
        Expr::Bytes(b) => {
            out.push_str(std::str::from_utf8(b).unwrap());
            true
        }
        Expr::Regex(h) => {
            out.push_str(&g.sample(h));
            true
        }
        Expr::Constrained { hir, constraints } => common::sample_constrained(g, hir, constraints)
            .map(|x| out.push_str(&x))
            .is_some(),
        Expr::Ref(r) => sample_def(def, g, &def.rules[r.0 as usize].expr, depth + 1, out),
        Expr::Seq(parts) => parts.iter().all(|p| sample_def(def, g, p, depth + 1, out)),
        Expr::Alt(alts) => {
            let n = common::alternative_count(alts);
            if n == 0 {
                return false;
            }
            let i = if depth > 40 {
                0
            } else {
                g.range(0, n as u64 - 1) as usize
            };
            sample_def(def, g, &common::alternative(alts, i), depth + 1, out)
        }
        Expr::RefPairs(pairs) => {
            let alts = [Expr::RefPairs(pairs.clone())];
            sample_def(def, g, &Expr::Alt(alts.to_vec()), depth, out)
        }
        Expr::Repeat { expr, min, max } => {
            let hi = max.unwrap_or(min + 2).min(min + 2);
            let n = if depth > 40 {
                *min
            } else {
                g.range(*min as u64, hi as u64) as u32
            };
            (0..n).all(|_| sample_def(def, g, expr, depth + 1, out))
        }
    }
}

/// Soundness on real schemas: documents sampled from each compiled grammar validate with the
/// `jsonschema` crate (schemas it cannot build a validator for are skipped and counted).
#[test]
fn jsonschemabench_grammar_samples_validate() {
    let dir = data_dir();
    let files = data_files();
    let (mut checked, mut docs, mut skipped, mut engine_docs) = (0usize, 0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    let vocab = std::sync::Arc::new(
        domino_engine::vocab::tokenizer_json::load(
            &dir.join("../../tokenizers/SmolLM2-135M-Instruct.tokenizer.json"),
        )
        .unwrap(),
    );
    for file in &files {
        let subset = file.file_stem().unwrap().to_string_lossy().to_string();
        for line in std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty())
        {
            let item: Value = serde_json::from_str(line).unwrap();
            let id = item["id"].as_str().unwrap_or("?");
            let schema = &item["schema"];
            let Ok(def) = json_schema::compile(
                schema,
                &CompileOptions {
                    whitespace: WhitespacePolicy::Compact,
                    ..CompileOptions::default()
                },
            ) else {
                continue;
            };
            let Ok(validator) = jsonschema::options()
                .should_validate_formats(true)
                .build(schema)
            else {
                skipped += 1;
                continue;
            };
            checked += 1;
            // The engine itself (lazy scanner + Earley parser) must accept every sample.
            let engine = domino_engine::grammar::lower::lower(&def)
                .ok()
                .and_then(|ir| domino_engine::engine::CompiledGrammar::new(ir).ok());
            let mut g = Generator::new(schema, 3);
            for _ in 0..20 {
                let mut out = String::new();
                if !sample_def(
                    &def,
                    &mut g,
                    &def.rules[def.start.0 as usize].expr,
                    0,
                    &mut out,
                ) {
                    continue;
                }
                docs += 1;
                match serde_json::from_str::<Value>(&out) {
                    Ok(doc) if validator.is_valid(&doc) => {
                        let Some(engine) = &engine else { continue };
                        let mut c = domino_engine::engine::Constraint::new(
                            engine,
                            &vocab,
                            Default::default(),
                        )
                        .unwrap();
                        if c.commit_bytes(out.as_bytes()).is_err() || !c.is_accepting() {
                            failures.push(format!(
                                "{subset}/{id}: the engine rejects the sample {}",
                                &out.chars().take(300).collect::<String>()
                            ));
                            break;
                        }
                        engine_docs += 1;
                    }
                    Ok(doc) => {
                        let why: Vec<String> = validator
                            .iter_errors(&doc)
                            .take(2)
                            .map(|e| format!("{} at {}", e, e.instance_path()))
                            .collect();
                        failures.push(format!(
                            "{subset}/{id}: invalid sample {}: {why:?}",
                            &out.chars().take(300).collect::<String>()
                        ));
                        break;
                    }
                    Err(e) => {
                        failures.push(format!(
                            "{subset}/{id}: non-JSON sample ({e}): {}",
                            &out.chars().take(300).collect::<String>()
                        ));
                        break;
                    }
                }
            }
        }
    }
    eprintln!(
        "sampled {docs} documents from {checked} compiled schemas ({skipped} skipped: no jsonschema validator); \
         the engine accepted {engine_docs} valid ones"
    );
    assert!(
        engine_docs > 5_000,
        "too few samples went through the engine: {engine_docs}"
    );
    for f in &failures {
        eprintln!("  {f}");
    }
    assert!(
        failures.is_empty(),
        "{} schemas produced invalid documents",
        failures.len()
    );
}

/// Every key set the development subset's schemas produce (`additionalProperties` beside
/// named properties) whose DFA comes from the names' trie (`key_set_dfa`) accepts exactly its
/// HIR's language: a walk over the pairs of states the two DFAs reach on the same bytes
/// (every byte from each), where they must agree on accepting and on dead (both keep only
/// states that can reach a match). And nearly all key sets are kept as their names with the
/// trie's DFA: 1,484 of 1,485 (the other has a name with `/`). The HIR those build when read
/// is normalized, as `RegexHir::facts` claims without building it.
#[test]
fn jsonschemabench_key_set_dfas_equal_their_hirs() {
    use domino_engine::grammar::dfa::{KEY_SET_STATE, TerminalDfa};
    use domino_engine::grammar::expr::RuleKind;
    use domino_engine::grammar::hir_key::hir_facts;
    use domino_engine::grammar::ir::Terminal;
    let files = data_files();
    let mut seen = std::collections::HashSet::new();
    let (mut key_sets, mut from_trie, mut pairs) = (0usize, 0usize, 0usize);
    let mut others = Vec::new();
    for file in &files {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let item: Value = serde_json::from_str(line).expect("data line is JSON");
            let Ok(def) = json_schema::compile(&item["schema"], &CompileOptions::default()) else {
                continue;
            };
            for rule in &def.rules {
                let Expr::Regex(hir) = &rule.expr else {
                    continue;
                };
                if rule.kind != RuleKind::Lexical || !rule.name.starts_with("key") {
                    continue;
                }
                if !seen.insert(hir.as_ptr() as usize) {
                    continue;
                }
                key_sets += 1;
                if !hir.is_key_set() {
                    others.push(format!("{}/{}", item["id"], rule.name));
                    continue;
                }
                from_trie += 1;
                let terminal = Terminal::new(rule.name.clone(), hir.clone(), None);
                let trie = TerminalDfa::for_terminal(&terminal).expect("the key set's DFA");
                assert!(
                    trie.state_key(0).is_some_and(|k| k[0] == KEY_SET_STATE),
                    "the trie's DFA"
                );
                // Reading the HIR builds it.
                assert!(hir_facts(hir).normalized, "{}: key set HIR", item["id"]);
                pairs += common::assert_same_dfa_language(
                    &trie,
                    &TerminalDfa::eager(hir).expect("the key set's HIR compiles"),
                    &format!("{}: key set `{}`", item["id"], rule.name),
                );
            }
        }
    }
    eprintln!(
        "{key_sets} key sets, {from_trie} from their trie, {pairs} state pairs compared; \
         with their HIR's DFA: {others:?}"
    );
    assert!(
        key_sets >= 100,
        "expected the development subset's key sets"
    );
    assert!(
        from_trie * 100 >= key_sets * 99,
        "only {from_trie} of {key_sets} key sets got the trie's DFA"
    );
}
