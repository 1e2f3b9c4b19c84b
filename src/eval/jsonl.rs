//! The framing of `results.jsonl` (see [`super::results`]): JSON records one per line, a torn
//! last line tolerated, anything else unparsable an error naming `file:line`.
//!
//! Kept free of the rest of the crate (it names only `anyhow` and `serde`), so the fuzz
//! crate, which cannot link llama.cpp, compiles this very file (`fuzz/fuzz_targets/files.rs`)
//! and feeds it arbitrary bytes.

use anyhow::bail;
use serde::de::DeserializeOwned;

/// The records of a results file, as far as they are complete.
#[derive(Debug)]
pub struct ReadResults<T> {
    pub records: Vec<T>,
    /// Byte length of the valid part (through the last complete record).
    pub valid_len: u64,
    /// Whether a partial last line was dropped.
    pub dropped_partial_line: bool,
    /// Whether the valid part ends without a newline (a complete record whose `\n` was lost).
    pub needs_newline: bool,
}

impl<T> ReadResults<T> {
    /// No records (a missing file).
    pub fn empty() -> Self {
        ReadResults {
            records: Vec::new(),
            valid_len: 0,
            dropped_partial_line: false,
            needs_newline: false,
        }
    }
}

/// The records in `bytes`, a results file's content (`origin` names it in errors). Blank
/// lines are skipped; a last line without a newline that does not parse is a torn write and
/// dropped (`dropped_partial_line`); any other line that does not parse is an error.
///
/// Invariant (what `--resume` relies on): the first `valid_len` bytes, plus a newline when
/// `needs_newline`, read back as the same records with nothing dropped.
pub fn parse_results<T: DeserializeOwned>(
    bytes: &[u8],
    origin: &str,
) -> anyhow::Result<ReadResults<T>> {
    let mut read = ReadResults::empty();
    let mut offset = 0usize;
    let mut line_no = 0usize;
    while offset < bytes.len() {
        line_no += 1;
        let (line, next, terminated) = match bytes[offset..].iter().position(|&b| b == b'\n') {
            Some(i) => (&bytes[offset..offset + i], offset + i + 1, true),
            None => (&bytes[offset..], bytes.len(), false),
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            offset = next;
            read.valid_len = next as u64;
            continue;
        }
        match serde_json::from_slice::<T>(line) {
            Ok(record) => {
                read.records.push(record);
                read.valid_len = next as u64;
                read.needs_newline = !terminated;
            }
            Err(_) if !terminated => {
                read.dropped_partial_line = true;
            }
            Err(e) => bail!(
                "{origin}:{line_no}: corrupt record ({e}); remove the line or start a fresh --out directory"
            ),
        }
        offset = next;
    }
    Ok(read)
}
