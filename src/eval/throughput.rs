//! The throughput suite (paper §4.3, Table 3): tokens/s of each constrained method relative to
//! unconstrained generation, on the App. C workloads.
//!
//! The manifest `eval/throughput.json` names, per workload, the grammar and the prompts
//! (a prompt list file in `prompts/throughput/`, or `{"fewshot": "gsm8k", "questions": N}`: the
//! 5-shot GSM8K prompts of the first N test questions, as the paper does for its GSM8K schema
//! workload). Protocol, as in the paper: per workload, `warmup` repetitions (not recorded; the
//! backend learns its draft priors, then [`EvalBackend::end_warmup`] freezes them), then `reps`
//! measured repetitions. Each repetition draws one prompt with a seeded RNG and runs every
//! method on it with the same sampling seed (temperature 1.0, up to 128 tokens), so the ratio
//! of a repetition compares like with like. Reported per workload and method: median tokens/s,
//! and the ratio to `none`'s tokens/s of the same repetition, min / median / max over reps,
//! plus the ratio of totals (Σ tokens / Σ seconds).
//!
//! Records go to `throughput.jsonl` with the same append-and-flush discipline as accuracy
//! runs; on resume a workload whose records are complete is skipped, and an incomplete one
//! re-runs its warm-up (priors are not saved) and then only the missing repetitions.

use super::Task;
use super::data::{Dataset, Split, default_path};
use super::method::Method;
use super::metrics::FinishReason;
use super::prompt::{FewShotPrompt, JsonStyle, SplitMix64, Template, fnv1a64, load_prompt_list};
use super::report::PaperReference;
use super::results::{ResultsLog, read_results};
use super::runner::{EvalBackend, GenerationRequest};
use super::svg::BarChart;
use crate::diag::UsageError;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// Where a workload's prompts come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptSource {
    /// A prompt list file (one JSON string per line).
    File(String),
    /// Few-shot prompts of the first `questions` test questions of a task.
    FewShot { fewshot: Task, questions: usize },
}

/// One workload of the manifest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Short name (`json`, `gsm8k-schema`, `c`, `xml`, `rpg-template`), as in the paper reference.
    pub name: String,
    /// The paper's row title.
    pub title: String,
    /// Grammar or schema file, relative to the repository root.
    pub grammar: String,
    pub prompts: PromptSource,
}

/// `eval/throughput.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub description: String,
    pub max_tokens: usize,
    pub temperature: f32,
    pub reps: usize,
    pub warmup: usize,
    pub workloads: Vec<Workload>,
}

impl Manifest {
    pub fn load(path: &Path) -> anyhow::Result<Manifest> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read throughput manifest {}", path.display()))?;
        let manifest: Manifest = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: invalid throughput manifest: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        let mut seen = HashSet::new();
        for w in &manifest.workloads {
            if !seen.insert(w.name.as_str()) {
                bail!("{}: workload `{}` is listed twice", path.display(), w.name);
            }
        }
        Ok(manifest)
    }

    /// The manifest shipped in `eval/throughput.json`.
    pub fn load_default() -> anyhow::Result<Manifest> {
        Manifest::load(&super::resolve("eval/throughput.json"))
    }
}

/// Resolve a workload's prompts.
pub fn workload_prompts(workload: &Workload, seed: u64) -> anyhow::Result<Vec<String>> {
    match &workload.prompts {
        PromptSource::File(path) => load_prompt_list(&super::resolve(path)),
        PromptSource::FewShot { fewshot, questions } => {
            let train = Dataset::load(*fewshot, &default_path(*fewshot, Split::Train))?;
            let test = Dataset::load(*fewshot, &default_path(*fewshot, Split::Test))?;
            let prompt = FewShotPrompt::build(
                Template::for_task(*fewshot)?,
                &train,
                5,
                seed,
                JsonStyle::Pretty,
            )?;
            if *questions == 0 {
                bail!(
                    "workload `{}`: `questions` must be at least 1",
                    workload.name
                );
            }
            Ok(match &test {
                Dataset::Gsm8k(v) => v
                    .iter()
                    .take(*questions)
                    .map(|s| prompt.gsm8k_prompt(s))
                    .collect(),
                Dataset::Conll(v) => v
                    .iter()
                    .take(*questions)
                    .map(|s| prompt.conll_prompt(s))
                    .collect(),
            })
        }
    }
}

/// Options of a throughput run.
#[derive(Clone, Debug)]
pub struct ThroughputOptions {
    pub methods: Vec<Method>,
    /// Overrides of the manifest's values.
    pub reps: Option<usize>,
    pub warmup: Option<usize>,
    pub max_tokens: Option<usize>,
    pub temperature: Option<f32>,
    /// Run only these workloads (empty = all).
    pub workloads: Vec<String>,
    pub seed: u64,
    pub resume: bool,
    pub command_line: String,
    pub progress: bool,
}

impl Default for ThroughputOptions {
    fn default() -> Self {
        ThroughputOptions {
            methods: Method::default_throughput_methods(),
            reps: None,
            warmup: None,
            max_tokens: None,
            temperature: None,
            workloads: Vec::new(),
            seed: 0,
            resume: false,
            command_line: String::new(),
            progress: false,
        }
    }
}

/// One measured repetition of one method (a line of `throughput.jsonl`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRecord {
    pub workload: String,
    pub method: Method,
    pub rep: usize,
    pub prompt_index: usize,
    pub generated_tokens: usize,
    pub decode_ms: f64,
    pub interventions: u32,
    pub finish_reason: FinishReason,
    pub output_text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Forward passes, the prompt's included (0 in records written before it was recorded).
    #[serde(default)]
    pub forward_passes: usize,
    /// Speculative draft tokens verified, and accepted.
    #[serde(default)]
    pub draft_proposed: usize,
    #[serde(default)]
    pub draft_accepted: usize,
}

impl ThroughputRecord {
    pub fn tokens_per_second(&self) -> Option<f64> {
        (self.decode_ms > 0.0 && self.generated_tokens > 0)
            .then(|| self.generated_tokens as f64 / (self.decode_ms / 1000.0))
    }
}

/// Min / median / max of a list.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }
}

/// Throughput of one method on one workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputSummary {
    pub workload: String,
    pub method: Method,
    pub reps: usize,
    pub tokens_per_second: Option<Spread>,
    /// Per-repetition ratio to `none` of the same repetition.
    pub ratio_to_none: Option<Spread>,
    /// (Σ tokens / Σ seconds) divided by the same for `none`.
    pub total_ratio_to_none: Option<f64>,
    pub intervention_rate: Option<f64>,
    /// Σ forward passes / Σ generated tokens (1 without speculation or forced text; below 1
    /// when a pass yields several tokens). None when the records do not say.
    #[serde(default)]
    pub passes_per_token: Option<f64>,
    /// Σ drafts accepted / Σ drafts verified; None without drafts.
    #[serde(default)]
    pub draft_acceptance: Option<f64>,
    pub errors: usize,
}

/// `throughput.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputReport {
    pub model: String,
    pub command: String,
    pub reps: usize,
    pub warmup: usize,
    pub max_tokens: usize,
    pub temperature: f32,
    pub seed: u64,
    pub workloads: Vec<(String, String)>,
    pub summaries: Vec<ThroughputSummary>,
}

/// What must not change between a throughput run and its resumption (`throughput_run.json`).
/// More repetitions, workloads or methods may be added on resume; the measurement protocol may not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThroughputConfig {
    pub model: String,
    pub seed: u64,
    pub warmup: usize,
    pub max_tokens: usize,
    pub temperature: f32,
    /// SHA-256 of the model file (None: a backend without one, as in tests). Runs recorded
    /// before it existed read as empty and cannot be resumed by a build that records it.
    #[serde(default)]
    pub model_sha256: Option<String>,
    /// The domino commit and llama.cpp version of the build that measured (as `run.json`).
    #[serde(default)]
    pub domino_commit: String,
    #[serde(default)]
    pub llama_cpp: String,
}

impl ThroughputConfig {
    /// The first field that differs from `now`, as `(name, recorded, now)`.
    fn difference(&self, now: &ThroughputConfig) -> Option<(&'static str, String, String)> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
        [
            ("model", self.model.clone(), now.model.clone()),
            (
                "model file (SHA-256)",
                opt(&self.model_sha256),
                opt(&now.model_sha256),
            ),
            ("seed", self.seed.to_string(), now.seed.to_string()),
            ("warm-up", self.warmup.to_string(), now.warmup.to_string()),
            (
                "max tokens",
                self.max_tokens.to_string(),
                now.max_tokens.to_string(),
            ),
            (
                "temperature",
                self.temperature.to_string(),
                now.temperature.to_string(),
            ),
            (
                "domino commit",
                self.domino_commit.clone(),
                now.domino_commit.clone(),
            ),
            (
                "llama.cpp version",
                self.llama_cpp.clone(),
                now.llama_cpp.clone(),
            ),
        ]
        .into_iter()
        .find(|(_, a, b)| a != b)
    }
}

fn check_or_write_config(
    path: &Path,
    config: &ThroughputConfig,
    resume: bool,
) -> anyhow::Result<()> {
    if resume && path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let previous: ThroughputConfig = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a throughput run configuration", path.display()))?;
        if let Some((what, old, new)) = previous.difference(config) {
            bail!(UsageError(format!(
                "cannot resume: the {what} differs from the run in {}: it recorded {old}, now {new}",
                path.parent().unwrap_or(path).display()
            )));
        }
        return Ok(());
    }
    std::fs::write(path, serde_json::to_string_pretty(config)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Aggregate records into summaries, workloads × methods in the given orders.
pub fn summarize_throughput(
    records: &[ThroughputRecord],
    workloads: &[String],
    methods: &[Method],
) -> Vec<ThroughputSummary> {
    let mut out = Vec::new();
    for w in workloads {
        let none: BTreeMap<usize, f64> = records
            .iter()
            .filter(|r| &r.workload == w && r.method == Method::None)
            .filter_map(|r| r.tokens_per_second().map(|t| (r.rep, t)))
            .collect();
        let none_total = total_rate(
            records
                .iter()
                .filter(|r| &r.workload == w && r.method == Method::None),
        );
        for &m in methods {
            let rows: Vec<&ThroughputRecord> = records
                .iter()
                .filter(|r| &r.workload == w && r.method == m)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let tps: Vec<f64> = rows.iter().filter_map(|r| r.tokens_per_second()).collect();
            let ratios: Vec<f64> = rows
                .iter()
                .filter_map(|r| {
                    Some(r.tokens_per_second()? / none.get(&r.rep).copied().filter(|x| *x > 0.0)?)
                })
                .collect();
            let total = total_rate(rows.iter().copied());
            let tokens: usize = rows.iter().map(|r| r.generated_tokens).sum();
            let interventions: u64 = rows.iter().map(|r| r.interventions as u64).sum();
            // Records written before passes were recorded say 0: no column rather than a wrong one.
            let measured: Vec<&&ThroughputRecord> =
                rows.iter().filter(|r| r.error.is_none()).collect();
            let passes_known =
                !measured.is_empty() && measured.iter().all(|r| r.forward_passes > 0);
            let measured_tokens: usize = measured.iter().map(|r| r.generated_tokens).sum();
            let passes: usize = measured.iter().map(|r| r.forward_passes).sum();
            let proposed: usize = measured.iter().map(|r| r.draft_proposed).sum();
            let accepted: usize = measured.iter().map(|r| r.draft_accepted).sum();
            out.push(ThroughputSummary {
                workload: w.clone(),
                method: m,
                reps: rows.len(),
                tokens_per_second: Spread::of(&tps),
                ratio_to_none: Spread::of(&ratios),
                total_ratio_to_none: match (total, none_total) {
                    (Some(t), Some(n)) if n > 0.0 => Some(t / n),
                    _ => None,
                },
                intervention_rate: (tokens > 0).then(|| interventions as f64 / tokens as f64),
                passes_per_token: (passes_known && measured_tokens > 0)
                    .then(|| passes as f64 / measured_tokens as f64),
                draft_acceptance: (proposed > 0).then(|| accepted as f64 / proposed as f64),
                errors: rows.iter().filter(|r| r.error.is_some()).count(),
            });
        }
    }
    out
}

fn total_rate<'a>(rows: impl Iterator<Item = &'a ThroughputRecord>) -> Option<f64> {
    let (t, ms) = rows.fold((0usize, 0f64), |(t, ms), r| {
        (t + r.generated_tokens, ms + r.decode_ms)
    });
    (ms > 0.0 && t > 0).then(|| t as f64 / (ms / 1000.0))
}

/// Run the suite; writes `throughput.jsonl`, `throughput.md`, `throughput.json` and
/// `throughput.svg` into `out_dir`.
pub fn run_throughput(
    manifest: &Manifest,
    backend: &mut dyn EvalBackend,
    opts: &ThroughputOptions,
    out_dir: &Path,
) -> anyhow::Result<ThroughputReport> {
    if opts.methods.is_empty() {
        bail!(UsageError("no methods to measure".into()));
    }
    let reps = opts.reps.unwrap_or(manifest.reps);
    let warmup = opts.warmup.unwrap_or(manifest.warmup);
    let max_tokens = opts.max_tokens.unwrap_or(manifest.max_tokens);
    let temperature = opts.temperature.unwrap_or(manifest.temperature);
    let workloads: Vec<&Workload> = manifest
        .workloads
        .iter()
        .filter(|w| opts.workloads.is_empty() || opts.workloads.contains(&w.name))
        .collect();
    for name in &opts.workloads {
        if !manifest.workloads.iter().any(|w| &w.name == name) {
            let known: Vec<&str> = manifest.workloads.iter().map(|w| w.name.as_str()).collect();
            bail!(UsageError(format!(
                "unknown workload `{name}` (the manifest has {})",
                known.join(", ")
            )));
        }
    }
    // Fail before any generation, not at the first constrained method of the third workload.
    if opts.methods.iter().any(|m| m.is_constrained()) {
        for w in &workloads {
            let grammar = super::resolve(&w.grammar);
            if !grammar.is_file() {
                bail!(
                    "grammar file {} of workload `{}` not found",
                    grammar.display(),
                    w.name
                );
            }
        }
    }
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create output directory {}", out_dir.display()))?;
    let model_sha256 = backend
        .model_path()
        .map(|p| {
            super::digest::sha256_file(&p)
                .with_context(|| format!("cannot read the model {} to digest it", p.display()))
        })
        .transpose()?;
    let config = ThroughputConfig {
        model: backend.model_name(),
        seed: opts.seed,
        warmup,
        max_tokens,
        temperature,
        model_sha256,
        domino_commit: env!("DOMINO_COMMIT").to_string(),
        llama_cpp: crate::runtime::LLAMA_CPP_VERSION.to_string(),
    };
    check_or_write_config(&out_dir.join("throughput_run.json"), &config, opts.resume)?;
    let path = out_dir.join("throughput.jsonl");
    let (mut log, existing) = ResultsLog::open::<ThroughputRecord>(&path, opts.resume)?;
    let done: HashSet<(String, Method, usize)> = existing
        .iter()
        .map(|r| (r.workload.clone(), r.method, r.rep))
        .collect();

    let total = (workloads.len() * reps * opts.methods.len()) as u64;
    // No methods: a throughput run has no accuracy to show, only counts and ETA.
    let mut progress = super::progress::Progress::new(total, &[], opts.progress);
    for w in &workloads {
        let missing: Vec<(usize, Method)> = (0..reps)
            .flat_map(|rep| opts.methods.iter().map(move |&m| (rep, m)))
            .filter(|(rep, m)| !done.contains(&(w.name.clone(), *m, *rep)))
            .collect();
        for _ in 0..(reps * opts.methods.len() - missing.len()) {
            progress.record_resumed(Method::None, false);
        }
        if missing.is_empty() {
            continue;
        }
        let prompts = workload_prompts(w, opts.seed)?;
        let grammar = super::resolve(&w.grammar);
        let workload_seed = opts.seed ^ fnv1a64(w.name.as_bytes());
        let mut rng = SplitMix64::new(workload_seed);
        let stop: Vec<String> = Vec::new();
        backend.begin_workload(&w.name);
        // Warm-up repetitions use their own prompt draws, before the measured ones.
        for i in 0..warmup {
            let prompt = &prompts[rng.below(prompts.len() as u64) as usize];
            for &method in &opts.methods {
                let request = GenerationRequest {
                    task: &w.name,
                    prompt,
                    shared_prefix_len: 0,
                    method,
                    grammar: &grammar,
                    max_tokens,
                    stop: &stop,
                    temperature,
                    seed: workload_seed.wrapping_add(1_000_000 + i as u64),
                    // Throughput measures the methods on the whole output, as the paper does.
                    reasoning_end: None,
                    token_healing: false,
                };
                // A method that cannot run this workload at all (llama.cpp's GBNF cannot express
                // a Lark `%ignore`) is not a reason to lose the other methods: its measured
                // repetitions fail the same way and are reported as errors.
                if let Err(e) = backend.run(&request) {
                    eprintln!(
                        "warning: warm-up of workload {} with {method} failed: {e:#}",
                        w.name
                    );
                }
            }
        }
        backend.end_warmup();
        for rep in 0..reps {
            let prompt_index = rng.below(prompts.len() as u64) as usize;
            for &method in &opts.methods {
                if done.contains(&(w.name.clone(), method, rep)) {
                    continue;
                }
                let request = GenerationRequest {
                    task: &w.name,
                    prompt: &prompts[prompt_index],
                    shared_prefix_len: 0,
                    method,
                    grammar: &grammar,
                    max_tokens,
                    stop: &stop,
                    temperature,
                    seed: workload_seed.wrapping_add(rep as u64),
                    // Throughput measures the methods on the whole output, as the paper does.
                    reasoning_end: None,
                    token_healing: false,
                };
                let record = match backend.run(&request) {
                    Ok(o) => ThroughputRecord {
                        workload: w.name.clone(),
                        method,
                        rep,
                        prompt_index,
                        generated_tokens: o.tokens.len(),
                        decode_ms: o.decode_ms,
                        interventions: o.interventions,
                        finish_reason: o.finish_reason.unwrap_or(FinishReason::Eos),
                        output_text: o.text,
                        error: None,
                        forward_passes: o.forward_passes,
                        draft_proposed: o.draft_proposed,
                        draft_accepted: o.draft_accepted,
                    },
                    Err(e) => ThroughputRecord {
                        workload: w.name.clone(),
                        method,
                        rep,
                        prompt_index,
                        generated_tokens: 0,
                        decode_ms: 0.0,
                        interventions: 0,
                        finish_reason: FinishReason::Error,
                        output_text: String::new(),
                        error: Some(format!("{e:#}")),
                        forward_passes: 0,
                        draft_proposed: 0,
                        draft_accepted: 0,
                    },
                };
                log.append(&record)?;
                progress.record(method, false);
            }
        }
    }
    progress.finish();

    let records = read_results::<ThroughputRecord>(&path)?.records;
    let names: Vec<String> = workloads.iter().map(|w| w.name.clone()).collect();
    let records: Vec<ThroughputRecord> = records
        .into_iter()
        .filter(|r| r.rep < reps && names.contains(&r.workload) && opts.methods.contains(&r.method))
        .collect();
    let report = ThroughputReport {
        model: backend.model_name(),
        command: opts.command_line.clone(),
        reps,
        warmup,
        max_tokens,
        temperature,
        seed: opts.seed,
        workloads: workloads
            .iter()
            .map(|w| (w.name.clone(), w.title.clone()))
            .collect(),
        summaries: summarize_throughput(&records, &names, &opts.methods),
    };
    write_throughput_report(&report, &opts.methods, out_dir)?;
    Ok(report)
}

fn ratio_cell(s: &ThroughputSummary) -> String {
    match s.ratio_to_none {
        Some(r) => format!("{:.2}× ({:.2}–{:.2})", r.median, r.min, r.max),
        None => "—".into(),
    }
}

/// Render `throughput.md`: our ratios per workload and method, then the paper's Table 3 rows.
pub fn render_throughput_markdown(report: &ThroughputReport, methods: &[Method]) -> String {
    let paper = PaperReference::load_default().unwrap_or_default();
    let mut s = String::new();
    let _ = writeln!(s, "# domino eval throughput\n");
    let _ = writeln!(s, "- Model: `{}`", report.model);
    let _ = writeln!(
        s,
        "- {} measured repetitions per workload after {} warm-up repetitions; up to {} tokens at temperature {}; seed {}",
        report.reps, report.warmup, report.max_tokens, report.temperature, report.seed
    );
    if !report.command.is_empty() {
        let _ = writeln!(s, "- Command: `{}`", report.command);
    }
    let _ = writeln!(
        s,
        "\nCells: median ratio of tokens/s to `none` on the same repetition (min–max over repetitions). \
         Decoding time only (prompt evaluation excluded).\n"
    );
    let _ = write!(s, "| Grammar | Model |");
    for m in methods {
        let _ = write!(s, " {m} |");
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "|---|---|{}", "---:|".repeat(methods.len()));
    for (name, title) in &report.workloads {
        let _ = write!(s, "| {title} | {} |", report.model);
        for &m in methods {
            let cell = report
                .summaries
                .iter()
                .find(|x| &x.workload == name && x.method == m)
                .map_or("—".into(), ratio_cell);
            let _ = write!(s, " {cell} |");
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "\n## Tokens per second (median over repetitions)\n");
    let _ = writeln!(
        s,
        "| Grammar | Method | Reps | Tokens/s (median) | Ratio of totals | Intervention rate | Forward passes per token | Drafts accepted | Errors |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for x in &report.summaries {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            x.workload,
            x.method,
            x.reps,
            x.tokens_per_second
                .map_or("—".into(), |t| format!("{:.1}", t.median)),
            x.total_ratio_to_none
                .map_or("—".into(), |r| format!("{r:.2}×")),
            x.intervention_rate
                .map_or("—".into(), |r| format!("{r:.4}")),
            x.passes_per_token.map_or("—".into(), |r| format!("{r:.2}")),
            x.draft_acceptance
                .map_or("—".into(), |r| format!("{:.0} %", r * 100.0)),
            x.errors
        );
    }
    let _ = writeln!(
        s,
        "\nForward passes per token: the prompt's pass included, so 1.00 for plain decoding; a speculative \
         method's speed-up is bounded by how far below 1 it gets, and paid for by each verified draft \
         position (measured on the 2-core CPU: 0.3–0.7 of a pass for Gemma 3 270M and SmolLM2 135M). \
         Drafts accepted: accepted / verified draft tokens."
    );
    if !paper.table3.is_empty() {
        let _ = writeln!(
            s,
            "\n## The paper's Table 3 (Mistral 7B and Llama-2 13B, A100/H100)\n"
        );
        let _ = write!(s, "| Grammar | Model |");
        for c in &paper.table3_columns {
            let ours = match c.ours.as_deref() {
                Some("accel_ours") => " (↔ domino / domino-s10)".to_string(),
                Some(o) => format!(" (↔ {o})"),
                None => String::new(),
            };
            let _ = write!(s, " {}{ours} |", c.name);
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "|---|---|{}", "---:|".repeat(paper.table3_columns.len()));
        for r in &paper.table3 {
            let _ = write!(s, "| {} | {} |", r.workload, r.model);
            for c in &paper.table3_columns {
                let v = r
                    .values
                    .get(&c.name)
                    .copied()
                    .flatten()
                    .map_or("—".into(), |v| format!("{v:.2}×"));
                let note = if c.ours.as_deref() == Some("accel_ours") {
                    format!(" ({})", r.accel)
                } else {
                    String::new()
                };
                let _ = write!(s, " {v}{note} |");
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "\n![throughput ratio per workload and method](throughput.svg)"
    );
    s
}

/// The throughput ratio chart: one group per workload, one bar per method.
pub fn throughput_chart(report: &ThroughputReport, methods: &[Method]) -> BarChart {
    BarChart {
        title: format!(
            "Throughput relative to unconstrained — {}",
            super::svg::model_label(&report.model)
        ),
        y_label: "tokens/s ÷ none (median)".into(),
        categories: report.workloads.iter().map(|(n, _)| n.clone()).collect(),
        series: methods
            .iter()
            .map(|&m| {
                let values = report
                    .workloads
                    .iter()
                    .map(|(n, _)| {
                        report
                            .summaries
                            .iter()
                            .find(|x| &x.workload == n && x.method == m)
                            .and_then(|x| x.ratio_to_none.map(|r| r.median))
                    })
                    .collect();
                (m.to_string(), values)
            })
            .collect(),
        y_max: None,
        reference_line: Some(1.0),
        decimals: 2,
        // Whiskers: the min–max ratio over the repetitions behind each median.
        ranges: methods
            .iter()
            .map(|&m| {
                report
                    .workloads
                    .iter()
                    .map(|(n, _)| {
                        report
                            .summaries
                            .iter()
                            .find(|x| &x.workload == n && x.method == m)
                            .and_then(|x| x.ratio_to_none.map(|r| (r.min, r.max)))
                    })
                    .collect()
            })
            .collect(),
    }
}

/// Write `throughput.md`, `throughput.json` and `throughput.svg`.
pub fn write_throughput_report(
    report: &ThroughputReport,
    methods: &[Method],
    out_dir: &Path,
) -> anyhow::Result<()> {
    let write = |name: &str, text: String| -> anyhow::Result<()> {
        let path: PathBuf = out_dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("throughput.md", render_throughput_markdown(report, methods))?;
    write(
        "throughput.json",
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    write("throughput.svg", throughput_chart(report, methods).render())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread() {
        assert_eq!(
            Spread::of(&[3.0, 1.0, 2.0]),
            Some(Spread {
                min: 1.0,
                median: 2.0,
                max: 3.0
            })
        );
        assert_eq!(Spread::of(&[1.0, 4.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[]), None);
    }
}
