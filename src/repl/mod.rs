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
//! - Each prompt is one independent turn (with `:chat on`, one user message, after the
//!   system prompt if one was given) unless `:conversation on` (`--conversation`, llama-cli's
//!   `-cnv`): then the session keeps the conversation, each prompt is the next user turn after
//!   the earlier user and assistant turns, all rendered through the chat template, and
//!   `:reset` forgets it. Independent turns stay the default so that a prompt asked twice gives
//!   the same answer (greedy), which is what comparing methods and settings needs. The KV
//!   cache keeps the longest common prefix with the previous turn, so repeating a prompt (or
//!   its chat preamble, or the conversation so far) is not evaluated again.
//! - A bad command argument, an unreadable grammar or schema, or a failed generation prints
//!   `error: …` on stderr and the session goes on; the previous constraint stays in force.
//! - Ctrl-C during a generation stops it (a signal flag checked once per token; the model
//!   stays loaded); at the prompt it clears the line; Ctrl-D or `:quit` ends the session.
//!   When stdin is not a terminal, Ctrl-C while waiting for input ends the process as usual.
//! - Speculative drafts (`:draft S`, S > 0) and the `template` and `llama-grammar` methods
//!   run through [`crate::decode::methods::Decoder`] (kept across turns, so draft counts keep
//!   learning); their text streams without heat, and the transcript's `intervened` (one
//!   entry per token) comes from decode's result. Speculation never changes greedy output.
//! - Results (generated text, command answers) go to stdout; the banner, per-generation
//!   status lines and errors go to stderr. With stdin not a terminal lines are read plainly
//!   (no prompt, no line editing); colour is off when stdout is not a terminal or `NO_COLOR`
//!   is set.

pub mod command;
pub mod generation;
pub mod heat;
pub mod input;
mod mask;
mod state;

use crate::constraint::ConstraintSpec;
use crate::decode::GenerationRequest;
use crate::decode::methods::{Decoder, DecoderConfig};
use crate::decode::{Control, FinishReason, TokenEvent};
use crate::engine::{Constraint, Options};
use crate::grammar::CompileOptions;
use crate::models::ModelConfig;
use crate::runtime::{ChatMessage, Model, Session};
use crate::vocab::{TokenId, Vocabulary};
use anyhow::Context;
use command::{Command, Input, Method, parse_input};
use generation::{GenConfig, Outcome};
use heat::{HeatStyle, Palette, TokenView};
use input::{LineReader, ReadOutcome};
pub use state::Settings;
use state::{Active, Turn, k_str, short_label};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Everything a session starts from (the command line builds it from `domino repl`'s flags);
/// `:commands` change the settings and the constraint later.
#[derive(Clone, Debug)]
pub struct ReplConfig {
    pub model: ModelConfig,
    /// The starting constraint, if any.
    pub constraint: Option<ConstraintSpec>,
    /// Compile options (start rule, whitespace policy, …) for the constraints that
    /// `:grammar`, `:schema`, `:regex` and `:json` set.
    pub compile: CompileOptions,
    pub settings: Settings,
    /// System prompt for chat turns (`--system-prompt`).
    pub system: Option<String>,
    /// Tagged regions from the command line (`--reasoning`, `--trigger`, `--tags`).
    pub regions: Option<crate::decode::regions::TagPlan>,
    /// Token healing of raw prompts (`--no-token-healing` turns it off).
    pub token_healing: bool,
}

/// Tools offered by `:tools`.
struct OfferedTools {
    tools: Vec<crate::decode::tools::Tool>,
    choice: crate::decode::tools::ToolChoice,
    syntax: crate::decode::tools::Syntax,
    label: String,
}

/// A session's state.
struct Repl<'m> {
    model: &'m Model,
    session: Session<'m>,
    vocab: Arc<Vocabulary>,
    /// Compile options (start rule, whitespace policy, …) from the command line, for every
    /// `:grammar`/`:schema`/`:regex`/`:json`.
    compile: CompileOptions,
    active: Option<Active>,
    settings: Settings,
    turns: Vec<Turn>,
    palette: Palette,
    /// Raised by SIGINT; cleared before each generation.
    cancel: Arc<AtomicBool>,
    /// decode's decoder for the current settings (rebuilt when they change; it keeps its
    /// draft counts across generations).
    decoder: Option<(String, Decoder)>,
    /// System prompt of chat turns.
    system: Option<String>,
    /// The conversation so far (`:conversation on`): user and assistant turns.
    history: Vec<ChatMessage>,
    /// Tagged regions from the command line.
    regions: Option<crate::decode::regions::TagPlan>,
    /// Tools offered (`:tools`): their regions replace `regions`, their description joins
    /// the system prompt, and prompts go through the chat template.
    tools: Option<OfferedTools>,
    token_healing: bool,
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

/// Run an interactive session until `:quit` or end of input.
pub fn run(config: ReplConfig) -> anyhow::Result<()> {
    // A bad starting constraint is a usage error (exit 2) before the model loads.
    let active = config.constraint.map(Active::compile).transpose()?;
    let model = config.model.load()?;
    let session = model.session(config.model.session_options())?;
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
        compile: config.compile,
        active,
        settings: config.settings,
        turns: Vec::new(),
        palette,
        cancel,
        decoder: None,
        system: config.system,
        history: Vec::new(),
        regions: config.regions,
        tools: None,
        token_healing: config.token_healing,
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
                format!("domino[{}]> ", short_label(a.label()))
            }
            Some(a) => format!("domino[{} off]> ", short_label(a.label())),
            None => "domino> ".to_string(),
        }
    }

    /// Switch to a constraint choice (`None` = no constraint); on an error the constraint in
    /// force stays.
    fn set_constraint(&mut self, choice: anyhow::Result<Option<ConstraintSpec>>) {
        match choice.and_then(|spec| spec.map(Active::compile).transpose()) {
            Ok(active) => {
                match &active {
                    Some(a) => say(format!(
                        "constraint: {} ({} terminals, {} scanner states)",
                        a.label(),
                        a.grammar.grammar().terminals.len(),
                        a.grammar.scanner_states()
                    )),
                    None => say("constraint: none"),
                }
                self.active = active;
            }
            Err(e) => complain(format!("{e:#} (the constraint is unchanged)")),
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Help => print!("{}", command::help_text()),
            Command::Grammar(p) => self.set_constraint(
                ConstraintSpec::grammar_file(&p, self.compile.clone())
                    .with_context(|| format!("grammar {}", p.display()))
                    .map(Some),
            ),
            Command::Schema(p) => self.set_constraint(
                ConstraintSpec::schema_file(&p, self.compile.clone())
                    .with_context(|| format!("schema {}", p.display()))
                    .map(Some),
            ),
            Command::Regex(r) => {
                self.set_constraint(Ok(Some(ConstraintSpec::regex(&r, self.compile.clone()))))
            }
            Command::Json => {
                self.set_constraint(Ok(Some(ConstraintSpec::json(self.compile.clone()))))
            }
            Command::NoConstraint => self.set_constraint(Ok(None)),
            Command::Tools(path, choice) => match path {
                None => {
                    self.tools = None;
                    say("tools: off");
                }
                Some(p) => match self.offer_tools(&p, &choice) {
                    Ok(t) => {
                        say(format!(
                            "tools: {} ({} syntax, tool_choice {choice}); prompts go through the chat template",
                            t.label,
                            t.syntax.as_str()
                        ));
                        self.tools = Some(t);
                    }
                    Err(e) => complain(format!("{e:#} (the tools are unchanged)")),
                },
            },
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
                if !on {
                    self.settings.conversation = false;
                }
                say(format!("chat: {}", if on { "on" } else { "off" }));
            }
            Command::Conversation(on) => {
                if on {
                    if let Err(e) = self.model.chat_template() {
                        complain(e);
                        return;
                    }
                    self.settings.chat = true;
                }
                self.settings.conversation = on;
                say(format!(
                    "conversation: {} ({} earlier turns)",
                    if on { "on" } else { "off" },
                    self.history.len() / 2
                ));
            }
            Command::Reset => {
                let n = self.history.len() / 2;
                self.history.clear();
                say(format!("conversation reset ({n} turns forgotten)"));
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
                self.active.as_ref().map_or("none", |a| a.label())
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
            format!(
                "conversation {} ({} turns)",
                if s.conversation { "on" } else { "off" },
                self.history.len() / 2
            ),
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

    /// Read a tools file for `:tools`.
    fn offer_tools(&self, path: &Path, choice: &str) -> anyhow::Result<OfferedTools> {
        use crate::decode::tools::{Syntax, ToolChoice, parse_tools};
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let tools = parse_tools(&value).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let choice = ToolChoice::parse(choice)
            .checked(&tools)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(OfferedTools {
            label: tools
                .iter()
                .map(|t| t.function.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            syntax: Syntax::detect(self.model.chat_template().ok().as_deref()),
            tools,
            choice,
        })
    }

    /// The tagged regions of the next generation: the tools', else the command line's.
    fn current_regions(&self) -> Option<crate::decode::regions::TagPlan> {
        match &self.tools {
            Some(t) => crate::decode::tools::tag_plan(&t.tools, &t.choice, t.syntax, true),
            None => self.regions.clone(),
        }
    }

    /// Whether the next generation runs through decode's loops: tagged regions and healing
    /// live there (as do drafts and the template and llama-grammar baselines).
    fn uses_decoder(&self) -> bool {
        self.settings.uses_decoder(self.active.is_some())
            || self.current_regions().is_some()
            || self.heals()
    }

    /// Token healing applies: on, and a raw prompt (not the chat template's).
    fn heals(&self) -> bool {
        self.token_healing
            && !self.settings.chat
            && !self.settings.conversation
            && self.tools.is_none()
    }

    fn prompt(&mut self, prompt: &str) {
        if let Err(e) = self.generate(prompt) {
            // The stream may have stopped mid-line.
            println!();
            complain(format!("{e:#}"));
        }
    }

    /// The prompt's tokens: raw; or one user turn (after the system prompt) in the chat
    /// template; or, in a conversation, the next user turn after the earlier ones.
    fn prompt_tokens(&self, prompt: &str) -> anyhow::Result<Vec<TokenId>> {
        if !self.settings.chat && !self.settings.conversation && self.tools.is_none() {
            return Ok(self.model.prompt_tokens(prompt, false)?);
        }
        let mut system = self.system.clone();
        if let Some(t) = &self.tools
            && t.choice != crate::decode::tools::ToolChoice::None
        {
            let text = crate::decode::tools::instructions(&t.tools, &t.choice, t.syntax);
            system = Some(match system {
                Some(s) => format!("{s}\n\n{text}"),
                None => text,
            });
        }
        let mut messages: Vec<ChatMessage> = system.iter().map(ChatMessage::system).collect();
        if self.settings.conversation {
            messages.extend(self.history.iter().cloned());
        }
        messages.push(ChatMessage::user(prompt));
        Ok(self.model.chat_tokens(&messages)?)
    }

    fn generate(&mut self, prompt: &str) -> anyhow::Result<()> {
        let prompt_tokens = self.prompt_tokens(prompt)?;
        anyhow::ensure!(!prompt_tokens.is_empty(), "the prompt is empty");
        self.cancel.store(false, Ordering::SeqCst);
        let outcome = if self.uses_decoder() {
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
        if s.healed_tokens > 0 {
            status.push_str(&format!(" · healed {:?}", s.healed_text));
        }
        if let Some(t) = &self.tools {
            match crate::decode::tools::parse_calls(&outcome.text(), &t.tools, t.syntax) {
                Ok(parsed) => {
                    for c in &parsed.calls {
                        say(format!(
                            "tool call: {}",
                            serde_json::json!({"name": c.name, "arguments": c.arguments})
                        ));
                    }
                }
                Err(e) => complain(format!("tool calls: {e}")),
            }
        }
        if self.uses_decoder() {
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
        if self.settings.conversation {
            self.history.push(ChatMessage::user(prompt));
            self.history.push(ChatMessage::assistant(outcome.text()));
        }
        self.turns.push(Turn {
            prompt: prompt.to_string(),
            prompt_tokens,
            constraint: self.active.as_ref().map(|a| a.label().to_string()),
            settings: self.settings.clone(),
            outcome,
        });
        Ok(())
    }

    /// The decoder for the current settings, built (and the constraint compiled for it) when
    /// they changed since the last generation.
    fn decoder(&mut self) -> anyhow::Result<&mut Decoder> {
        let s = &self.settings;
        let regions = self.current_regions();
        let heals = self.heals();
        let key = format!(
            "{:?}|{}|{:?}|{:?}|{:?}|{}|{}|{:?}",
            regions.as_ref().map(|r| r.key_text(&self.compile)),
            heals,
            self.active.as_ref().map(|a| a.label()),
            s.method,
            s.k,
            s.draft,
            s.draft_threshold,
            s.draft_policy
        );
        if self.decoder.as_ref().is_none_or(|(k, _)| *k != key) {
            // Without a constraint or regions there is nothing for the engine to do but heal.
            let method = if self.active.is_none() && regions.is_none() {
                Method::None
            } else {
                s.method
            };
            let config = DecoderConfig {
                method,
                source: self.active.as_ref().map(|a| a.spec.source.clone()),
                compile: self.compile.clone(),
                k: s.k,
                opportunistic: false,
                draft: s.draft,
                draft_threshold: s.draft_threshold,
                draft_policy: s.draft_policy,
                draft_stats: None,
                regions,
                token_healing: heals,
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

    fn save(&self, path: &Path) -> anyhow::Result<usize> {
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
