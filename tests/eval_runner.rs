//! The runner end to end with a deterministic fake backend: results and reports are written,
//! every method appears, and a run killed midway (by a panic, or with a half-written last
//! line) and resumed produces byte-identical results and reports to an uninterrupted run.
//! Needs ../shared/data (fails loudly without it).

use domino::eval::data::{Dataset, Split, default_path};
use domino::eval::metrics::{FinishReason, SampleResult};
use domino::eval::prompt::fnv1a64;
use domino::eval::results::{done_pairs, read_results};
use domino::eval::throughput::{Manifest, ThroughputOptions, run_throughput};
use domino::eval::{
    EvalBackend, GenerationOutcome, GenerationRequest, Method, RunOptions, Task, run_task,
};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Answers from a table of gold answers, with per-method deterministic quirks.
struct FakeBackend {
    gsm_gold: HashMap<String, i64>,
    conll_gold: HashMap<String, Vec<String>>,
    calls: usize,
    panic_after: Option<usize>,
    /// Fail this many of the first requests of this method.
    fail: Option<(Method, usize)>,
    /// The shared prompt prefix seen first; every later request must share it.
    prefix: Option<String>,
}

impl FakeBackend {
    fn new() -> FakeBackend {
        let Dataset::Gsm8k(g) = Dataset::load(Task::Gsm8k, &default_path(Task::Gsm8k, Split::Test))
            .expect("data required")
        else {
            unreachable!()
        };
        let Dataset::Conll(c) = Dataset::load(Task::Conll, &default_path(Task::Conll, Split::Test))
            .expect("data required")
        else {
            unreachable!()
        };
        FakeBackend {
            gsm_gold: g
                .into_iter()
                .map(|s| (s.question, s.final_answer))
                .collect(),
            conll_gold: c
                .into_iter()
                .map(|s| {
                    (
                        domino::eval::prompt::conll_question(&domino::eval::data::ConllSample {
                            id: 0,
                            tokens: s.tokens,
                            tags: vec![],
                        }),
                        s.tags,
                    )
                })
                .collect(),
            calls: 0,
            panic_after: None,
            fail: None,
            prefix: None,
        }
    }
}

fn method_index(m: Method) -> u64 {
    match m {
        Method::None => 0,
        Method::Domino { .. } => 1,
        Method::Naive => 2,
        Method::LlamaGrammar => 3,
        Method::Template => 4,
        Method::Llguidance => 5,
    }
}

impl EvalBackend for FakeBackend {
    fn model_name(&self) -> String {
        "fake-model".into()
    }

    fn run(&mut self, req: &GenerationRequest<'_>) -> anyhow::Result<GenerationOutcome> {
        self.calls += 1;
        if self.panic_after.is_some_and(|n| self.calls > n) {
            panic!("simulated kill");
        }
        if let Some((method, left)) = &mut self.fail
            && *method == req.method
            && *left > 0
        {
            *left -= 1;
            anyhow::bail!("simulated backend failure");
        }
        if req.shared_prefix_len > 0 {
            let prefix = &req.prompt[..req.shared_prefix_len];
            assert!(
                prefix.ends_with("\n\n") && prefix.contains("Q: "),
                "the shared prefix is instruction + demonstrations"
            );
            match &self.prefix {
                Some(p) => assert_eq!(p, prefix, "every request of a run shares the prefix"),
                None => self.prefix = Some(prefix.to_string()),
            }
        }
        // Few-shot prompts end in `Q: <question>\nA:`; throughput prompts are used whole.
        let question = req
            .prompt
            .rsplit("\nQ: ")
            .next()
            .unwrap()
            .strip_suffix("\nA:")
            .unwrap_or(req.prompt);
        let h = fnv1a64(question.as_bytes());
        let mi = method_index(req.method);
        let mut text = match req.task {
            "gsm8k" => {
                let gold = self.gsm_gold[question];
                assert_eq!(req.max_tokens, 512);
                let answer = if h % 2 == 0 || (mi == 1 && h % 4 == 1) {
                    gold
                } else {
                    gold + 1
                };
                let json = format!(
                    "{{\n    \"thoughts\": [\n        {{\"step\": \"s\", \"calculation\": \"1+1\", \"result\": 2}}\n    ],\n    \"answer\": {answer}\n}}"
                );
                if mi == 2 {
                    json.replace("\n", "").replace("    ", "")
                } else {
                    json
                }
            }
            "conll" => {
                let gold = &self.conll_gold[question];
                assert_eq!(
                    req.max_tokens,
                    (64 + 32 * gold.len()).min(2048),
                    "the CoNLL budget grows with the sentence"
                );
                let items: Vec<String> = gold
                    .iter()
                    .enumerate()
                    .map(|(i, t)| {
                        let tag = if mi == 2 && i == 0 { "O" } else { t.as_str() };
                        format!("{{\"token\": \"t{i}\", \"tag\": \"{tag}\"}}")
                    })
                    .collect();
                format!("{{\"tokens\": [{}]}}", items.join(", "))
            }
            _ => format!("output for {} with {}", req.task, req.method),
        };
        if mi == 3 && h % 5 == 0 {
            text.truncate(text.len() / 2);
        }
        if mi == 4 {
            text = format!(" Here you go:\n```json\n{text}\n```\nQ: more");
        }
        if mi == 0 && h % 3 == 0 {
            text.push_str("\n\nQ: another question");
        }
        let tokens: Vec<u32> = text.bytes().map(u32::from).collect();
        let n = tokens.len();
        Ok(GenerationOutcome {
            text,
            logprobs: vec![-0.05 * (mi + 1) as f32; n],
            interventions: if mi == 0 {
                0
            } else {
                (n / (5 + mi as usize)) as u32
            },
            prompt_tokens: req.prompt.len(),
            prompt_ms: 1.0,
            decode_ms: n as f64 * (10.0 + mi as f64),
            finish_reason: Some(if mi == 3 && h % 5 == 0 {
                FinishReason::MaxTokens
            } else {
                FinishReason::Eos
            }),
            // Speculative methods (`domino-sN`) verify one draft in three and take two of them.
            forward_passes: if req.method.is_speculative() {
                n.div_ceil(2)
            } else {
                n
            },
            draft_proposed: if req.method.is_speculative() {
                n / 2 + n / 4
            } else {
                0
            },
            draft_accepted: if req.method.is_speculative() {
                n / 2
            } else {
                0
            },
            tokens,
        })
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("domino-eval-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn options(limit: usize) -> RunOptions {
    RunOptions {
        limit: Some(limit),
        methods: Method::default_accuracy_methods(),
        command_line: "domino eval gsm8k --limit 12 (test)".into(),
        ..RunOptions::default()
    }
}

const REPORT_FILES: [&str; 4] = ["results.jsonl", "report.md", "report.json", "accuracy.svg"];

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assert_same_outputs(a: &Path, b: &Path) {
    for name in REPORT_FILES {
        assert_eq!(
            read(a, name),
            read(b, name),
            "{name} differs between {} and {}",
            a.display(),
            b.display()
        );
    }
}

#[test]
fn reports_contain_every_method() {
    let dir = fresh_dir("report");
    let report = run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(12), &dir).unwrap();
    assert_eq!(report.methods.len(), 5);
    assert_eq!(report.model, "fake-model");
    let md = read(&dir, "report.md");
    let json: serde_json::Value = serde_json::from_str(&read(&dir, "report.json")).unwrap();
    let svg = read(&dir, "accuracy.svg");
    for m in Method::default_accuracy_methods() {
        let name = m.to_string();
        assert!(
            md.contains(&format!("| GSM8K | fake-model | {name} |")),
            "report.md lacks a Table 2 row for {name}"
        );
        assert!(
            md.contains(&format!("\n| {name} |")),
            "report.md lacks an invasiveness row for {name}"
        );
        assert!(
            json["methods"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["method"] == name.as_str()),
            "report.json lacks {name}"
        );
        assert!(
            svg.contains(&format!(">{name}</text>")),
            "accuracy.svg lacks {name}"
        );
    }
    assert!(
        md.contains("0.415 / 0.262"),
        "the paper's unconstrained accuracy is beside ours"
    );
    assert!(md.contains("Small models score low"));
    assert!(md.contains("## The paper's claims in this run"));
    assert_eq!(report.claims.len(), 7, "{:#?}", report.claims);
    let summary_of = |m: Method| report.methods.iter().find(|s| s.method == m).unwrap();
    // 12 samples cannot decide an accuracy claim: it is inconclusive, not "yes".
    let _ = summary_of;
    assert_eq!(report.claims[0].holds, None, "{:#?}", report.claims[0]);
    assert!(
        report.claims[0]
            .inconclusive
            .as_deref()
            .is_some_and(|why| why.contains("too few samples (12 < 30)")),
        "{:#?}",
        report.claims[0]
    );
    assert!(
        md.contains("| inconclusive: too few samples (12 < 30) |"),
        "{md}"
    );
    assert_eq!(
        report.claims[2].holds,
        Some(false),
        "the fake's domino is slower than none"
    );

    let results = read_results::<SampleResult>(&dir.join("results.jsonl"))
        .unwrap()
        .records;
    assert_eq!(results.len(), 12 * 5);
    let summary = |m: Method| report.methods.iter().find(|s| s.method == m).unwrap();
    // The fake's `none` and `domino` agree on the evenly hashed samples only, `naive` reflows whitespace.
    assert_eq!(summary(Method::None).exact_match_with_none, Some(1.0));
    assert_eq!(summary(Method::None).performance_impact, Some(1.0));
    assert!(summary(Method::Naive).exact_match_with_none.unwrap() < 1.0);
    assert!(summary(Method::Naive).mean_first_divergence.is_some());
    assert!((summary(Method::None).perplexity.unwrap() - (0.05f64).exp()).abs() < 1e-6);
    assert!((summary(Method::DOMINO).performance_impact.unwrap() - 10.0 / 11.0).abs() < 0.02);
    assert!(md.contains("(McNemar p)") && md.contains("McNemar p = "));
    // Scores recomputed by hand from the records.
    let none_correct = results
        .iter()
        .filter(|r| r.method == Method::None && r.correct)
        .count();
    for s in &report.methods {
        let rows: Vec<&SampleResult> = results.iter().filter(|r| r.method == s.method).collect();
        let correct = rows.iter().filter(|r| r.correct).count();
        assert_eq!(s.correct, correct);
        if let Some(p) = s.vs_none {
            assert_eq!(
                (p.both_correct + p.only_method, p.both_correct + p.only_none),
                (correct, none_correct)
            );
            assert_eq!(p.both_correct + p.only_method + p.only_none + p.neither, 12);
        } else {
            assert_eq!(s.method, Method::None);
        }
        assert_eq!(
            s.well_formed_rate,
            rows.iter().filter(|r| r.well_formed).count() as f64 / 12.0
        );
    }
    // Truncated outputs (llama-grammar on every fifth hash) are never well-formed.
    for r in results
        .iter()
        .filter(|r| r.finish_reason == FinishReason::MaxTokens)
    {
        assert!(
            !r.well_formed && !r.correct && r.score_note.as_deref().unwrap().contains("truncated")
        );
    }
    // Without --resume an existing results file is refused.
    let err = run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(12), &dir).unwrap_err();
    assert!(format!("{err:#}").contains("--resume"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resume_after_a_kill_gives_the_same_report() {
    let full = fresh_dir("full");
    run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(12), &full).unwrap();

    // Killed after 23 of 60 generations (a panic unwinds out of the runner mid-run).
    let killed = fresh_dir("killed");
    let mut dying = FakeBackend::new();
    dying.panic_after = Some(23);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_task(Task::Gsm8k, &mut dying, &options(12), &killed)
    }));
    assert!(outcome.is_err(), "the fake backend panics");
    assert_eq!(done_pairs(&killed.join("results.jsonl")).unwrap().len(), 23);
    assert!(!killed.join("report.md").exists());

    let mut opts = options(12);
    opts.resume = true;
    opts.command_line.push_str(" --resume");
    let mut backend = FakeBackend::new();
    run_task(Task::Gsm8k, &mut backend, &opts, &killed).unwrap();
    assert_eq!(backend.calls, 60 - 23, "resume runs only the missing pairs");
    assert_same_outputs(&full, &killed);

    // A kill in the middle of writing a line: the partial line is dropped and redone.
    let torn = fresh_dir("torn");
    let text = read(&full, "results.jsonl");
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut partial: String = lines[..30].concat();
    partial.push_str(&lines[30][..lines[30].len() / 2]);
    std::fs::write(torn.join("results.jsonl"), partial).unwrap();
    std::fs::copy(full.join("run.json"), torn.join("run.json")).unwrap();
    let mut backend = FakeBackend::new();
    run_task(Task::Gsm8k, &mut backend, &opts, &torn).unwrap();
    assert_eq!(backend.calls, 30);
    assert_same_outputs(&full, &torn);

    // Reports rewritten from the files alone, without a model, are the same too.
    for name in ["report.md", "report.json", "accuracy.svg"] {
        std::fs::remove_file(torn.join(name)).unwrap();
    }
    let rewritten =
        domino::eval::runner::rewrite_report(Task::Gsm8k, &RunOptions::default(), &torn).unwrap();
    assert_eq!(rewritten.samples, 12);
    assert_same_outputs(&full, &torn);

    // Resuming with another configuration (seed → other demonstrations) is refused.
    let mut other = opts.clone();
    other.seed = 1;
    let err = run_task(Task::Gsm8k, &mut FakeBackend::new(), &other, &torn).unwrap_err();
    assert!(format!("{err:#}").contains("cannot resume"), "{err:#}");
    assert_eq!(domino::diag::exit_code_for(&err), 2);

    for d in [full, killed, torn] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn backend_errors_are_recorded_and_retried_on_resume() {
    let full = fresh_dir("errors-full");
    run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(6), &full).unwrap();

    let dir = fresh_dir("errors");
    let mut flaky = FakeBackend::new();
    flaky.fail = Some((Method::Template, 2));
    let report = run_task(Task::Gsm8k, &mut flaky, &options(6), &dir).unwrap();
    let template = report
        .methods
        .iter()
        .find(|m| m.method == Method::Template)
        .unwrap();
    assert_eq!((template.errors, template.finish_reasons["error"]), (2, 2));
    assert_eq!(
        done_pairs(&dir.join("results.jsonl")).unwrap().len(),
        6 * 5 - 2
    );

    let mut opts = options(6);
    opts.resume = true;
    let mut backend = FakeBackend::new();
    run_task(Task::Gsm8k, &mut backend, &opts, &dir).unwrap();
    assert_eq!(backend.calls, 2, "only the failed pairs are retried");
    for name in ["report.md", "report.json", "accuracy.svg"] {
        assert_eq!(
            read(&full, name),
            read(&dir, name),
            "{name}: the retried records replace the errors"
        );
    }

    // Three failures in a row of one method stop the run, pointing at --resume.
    let broken = fresh_dir("errors-broken");
    let mut dead = FakeBackend::new();
    dead.fail = Some((Method::Naive, usize::MAX));
    let err = run_task(Task::Gsm8k, &mut dead, &options(6), &broken).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("naive failed on 3 samples in a row") && msg.contains("--resume"),
        "{msg}"
    );
    for d in [full, dir, broken] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn corrupt_line_in_the_middle_is_an_error() {
    let dir = fresh_dir("corrupt");
    std::fs::write(dir.join("results.jsonl"), "{\"not\": \"a record\"}\n{}\n").unwrap();
    let msg = format!("{:#}", done_pairs(&dir.join("results.jsonl")).unwrap_err());
    assert!(msg.contains("results.jsonl:1"), "{msg}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn conll_run_reports_entity_f1() {
    let dir = fresh_dir("conll");
    let mut opts = options(8);
    opts.methods = vec![Method::None, Method::Naive];
    let report = run_task(Task::Conll, &mut FakeBackend::new(), &opts, &dir).unwrap();
    let none = &report.methods[0];
    assert_eq!(
        (none.accuracy, none.well_formed_rate, none.entity_f1),
        (1.0, 1.0, Some(1.0))
    );
    let naive = &report.methods[1];
    assert!(
        naive.entity_f1.unwrap() < 1.0,
        "naive mistags the first token"
    );
    let md = read(&dir, "report.md");
    assert!(md.contains("## Entity-level F1") && md.contains("| CoNLL2003 | fake-model | naive |"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn throughput_suite_reports_every_workload_and_method() {
    let dir = fresh_dir("throughput");
    let mut manifest = Manifest::load_default().unwrap();
    let methods = Method::default_throughput_methods();
    // The fake ignores grammars; the shipped grammar files belong to another part of the tree.
    let mut missing = Manifest {
        workloads: vec![manifest.workloads[0].clone()],
        ..manifest.clone()
    };
    missing.workloads[0].grammar = "grammars/does-not-exist.gbnf".into();
    let err = run_throughput(
        &missing,
        &mut FakeBackend::new(),
        &ThroughputOptions::default(),
        &dir,
    )
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("does-not-exist.gbnf"),
        "{err:#}"
    );
    for w in &mut manifest.workloads {
        w.grammar = "grammars/gsm8k.schema.json".into();
    }
    let opts = ThroughputOptions {
        reps: Some(3),
        warmup: Some(1),
        methods: methods.clone(),
        ..ThroughputOptions::default()
    };
    let mut backend = FakeBackend::new();
    let report = run_throughput(&manifest, &mut backend, &opts, &dir).unwrap();
    assert_eq!(backend.calls, 5 * (3 + 1) * methods.len());
    assert_eq!(report.summaries.len(), 5 * methods.len());
    let md = read(&dir, "throughput.md");
    let svg = read(&dir, "throughput.svg");
    for w in &manifest.workloads {
        assert!(
            md.contains(&format!("| {} | fake-model |", w.title)),
            "throughput.md lacks {}",
            w.name
        );
        assert!(svg.contains(&format!(">{}</text>", w.name)));
    }
    for m in &methods {
        assert!(
            svg.contains(&format!(">{m}</text>")),
            "throughput.svg legend lacks {m}"
        );
    }
    for s in report.summaries.iter().filter(|s| s.method == Method::None) {
        assert_eq!(s.ratio_to_none.unwrap().median, 1.0);
        assert_eq!((s.passes_per_token, s.draft_acceptance), (Some(1.0), None));
    }
    assert!(md.contains("The paper's Table 3"));
    // Speculation is explained by its counts: passes per token and draft acceptance, summed
    // over the records.
    let records =
        read_results::<domino::eval::throughput::ThroughputRecord>(&dir.join("throughput.jsonl"))
            .unwrap()
            .records;
    for s in report
        .summaries
        .iter()
        .filter(|s| s.method.is_speculative())
    {
        let rows: Vec<_> = records
            .iter()
            .filter(|r| r.workload == s.workload && r.method == s.method)
            .collect();
        let sum = |f: fn(&domino::eval::throughput::ThroughputRecord) -> usize| {
            rows.iter().map(|r| f(r)).sum::<usize>() as f64
        };
        assert_eq!(
            s.passes_per_token,
            Some(sum(|r| r.forward_passes) / sum(|r| r.generated_tokens))
        );
        assert_eq!(
            s.draft_acceptance,
            Some(sum(|r| r.draft_accepted) / sum(|r| r.draft_proposed))
        );
        assert!(
            s.passes_per_token.unwrap() < 0.6
                && (s.draft_acceptance.unwrap() - 2.0 / 3.0).abs() < 0.05
        );
    }
    assert!(md.contains("| Forward passes per token | Drafts accepted |"));
    // Records written before passes were recorded (no such fields) parse, and report "—".
    let mut old: serde_json::Value = serde_json::to_value(&records[0]).unwrap();
    for key in ["forward_passes", "draft_proposed", "draft_accepted"] {
        old.as_object_mut().unwrap().remove(key);
    }
    let old: domino::eval::throughput::ThroughputRecord = serde_json::from_value(old).unwrap();
    let summary = domino::eval::throughput::summarize_throughput(
        std::slice::from_ref(&old),
        std::slice::from_ref(&old.workload),
        &[old.method],
    );
    assert_eq!(summary[0].passes_per_token, None);

    // Resume of a finished suite runs nothing and rewrites the same report.
    let before = read(&dir, "throughput.json");
    let mut again = FakeBackend::new();
    run_throughput(
        &manifest,
        &mut again,
        &ThroughputOptions {
            resume: true,
            ..opts.clone()
        },
        &dir,
    )
    .unwrap();
    assert_eq!(again.calls, 0);
    assert_eq!(read(&dir, "throughput.json"), before);
    // … but not with another protocol.
    let other = ThroughputOptions {
        resume: true,
        max_tokens: Some(64),
        ..opts.clone()
    };
    let err = run_throughput(&manifest, &mut FakeBackend::new(), &other, &dir).unwrap_err();
    assert!(format!("{err:#}").contains("cannot resume"), "{err:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The union of the records of every results file in `dir`, in (sample, method) order.
fn all_records(dir: &Path) -> Vec<serde_json::Value> {
    let mut all: Vec<serde_json::Value> = Vec::new();
    for path in domino::eval::runner::results_files(dir).unwrap() {
        all.extend(read_results::<serde_json::Value>(&path).unwrap().records);
    }
    all.sort_by_key(|r| (r["sample_id"].as_u64().unwrap(), r["method"].to_string()));
    all
}

#[test]
fn shards_split_a_run_and_report_like_one_process() {
    let full = fresh_dir("shard-full");
    run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(12), &full).unwrap();

    // An unsharded run killed after 17 generations (3 samples and 2 methods of the fourth) …
    let dir = fresh_dir("sharded");
    let mut dying = FakeBackend::new();
    dying.panic_after = Some(17);
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_task(Task::Gsm8k, &mut dying, &options(12), &dir)
    }));
    assert!(killed.is_err());
    let shard = |s: &str| {
        let mut o = options(12);
        o.shard = Some(s.parse().unwrap());
        o.resume = true;
        o
    };
    // … finished by two shards. Shard 1 runs first and alone: it does the odd samples only,
    // including the unfinished fourth one (index 3), and reports the samples every method has
    // finished so far: the first four (sample 4 is shard 0's).
    let mut odd = FakeBackend::new();
    let partial = run_task(Task::Gsm8k, &mut odd, &shard("1/2"), &dir).unwrap();
    assert_eq!(
        odd.calls,
        3 + 5 * 4,
        "the rest of sample 3, then samples 5, 7, 9, 11"
    );
    assert_eq!(partial.samples, 4);
    assert!(dir.join("results.shard-1-of-2.jsonl").is_file());
    let mut even = FakeBackend::new();
    let report = run_task(Task::Gsm8k, &mut even, &shard("0/2"), &dir).unwrap();
    assert_eq!(even.calls, 5 * 4, "samples 4, 6, 8, 10");
    assert_eq!(report.samples, 12, "the last shard reports every sample");
    for name in ["report.md", "report.json", "accuracy.svg"] {
        assert_eq!(
            read(&full, name),
            read(&dir, name),
            "{name} differs from an unsharded run"
        );
    }
    assert_eq!(
        all_records(&full),
        all_records(&dir),
        "the same records, spread over three files"
    );
    // Nothing left to do for anyone; a plain resume agrees.
    let mut idle = FakeBackend::new();
    let mut resume = options(12);
    resume.resume = true;
    run_task(Task::Gsm8k, &mut idle, &resume, &dir).unwrap();
    assert_eq!(idle.calls, 0);
    // Without --resume, a directory holding shard results is refused for an unsharded run,
    // and a shard with another configuration is refused by run.json.
    let err = run_task(Task::Gsm8k, &mut FakeBackend::new(), &options(12), &dir).unwrap_err();
    assert!(format!("{err:#}").contains("--resume"), "{err:#}");
    let mut other = shard("1/3");
    other.resume = false;
    other.seed = 5;
    let err = run_task(Task::Gsm8k, &mut FakeBackend::new(), &other, &dir).unwrap_err();
    assert!(format!("{err:#}").contains("cannot resume"), "{err:#}");
    // --report-only reads the shards too.
    for name in ["report.md", "report.json", "accuracy.svg"] {
        std::fs::remove_file(dir.join(name)).unwrap();
    }
    domino::eval::runner::rewrite_report(Task::Gsm8k, &RunOptions::default(), &dir).unwrap();
    assert_eq!(read(&full, "report.md"), read(&dir, "report.md"));
    for d in [full, dir] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn shard_flags_are_checked() {
    use domino::eval::Shard;
    assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
    for bad in ["4/4", "1/0", "1", "a/2", "-1/2", ""] {
        let err = bad.parse::<Shard>().unwrap_err();
        assert!(err.contains("I/N"), "{bad}: {err}");
    }
    let s = Shard { index: 2, count: 3 };
    assert_eq!(
        (0..9).filter(|&i| s.contains(i)).collect::<Vec<_>>(),
        vec![2, 5, 8]
    );
}

#[test]
fn resume_with_other_data_stops_naming_it() {
    // A copy of the test split with one sample left out: the same file name elsewhere,
    // other contents. Resuming the run with it must not mix the two datasets.
    let dir = fresh_dir("provenance");
    let data_dir = fresh_dir("provenance-data");
    let test = domino::eval::data::default_path(Task::Gsm8k, domino::eval::data::Split::Test);
    let text = std::fs::read_to_string(&test).unwrap();
    let same = data_dir.join("same.jsonl");
    std::fs::write(&same, &text).unwrap();
    let other = data_dir.join("other.jsonl");
    std::fs::write(
        &other,
        text.split_inclusive('\n').skip(1).collect::<String>(),
    )
    .unwrap();

    let mut opts = options(4);
    opts.data = Some(same.clone());
    run_task(Task::Gsm8k, &mut FakeBackend::new(), &opts, &dir).unwrap();
    let config: serde_json::Value =
        serde_json::from_str(&read(&dir, "run.json")).expect("run.json is JSON");
    let provenance = &config["provenance"];
    assert_eq!(
        provenance["test_data_sha256"].as_str().unwrap(),
        domino::eval::digest::sha256_file(&test).unwrap()
    );
    assert!(provenance["domino_commit"].as_str().unwrap().len() >= 7);
    assert!(
        provenance["llama_cpp"]
            .as_str()
            .unwrap()
            .starts_with("llama-cpp-2 ")
    );

    opts.resume = true;
    // The same contents (another path would do too): resumes, nothing left to run.
    let mut backend = FakeBackend::new();
    run_task(Task::Gsm8k, &mut backend, &opts, &dir).unwrap();
    assert_eq!(backend.calls, 0);

    opts.data = Some(other);
    let err = run_task(Task::Gsm8k, &mut FakeBackend::new(), &opts, &dir).unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("test data file (--data) differs"), "{msg}");
    assert_eq!(domino::diag::exit_code_for(&err), 2);
    for d in [dir, data_dir] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

/// Writes a decoy document, the end-of-reasoning marker, then the answer; records what the
/// runner asked for.
struct ReasoningBackend {
    seen: Vec<(Option<String>, bool)>,
}

impl EvalBackend for ReasoningBackend {
    fn model_name(&self) -> String {
        "fake-reasoning-model".into()
    }

    fn run(&mut self, req: &GenerationRequest<'_>) -> anyhow::Result<GenerationOutcome> {
        self.seen
            .push((req.reasoning_end.map(String::from), req.token_healing));
        Ok(GenerationOutcome {
            text: r#" {"thoughts": [{"step": "guess", "calculation": "1", "result": 1}], "answer": 1} then </end> {"thoughts": [{"step": "count", "calculation": "2", "result": 2}], "answer": 2}"#.into(),
            ..GenerationOutcome::default()
        })
    }
}

#[test]
fn reasoning_reads_the_answer_after_the_marker_and_resume_checks_the_setting() {
    let dir = fresh_dir("reasoning");
    let mut opts = options(2);
    opts.methods = vec![Method::None, "domino".parse().unwrap()];
    opts.reasoning_end = Some("</end>".into());
    opts.token_healing = true;
    let mut backend = ReasoningBackend { seen: Vec::new() };
    run_task(Task::Gsm8k, &mut backend, &opts, &dir).unwrap();
    assert_eq!(backend.seen.len(), 4);
    assert!(
        backend
            .seen
            .iter()
            .all(|s| *s == (Some("</end>".to_string()), true)),
        "{:?}",
        backend.seen
    );
    let records = read_results::<SampleResult>(&dir.join("results.jsonl"))
        .unwrap()
        .records;
    for r in &records {
        // The document after the marker is the answer, not the one before it.
        assert_eq!(r.parsed_answer, serde_json::json!(2), "{r:?}");
        assert!(r.well_formed);
    }
    let config: serde_json::Value = serde_json::from_str(&read(&dir, "run.json")).unwrap();
    assert_eq!(config["provenance"]["reasoning_end"], "</end>");
    assert_eq!(config["provenance"]["token_healing"], true);

    // Without --reasoning the first document is read.
    let plain = fresh_dir("reasoning-off");
    let mut off = opts.clone();
    off.reasoning_end = None;
    run_task(
        Task::Gsm8k,
        &mut ReasoningBackend { seen: Vec::new() },
        &off,
        &plain,
    )
    .unwrap();
    let records = read_results::<SampleResult>(&plain.join("results.jsonl"))
        .unwrap()
        .records;
    assert!(
        records
            .iter()
            .all(|r| r.parsed_answer == serde_json::json!(1))
    );

    // Resuming with another reasoning setting (or healing setting) stops, exit 2.
    let changes: [fn(&mut RunOptions); 3] = [
        |o| o.reasoning_end = None,
        |o| o.reasoning_end = Some("\n".into()),
        |o| o.token_healing = false,
    ];
    for change in changes {
        let mut other = opts.clone();
        other.resume = true;
        change(&mut other);
        let mut backend = ReasoningBackend { seen: Vec::new() };
        let err = run_task(Task::Gsm8k, &mut backend, &other, &dir).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("cannot resume"), "{msg}");
        assert_eq!(domino::diag::exit_code_for(&err), 2, "{msg}");
        assert!(backend.seen.is_empty());
    }
    // The same setting resumes (nothing left to do).
    let mut same = opts.clone();
    same.resume = true;
    run_task(
        Task::Gsm8k,
        &mut ReasoningBackend { seen: Vec::new() },
        &same,
        &dir,
    )
    .unwrap();

    // llama.cpp's grammar sampler cannot leave the reasoning free: refused before any run.
    let mut bad = opts.clone();
    bad.methods.push(Method::LlamaGrammar);
    let mut backend = ReasoningBackend { seen: Vec::new() };
    let err = run_task(Task::Gsm8k, &mut backend, &bad, &fresh_dir("reasoning-bad")).unwrap_err();
    assert_eq!(domino::diag::exit_code_for(&err), 2, "{err:#}");
    assert!(format!("{err:#}").contains("llama-grammar"), "{err:#}");
    assert!(backend.seen.is_empty());
    for d in [dir, plain] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
