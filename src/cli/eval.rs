//! The `domino eval` command line: flags, and the handler that turns them into a run
//! ([`RunOptions`], [`ThroughputOptions`]) of the library's [`crate::eval`].
//!
//! Model flags (`-m`, `--ctx`, `--threads`, `--n-gpu-layers`) are `generate`'s
//! ([`ModelArgs`]), and so is `--temp` (`--temperature` is its alias here); the model is loaded once per command and every sample and method runs in
//! one session ([`LlamaEvalBackend`]). Everything that needs no model works without one —
//! `--show-prompt` prints the exact prompt of the first selected test sample and exits, and
//! `--report-only` rewrites reports — so prompts and reports can be inspected anywhere.
//!
//! `--reasoning [--reasoning-end TEXT]` and `--no-token-healing` are the flags `generate`
//! takes ([`ReasoningArgs`], [`HealingArgs`]). With `--reasoning` the text before the marker
//! is free (stopped at `\nQ:` like `none`), the task schema constrains what follows, and the
//! answer is read after the marker; `llama-grammar` cannot do that and is refused. The
//! few-shot prompts are raw text (not chat-templated) ending in `A:`, so token healing
//! applies, on by default as in `generate`, for every method but `llama-grammar` (llama.cpp's
//! sampler cannot start inside a token); reports measured before healing existed were run as
//! `--no-token-healing` runs. Both settings are recorded in `run.json`: `--resume` with
//! another one stops (exit 2).
//!
//! stdout carries the result only (the report as Markdown, or `report.json` with
//! `--format json`); progress goes to stderr.

use crate::cli::args::{HealingArgs, ModelArgs, OutputFormat, ReasoningArgs, json_style_parser};
use crate::diag::UsageError;
use crate::eval::Task;
use crate::eval::backend::LlamaEvalBackend;
use crate::eval::method::Method;
use crate::eval::prompt::JsonStyle;
use crate::eval::retokenize::{Tokenization, compare};
use crate::eval::runner::{EvalBackend, PreparedTask, RunOptions, Shard, run_task};
use crate::eval::throughput::{
    Manifest, ThroughputOptions, render_throughput_markdown, run_throughput,
};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;

/// `domino eval …`
#[derive(Subcommand, Debug, Clone)]
pub enum EvalCommand {
    /// GSM8K math reasoning answered as JSON (the paper's Table 2).
    Gsm8k(TaskArgs),
    /// CoNLL-2003 named entities answered as JSON (the paper's Table 2).
    Conll(TaskArgs),
    /// Throughput of each method relative to unconstrained decoding (the paper's Table 3).
    Throughput(ThroughputArgs),
    /// Model-preferred retokenization of a text (the paper's App. B, Fig. 2): perplexity of
    /// the tokenizer's tokens vs the tokens the model itself would choose for the same text.
    Retokenize(RetokenizeArgs),
}

/// A comma-separated list of methods (`none,domino,naive`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodList(pub Vec<Method>);

impl std::str::FromStr for MethodList {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Method::parse_list(s).map(MethodList)
    }
}

/// Flags of `domino eval gsm8k|conll`.
#[derive(Args, Debug, Clone)]
pub struct TaskArgs {
    /// Test split, JSON Lines (default: `../shared/data/<task>/test.jsonl`).
    #[arg(long, value_name = "PATH")]
    pub data: Option<PathBuf>,
    /// Training split the demonstrations are drawn from (default: `../shared/data/<task>/train.jsonl`).
    #[arg(long, value_name = "PATH")]
    pub train: Option<PathBuf>,
    /// Evaluate only the first N test samples (the paper: 400).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Number of demonstrations in the prompt.
    #[arg(long, value_name = "K", default_value_t = 5)]
    pub shots: usize,
    /// Seed of the demonstration draw (and of sampling when --temp > 0).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Comma-separated methods: none, domino, `domino-k<N>`, `domino-s<N>` (drafts cut by measured
    /// cost), `domino-s<N>-threshold` (drafts verified whole), naive, llama-grammar, template,
    /// llguidance.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "none,domino,naive,llama-grammar,template"
    )]
    pub methods: MethodList,
    /// Most tokens generated per answer (default: 512 for GSM8K; for CoNLL 64 + 32 per input
    /// token, 16 with --json-style compact, at most 2048).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    /// Sampling temperature (0 = greedy, the default).
    #[arg(
        long = "temp",
        visible_alias = "temperature",
        value_name = "T",
        default_value_t = 0.0
    )]
    pub temperature: f32,
    /// Layout of the demonstration answers.
    #[arg(long, value_name = "JSON_STYLE", value_parser = json_style_parser(), default_value = "pretty")]
    pub json_style: JsonStyle,
    /// Few-shot template (default: `prompts/<task>.txt`).
    #[arg(long, value_name = "FILE")]
    pub template: Option<PathBuf>,
    /// Output directory for results.jsonl and the reports (default: `eval-runs/<task>`).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Continue the run in --out, skipping samples already done.
    #[arg(long)]
    pub resume: bool,
    /// Evaluate only the samples whose index is I modulo N, appending to
    /// `results.shard-I-of-N.jsonl` in --out: start N processes (0/N … N-1/N) with the same
    /// flags to use N cores or GPUs; each reads every shard's results, and the last to finish
    /// writes the report over all of them.
    #[arg(long, value_name = "I/N", conflicts_with_all = ["show_prompt", "report_only"])]
    pub shard: Option<Shard>,
    /// Print the prompt of the first selected test sample and exit (needs no model).
    #[arg(long)]
    pub show_prompt: bool,
    /// Rewrite the reports of the run in --out from its results.jsonl (needs no model); reports
    /// every method found there, and the first --limit samples (default: all done).
    #[arg(long, conflicts_with_all = ["show_prompt", "resume"])]
    pub report_only: bool,
    /// No progress display.
    #[arg(long, short)]
    pub quiet: bool,
    /// Output format of the summary on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub reasoning: ReasoningArgs,
    #[command(flatten)]
    pub healing: HealingArgs,
    #[command(flatten)]
    pub budget: crate::cli::args::BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Flags of `domino eval throughput`.
#[derive(Args, Debug, Clone)]
pub struct ThroughputArgs {
    /// Workload manifest (default: eval/throughput.json).
    #[arg(long, value_name = "FILE")]
    pub manifest: Option<PathBuf>,
    /// Measured repetitions per workload (default from the manifest: 100).
    #[arg(long, value_name = "N")]
    pub reps: Option<usize>,
    /// Warm-up repetitions per workload, not measured (default from the manifest: 10).
    #[arg(long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Most tokens per generation (default from the manifest: 128).
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<usize>,
    /// Sampling temperature (default from the manifest: 1.0).
    #[arg(long = "temp", visible_alias = "temperature", value_name = "T")]
    pub temperature: Option<f32>,
    /// Comma-separated workload names (default: all in the manifest).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub workloads: Vec<String>,
    /// Comma-separated methods (as for `eval gsm8k`; `domino-s10` is DOMINO with speculative
    /// drafts of up to 10 tokens cut by measured cost, `domino-s10-threshold` the paper's rule).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "none,domino,domino-s10,llama-grammar,template"
    )]
    pub methods: MethodList,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory (default: eval-runs/throughput).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub resume: bool,
    #[arg(long, short)]
    pub quiet: bool,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub budget: crate::cli::args::BudgetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Flags of `domino eval retokenize`.
#[derive(Args, Debug, Clone)]
pub struct RetokenizeArgs {
    /// The prompt the text is conditioned on.
    #[arg(long)]
    pub prompt: String,
    /// The text to retokenize (e.g. a template's output).
    #[arg(long)]
    pub text: String,
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub format: OutputFormat,
    #[command(flatten)]
    pub model: ModelArgs,
}

impl TaskArgs {
    /// The run options these flags describe.
    pub fn run_options(&self, command_line: String) -> RunOptions {
        RunOptions {
            data: self.data.clone(),
            train: self.train.clone(),
            limit: self.limit,
            shots: self.shots,
            seed: self.seed,
            methods: self.methods.0.clone(),
            max_tokens: self.max_tokens,
            temperature: self.temperature,
            resume: self.resume,
            json_style: self.json_style,
            template: self.template.clone(),
            schema: None,
            command_line,
            progress: !self.quiet,
            shard: self.shard,
            reasoning_end: self
                .reasoning
                .reasoning
                .then(|| self.reasoning.reasoning_end.clone()),
            token_healing: !self.healing.no_token_healing,
        }
    }
}

/// The command line as typed, for reports (arguments with spaces quoted).
pub fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.contains(char::is_whitespace) || a.is_empty() {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Run `domino eval …` with the model the flags name.
pub fn main(cmd: EvalCommand) -> anyhow::Result<()> {
    let model_args = match &cmd {
        EvalCommand::Gsm8k(a) | EvalCommand::Conll(a) => a.model.clone(),
        EvalCommand::Throughput(a) => a.model.clone(),
        EvalCommand::Retokenize(a) => return retokenize(a),
    };
    run(cmd, || {
        let model = model_args.load()?;
        Ok((model, model_args.session_options()))
    })
}

/// Run `domino eval gsm8k|conll|throughput`. `load_model` is only called when generation is
/// needed (not for `--show-prompt` or `--report-only`).
pub fn run(
    cmd: EvalCommand,
    load_model: impl FnOnce() -> anyhow::Result<(crate::runtime::Model, crate::runtime::SessionOptions)>,
) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match cmd {
        EvalCommand::Gsm8k(args) => run_accuracy(Task::Gsm8k, &args, load_model, &mut stdout),
        EvalCommand::Conll(args) => run_accuracy(Task::Conll, &args, load_model, &mut stdout),
        EvalCommand::Retokenize(args) => retokenize(&args),
        EvalCommand::Throughput(args) => {
            let manifest_path = args
                .manifest
                .clone()
                .unwrap_or_else(|| crate::eval::resolve("eval/throughput.json"));
            let manifest = Manifest::load(&manifest_path)?;
            let opts = ThroughputOptions {
                methods: args.methods.0.clone(),
                reps: args.reps,
                warmup: args.warmup,
                max_tokens: args.max_tokens,
                temperature: args.temperature,
                workloads: args.workloads.clone(),
                seed: args.seed,
                resume: args.resume,
                command_line: command_line(),
                progress: !args.quiet,
            };
            let out = args
                .out
                .clone()
                .unwrap_or_else(|| PathBuf::from("eval-runs/throughput"));
            let (model, session_options) = load_model()?;
            let mut backend =
                LlamaEvalBackend::new(&model, session_options)?.with_budget(args.budget.budget());
            let report =
                run_throughput(&manifest, &mut backend as &mut dyn EvalBackend, &opts, &out)?;
            match args.format {
                OutputFormat::Json => {
                    writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?
                }
                OutputFormat::Text => write!(
                    stdout,
                    "{}",
                    render_throughput_markdown(&report, &opts.methods)
                )?,
            }
            eprintln!("reports written to {}", out.display());
            Ok(())
        }
    }
}

fn run_accuracy(
    task: Task,
    args: &TaskArgs,
    load_model: impl FnOnce() -> anyhow::Result<(crate::runtime::Model, crate::runtime::SessionOptions)>,
    stdout: &mut impl Write,
) -> anyhow::Result<()> {
    let opts = args.run_options(command_line());
    if opts.max_tokens == Some(0) {
        anyhow::bail!(UsageError("--max-tokens must be at least 1".into()));
    }
    if args.show_prompt {
        let prepared = PreparedTask::load(task, &opts)?;
        if prepared.sample_count(opts.limit) == 0 {
            anyhow::bail!(UsageError("--limit 0 selects no sample to show".into()));
        }
        let (_, prompt, _) = prepared.sample(0);
        write!(stdout, "{prompt}")?;
        return Ok(());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("eval-runs").join(task.name()));
    let report = if args.report_only {
        crate::eval::runner::rewrite_report(task, &opts, &out)?
    } else {
        let (model, session_options) = load_model()?;
        let mut backend =
            LlamaEvalBackend::new(&model, session_options)?.with_budget(args.budget.budget());
        run_task(task, &mut backend as &mut dyn EvalBackend, &opts, &out)?
    };
    match args.format {
        OutputFormat::Json => writeln!(stdout, "{}", serde_json::to_string_pretty(&report)?)?,
        OutputFormat::Text => write!(stdout, "{}", crate::eval::report::render_compact(&report))?,
    }
    eprintln!(
        "results and the full report (report.md, report.json, charts) written to {}",
        out.display()
    );
    Ok(())
}

fn render(t: &Tokenization) -> String {
    t.pieces
        .iter()
        .map(|p| format!("[{}]", p.escape_debug()))
        .collect()
}

/// `domino eval retokenize`: both tokenizations of the text, scored.
fn retokenize(args: &RetokenizeArgs) -> anyhow::Result<()> {
    let model = args.model.load()?;
    let mut session = model.session(args.model.session_options())?;
    let report = compare(&mut session, &args.prompt, &args.text)?;
    let mut out = std::io::stdout().lock();
    match args.format {
        OutputFormat::Json => writeln!(out, "{}", serde_json::to_string_pretty(&report)?)?,
        OutputFormat::Text => {
            writeln!(
                out,
                "model: {}; prompt: {} tokens",
                report.model, report.prompt_tokens
            )?;
            for (name, t) in [
                ("tokenizer", &report.default),
                ("model-preferred", &report.naturalized),
            ] {
                writeln!(
                    out,
                    "{name}: {} tokens, perplexity {:.2}",
                    t.tokens.len(),
                    t.perplexity
                )?;
                writeln!(out, "  {}", render(t))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Harness {
        #[command(subcommand)]
        cmd: EvalCommand,
    }

    #[test]
    fn flags_parse_with_paper_defaults() {
        let h = Harness::try_parse_from(["eval", "gsm8k", "--limit", "20"]).unwrap();
        let EvalCommand::Gsm8k(args) = h.cmd else {
            panic!()
        };
        let opts = args.run_options(String::new());
        assert_eq!(
            (opts.limit, opts.shots, opts.temperature),
            (Some(20), 5, 0.0)
        );
        assert_eq!(opts.methods, Method::default_accuracy_methods());

        let h = Harness::try_parse_from(["eval", "conll", "--methods", "none,domino-k0"]).unwrap();
        let EvalCommand::Conll(args) = h.cmd else {
            panic!()
        };
        assert_eq!(args.methods.0, vec![Method::None, Method::domino_k(0)]);

        assert!(Harness::try_parse_from(["eval", "gsm8k", "--methods", "none,bogus"]).is_err());

        let h =
            Harness::try_parse_from(["eval", "throughput", "--reps", "3", "--workloads", "json,c"])
                .unwrap();
        let EvalCommand::Throughput(args) = h.cmd else {
            panic!()
        };
        assert_eq!(args.workloads, ["json", "c"]);
        assert_eq!(args.methods.0, Method::default_throughput_methods());
    }
}
