//! Reading REPL input: rustyline on a terminal, plain lines otherwise.
//!
//! On a terminal, [`LineReader::Editor`] gives line editing, history (persisted in
//! [`history_path`]), bracketed paste (a pasted block with newlines arrives as one input) and
//! tab completion ([`ReplHelper`]: command names after `:`, file paths after `:grammar`,
//! `:schema`, `:save`, fixed words after `:method`, `:k`, `:chat`, `:tokens`). When stdin is
//! not a terminal (a pipe, a test), [`LineReader::Plain`] reads lines with no prompt and no
//! escape sequences. Either way a line ending in `\` continues on the next line
//! ([`join_continuation`]), and the joined input keeps the newline.
//!
//! Ctrl-C at the prompt clears the line ([`ReadOutcome::Interrupted`]); Ctrl-D (end of input)
//! ends the session ([`ReadOutcome::Eof`]).

use super::command::{ArgKind, COMMANDS, spec};
use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::DefaultHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use std::io::BufRead;
use std::path::PathBuf;

/// The history file: `$XDG_DATA_HOME/domino/history`, else `~/.local/share/domino/history`.
pub fn history_path() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })?;
    Some(data.join("domino").join("history"))
}

/// If `line` ends with an unescaped continuation backslash, the line without it.
pub fn continuation(line: &str) -> Option<&str> {
    let trimmed = line.strip_suffix('\r').unwrap_or(line);
    let stripped = trimmed.strip_suffix('\\')?;
    // `\\` at the end is an escaped backslash, not a continuation.
    if stripped.ends_with('\\') {
        None
    } else {
        Some(stripped)
    }
}

/// Join physical lines into one input: each continued line loses its `\` and keeps a newline.
/// Returns the input and whether it is still open (its last line ended in `\`).
pub fn join_continuation(lines: &[&str]) -> (String, bool) {
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        match continuation(line) {
            Some(body) => {
                out.push_str(body);
                out.push('\n');
                if i + 1 == lines.len() {
                    return (out, true);
                }
            }
            None => {
                out.push_str(line.strip_suffix('\r').unwrap_or(line));
                return (out, false);
            }
        }
    }
    (out, !lines.is_empty())
}

/// What one read produced.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    Line(String),
    /// Ctrl-C at the prompt: the line is dropped, the session goes on.
    Interrupted,
    /// End of input (Ctrl-D): the session ends.
    Eof,
}

/// Tab completion for the REPL.
pub struct ReplHelper {
    files: FilenameCompleter,
}

impl ReplHelper {
    pub fn new() -> Self {
        ReplHelper {
            files: FilenameCompleter::new(),
        }
    }
}

impl Default for ReplHelper {
    fn default() -> Self {
        Self::new()
    }
}

/// Completion candidates for `line` with the cursor at `pos`, without files: command names
/// and fixed words. `None` when the position takes a file path.
pub fn complete_words(line: &str, pos: usize) -> Option<(usize, Vec<String>)> {
    let head = &line[..pos];
    let lead = head.len() - head.trim_start().len();
    let Some(rest) = head[lead..].strip_prefix(':') else {
        return Some((pos, Vec::new()));
    };
    match rest.find(char::is_whitespace) {
        None => {
            let names = COMMANDS
                .iter()
                .filter(|c| c.name.starts_with(rest))
                .map(|c| format!(":{}", c.name))
                .collect();
            Some((lead, names))
        }
        Some(i) => {
            let name = &rest[..i];
            let arg_start = lead + 1 + i + (rest[i..].len() - rest[i..].trim_start().len());
            let partial = &head[arg_start..];
            match spec(name).map(|s| s.arg) {
                Some(ArgKind::File) => None,
                Some(ArgKind::Word(words)) => Some((
                    arg_start,
                    words
                        .iter()
                        .filter(|w| w.starts_with(partial))
                        .map(|w| w.to_string())
                        .collect(),
                )),
                _ => Some((pos, Vec::new())),
            }
        }
    }
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        match complete_words(line, pos) {
            Some((start, words)) => Ok((
                start,
                words
                    .into_iter()
                    .map(|w| Pair {
                        display: w.clone(),
                        replacement: w,
                    })
                    .collect(),
            )),
            None => self.files.complete_path(line, pos),
        }
    }
}

impl Hinter for ReplHelper {
    type Hint = String;
}
impl Highlighter for ReplHelper {}
impl Validator for ReplHelper {}
impl Helper for ReplHelper {}

/// Where input lines come from.
pub enum LineReader {
    Editor {
        editor: Box<Editor<ReplHelper, DefaultHistory>>,
        history: Option<PathBuf>,
    },
    Plain(Box<dyn BufRead>),
}

impl LineReader {
    /// A rustyline editor with history loaded (a missing or unreadable history file is not an
    /// error: the session starts with an empty one).
    pub fn editor() -> anyhow::Result<LineReader> {
        let config = rustyline::Config::builder()
            .auto_add_history(false)
            .completion_type(rustyline::CompletionType::List)
            .max_history_size(2000)?
            .build();
        let mut editor: Editor<ReplHelper, DefaultHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(ReplHelper::new()));
        let history = history_path();
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Ok(LineReader::Editor {
            editor: Box::new(editor),
            history,
        })
    }

    pub fn plain(input: Box<dyn BufRead>) -> LineReader {
        LineReader::Plain(input)
    }

    fn read_physical(&mut self, prompt: &str) -> anyhow::Result<ReadOutcome> {
        match self {
            LineReader::Editor { editor, .. } => match editor.readline(prompt) {
                Ok(line) => Ok(ReadOutcome::Line(line)),
                Err(rustyline::error::ReadlineError::Interrupted) => Ok(ReadOutcome::Interrupted),
                Err(rustyline::error::ReadlineError::Eof) => Ok(ReadOutcome::Eof),
                Err(e) => Err(e.into()),
            },
            LineReader::Plain(input) => {
                // Bytes, not `read_line`: invalid UTF-8 becomes U+FFFD instead of ending the session.
                let mut raw = Vec::new();
                if input.read_until(b'\n', &mut raw)? == 0 {
                    return Ok(ReadOutcome::Eof);
                }
                if raw.ends_with(b"\n") {
                    raw.pop();
                }
                Ok(ReadOutcome::Line(
                    String::from_utf8_lossy(&raw).into_owned(),
                ))
            }
        }
    }

    /// Read one logical input (continuation lines joined). End of input in the middle of a
    /// continued input returns what was read so far.
    pub fn read(&mut self, prompt: &str, continuation_prompt: &str) -> anyhow::Result<ReadOutcome> {
        let mut lines: Vec<String> = Vec::new();
        loop {
            let p = if lines.is_empty() {
                prompt
            } else {
                continuation_prompt
            };
            match self.read_physical(p)? {
                ReadOutcome::Line(line) => lines.push(line),
                ReadOutcome::Interrupted => return Ok(ReadOutcome::Interrupted),
                ReadOutcome::Eof if lines.is_empty() => return Ok(ReadOutcome::Eof),
                ReadOutcome::Eof => break,
            }
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            if !join_continuation(&refs).1 {
                break;
            }
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (text, _) = join_continuation(&refs);
        if let LineReader::Editor { editor, history } = self {
            if !text.trim().is_empty() {
                let _ = editor.add_history_entry(text.as_str());
                if let Some(path) = history {
                    // Write as we go, so a killed session keeps its history.
                    if let Some(dir) = path.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    let _ = editor.save_history(path);
                }
            }
        }
        Ok(ReadOutcome::Line(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuation_lines_join_with_newlines() {
        assert_eq!(join_continuation(&["one"]), ("one".into(), false));
        assert_eq!(join_continuation(&["one \\"]), ("one \n".into(), true));
        assert_eq!(
            join_continuation(&["one\\", "two\\", "three"]),
            ("one\ntwo\nthree".into(), false)
        );
        // An escaped backslash does not continue.
        assert_eq!(join_continuation(&["path\\\\"]), ("path\\\\".into(), false));
        assert_eq!(
            join_continuation(&["crlf\\\r", "x\r"]),
            ("crlf\nx".into(), false)
        );
    }

    #[test]
    fn plain_reader_joins_and_stops_at_eof() {
        let input = b"first \\\nsecond\n:stats\nbad \xff byte\nopen \\\n".to_vec();
        let mut r = LineReader::plain(Box::new(std::io::Cursor::new(input)));
        assert_eq!(
            r.read("", "").unwrap(),
            ReadOutcome::Line("first \nsecond".into())
        );
        assert_eq!(r.read("", "").unwrap(), ReadOutcome::Line(":stats".into()));
        assert_eq!(
            r.read("", "").unwrap(),
            ReadOutcome::Line("bad \u{FFFD} byte".into())
        );
        assert_eq!(r.read("", "").unwrap(), ReadOutcome::Line("open \n".into()));
        assert_eq!(r.read("", "").unwrap(), ReadOutcome::Eof);
    }

    #[test]
    fn completes_command_names_and_words() {
        let (start, names) = complete_words(":s", 2).unwrap();
        assert_eq!(start, 0);
        assert_eq!(names, vec![":schema", ":seed", ":show", ":stats", ":save"]);
        let (start, words) = complete_words(":method n", 9).unwrap();
        assert_eq!(start, 8);
        assert_eq!(words, vec!["naive", "none"]);
        let (_, words) = complete_words(":method l", 9).unwrap();
        assert_eq!(words, vec!["llama-grammar"]);
        let (_, words) = complete_words(":tokens ", 8).unwrap();
        assert_eq!(words, vec!["on", "off"]);
        // File arguments go to the path completer.
        assert_eq!(complete_words(":schema gra", 11), None);
        // A prompt gets nothing.
        assert_eq!(complete_words("hello", 5), Some((5, vec![])));
    }

    #[test]
    fn history_lives_under_the_data_dir() {
        // Only checks the shape; the environment is the test runner's.
        if let Some(p) = history_path() {
            assert!(p.ends_with("domino/history"), "{}", p.display());
        }
    }
}
