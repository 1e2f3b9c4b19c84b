//! `domino generate --batch prompts.jsonl`: many prompts through one loaded model, one JSON
//! result per line (NDJSON) written and flushed as each finishes, so that a killed run loses
//! at most the prompt in flight and `--resume` picks up where it stopped.
//!
//! Input: one JSON object per line, `{"id": ..., "prompt": "...", "system": "..."}`; `id`
//! (any JSON value, default the 1-based line number) names the result, `system` (optional)
//! overrides `--system-prompt` for that line. Blank lines are skipped. Output: `generate
//! --format json`'s object with `id` first. Every prompt runs with the same flags (constraint,
//! sampling, `-n`) in a fresh context, so a result does not depend on the lines before it and
//! a resumed run produces what an uninterrupted one would have.
//!
//! `--resume` reads the ids already in `-o FILE` and appends the rest; without it the file is
//! overwritten. Progress (done/total, counting resumed lines) goes to stderr: a bar on a
//! terminal, a line every 5 % otherwise.

use crate::cli::generate::{GenerateArgs, check_complete, process_escapes, prompt_tokens};
use crate::decode::GenerationRequest;
use anyhow::Context;
use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

/// The batch flags of `generate`.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = "Batch")]
pub struct BatchArgs {
    /// JSON Lines of prompts, `{"id": ..., "prompt": "...", "system": "..."}`: one NDJSON
    /// result per prompt, written as each finishes.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "prompt_flag", "prompt_file"])]
    pub batch: Option<PathBuf>,
    /// Write the batch's results to this file instead of stdout.
    #[arg(short = 'o', long, value_name = "FILE", requires = "batch")]
    pub output: Option<PathBuf>,
    /// Skip the prompts whose id is already in --output, and append to it.
    #[arg(long, requires = "output")]
    pub resume: bool,
    /// No progress display.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// One input line.
#[derive(Debug, PartialEq)]
pub struct BatchItem {
    pub id: serde_json::Value,
    pub prompt: String,
    pub system: Option<String>,
}

/// Parse the batch file's text (errors name the line).
pub fn parse_batch(text: &str) -> anyhow::Result<Vec<BatchItem>> {
    let mut items = Vec::new();
    let mut seen = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| crate::diag::UsageError(format!("batch line {n}: not JSON: {e}")))?;
        let prompt = v.get("prompt").and_then(|p| p.as_str()).ok_or_else(|| {
            crate::diag::UsageError(format!("batch line {n}: no string field \"prompt\""))
        })?;
        let id = v.get("id").cloned().unwrap_or(serde_json::json!(n));
        if !seen.insert(id_key(&id)) {
            return Err(
                crate::diag::UsageError(format!("batch line {n}: duplicate id {id}")).into(),
            );
        }
        let system = v.get("system").and_then(|s| s.as_str()).map(str::to_string);
        items.push(BatchItem {
            id,
            prompt: prompt.to_string(),
            system,
        });
    }
    Ok(items)
}

/// An id as a set key (`1` and `"1"` stay different).
fn id_key(id: &serde_json::Value) -> String {
    id.to_string()
}

/// The ids already in an output file (a torn last line, from a killed run, is ignored).
pub fn done_ids(path: &Path) -> anyhow::Result<HashSet<String>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut ids = HashSet::new();
    for line in std::io::BufReader::new(file).lines() {
        let line = line?;
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
            && let Some(id) = v.get("id")
        {
            ids.insert(id_key(id));
        }
    }
    Ok(ids)
}

/// Progress on stderr.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    every: usize,
    total: usize,
}

impl Progress {
    fn new(total: usize, done: usize, quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total as u64),
                indicatif::ProgressDrawTarget::stderr(),
            );
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "[{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.set_position(done as u64);
            bar
        });
        let p = Progress {
            bar,
            every: if quiet {
                usize::MAX
            } else {
                (total / 20).max(1)
            },
            total,
        };
        p.line(done);
        p
    }

    fn line(&self, done: usize) {
        if self.bar.is_none() && (done % self.every == 0 || done == self.total) {
            eprintln!("batch: {done}/{} done", self.total);
        }
    }

    fn advance(&self, done: usize) {
        match &self.bar {
            Some(bar) => bar.set_position(done as u64),
            None => self.line(done),
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish();
        }
    }
}

/// `generate --batch`.
pub fn run(args: GenerateArgs) -> anyhow::Result<()> {
    let batch = args.batch.batch.clone().expect("--batch given");
    let sampling = args.sampling.config()?;
    let mut decode_config = args.decode.config()?;
    // Only raw prompts are healed (a chat template's assistant header is not the user's text).
    decode_config.token_healing &= !args.chat && args.system_prompt.is_none();
    let text = std::fs::read_to_string(&batch)
        .with_context(|| format!("reading the batch file {}", batch.display()))?;
    let items = parse_batch(&text)?;
    let done = match (&args.batch.output, args.batch.resume) {
        (Some(path), true) => done_ids(path)?,
        _ => HashSet::new(),
    };
    let todo: Vec<&BatchItem> = items
        .iter()
        .filter(|it| !done.contains(&id_key(&it.id)))
        .collect();
    let mut out: Box<dyn Write> = match &args.batch.output {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(args.batch.resume)
                .truncate(!args.batch.resume)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?;
            // A killed run may have left a torn last line: start ours on a fresh one.
            if args.batch.resume {
                let bytes = std::fs::read(path)?;
                if bytes.last().is_some_and(|&b| b != b'\n') {
                    file.write_all(b"\n")?;
                }
            }
            Box::new(file)
        }
        None => Box::new(std::io::stdout().lock()),
    };
    let escape = |s: &str| {
        if args.escape {
            process_escapes(s)
        } else {
            s.to_string()
        }
    };
    let default_system = args.system_prompt.as_deref().map(escape);
    let already = items.len() - todo.len();
    if already > 0 {
        crate::log!(1, "batch: {already} of {} already done", items.len());
    }
    let progress = Progress::new(items.len(), already, args.batch.quiet);
    if todo.is_empty() {
        progress.finish();
        return Ok(());
    }
    let model = args.model.load()?;
    let mut decoder = crate::decode::methods::Decoder::new(&decode_config, &model)?;
    let mut session = model.session(args.model.session_options())?;
    let constrained = decode_config.source.is_some() || decode_config.regions.is_some();
    let mut incomplete = 0usize;
    for (i, item) in todo.iter().enumerate() {
        let system = item
            .system
            .as_deref()
            .map(escape)
            .or(default_system.clone());
        let prompt = escape(&item.prompt);
        let tokens = prompt_tokens(&model, &prompt, system.as_deref(), args.chat)?;
        if tokens.is_empty() {
            return Err(crate::diag::UsageError(format!(
                "batch id {}: the prompt is empty",
                item.id
            ))
            .into());
        }
        session.clear();
        let request = GenerationRequest {
            prompt: tokens,
            max_tokens: args.max_tokens,
            sampling: sampling.clone(),
            logprobs: false,
        };
        let result = decoder
            .generate(&mut session, &request, &mut |_, _| Ok(()))
            .with_context(|| format!("batch id {}", item.id))?;
        let mut line = serde_json::Map::new();
        line.insert("id".into(), item.id.clone());
        if let serde_json::Value::Object(fields) = crate::cli::generate::result_json(&result) {
            line.extend(fields.into_iter().filter(|(k, _)| k != "logprobs"));
        }
        serde_json::to_writer(&mut out, &line)?;
        writeln!(out)?;
        out.flush()?;
        if let Some(bar) = &progress.bar {
            bar.suspend(|| {
                check_complete(
                    constrained,
                    &result,
                    args.max_tokens,
                    false,
                    &format!("batch id {}: ", item.id),
                )
            })?;
        } else {
            check_complete(
                constrained,
                &result,
                args.max_tokens,
                false,
                &format!("batch id {}: ", item.id),
            )?;
        }
        if constrained && result.finish_reason == crate::decode::FinishReason::Length {
            incomplete += 1;
        }
        progress.advance(already + i + 1);
    }
    progress.finish();
    decoder.save_draft_stats()?;
    if args.decode.constraint.strict && incomplete > 0 {
        return Err(crate::diag::Incomplete(format!(
            "{incomplete} of {} batch outputs were cut short by the token limit (-n {})",
            todo.len(),
            args.max_tokens
        ))
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_lines_take_an_id_or_their_line_number() {
        let items = parse_batch(
            "{\"id\": \"a\", \"prompt\": \"x\"}\n\n{\"prompt\": \"y\", \"system\": \"s\"}\n",
        )
        .unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].id, serde_json::json!("a"));
        assert_eq!(items[1].id, serde_json::json!(3));
        assert_eq!(items[1].system.as_deref(), Some("s"));
    }

    #[test]
    fn bad_batch_lines_are_usage_errors_naming_the_line() {
        for (text, want) in [
            ("{\"prompt\": 1}", "line 1: no string field"),
            ("{}\n", "line 1"),
            ("{\"prompt\": \"a\"}\nnot json", "line 2: not JSON"),
            (
                "{\"id\": 1, \"prompt\": \"a\"}\n{\"id\": 1, \"prompt\": \"b\"}",
                "duplicate id 1",
            ),
        ] {
            let err = parse_batch(text).unwrap_err();
            assert!(crate::diag::is_usage_error(&err), "{err:#}");
            assert!(format!("{err:#}").contains(want), "{text:?}: {err:#}");
        }
    }

    #[test]
    fn done_ids_skip_a_torn_last_line() {
        let dir = std::env::temp_dir().join(format!("domino-batch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        std::fs::write(
            &path,
            "{\"id\":\"a\",\"text\":\"x\"}\n{\"id\":2}\n{\"id\":\"c\",\"te",
        )
        .unwrap();
        let ids = done_ids(&path).unwrap();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains("\"a\"") && ids.contains("2"));
        assert!(done_ids(&dir.join("missing.jsonl")).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }
}
