//! Loaders for the evaluation data: GSM8K and CoNLL-2003 as JSON Lines.
//!
//! Formats (see `../shared/data/README.md`):
//! - GSM8K: `{"question": str, "answer": str, "final": int}`; `answer` is the full solution with
//!   `<<calc=result>>` annotations and a closing `#### N` line.
//! - CoNLL-2003: `{"tokens": [str], "tags": [str]}` with IOB2 tags over PER/LOC/ORG/MISC.
//!
//! The data is not part of the repository. Default paths are
//! `../shared/data/<dir>/{train,test}.jsonl` relative to the repository root (see [`data_root`]
//! for the override and the fallback); a missing file is
//! an error naming the path and where the data comes from. Malformed lines are errors with
//! `path:line`, never panics. A sample's id is its 0-based line index in its file, which is
//! stable across runs and what `results.jsonl` records.

use super::Task;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Which split of a dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Train,
    Test,
}

impl Split {
    fn file_name(self) -> &'static str {
        match self {
            Split::Train => "train.jsonl",
            Split::Test => "test.jsonl",
        }
    }
}

/// Environment variable that overrides where the evaluation data lives.
pub const DATA_DIR_ENV: &str = "DOMINO_DATA_DIR";

/// The evaluation data directory: `$DOMINO_DATA_DIR` if set, else `../shared/data` relative to
/// the repository root; when that does not exist (a git worktree nested one level deeper, such
/// as `work/wt/<branch>`), the nearest ancestor's `shared/data` that exists.
pub fn data_root() -> PathBuf {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let root = super::repo_root();
    let primary = root.join("..").join("shared").join("data");
    if primary.is_dir() {
        return primary;
    }
    root.ancestors()
        .skip(2)
        .map(|a| a.join("shared").join("data"))
        .find(|p| p.is_dir())
        .unwrap_or(primary)
}

/// The default location of a split: `<data root>/<dir>/<split>.jsonl` (see [`data_root`]).
pub fn default_path(task: Task, split: Split) -> PathBuf {
    data_root()
        .join(task.data_dir_name())
        .join(split.file_name())
}

/// One GSM8K problem.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GsmSample {
    /// 0-based line index in its file.
    #[serde(skip)]
    pub id: usize,
    pub question: String,
    /// Full solution text with `<<calc=result>>` annotations and the `#### N` line.
    pub answer: String,
    /// The final answer (the number after `####`, commas removed).
    #[serde(rename = "final")]
    pub final_answer: i64,
}

/// One CoNLL-2003 sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConllSample {
    /// 0-based line index in its file.
    #[serde(skip)]
    pub id: usize,
    pub tokens: Vec<String>,
    /// IOB2 tags, one per token.
    pub tags: Vec<String>,
}

/// The tags CoNLL-2003 uses (IOB2), in the order of the task schema's enum.
pub const CONLL_TAGS: [&str; 9] = [
    "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC",
];

/// A loaded split of either task.
#[derive(Clone, Debug)]
pub enum Dataset {
    Gsm8k(Vec<GsmSample>),
    Conll(Vec<ConllSample>),
}

impl Dataset {
    pub fn len(&self) -> usize {
        match self {
            Dataset::Gsm8k(v) => v.len(),
            Dataset::Conll(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn task(&self) -> Task {
        match self {
            Dataset::Gsm8k(_) => Task::Gsm8k,
            Dataset::Conll(_) => Task::Conll,
        }
    }

    /// Load a split of `task` from `path`.
    pub fn load(task: Task, path: &Path) -> anyhow::Result<Dataset> {
        Ok(match task {
            Task::Gsm8k => Dataset::Gsm8k(load_gsm8k(path)?),
            Task::Conll => Dataset::Conll(load_conll(path)?),
        })
    }
}

/// Read a JSON Lines file into records, numbering them by line. Blank lines are skipped
/// (but still counted, so ids stay line indices).
fn load_jsonl<T: for<'de> Deserialize<'de>>(
    path: &Path,
    task_dir: &str,
) -> anyhow::Result<Vec<(usize, T)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "data file {} not found: the evaluation data is not part of the repository; put the \
             JSON Lines files under ../shared/data/{task_dir}/ (see ../shared/data/README.md for \
             their origin and format) or pass --data/--train PATH",
            path.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("cannot read data file {}", path.display()));
        }
    };
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: T = serde_json::from_str(line).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: not a valid record: {e}",
                path.display(),
                index + 1,
                e.column()
            )
        })?;
        out.push((index, record));
    }
    if out.is_empty() {
        bail!("data file {} holds no records", path.display());
    }
    Ok(out)
}

/// A GSM8K line as stored: the official dataset's `{"question", "answer"}`, or ours with the
/// final answer also given as `final`.
#[derive(Deserialize)]
struct GsmRecord {
    question: String,
    answer: String,
    #[serde(rename = "final", default)]
    final_answer: Option<i64>,
}

/// The number of a solution's `#### N` line (commas, as in `#### 1,000`, removed); `None`
/// when there is no such line or it is not an integer.
pub fn final_answer_of(solution: &str) -> Option<i64> {
    let line = solution
        .lines()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix("####"))?;
    line.trim().replace(',', "").parse().ok()
}

/// Load GSM8K problems, in the official format (`{"question", "answer"}`, the final answer
/// read from the `#### N` line) or with `final` given; checks that every solution ends with
/// its `#### N` line, and that a given `final` agrees with it.
pub fn load_gsm8k(path: &Path) -> anyhow::Result<Vec<GsmSample>> {
    let records = load_jsonl::<GsmRecord>(path, Task::Gsm8k.data_dir_name())?;
    records
        .into_iter()
        .map(|(id, r)| {
            let at = || format!("{}:{}", path.display(), id + 1);
            if !r.answer.lines().any(|l| l.trim_start().starts_with("####")) {
                bail!("{}: solution has no `#### N` line", at());
            }
            let parsed = final_answer_of(&r.answer);
            let final_answer = match (r.final_answer, parsed) {
                (Some(given), Some(read)) if given != read => bail!(
                    "{}: `final` is {given} but the solution's `####` line says {read}",
                    at()
                ),
                (Some(given), _) => given,
                (None, Some(read)) => read,
                (None, None) => bail!(
                    "{}: the solution's `####` line holds no integer (and no `final` is given)",
                    at()
                ),
            };
            Ok(GsmSample {
                id,
                question: r.question,
                answer: r.answer,
                final_answer,
            })
        })
        .collect()
}

/// Load CoNLL sentences; checks that tokens and tags have equal length and tags are IOB2.
pub fn load_conll(path: &Path) -> anyhow::Result<Vec<ConllSample>> {
    let records = load_jsonl::<ConllSample>(path, Task::Conll.data_dir_name())?;
    records
        .into_iter()
        .map(|(id, mut s)| {
            s.id = id;
            if s.tokens.len() != s.tags.len() {
                bail!(
                    "{}:{}: {} tokens but {} tags",
                    path.display(),
                    id + 1,
                    s.tokens.len(),
                    s.tags.len()
                );
            }
            if let Some(bad) = s.tags.iter().find(|t| !CONLL_TAGS.contains(&t.as_str())) {
                bail!("{}:{}: unknown tag `{bad}`", path.display(), id + 1);
            }
            Ok(s)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> anyhow::Result<Vec<GsmSample>> {
        let dir = std::env::temp_dir().join(format!("domino-gsm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("t{}.jsonl", text.len()));
        std::fs::write(&path, text).unwrap();
        let r = load_gsm8k(&path);
        std::fs::remove_file(&path).ok();
        r
    }

    #[test]
    fn official_gsm8k_lines_are_read_as_is() {
        let line = |v: serde_json::Value| v.to_string();
        let official = line(serde_json::json!({
            "question": "How many?",
            "answer": "2+3 = <<2+3=5>>5\n#### 1,005"
        }));
        let v = load(&official).unwrap();
        assert_eq!(v[0].final_answer, 1005);
        assert_eq!(v[0].question, "How many?");
        let ours = line(serde_json::json!({"question": "q", "answer": "#### 5", "final": 5}));
        assert_eq!(load(&ours).unwrap()[0].final_answer, 5);
        let disagree = line(serde_json::json!({"question": "q", "answer": "#### 5", "final": 6}));
        assert!(format!("{:#}", load(&disagree).unwrap_err()).contains("says 5"));
        let words = line(serde_json::json!({"question": "q", "answer": "#### five"}));
        assert!(format!("{:#}", load(&words).unwrap_err()).contains("no integer"));
        assert_eq!(final_answer_of("a\n#### -3"), Some(-3));
        assert_eq!(final_answer_of("no answer"), None);
    }
}
