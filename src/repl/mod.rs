//! `domino repl`: an interactive shell for watching a model generate under a grammar.
//!
//! # Overview
//! The model is loaded once and one llama context (KV cache) is kept for the whole session.
//! Every input line is either a `:command` ([`command`]: switch the constraint, the method,
//! lookahead, sampling, inspect the mask, save the transcript, …) or a prompt, which is
//! generated against the current settings and streamed token by token with *token heat*
//! ([`heat`]): each token's background shows how surprising it was to the unmasked model, and
//! tokens where the grammar overrode the model's favourite are underlined. The loop itself is
//! [`generation::generate`].
//!
//! # Behaviour worth knowing
//! - Each prompt is one independent turn (with `:chat on`, one user message); the KV cache
//!   keeps the longest common prefix with the previous turn, so repeating a prompt (or its
//!   chat preamble) is not evaluated again.
//! - A bad command argument, an unreadable grammar or schema, or a failed generation prints
//!   `error: …` on stderr and the session goes on; the previous constraint stays in force.
//! - Ctrl-C during a generation stops it (a signal flag checked once per token; the model
//!   stays loaded); at the prompt it clears the line; Ctrl-D or `:quit` ends the session.
//!   When stdin is not a terminal, Ctrl-C while waiting for input ends the process as usual.
//! - Speculative drafts (`:draft S`, S > 0) and the `template` and `llama-grammar` methods
//!   run through [`crate::decode::methods::Decoder`] (kept across turns, so draft counts keep
//!   learning); those loops report no per-token facts, so their text streams without heat and
//!   the transcript's `intervened` is `null`. Speculation never changes greedy output.
//! - Results (generated text, command answers) go to stdout; the banner, per-generation
//!   status lines and errors go to stderr. With stdin not a terminal lines are read plainly
//!   (no prompt, no line editing); colour is off when stdout is not a terminal or `NO_COLOR`
//!   is set.

pub mod command;
pub mod generation;
pub mod heat;
pub mod input;

use crate::cli::args::ConstraintArgs;
use crate::cli::generate::{ModelArgs, SamplingArgs};
use crate::cli::mask::compile_constraint;
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::{Decoder, DecoderConfig};
use crate::decode::{Control, FinishReason, GenerationRequest, SamplingConfig, TokenEvent};
use crate::engine::{CompiledGrammar, Constraint, Options};
use crate::runtime::{Model, Session};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use command::{Command, Input, Method, parse_input};
use generation::{GenConfig, Outcome};
use heat::{HeatStyle, Palette, TokenView};
use input::{LineReader, ReadOutcome};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Start an interactive session.
///
/// Takes the same model, constraint and sampling flags as `generate`; they are the session's
/// starting settings, changed later with `:commands` (`:help` lists them).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  domino repl --json --chat\n  domino repl --schema grammars/gsm8k.schema.json --temp 0.7\n\n\
In the session: type a prompt, or :schema FILE, :grammar FILE, :regex RE, :json, :none, :method M, :k N|inf, \
:draft S, :temp T, :seed N, :max N, :chat on|off, :tokens on|off, :mask, :stats, :show, :save FILE, :help, :quit. \
Token heat: background from green (likely) to red (surprising to the unmasked model); underlined where the grammar \
overrode the model's favourite token."
)]
pub struct ReplArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    /// How the constraint is applied (as `generate --method`): domino (lookahead --k), naive
    /// (k = 0), none (unmasked), template (forced text appended), llama-grammar.
    #[arg(long, value_enum, default_value = "domino")]
    pub method: Method,
    /// Lookahead: the most terminal boundaries inside one token (`inf` = minimally invasive).
    #[arg(long, value_name = "N|inf", default_value = "inf")]
    pub k: String,
    /// Speculative draft length (0 = off, so that every token shows its heat; with S > 0
    /// decode's speculative loop runs and streams the text without heat).
    #[arg(long, value_name = "S", default_value_t = 0)]
    pub draft: usize,
    /// Smallest count probability for a drafted token.
    #[arg(long, value_name = "P", default_value_t = crate::decode::methods::DEFAULT_DRAFT_THRESHOLD)]
    pub draft_threshold: f32,
    /// How long each draft is (as `generate --draft-policy`): `cost` cuts it where expected
    /// tokens per measured millisecond peak, `threshold` verifies every proposal.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = DraftPolicy::Cost)]
    pub draft_policy: DraftPolicy,
    /// Maximum number of tokens per generation.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: u64,
    /// Wrap each prompt in the model's chat template as one user turn.
    #[arg(long)]
    pub chat: bool,
    /// Show token boundaries from the start.
    #[arg(long)]
    pub tokens: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// The settings a prompt is generated with.
#[derive(Clone, Debug)]
struct Settings {
    method: Method,
    k: Option<u32>,
    draft: usize,
    draft_threshold: f32,
    draft_policy: DraftPolicy,
    sampling: SamplingConfig,
    max_tokens: usize,
    chat: bool,
    tokens: bool,
}

impl Settings {
    /// Lookahead actually used by the engine.
    fn lookahead(&self) -> Option<u32> {
        match self.method {
            Method::Naive => Some(0),
            _ => self.k,
        }
    }

    /// Whether decode's loops run this generation (speculation and the template and
    /// llama-grammar baselines live there); otherwise the REPL's own loop runs, which
    /// reports every token's heat and interventions as it streams.
    fn uses_decoder(&self, constrained: bool) -> bool {
        constrained
            && (self.draft > 0 || matches!(self.method, Method::Template | Method::LlamaGrammar))
    }
}

fn k_str(k: Option<u32>) -> String {
    k.map_or("inf".to_string(), |k| k.to_string())
}

/// The constraint in force.
struct Active {
    /// How `:show` and the prompt name it (`json`, `schema gsm8k.schema.json`, …).
    label: String,
    grammar: Arc<CompiledGrammar>,
}

/// One generation, kept for `:stats`, `:mask` and `:save`.
struct Turn {
    prompt: String,
    prompt_tokens: Vec<TokenId>,
    constraint: Option<String>,
    settings: Settings,
    outcome: Outcome,
}

impl Turn {
    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "prompt": self.prompt,
            "chat": self.settings.chat,
            "constraint": self.constraint,
            "method": self.settings.method.as_str(),
            "k": k_str(self.settings.k),
            "temperature": self.settings.sampling.temperature,
            "seed": self.settings.sampling.seed,
            "max_tokens": self.settings.max_tokens,
            "text": self.outcome.text(),
            "tokens": self.outcome.tokens.iter().map(|t| t.0).collect::<Vec<_>>(),
            "logprobs": self.outcome.logprobs,
            "intervened": if self.outcome.intervened.len() == self.outcome.tokens.len() {
                serde_json::json!(self.outcome.intervened)
            } else {
                serde_json::Value::Null
            },
            "finish_reason": self.outcome.finish,
            "complete": self.outcome.complete(),
            "stats": self.outcome.stats,
        })
    }
}

/// A session's state.
struct Repl<'m> {
    model: &'m Model,
    session: Session<'m>,
    vocab: Arc<Vocabulary>,
    /// Compile options (start rule, whitespace policy, …) from the command line; the
    /// constraint fields are replaced by each `:grammar`/`:schema`/`:regex`/`:json`.
    compile: ConstraintArgs,
    active: Option<Active>,
    settings: Settings,
    turns: Vec<Turn>,
    palette: Palette,
    /// Raised by SIGINT; cleared before each generation.
    cancel: Arc<AtomicBool>,
    /// decode's decoder for the current settings (rebuilt when they change; it keeps its
    /// draft counts across generations).
    decoder: Option<(String, Decoder)>,
}

/// Where messages go: stdout for results, stderr for errors and status.
fn say(text: impl AsRef<str>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", text.as_ref());
    let _ = out.flush();
}

fn complain(text: impl std::fmt::Display) {
    eprintln!("error: {text}");
}

/// What the prompt is called in `:show` and in the input prompt.
fn label_for(args: &ConstraintArgs) -> Option<String> {
    let name = |p: &Path| p.display().to_string();
    if let Some(p) = &args.grammar {
        Some(format!("grammar {}", name(p)))
    } else if let Some(p) = &args.schema {
        Some(format!("schema {}", name(p)))
    } else if let Some(r) = &args.regex {
        Some(format!("regex {r}"))
    } else if args.json {
        Some("json".to_string())
    } else {
        None
    }
}

/// Compile a constraint choice; `Ok(None)` for "no constraint".
fn compile(args: &ConstraintArgs) -> anyhow::Result<Option<Active>> {
    let Some(label) = label_for(args) else {
        return Ok(None);
    };
    let grammar = compile_constraint(args).map_err(|e| e.context(label.clone()))?;
    Ok(Some(Active { label, grammar }))
}

pub fn run(args: ReplArgs) -> anyhow::Result<()> {
    let sampling = args.sampling.config()?;
    let k = crate::cli::mask::lookahead(&args.k)?;
    if !(0.0..=1.0).contains(&args.draft_threshold) {
        return Err(crate::diag::UsageError(format!(
            "--draft-threshold must be in [0, 1], got {}",
            args.draft_threshold
        ))
        .into());
    }
    // A bad starting constraint is a usage error (exit 2) before the model loads.
    let active = compile(&args.constraint)?;
    let model = args.model.load()?;
    let session = model.session(args.model.session_options())?;
    let interactive = std::io::stdin().is_terminal();
    let palette = Palette::detect(std::io::stdout().is_terminal());

    let cancel = Arc::new(AtomicBool::new(false));
    // When reading plain stdin, Ctrl-C outside a generation ends the process as usual; in the
    // line editor the terminal is raw while reading, so Ctrl-C arrives as a key instead.
    let idle_default = Arc::new(AtomicBool::new(!interactive));
    signal_hook::flag::register_conditional_default(
        signal_hook::consts::SIGINT,
        idle_default.clone(),
    )?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, cancel.clone())?;

    let mut repl = Repl {
        vocab: model.vocabulary(),
        model: &model,
        session,
        compile: args.constraint.clone(),
        active,
        settings: Settings {
            method: args.method,
            k,
            draft: args.draft,
            draft_threshold: args.draft_threshold,
            draft_policy: args.draft_policy,
            sampling,
            max_tokens: args.max_tokens as usize,
            chat: args.chat,
            tokens: args.tokens,
        },
        turns: Vec::new(),
        palette,
        cancel,
        decoder: None,
    };
    eprintln!(
        "domino repl: {} loaded ({} tokens of context). :help lists the commands; Ctrl-D leaves.",
        model.name(),
        repl.session.n_ctx()
    );
    let legend = heat::legend(palette);
    if !legend.is_empty() {
        eprintln!("{legend}");
    }

    let mut reader = if interactive {
        LineReader::editor()?
    } else {
        LineReader::plain(Box::new(std::io::BufReader::new(std::io::stdin())))
    };
    loop {
        let prompt = if interactive {
            repl.input_prompt()
        } else {
            String::new()
        };
        let cont = if interactive { "... " } else { "" };
        let text = match reader.read(&prompt, cont)? {
            ReadOutcome::Line(text) => text,
            ReadOutcome::Interrupted => continue,
            ReadOutcome::Eof => break,
        };
        match parse_input(&text) {
            Ok(Input::Empty) => {}
            Ok(Input::Prompt(p)) => {
                idle_default.store(false, Ordering::SeqCst);
                repl.prompt(&p);
                idle_default.store(!interactive, Ordering::SeqCst);
            }
            Ok(Input::Command(Command::Quit)) => break,
            Ok(Input::Command(c)) => repl.command(c),
            Err(e) => complain(e),
        }
    }
    Ok(())
}

const DECODER_NOTE: &str = "with drafts on, or method template or llama-grammar, the text streams without heat (:draft 0 and domino/naive/none show it)";

impl<'m> Repl<'m> {
    fn input_prompt(&self) -> String {
        match &self.active {
            Some(a) if self.settings.method != Method::None => {
                format!("domino[{}]> ", short_label(&a.label))
            }
            Some(a) => format!("domino[{} off]> ", short_label(&a.label)),
            None => "domino> ".to_string(),
        }
    }

    fn set_constraint(&mut self, choice: ConstraintArgs) {
        match compile(&choice) {
            Ok(active) => {
                match &active {
                    Some(a) => say(format!(
                        "constraint: {} ({} terminals, {} scanner states)",
                        a.label,
                        a.grammar.grammar().terminals.len(),
                        a.grammar.scanner_states()
                    )),
                    None => say("constraint: none"),
                }
                self.active = active;
                self.compile = choice;
            }
            Err(e) => complain(format!("{e:#} (the constraint is unchanged)")),
        }
    }

    /// A constraint choice with the command-line compile options and one source.
    fn choice(&self) -> ConstraintArgs {
        ConstraintArgs {
            grammar: None,
            schema: None,
            regex: None,
            json: false,
            ..self.compile.clone()
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Help => print!("{}", command::help_text()),
            Command::Grammar(p) => self.set_constraint(ConstraintArgs {
                grammar: Some(p),
                ..self.choice()
            }),
            Command::Schema(p) => self.set_constraint(ConstraintArgs {
                schema: Some(p),
                ..self.choice()
            }),
            Command::Regex(r) => self.set_constraint(ConstraintArgs {
                regex: Some(r),
                ..self.choice()
            }),
            Command::Json => self.set_constraint(ConstraintArgs {
                json: true,
                ..self.choice()
            }),
            Command::NoConstraint => self.set_constraint(self.choice()),
            Command::Method(m) => {
                self.settings.method = m;
                say(format!("method: {}", m.as_str()));
                if matches!(m, Method::Template | Method::LlamaGrammar) {
                    eprintln!("note: {DECODER_NOTE}");
                }
            }
            Command::K(k) => {
                self.settings.k = k;
                say(format!("k: {}", k_str(k)));
            }
            Command::Draft(s) => {
                self.settings.draft = s;
                say(format!("draft: {s}"));
                if s > 0 {
                    eprintln!("note: {DECODER_NOTE}");
                }
            }
            Command::Temp(t) => {
                self.settings.sampling.temperature = t;
                say(format!("temp: {t}"));
            }
            Command::Seed(n) => {
                self.settings.sampling.seed = n;
                say(format!("seed: {n}"));
            }
            Command::Max(n) => {
                self.settings.max_tokens = n;
                say(format!("max: {n}"));
            }
            Command::Chat(on) => {
                if on {
                    if let Err(e) = self.model.chat_template() {
                        complain(e);
                        return;
                    }
                }
                self.settings.chat = on;
                say(format!("chat: {}", if on { "on" } else { "off" }));
            }
            Command::Tokens(on) => {
                self.settings.tokens = on;
                say(format!("tokens: {}", if on { "on" } else { "off" }));
            }
            Command::Show => say(self.show()),
            Command::Stats => match self.turns.last() {
                Some(t) => {
                    let v = serde_json::json!({
                        "finish_reason": t.outcome.finish,
                        "complete": t.outcome.complete(),
                        "stats": t.outcome.stats,
                    });
                    // One line for machines; indented for a person at a terminal.
                    say(if self.palette.is_plain() {
                        v.to_string()
                    } else {
                        serde_json::to_string_pretty(&v).unwrap_or_default()
                    })
                }
                None => complain("no generation yet: type a prompt first"),
            },
            Command::Mask => {
                if let Err(e) = self.mask() {
                    complain(format!("{e:#}"));
                }
            }
            Command::Save(p) => match self.save(&p) {
                Ok(n) => say(format!("saved {n} turns to {}", p.display())),
                Err(e) => complain(format!("{e:#}")),
            },
            Command::Quit => {}
        }
    }

    fn show(&self) -> String {
        let s = &self.settings;
        let c = &s.sampling;
        let mut lines = vec![
            format!("model       {}", self.model.path().display()),
            format!(
                "constraint  {}",
                self.active.as_ref().map_or("none", |a| a.label.as_str())
            ),
            format!("method      {}", s.method.as_str()),
            format!(
                "k           {}{}",
                k_str(s.k),
                if s.method == Method::Naive {
                    " (naive uses 0)"
                } else {
                    ""
                }
            ),
            format!(
                "draft       {} (threshold {}, policy {})",
                s.draft,
                s.draft_threshold,
                s.draft_policy.as_str()
            ),
            format!(
                "temp        {}{}",
                c.temperature,
                if c.is_greedy() { " (greedy)" } else { "" }
            ),
            format!("seed        {}", c.seed),
            format!("max         {}", s.max_tokens),
            format!("chat        {}", if s.chat { "on" } else { "off" }),
            format!("tokens      {}", if s.tokens { "on" } else { "off" }),
        ];
        if c.top_k > 0 || c.top_p < 1.0 || c.min_p > 0.0 {
            lines.push(format!(
                "sampling    top-k {} top-p {} min-p {}",
                c.top_k, c.top_p, c.min_p
            ));
        }
        let w = &self.compile;
        lines.push(format!(
            "whitespace  {} (max {}){}",
            format!("{:?}", w.whitespace).to_lowercase(),
            w.max_whitespace,
            if w.lenient { ", lenient" } else { "" }
        ));
        lines.join("\n")
    }

    /// A constraint for one generation, or `None` when generating freely.
    fn new_constraint(&self) -> anyhow::Result<Option<Constraint>> {
        match (&self.active, self.settings.method) {
            (Some(a), Method::Domino | Method::Naive) => Ok(Some(Constraint::new(
                &a.grammar,
                &self.vocab,
                Options {
                    lookahead: self.settings.lookahead(),
                    ..Default::default()
                },
            )?)),
            _ => Ok(None),
        }
    }

    fn prompt(&mut self, prompt: &str) {
        if let Err(e) = self.generate(prompt) {
            // The stream may have stopped mid-line.
            println!();
            complain(format!("{e:#}"));
        }
    }

    fn generate(&mut self, prompt: &str) -> anyhow::Result<()> {
        let prompt_tokens = self.model.prompt_tokens(prompt, self.settings.chat)?;
        anyhow::ensure!(!prompt_tokens.is_empty(), "the prompt is empty");
        self.cancel.store(false, Ordering::SeqCst);
        let outcome = if self.settings.uses_decoder(self.active.is_some()) {
            self.generate_with_decoder(&prompt_tokens)?
        } else {
            self.generate_with_heat(&prompt_tokens)?
        };
        let s = &outcome.stats;
        let mut status = format!(
            "[{} · {} tokens · {:.1} tok/s · {} interventions · {} masks",
            outcome.finish.as_str(),
            s.generated_tokens,
            s.tokens_per_s,
            s.interventions,
            s.masks_computed,
        );
        if self.settings.uses_decoder(self.active.is_some()) {
            status.push_str(&format!(
                " · drafts {}/{} accepted · {} forced",
                s.draft_accepted, s.draft_proposed, s.forced_tokens
            ));
        }
        if outcome.finish == FinishReason::Cancelled {
            status.push_str(" · stopped by Ctrl-C");
        }
        status.push(']');
        if self.palette.is_plain() {
            eprintln!("{status}");
        } else {
            use crossterm::style::Stylize;
            eprintln!("{}", status.dark_grey());
        }
        self.turns.push(Turn {
            prompt: prompt.to_string(),
            prompt_tokens,
            constraint: self.active.as_ref().map(|a| a.label.clone()),
            settings: self.settings.clone(),
            outcome,
        });
        Ok(())
    }

    /// The decoder for the current settings, built (and the constraint compiled for it) when
    /// they changed since the last generation.
    fn decoder(&mut self) -> anyhow::Result<&mut Decoder> {
        let s = &self.settings;
        let key = format!(
            "{:?}|{:?}|{:?}|{}|{}|{:?}",
            self.active.as_ref().map(|a| &a.label),
            s.method,
            s.k,
            s.draft,
            s.draft_threshold,
            s.draft_policy
        );
        if self.decoder.as_ref().is_none_or(|(k, _)| *k != key) {
            let config = DecoderConfig {
                method: s.method,
                source: self.compile.source()?,
                compile: self.compile.compile_options(),
                k: s.k,
                opportunistic: false,
                draft: s.draft,
                draft_threshold: s.draft_threshold,
                draft_policy: s.draft_policy,
                draft_stats: None,
            };
            self.decoder = Some((key, Decoder::new(&config, self.model)?));
        }
        Ok(&mut self.decoder.as_mut().expect("just built").1)
    }

    /// One generation through decode's loops (speculation, template, llama-grammar): the text
    /// streams without heat; log-probabilities come with the result.
    fn generate_with_decoder(&mut self, prompt_tokens: &[TokenId]) -> anyhow::Result<Outcome> {
        // Reuse the KV cache's common prefix: decode's loop appends the prompt to the cache.
        let keep = generation::reuse_prefix(&mut self.session, prompt_tokens)?;
        let request = GenerationRequest {
            prompt: prompt_tokens[keep..].to_vec(),
            max_tokens: self.settings.max_tokens,
            sampling: self.settings.sampling.clone(),
            logprobs: true,
        };
        let cancel = self.cancel.clone();
        let style = HeatStyle {
            palette: Palette::Plain,
            boundaries: self.settings.tokens,
        };
        let mut streamed_tokens = 0usize;
        let mut last_byte: Option<u8> = None;
        let mut utf8 = crate::decode::Utf8Stream::new();
        let mut piece = String::new();
        let mut rendered = String::new();
        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        // Split borrows: the decoder and the session are separate fields.
        self.decoder()?;
        let decoder = &mut self.decoder.as_mut().expect("built above").1;
        let result = decoder.run(
            &mut self.session,
            &request,
            &Control::cancelled_by(&cancel),
            &mut |e: &TokenEvent<'_>| {
                piece.clear();
                utf8.push(e.bytes, &mut piece);
                rendered.clear();
                style.render(
                    &TokenView {
                        text: &piece,
                        logprob: 0.0,
                        intervened: false,
                        follows_token: streamed_tokens > 0,
                    },
                    &mut rendered,
                );
                streamed_tokens += 1;
                last_byte = e.bytes.last().copied().or(last_byte);
                out.write_all(rendered.as_bytes())?;
                out.flush()?;
                Ok(())
            },
        );
        piece.clear();
        utf8.finish(&mut piece);
        out.write_all(piece.as_bytes())?;
        if last_byte.is_some_and(|b| b != b'\n') {
            writeln!(out)?;
        }
        out.flush()?;
        match result {
            Ok(r) => {
                let mut outcome = Outcome::from(r);
                outcome.stats.prompt_tokens = prompt_tokens.len();
                outcome.stats.reused_prompt_tokens = keep;
                Ok(outcome)
            }
            Err(e) => {
                // Whatever state the loop left, the cache is only trusted up to the prompt prefix.
                let _ = self.session.truncate(keep.min(self.session.n_past()));
                Err(e)
            }
        }
    }

    /// One generation through the REPL's own loop, streaming every token with its heat.
    fn generate_with_heat(&mut self, prompt_tokens: &[TokenId]) -> anyhow::Result<Outcome> {
        let mut constraint = self.new_constraint()?;
        let config = GenConfig {
            max_tokens: self.settings.max_tokens,
            sampling: self.settings.sampling.clone(),
        };
        let style = HeatStyle {
            palette: self.palette,
            boundaries: self.settings.tokens,
        };

        let stdout = std::io::stdout();
        let mut out = stdout.lock();
        let mut utf8 = crate::decode::Utf8Stream::new();
        let mut piece = String::new();
        let mut rendered = String::new();
        let mut index = 0usize;
        let mut ends_with_newline = true;
        let outcome = generation::generate(
            &mut self.session,
            prompt_tokens,
            constraint.as_mut(),
            &config,
            &self.cancel,
            &mut |event| {
                piece.clear();
                utf8.push(event.bytes, &mut piece);
                rendered.clear();
                style.render(
                    &TokenView {
                        text: &piece,
                        logprob: event.logprob.unwrap_or(0.0),
                        intervened: event.intervened,
                        follows_token: index > 0,
                    },
                    &mut rendered,
                );
                index += 1;
                if !piece.is_empty() {
                    ends_with_newline = piece.ends_with('\n');
                }
                out.write_all(rendered.as_bytes())?;
                out.flush()?;
                Ok(())
            },
        )?;
        piece.clear();
        utf8.finish(&mut piece);
        out.write_all(piece.as_bytes())?;
        if !ends_with_newline || !piece.is_empty() {
            writeln!(out)?;
        }
        out.flush()?;
        Ok(outcome)
    }

    /// `:mask`: the tokens the current constraint allows after the last output (or at the
    /// start), ranked by the model's probability there.
    fn mask(&mut self) -> anyhow::Result<()> {
        let Some(active) = &self.active else {
            anyhow::bail!(
                "no constraint is set: every token is allowed (set one with :json, :schema, :grammar or :regex)"
            );
        };
        let mut constraint = Constraint::new(
            &active.grammar,
            &self.vocab,
            Options {
                lookahead: self.settings.lookahead(),
                ..Default::default()
            },
        )?;
        let (context, place) = match self.turns.last() {
            Some(turn) if constraint.commit_bytes(&turn.outcome.bytes).is_ok() => {
                let mut ctx = turn.prompt_tokens.clone();
                ctx.extend_from_slice(&turn.outcome.tokens);
                (
                    ctx,
                    format!(
                        "after the last output ({} tokens)",
                        turn.outcome.tokens.len()
                    ),
                )
            }
            Some(turn) => (
                turn.prompt_tokens.clone(),
                "at the start (the last output does not fit this constraint)".to_string(),
            ),
            None => {
                let mut ctx = self.model.prompt_tokens("", self.settings.chat)?;
                if ctx.is_empty() {
                    ctx.push(self.model.bos().0);
                }
                (ctx, "at the start (no prompt yet)".to_string())
            }
        };
        let (index, _) = generation::feed(&mut self.session, &context)?;
        let logits = self.session.logits(index);
        let mut mask = TokenSet::new(self.vocab.len());
        constraint.compute_mask(&mut mask);
        let probs = softmax(logits);
        let view = mask_view(&self.vocab, &mask, &probs, 15);
        let mut text = format!(
            "{place}: {} of {} tokens allowed{}; they hold {:.1}% of the model's probability",
            view.allowed,
            self.vocab.len(),
            if view.eos_allowed {
                " (end of generation among them)"
            } else {
                ""
            },
            view.allowed_mass * 100.0
        );
        if let Some((t, p, ok)) = &view.favourite {
            text.push_str(&format!(
                "\nmodel's favourite: {} p={} — {}",
                token_label(&self.vocab, *t),
                format_prob(*p),
                if *ok {
                    "allowed"
                } else {
                    "blocked by the grammar"
                }
            ));
        }
        for (t, p) in &view.top {
            text.push_str(&format!(
                "\n  {:>9}  {}",
                format_prob(*p),
                token_label(&self.vocab, *t)
            ));
        }
        if view.allowed > view.top.len() {
            text.push_str(&format!("\n  … {} more", view.allowed - view.top.len()));
        }
        let forced = constraint.forced_bytes();
        if !forced.is_empty() {
            text.push_str(&format!(
                "\nforced continuation: {:?}",
                String::from_utf8_lossy(&forced)
            ));
        }
        say(text);
        Ok(())
    }

    fn save(&self, path: &Path) -> anyhow::Result<usize> {
        use anyhow::Context;
        let mut body = String::new();
        for t in &self.turns {
            body.push_str(&t.json().to_string());
            body.push('\n');
        }
        // Write to a temporary file first: a failed save never leaves half a transcript.
        let tmp = path.with_extension("jsonl.tmp");
        std::fs::write(&tmp, body).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(self.turns.len())
    }
}

fn short_label(label: &str) -> String {
    // `schema grammars/gsm8k.schema.json` → `gsm8k.schema.json`
    match label.split_once(' ') {
        Some(("grammar" | "schema", path)) => Path::new(path)
            .file_name()
            .map_or(path.to_string(), |n| n.to_string_lossy().into_owned()),
        Some(("regex", re)) if re.chars().count() > 16 => {
            format!("/{}…/", re.chars().take(15).collect::<String>())
        }
        Some(("regex", re)) => format!("/{re}/"),
        _ => label.to_string(),
    }
}

/// A probability with four decimals, or in scientific notation when that would show zeros.
fn format_prob(p: f32) -> String {
    if p >= 1e-3 || p == 0.0 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

/// Probabilities of the full softmax over `logits`.
fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut p: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum: f32 = p.iter().sum();
    if sum > 0.0 {
        p.iter_mut().for_each(|x| *x /= sum);
    }
    p
}

/// What `:mask` reports.
#[derive(Debug, PartialEq)]
struct MaskView {
    allowed: usize,
    eos_allowed: bool,
    /// Sum of the model's probabilities over allowed tokens.
    allowed_mass: f32,
    /// The model's most likely token, its probability, and whether it is allowed.
    favourite: Option<(TokenId, f32, bool)>,
    /// Allowed tokens by decreasing probability (ties by id).
    top: Vec<(TokenId, f32)>,
}

fn mask_view(vocab: &Vocabulary, mask: &TokenSet, probs: &[f32], n: usize) -> MaskView {
    let mut allowed: Vec<(TokenId, f32)> = mask
        .iter()
        .map(|t| (t, probs.get(t.index()).copied().unwrap_or(0.0)))
        .collect();
    let allowed_mass = allowed.iter().map(|(_, p)| p).sum();
    allowed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let favourite = probs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(&a.0)))
        .map(|(i, &p)| (TokenId(i as u32), p, mask.contains(TokenId(i as u32))));
    MaskView {
        allowed: allowed.len(),
        eos_allowed: vocab.eog_tokens().iter().any(|&e| mask.contains(e)),
        allowed_mass,
        favourite,
        top: allowed.into_iter().take(n).collect(),
    }
}

/// A token as `:mask` shows it: its text quoted (end-of-generation named).
fn token_label(vocab: &Vocabulary, t: TokenId) -> String {
    if vocab.is_eog(t) {
        format!("<end of generation #{}>", t.0)
    } else {
        format!("{:?} #{}", String::from_utf8_lossy(vocab.bytes(t)), t.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_view_ranks_allowed_tokens_by_probability() {
        let words = ["a", "b", "c", "d", ""];
        let vocab = Vocabulary::new(
            words.iter().map(|w| w.as_bytes().to_vec()).collect(),
            vec![false; 5],
            vec![TokenId(4)],
        );
        let mut mask = TokenSet::new(5);
        for t in [1, 2, 4] {
            mask.insert(TokenId(t));
        }
        let probs = [0.5, 0.1, 0.3, 0.05, 0.05];
        let view = mask_view(&vocab, &mask, &probs, 2);
        assert_eq!(view.allowed, 3);
        assert!(view.eos_allowed);
        assert!((view.allowed_mass - 0.45).abs() < 1e-6);
        assert_eq!(view.favourite, Some((TokenId(0), 0.5, false)));
        assert_eq!(view.top, vec![(TokenId(2), 0.3), (TokenId(1), 0.1)]);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let p = softmax(&[1.0, 2.0, 3.0]);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(p[0] < p[1] && p[1] < p[2]);
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(
            short_label("schema grammars/gsm8k.schema.json"),
            "gsm8k.schema.json"
        );
        assert_eq!(short_label("json"), "json");
        assert_eq!(short_label("regex [0-9]+"), "/[0-9]+/");
    }
}
