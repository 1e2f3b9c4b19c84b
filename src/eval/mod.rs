//! # Evaluation harness: the paper's Table 2 (task accuracy) and Table 3 (throughput)
//!
//! The core of `domino eval` is model-independent: it loads the data, builds the few-shot
//! prompts, scores outputs, aggregates metrics and writes reports without touching llama.cpp.
//! Generation happens behind the [`runner::EvalBackend`] trait, which [`backend`] implements
//! over the decode loop (and a deterministic fake implements in tests), so everything but
//! [`backend`] and [`retokenize`] is testable without a model.
//!
//! The pipeline of one accuracy run ([`runner::run_task`]):
//!
//! 1. [`data`] loads GSM8K / CoNLL-2003 JSON Lines (default `../shared/data/<task>/…`).
//! 2. [`gold`] turns a training sample into the JSON answer of the paper's Appendix D.
//! 3. [`prompt`] draws K demonstrations from the training split with a fixed seed and lays
//!    them out as `Q: … \n A: …` using the templates in `prompts/`.
//! 4. The backend generates one output per (sample, method); [`extract`] finds the first JSON
//!    document in it and [`score`] validates it against the task schema and scores it.
//! 5. Every [`metrics::SampleResult`] is appended and flushed to `results.jsonl`
//!    ([`results`]); `--resume` reads that file back and skips the (sample, method) pairs
//!    already done, so a killed run loses nothing.
//! 6. [`metrics`] aggregates per method ([`metrics::MethodSummary`]); [`report`] writes
//!    `report.md` (laid out like the paper's tables, with the paper's numbers from
//!    `eval/paper_reference.json` beside ours), `report.json` and hand-written SVG charts.
//!
//! [`throughput`] does the same for the Table 3 workloads (manifest `eval/throughput.json`).
//! The `domino eval` flags and handler belong to the command line; [`backend`] is the real backend (the
//! decode module's methods in one llama.cpp session); [`retokenize`] is App. B's model-based
//! retokenization (`domino eval retokenize`).
//!
//! Invariants:
//! - Reports are computed from `results.jsonl` alone (never from in-memory state), so a run
//!   resumed after a kill produces byte-identical reports to an uninterrupted run.
//! - Reports contain no wall-clock timestamps, for the same reason.
//! - Scoring never panics on model output: whatever the model wrote is a value to score.

pub mod backend;
pub mod data;
pub mod digest;
pub mod extract;
pub mod gold;
pub mod jsonl;
pub mod method;
pub mod metrics;
pub mod progress;
pub mod prompt;
pub mod report;
pub mod results;
pub mod retokenize;
pub mod runner;
pub mod score;
pub mod svg;
pub mod throughput;

pub use method::Method;
pub use metrics::{MethodSummary, SampleResult};
pub use runner::{EvalBackend, GenerationOutcome, GenerationRequest, RunOptions, Shard, run_task};

use std::path::{Path, PathBuf};

/// The accuracy tasks of Table 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Task {
    Gsm8k,
    Conll,
}

impl Task {
    pub const ALL: [Task; 2] = [Task::Gsm8k, Task::Conll];

    /// The name used on the command line, in file names and in `results.jsonl`.
    pub fn name(self) -> &'static str {
        match self {
            Task::Gsm8k => "gsm8k",
            Task::Conll => "conll",
        }
    }

    /// The dataset's name as the paper prints it.
    pub fn paper_name(self) -> &'static str {
        match self {
            Task::Gsm8k => "GSM8K",
            Task::Conll => "CoNLL2003",
        }
    }

    /// Folder of the task's data under the shared data directory.
    pub fn data_dir_name(self) -> &'static str {
        match self {
            Task::Gsm8k => "gsm8k",
            Task::Conll => "conll2003",
        }
    }

    /// The JSON Schema every answer must validate against, relative to the repository root.
    pub fn schema_path(self) -> &'static str {
        match self {
            Task::Gsm8k => "grammars/gsm8k.schema.json",
            Task::Conll => "grammars/conll.schema.json",
        }
    }

    /// The few-shot template, relative to the repository root.
    pub fn template_path(self) -> &'static str {
        match self {
            Task::Gsm8k => "prompts/gsm8k.txt",
            Task::Conll => "prompts/conll.txt",
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "gsm8k" => Ok(Task::Gsm8k),
            "conll" | "conll2003" => Ok(Task::Conll),
            other => Err(format!("unknown task `{other}` (expected gsm8k or conll)")),
        }
    }
}

/// The repository root: the crate's manifest directory. Default paths (`grammars/`,
/// `prompts/`, `eval/`, `../shared/data`) are resolved against it so the harness works from
/// any current directory of a source checkout.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Resolve `path` against the repository root unless it is absolute or exists as given.
pub fn resolve(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    if path.is_absolute() || path.exists() {
        path.to_path_buf()
    } else {
        repo_root().join(path)
    }
}
