//! `results.jsonl`: one JSON record per line, appended and flushed as each sample finishes, so
//! a killed run loses at most the sample in flight; `--resume` reads it back.
//!
//! A kill can leave a partial last line (no trailing newline, not valid JSON). Reading
//! tolerates exactly that: the partial line is dropped, and [`ResultsLog::open`] in resume mode
//! cuts the file back to the end of the last complete record before appending, so the file
//! stays valid JSON Lines. Any other unparsable line is corruption and an error naming
//! `path:line` — silently skipping it would make a resumed run redo or lose samples.

use super::method::Method;
use super::metrics::SampleResult;
use anyhow::{Context, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub use super::jsonl::ReadResults;

/// Read a JSON Lines results file (missing file = no records).
pub fn read_results<T: DeserializeOwned>(path: &Path) -> anyhow::Result<ReadResults<T>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ReadResults::empty()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    super::jsonl::parse_results(&bytes, &path.display().to_string())
}

/// The (sample id, method) pairs done in an accuracy run's results file: those with a record
/// that is not a backend error (errors are retried on resume).
pub fn done_pairs(path: &Path) -> anyhow::Result<HashSet<(usize, Method)>> {
    let read = read_results::<SampleResult>(path)?;
    Ok(read
        .records
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| (r.sample_id, r.method))
        .collect())
}

/// An append-only results file.
pub struct ResultsLog {
    file: File,
    path: PathBuf,
}

impl ResultsLog {
    /// Open `path` for appending. Without `resume` the file must not exist or be empty (so two
    /// runs are never mixed by accident). With `resume`, the existing records are returned and
    /// a partial last line is cut off.
    pub fn open<T: DeserializeOwned>(
        path: &Path,
        resume: bool,
    ) -> anyhow::Result<(ResultsLog, Vec<T>)> {
        let existing = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if !resume && existing > 0 {
            bail!(
                "{} already holds results; pass --resume to continue that run, or choose another --out",
                path.display()
            );
        }
        let read = read_results::<T>(path)?;
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        if read.dropped_partial_line {
            file.set_len(read.valid_len)
                .with_context(|| format!("cannot truncate {}", path.display()))?;
        }
        if read.needs_newline {
            file.write_all(b"\n")?;
            file.flush()?;
        }
        Ok((
            ResultsLog {
                file,
                path: path.to_path_buf(),
            },
            read.records,
        ))
    }

    /// Append one record as a line and flush it to the OS.
    pub fn append<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.file.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn temp_file(name: &str, content: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("domino-results-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("results.jsonl");
        std::fs::write(&path, content).unwrap();
        path
    }

    #[test]
    fn torn_last_line_is_cut_before_appending() {
        let path = temp_file("torn", "{\"a\":1}\n{\"a\":2}\n{\"a\":");
        let (mut log, records) = ResultsLog::open::<Value>(&path, true).unwrap();
        assert_eq!(records, vec![json!({"a": 1}), json!({"a": 2})]);
        log.append(&json!({"a": 3})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n"
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn complete_last_record_without_newline_is_kept() {
        let path = temp_file("nonl", "{\"a\":1}");
        let (mut log, records) = ResultsLog::open::<Value>(&path, true).unwrap();
        assert_eq!(records, vec![json!({"a": 1})]);
        log.append(&json!({"a": 2})).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"a\":1}\n{\"a\":2}\n"
        );
        assert!(
            ResultsLog::open::<Value>(&path, false).is_err(),
            "without resume an existing file is refused"
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }
}
