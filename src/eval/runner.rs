//! The accuracy runner: samples × methods through an [`EvalBackend`], scored, logged, reported.
//!
//! The backend is the only part that needs a model: the decode loop implements
//! [`EvalBackend`] for real runs, tests implement it with a deterministic fake. The runner
//! owns everything else: data, prompts, scoring, `results.jsonl`, resume, reports, progress.
//!
//! Order: samples in file order (the first `limit`), and for each sample every method in turn,
//! so slow drift of the machine's speed affects all methods alike and a partial run has
//! comparable numbers for every method.
//!
//! Resume: `run.json` records the run's configuration; a resumed run must have the same prompt,
//! model, token limit, temperature and seed (otherwise its results would not be comparable) and
//! skips every (sample, method) pair already in `results.jsonl`. The report is always computed
//! from `results.jsonl`, so resumed and uninterrupted runs produce identical reports.
//!
//! Shards (`--shard I/N`): N processes (cores, GPUs, machines sharing a directory) split one
//! run. Shard I evaluates the samples whose index is I modulo N and appends to its own
//! `results.shard-I-of-N.jsonl` in the same directory, so no two processes ever write one
//! file. Every process reads *all* results files of the directory (`results.jsonl` and every
//! shard file) to know what is done and to report, and checks `run.json` like a resume, so a
//! run can start unsharded and be finished by shards (or the reverse). A shard that ends
//! before the others reports the samples every method has finished so far; the last one to
//! end reports them all.

use super::Task;
use super::data::{Dataset, Split, default_path};
use super::method::Method;
use super::metrics::{FinishReason, SampleResult, summarize};
use super::progress::Progress;
use super::prompt::{FewShotPrompt, JsonStyle, Template};
use super::report::{self, TaskReport};
use super::results::ResultsLog;
use super::score::{Gold, Scorer};
use crate::diag::UsageError;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What the runner asks the backend to generate.
#[derive(Clone, Debug)]
pub struct GenerationRequest<'a> {
    /// The task (`gsm8k`, `conll`) or throughput workload name; lets a backend cache compiled
    /// grammars and draft priors per task.
    pub task: &'a str,
    /// The full prompt. Few-shot prompts end in `A:`: the output starts right after it, and the
    /// demonstrations put a space (or newline) before `{`, so a grammar must allow leading
    /// whitespace for the model to follow them.
    pub prompt: &'a str,
    /// Length in bytes of the prefix of `prompt` shared by every request of this run (the
    /// instruction and demonstrations): a backend can keep its KV cache for it and evaluate
    /// only the rest. 0 when nothing is shared.
    pub shared_prefix_len: usize,
    pub method: Method,
    /// Grammar or JSON Schema file constraining the output (ignored by `none`).
    pub grammar: &'a Path,
    pub max_tokens: usize,
    /// Generation may stop when the output contains one of these (a hint: extraction copes
    /// with text after the answer either way).
    pub stop: &'a [String],
    /// 0 = greedy.
    pub temperature: f32,
    pub seed: u64,
    /// `--reasoning`: the end-of-reasoning marker. The text before its first occurrence is
    /// free, the grammar constrains what follows (methods that cannot constrain a region are
    /// refused before the run), and the answer is read after the marker.
    pub reasoning_end: Option<&'a str>,
    /// Token healing of the prompt's end (the few-shot prompts are raw text ending in `A:`).
    pub token_healing: bool,
}

/// What the backend returns for one generation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationOutcome {
    pub text: String,
    /// Generated token ids.
    pub tokens: Vec<u32>,
    /// Log-probability of each generated token under the unmasked model (same length as
    /// `tokens`).
    pub logprobs: Vec<f32>,
    /// Steps where the model's top token was blocked by the constraint.
    pub interventions: u32,
    pub prompt_tokens: usize,
    pub prompt_ms: f64,
    pub decode_ms: f64,
    pub finish_reason: Option<FinishReason>,
    /// Model forward passes of this generation, the prompt's included (0 = not reported).
    #[serde(default)]
    pub forward_passes: usize,
    /// Speculative draft tokens verified, and how many of them were accepted.
    #[serde(default)]
    pub draft_proposed: usize,
    #[serde(default)]
    pub draft_accepted: usize,
}

/// A model that can generate under each method. Implemented by the decode loop.
///
/// What the harness relies on (the metrics are only as honest as these):
/// - `tokens` are the generated token ids (no end-of-generation token), `text` their bytes
///   decoded; `logprobs[i]` is `log p(tokens[i])` under the model's *unmasked* distribution
///   at that step (for every method, `none` included), so perplexities compare across methods.
/// - `interventions` counts the steps where the unmasked argmax token was not allowed
///   (0 for `none`). With sampling, "top token" still means the argmax.
/// - `decode_ms` covers generation after the prompt's logits (sampling, masking, forward
///   passes), `prompt_ms` the prompt evaluation; tokens/s is computed from `decode_ms`.
/// - `temperature` 0 is greedy; otherwise sample with `seed`.
/// - The grammar for `request.grammar` may be compiled once and cached per `request.task`.
/// - An `Err` is recorded for that sample and the run goes on; three in a row for one method
///   stop the run (resumable).
pub trait EvalBackend {
    /// The model's name as reports show it: preferably the GGUF file name, which also names
    /// the quantisation (`SmolLM2-135M-Instruct.Q4_1.gguf`).
    fn model_name(&self) -> String;

    /// The model file, digested into `run.json` (None: no file, e.g. a test backend).
    fn model_path(&self) -> Option<PathBuf> {
        None
    }

    /// Generate one output.
    fn run(&mut self, request: &GenerationRequest<'_>) -> anyhow::Result<GenerationOutcome>;

    /// Throughput runs: a new workload starts (reset per-workload state such as draft priors).
    fn begin_workload(&mut self, _workload: &str) {}

    /// Throughput runs: warm-up of the current workload is over; freeze learned priors.
    fn end_warmup(&mut self) {}
}

/// Options of an accuracy run (the `domino eval gsm8k|conll` flags).
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Test split (default `../shared/data/<task>/test.jsonl`).
    pub data: Option<PathBuf>,
    /// Training split for demonstrations (default `../shared/data/<task>/train.jsonl`).
    pub train: Option<PathBuf>,
    /// Evaluate the first N test samples (None = all).
    pub limit: Option<usize>,
    pub shots: usize,
    /// Seed of the demonstration draw and of sampling.
    pub seed: u64,
    pub methods: Vec<Method>,
    /// Token budget per answer; None = [`auto_max_tokens`] (per sample).
    pub max_tokens: Option<usize>,
    pub temperature: f32,
    pub resume: bool,
    pub json_style: JsonStyle,
    /// Template file (default `prompts/<task>.txt`).
    pub template: Option<PathBuf>,
    /// Schema file (default `grammars/<task>.schema.json`).
    pub schema: Option<PathBuf>,
    /// The command line, recorded in the report.
    pub command_line: String,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// Evaluate only this shard's samples (see the module doc).
    pub shard: Option<Shard>,
    /// `--reasoning`: the end-of-reasoning marker (see [`GenerationRequest::reasoning_end`]).
    pub reasoning_end: Option<String>,
    /// Token healing of the prompts' end (off unless asked for; the command line turns it on
    /// unless `--no-token-healing`).
    pub token_healing: bool,
}

/// Shard `index` of `count` (`--shard I/N`, `0 ≤ I < N`): the samples whose index is `I`
/// modulo `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Whether sample `index` (0-based position in the test split) belongs to this shard.
    pub fn contains(&self, index: usize) -> bool {
        index % self.count == self.index
    }
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not a shard: expected I/N with 0 ≤ I < N, e.g. 0/2 and 1/2 for two processes"
            )
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The results file a process of this shard appends to.
pub fn results_path(out_dir: &Path, shard: Option<Shard>) -> PathBuf {
    match shard {
        None => out_dir.join("results.jsonl"),
        Some(s) => out_dir.join(format!("results.shard-{}-of-{}.jsonl", s.index, s.count)),
    }
}

/// Every results file of a run directory: `results.jsonl` (when present) and the shard files,
/// in name order.
pub fn results_files(out_dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut shards = Vec::new();
    if out_dir.is_dir() {
        for entry in std::fs::read_dir(out_dir)
            .with_context(|| format!("cannot list {}", out_dir.display()))?
        {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("results.shard-") && name.ends_with(".jsonl") {
                shards.push(out_dir.join(name.as_ref()));
            }
        }
    }
    shards.sort();
    let main = out_dir.join("results.jsonl");
    Ok(if main.exists() {
        std::iter::once(main).chain(shards).collect()
    } else {
        shards
    })
}

/// The records of every results file of a run directory (see [`results_files`]), except
/// `skip` (the caller's own file, read separately).
fn read_run_records(out_dir: &Path, skip: Option<&Path>) -> anyhow::Result<Vec<SampleResult>> {
    let mut all = Vec::new();
    for path in results_files(out_dir)? {
        if Some(path.as_path()) != skip {
            all.extend(super::results::read_results::<SampleResult>(&path)?.records);
        }
    }
    Ok(all)
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            data: None,
            train: None,
            limit: None,
            shots: 5,
            seed: 0,
            methods: Method::default_accuracy_methods(),
            max_tokens: None,
            temperature: 0.0,
            resume: false,
            json_style: JsonStyle::Pretty,
            template: None,
            schema: None,
            command_line: String::new(),
            progress: false,
            shard: None,
            reasoning_end: None,
            token_healing: false,
        }
    }
}

/// The configuration a run records in `run.json`, checked on resume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    pub task: Task,
    pub model: String,
    pub prompt_id: String,
    pub shots: usize,
    pub demo_ids: Vec<usize>,
    pub seed: u64,
    /// None = automatic per sample ([`auto_max_tokens`]).
    pub max_tokens: Option<usize>,
    pub temperature: f32,
    pub json_style: JsonStyle,
    /// The command line that started the run (kept on resume, not compared: a resumed run's
    /// report names the command that produced the run, and equals an uninterrupted run's).
    #[serde(default)]
    pub command: String,
    /// What the run's outputs depend on beyond the flags: compared field by field on resume.
    /// Absent in `run.json` files written before it existed (then nothing is compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// The inputs and builds a run's results come from, recorded in `run.json` so that
/// `--resume` cannot mix two runs: a data file, schema or model with other contents, or
/// another build of domino or llama.cpp, stops the resume (exit 2) naming what differs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// SHA-256 of the test split, the training split (demonstrations) and the task schema.
    pub test_data_sha256: String,
    pub train_data_sha256: String,
    pub schema_sha256: String,
    /// SHA-256 of the model file (None: a backend without one, e.g. the tests' fake).
    pub model_sha256: Option<String>,
    /// `git rev-parse HEAD` of the domino build (`unknown` outside a git checkout).
    pub domino_commit: String,
    /// The llama.cpp binding the build links ([`crate::runtime::LLAMA_CPP_VERSION`]; the
    /// llama-cpp-sys-2 version pins one llama.cpp commit).
    pub llama_cpp: String,
    /// `--reasoning`'s end-of-reasoning marker (None: the grammar constrains the whole answer;
    /// also what `run.json` files written before the flag existed mean).
    #[serde(default)]
    pub reasoning_end: Option<String>,
    /// Whether the prompts' end was token-healed (false in files written before healing).
    #[serde(default)]
    pub token_healing: bool,
}

impl Provenance {
    /// Digests of `prepared`'s files and of `model` (if any), this build's versions, and the
    /// run's reasoning and healing settings.
    pub fn of(
        prepared: &PreparedTask,
        model: Option<&Path>,
        opts: &RunOptions,
    ) -> anyhow::Result<Provenance> {
        let digest = |what: &str, p: &Path| {
            super::digest::sha256_file(p)
                .with_context(|| format!("cannot read the {what} {} to digest it", p.display()))
        };
        Ok(Provenance {
            test_data_sha256: digest("test data", &prepared.test_path)?,
            train_data_sha256: digest("training data", &prepared.train_path)?,
            schema_sha256: digest("schema", &prepared.schema_path)?,
            model_sha256: model.map(|m| digest("model", m)).transpose()?,
            domino_commit: env!("DOMINO_COMMIT").to_string(),
            llama_cpp: crate::runtime::LLAMA_CPP_VERSION.to_string(),
            reasoning_end: opts.reasoning_end.clone(),
            token_healing: opts.token_healing,
        })
    }

    /// The first recorded input that differs from `now`, as `(name, recorded, now)`.
    pub fn difference(&self, now: &Provenance) -> Option<(&'static str, String, String)> {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
        let marker = |o: &Option<String>| o.as_ref().map_or("off".into(), |m| format!("{m:?}"));
        let on = |b: bool| if b { "on" } else { "off" }.to_string();
        [
            (
                "test data file (--data)",
                self.test_data_sha256.clone(),
                now.test_data_sha256.clone(),
            ),
            (
                "training data file (--train)",
                self.train_data_sha256.clone(),
                now.train_data_sha256.clone(),
            ),
            (
                "schema",
                self.schema_sha256.clone(),
                now.schema_sha256.clone(),
            ),
            ("model", opt(&self.model_sha256), opt(&now.model_sha256)),
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
            (
                "reasoning setting (--reasoning, --reasoning-end)",
                marker(&self.reasoning_end),
                marker(&now.reasoning_end),
            ),
            (
                "token healing (--no-token-healing)",
                on(self.token_healing),
                on(now.token_healing),
            ),
        ]
        .into_iter()
        .find(|(_, a, b)| a != b)
    }
}

/// Stop after this many consecutive backend failures of one method: something is broken
/// (a grammar the backend rejects, a model that is gone), not one unlucky sample.
const MAX_CONSECUTIVE_ERRORS: usize = 3;

/// The default token budget of a sample: 512 for GSM8K (gold answers in the pretty layout
/// take 100–350 tokens); for CoNLL it grows with the sentence, since the answer repeats every
/// token: 64 + 32 per input token in the pretty layout (an entry takes about 20 tokens),
/// 64 + 16 compact, at most 2048. A fixed budget would cut long sentences short and bias
/// accuracy towards short ones.
pub fn auto_max_tokens(test: &Dataset, index: usize, style: JsonStyle) -> usize {
    match test {
        Dataset::Gsm8k(_) => 512,
        Dataset::Conll(v) => {
            let per_token = match style {
                JsonStyle::Pretty => 32,
                JsonStyle::Compact => 16,
            };
            (64 + per_token * v[index].tokens.len()).min(2048)
        }
    }
}

/// A test split with its prompts ready: everything of a run that does not need the model.
pub struct PreparedTask {
    pub task: Task,
    pub test: Dataset,
    pub prompt: FewShotPrompt,
    pub scorer: Scorer,
    pub schema_path: PathBuf,
    /// The files the splits were loaded from (digested into `run.json`).
    pub test_path: PathBuf,
    pub train_path: PathBuf,
}

impl PreparedTask {
    /// Load data, template and schema for `task` as `opts` says.
    pub fn load(task: Task, opts: &RunOptions) -> anyhow::Result<PreparedTask> {
        let test_path = opts
            .data
            .clone()
            .unwrap_or_else(|| default_path(task, Split::Test));
        let train_path = opts
            .train
            .clone()
            .unwrap_or_else(|| default_path(task, Split::Train));
        let test = Dataset::load(task, &test_path)?;
        let train = Dataset::load(task, &train_path)?;
        let template = match &opts.template {
            Some(p) => Template::load(p)?,
            None => Template::for_task(task)?,
        };
        let prompt =
            FewShotPrompt::build(template, &train, opts.shots, opts.seed, opts.json_style)?;
        let schema_path = opts
            .schema
            .clone()
            .unwrap_or_else(|| super::resolve(task.schema_path()));
        let scorer = Scorer::new(task, &schema_path)?;
        Ok(PreparedTask {
            task,
            test,
            prompt,
            scorer,
            schema_path,
            test_path,
            train_path,
        })
    }

    /// Number of samples a run with `limit` evaluates.
    pub fn sample_count(&self, limit: Option<usize>) -> usize {
        limit.map_or(self.test.len(), |l| l.min(self.test.len()))
    }

    /// Prompt and gold answer of test sample `index`.
    pub fn sample(&self, index: usize) -> (usize, String, Gold) {
        match &self.test {
            Dataset::Gsm8k(v) => (
                v[index].id,
                self.prompt.gsm8k_prompt(&v[index]),
                Gold::Number(v[index].final_answer),
            ),
            Dataset::Conll(v) => (
                v[index].id,
                self.prompt.conll_prompt(&v[index]),
                Gold::Tags(v[index].tags.clone()),
            ),
        }
    }
}

/// Run `task` with `backend`, writing `results.jsonl`, `run.json` and the reports into
/// `out_dir`. Returns the report.
pub fn run_task(
    task: Task,
    backend: &mut dyn EvalBackend,
    opts: &RunOptions,
    out_dir: &Path,
) -> anyhow::Result<TaskReport> {
    if opts.methods.is_empty() {
        bail!(UsageError("no methods to evaluate".into()));
    }
    check_reasoning(opts)?;
    let prepared = PreparedTask::load(task, opts)?;
    std::fs::create_dir_all(out_dir)
        .with_context(|| format!("cannot create output directory {}", out_dir.display()))?;

    let config = RunConfig {
        task,
        model: backend.model_name(),
        prompt_id: prepared.prompt.prompt_id(),
        shots: opts.shots,
        demo_ids: prepared.prompt.demo_ids.clone(),
        seed: opts.seed,
        max_tokens: opts.max_tokens,
        temperature: opts.temperature,
        json_style: opts.json_style,
        command: opts.command_line.clone(),
        provenance: Some(Provenance::of(
            &prepared,
            backend.model_path().as_deref(),
            opts,
        )?),
    };
    let own_path = results_path(out_dir, opts.shard);
    // Results other processes wrote into this directory: other shards of this run, or the
    // unsharded start of it. Without --resume they are refused like an existing results file,
    // except for a shard, which expects its siblings (and then checks run.json like a resume).
    let others = read_run_records(out_dir, Some(&own_path))?;
    if !others.is_empty() && !opts.resume && opts.shard.is_none() {
        bail!(
            "{} already holds results (of shards or an earlier run); pass --resume to continue that run, or choose another --out",
            out_dir.display()
        );
    }
    let config = check_or_write_config(
        &out_dir.join("run.json"),
        config,
        opts.resume || !others.is_empty(),
    )?;

    let (mut log, own) = ResultsLog::open::<SampleResult>(&own_path, opts.resume)?;
    let existing: Vec<SampleResult> = own.into_iter().chain(others).collect();
    // A pair whose record is a backend error is not done: resume retries it (the report
    // prefers the retry's record).
    let done: std::collections::HashSet<(usize, Method)> = existing
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| (r.sample_id, r.method))
        .collect();

    let count = prepared.sample_count(opts.limit);
    let in_shard = |index: usize| opts.shard.is_none_or(|s| s.contains(index));
    let shard_samples = (0..count).filter(|&i| in_shard(i)).count();
    let mut progress = Progress::new(
        (shard_samples * opts.methods.len()) as u64,
        &opts.methods,
        opts.progress,
    );
    let shard_ids: std::collections::HashSet<usize> = (0..count)
        .filter(|&i| in_shard(i))
        .map(|i| prepared.sample(i).0)
        .collect();
    for r in existing.iter().filter(|r| {
        r.error.is_none() && shard_ids.contains(&r.sample_id) && opts.methods.contains(&r.method)
    }) {
        progress.record_resumed(r.method, r.correct);
    }

    let stop = vec!["\nQ:".to_string()];
    let mut consecutive_errors = vec![0usize; opts.methods.len()];
    for index in (0..count).filter(|&i| in_shard(i)) {
        let (sample_id, prompt, gold) = prepared.sample(index);
        for (mi, &method) in opts.methods.iter().enumerate() {
            if done.contains(&(sample_id, method)) {
                continue;
            }
            let request = GenerationRequest {
                task: task.name(),
                prompt: &prompt,
                shared_prefix_len: prepared.prompt.prefix.len(),
                method,
                grammar: &prepared.schema_path,
                max_tokens: opts
                    .max_tokens
                    .unwrap_or_else(|| auto_max_tokens(&prepared.test, index, opts.json_style)),
                stop: &stop,
                temperature: opts.temperature,
                seed: opts.seed.wrapping_add(sample_id as u64),
                reasoning_end: opts.reasoning_end.as_deref(),
                token_healing: opts.token_healing,
            };
            let record = match backend.run(&request) {
                Ok(outcome) => {
                    consecutive_errors[mi] = 0;
                    score_outcome(
                        &prepared,
                        sample_id,
                        method,
                        &config.prompt_id,
                        &gold,
                        outcome,
                        opts.reasoning_end.as_deref(),
                    )
                }
                Err(err) => {
                    consecutive_errors[mi] += 1;
                    if consecutive_errors[mi] >= MAX_CONSECUTIVE_ERRORS {
                        progress.finish();
                        return Err(err.context(format!(
                            "method {method} failed on {MAX_CONSECUTIVE_ERRORS} samples in a row (last: sample {sample_id}); \
                             fix the cause and continue with --resume"
                        )));
                    }
                    error_record(task, sample_id, method, &config.prompt_id, &gold, &err)
                }
            };
            log.append(&record)?;
            progress.record(method, record.correct);
        }
    }
    progress.finish();
    // With shards, others may still be running: report what every method has finished.
    let finished = complete_prefix(
        &prepared,
        &read_run_records(out_dir, None)?,
        &opts.methods,
        count,
    );
    if finished < count {
        eprintln!(
            "shard {} finished; {finished} of {count} samples are done by every method so far (other shards are still running): \
             the report covers those, and the last shard to finish reports them all",
            opts.shard.map_or("?".to_string(), |s| s.to_string())
        );
    }
    write_task_report(task, opts, &config, out_dir, finished)
}

/// How many of the first `count` samples every one of `methods` has a record for: the samples
/// a report can compare all methods on. A backend error is a record (the report counts it as
/// a failure; only resume retries it).
fn complete_prefix(
    prepared: &PreparedTask,
    records: &[SampleResult],
    methods: &[Method],
    count: usize,
) -> usize {
    let done: std::collections::HashSet<(usize, Method)> =
        records.iter().map(|r| (r.sample_id, r.method)).collect();
    (0..count)
        .take_while(|&i| {
            let id = prepared.sample(i).0;
            methods.iter().all(|&m| done.contains(&(id, m)))
        })
        .count()
}

/// `--reasoning` with methods that cannot leave the reasoning free and constrain only what
/// follows the marker is refused before anything runs (rather than failing every sample).
fn check_reasoning(opts: &RunOptions) -> anyhow::Result<()> {
    let Some(marker) = &opts.reasoning_end else {
        return Ok(());
    };
    if marker.is_empty() {
        bail!(UsageError("--reasoning-end is empty".into()));
    }
    let refused: Vec<String> = opts
        .methods
        .iter()
        .filter(|m| matches!(m, Method::LlamaGrammar | Method::Llguidance))
        .map(|m| m.to_string())
        .collect();
    if !refused.is_empty() {
        bail!(UsageError(format!(
            "--reasoning: method {} cannot leave the reasoning free and constrain only the answer after the marker \
             (llama.cpp's grammar sampler constrains from the first token); choose --methods from none, domino…, naive, template",
            refused.join(", ")
        )));
    }
    Ok(())
}

/// The part of `text` the answer is read from: all of it, or with `--reasoning` what follows
/// the first end-of-reasoning marker (`None` when the output has no marker).
pub fn answer_text<'t>(text: &'t str, reasoning_end: Option<&str>) -> Option<&'t str> {
    match reasoning_end {
        None => Some(text),
        Some(marker) => text.find(marker).map(|at| &text[at + marker.len()..]),
    }
}

/// Score a backend outcome into a result record; with `reasoning_end` (`--reasoning`) the
/// answer is the text after the first marker ([`answer_text`]).
pub fn score_outcome(
    prepared: &PreparedTask,
    sample_id: usize,
    method: Method,
    prompt_id: &str,
    gold: &Gold,
    outcome: GenerationOutcome,
    reasoning_end: Option<&str>,
) -> SampleResult {
    let answer = answer_text(&outcome.text, reasoning_end);
    let score = prepared.scorer.score(answer.unwrap_or(""), gold);
    let score_note = match (answer, &score.extract_error, &score.schema_error) {
        (None, _, _) => Some(format!(
            "no end-of-reasoning marker {:?} in the output",
            reasoning_end.unwrap_or_default()
        )),
        (_, Some(e), _) => Some(e.to_string()),
        (_, None, Some(e)) => Some(format!("schema: {e}")),
        (_, None, None) => None,
    };
    // A backend that does not say why it stopped is taken to have stopped normally.
    let finish_reason = outcome.finish_reason.unwrap_or(FinishReason::Eos);
    SampleResult {
        task: prepared.task,
        sample_id,
        method,
        prompt_id: prompt_id.to_string(),
        generated_tokens: outcome.tokens.len(),
        output_text: outcome.text,
        tokens: outcome.tokens,
        logprobs: outcome.logprobs,
        interventions: outcome.interventions,
        parsed_answer: score.parsed_answer,
        gold: serde_json::to_value(gold).unwrap_or_default(),
        correct: score.correct,
        well_formed: score.well_formed,
        prompt_tokens: outcome.prompt_tokens,
        decode_ms: outcome.decode_ms,
        prompt_ms: outcome.prompt_ms,
        finish_reason,
        entities: score.entities,
        score_note,
        error: None,
    }
}

fn error_record(
    task: Task,
    sample_id: usize,
    method: Method,
    prompt_id: &str,
    gold: &Gold,
    err: &anyhow::Error,
) -> SampleResult {
    let entities = match gold {
        Gold::Tags(tags) => Some(super::score::entity_counts(None, tags)),
        Gold::Number(_) => None,
    };
    SampleResult {
        task,
        sample_id,
        method,
        prompt_id: prompt_id.to_string(),
        output_text: String::new(),
        tokens: Vec::new(),
        logprobs: Vec::new(),
        interventions: 0,
        parsed_answer: serde_json::Value::Null,
        gold: serde_json::to_value(gold).unwrap_or_default(),
        correct: false,
        well_formed: false,
        generated_tokens: 0,
        prompt_tokens: 0,
        decode_ms: 0.0,
        prompt_ms: 0.0,
        finish_reason: FinishReason::Error,
        entities,
        score_note: None,
        error: Some(format!("{err:#}")),
    }
}

/// Write `run.json`, or on resume check it matches (all but the command line) and return the
/// recorded configuration.
fn check_or_write_config(
    path: &Path,
    config: RunConfig,
    resume: bool,
) -> anyhow::Result<RunConfig> {
    if resume && path.exists() {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let previous: RunConfig = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a run configuration", path.display()))?;
        if let (Some(was), Some(now)) = (&previous.provenance, &config.provenance)
            && let Some((what, old, new)) = was.difference(now)
        {
            bail!(UsageError(format!(
                "cannot resume: the {what} differs from the run in {}: it recorded {old}, now {new}",
                path.display()
            )));
        }
        let without_command = |c: &RunConfig| RunConfig {
            command: String::new(),
            provenance: None,
            ..c.clone()
        };
        if without_command(&previous) != without_command(&config) {
            let old = serde_json::to_string_pretty(&previous)?;
            let new = serde_json::to_string_pretty(&config)?;
            bail!(UsageError(format!(
                "cannot resume: this run's configuration differs from the one in {}\nprevious: {old}\nnow: {new}",
                path.display()
            )));
        }
        return Ok(previous);
    }
    std::fs::write(path, serde_json::to_string_pretty(&config)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(config)
}

/// Compute the report from `results.jsonl` (first `count` samples, the run's methods) and
/// write `report.md`, `report.json` and the charts.
pub fn write_task_report(
    task: Task,
    opts: &RunOptions,
    config: &RunConfig,
    out_dir: &Path,
    count: usize,
) -> anyhow::Result<TaskReport> {
    let all = read_run_records(out_dir, None)?;
    // Sample ids are line indices, increasing with the sample index: the first `count` samples
    // are exactly those with an id below the next sample's id.
    let id_limit = match count {
        0 => 0,
        _ => {
            let prepared = PreparedTask::load(task, opts)?;
            prepared.sample(count - 1).0 + 1
        }
    };
    let mut results: Vec<SampleResult> = all
        .into_iter()
        .filter(|r| r.task == task && r.sample_id < id_limit && opts.methods.contains(&r.method))
        .collect();
    // One record per (sample, method): a successful one over a backend error (stable sort keeps
    // file order among equals, so the first success wins).
    results.sort_by_key(|r| {
        (
            r.sample_id,
            opts.methods.iter().position(|m| *m == r.method),
            r.error.is_some(),
        )
    });
    results.dedup_by_key(|r| (r.sample_id, r.method));
    let summaries = summarize(&results, &opts.methods);
    let report = TaskReport::new(task, config, count, summaries)?;
    report::write_task_report(&report, out_dir)?;
    Ok(report)
}

/// Rewrite the reports of an existing run directory from its `run.json` and `results.jsonl`,
/// without a model (e.g. after a run was killed, or to report fewer samples with `limit`).
/// Reports every method found in `results.jsonl`, in the order the run used them.
pub fn rewrite_report(task: Task, opts: &RunOptions, out_dir: &Path) -> anyhow::Result<TaskReport> {
    let config_path = out_dir.join("run.json");
    let text = std::fs::read_to_string(&config_path).with_context(|| {
        format!(
            "cannot read {}: is {} a run directory?",
            config_path.display(),
            out_dir.display()
        )
    })?;
    let config: RunConfig = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a run configuration", config_path.display()))?;
    if config.task != task {
        bail!(UsageError(format!(
            "{} holds a {} run, not {task}",
            out_dir.display(),
            config.task
        )));
    }
    let records = read_run_records(out_dir, None)?;
    let mut methods: Vec<Method> = Vec::new();
    for r in &records {
        if !methods.contains(&r.method) {
            methods.push(r.method);
        }
    }
    let mut opts = opts.clone();
    opts.methods = methods;
    opts.shots = config.shots;
    opts.seed = config.seed;
    opts.json_style = config.json_style;
    let prepared = PreparedTask::load(task, &opts)?;
    // By default the samples every method has finished (a killed run's last sample may be
    // done by some methods only; shards may leave holes).
    let count = match opts.limit {
        Some(limit) => limit.min(prepared.test.len()),
        None => complete_prefix(&prepared, &records, &opts.methods, prepared.test.len()),
    };
    write_task_report(task, &opts, &config, out_dir, count)
}
