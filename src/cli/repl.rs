//! `domino repl`'s flags, and the handler that turns them into a [`ReplConfig`] and starts
//! the session ([`crate::repl::run`]).

use crate::cli::args::{ConstraintArgs, ModelArgs, SamplingArgs};
use crate::cli::decode_args::{MethodArgs, REPL_DEFAULT_DRAFT};
use crate::decode::methods::Method;
use crate::repl::{ReplConfig, Settings};

/// Start an interactive session.
///
/// Takes the same model, constraint and sampling flags as `generate`; they are the session's
/// starting settings, changed later with `:commands` (`:help` lists them).
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  domino repl --json --chat\n  domino repl --schema grammars/gsm8k.schema.json --temp 0.7\n\n\
In the session: type a prompt, or :schema FILE, :grammar FILE, :regex RE, :json, :none, :method M, :k N|inf, \
:draft S, :tools FILE [CHOICE]|off, :temp T, :seed N, :max N, :chat on|off, :conversation on|off, :reset, :tokens on|off, :mask, :stats, :show, :save FILE, :help, :quit. \
Token heat: background from green (likely) to red (surprising to the unmasked model); underlined where the grammar \
overrode the model's favourite token."
)]
pub struct ReplArgs {
    #[command(flatten)]
    pub constraint: ConstraintArgs,
    #[command(flatten)]
    pub regions: crate::cli::args::RegionArgs,
    #[command(flatten)]
    pub method: MethodArgs,
    /// Maximum number of tokens per generation.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: u64,
    /// Wrap each prompt in the model's chat template as one user turn.
    #[arg(long)]
    pub chat: bool,
    /// Multi-turn chat from the start: each prompt follows the earlier turns (implies --chat;
    /// llama-cli's -cnv). `:reset` forgets them.
    #[arg(long)]
    pub conversation: bool,
    /// System prompt of every chat turn (also -sys).
    #[arg(long, value_name = "TEXT")]
    pub system_prompt: Option<String>,
    /// Show token boundaries from the start.
    #[arg(long)]
    pub tokens: bool,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

impl ReplArgs {
    /// The session's starting configuration (usage errors before anything loads).
    pub fn config(&self) -> anyhow::Result<ReplConfig> {
        let sampling = self.sampling.config()?;
        let draft_threshold = self.method.draft_threshold()?;
        let (constraint, regions) = self.regions.resolve(&self.constraint)?;
        Ok(ReplConfig {
            model: self.model.config(),
            regions,
            token_healing: self.regions.token_healing(),
            constraint,
            compile: self.constraint.compile_options(),
            system: self.system_prompt.clone(),
            settings: Settings {
                // The REPL applies the constraint it is given (or later sets) unless told
                // otherwise: domino even when it starts without one.
                method: self.method.method.unwrap_or(Method::Domino),
                k: self.method.k.0,
                draft: self.method.draft.unwrap_or(REPL_DEFAULT_DRAFT),
                draft_threshold,
                draft_policy: self.method.draft_policy,
                sampling,
                max_tokens: self.max_tokens as usize,
                chat: self.chat || self.conversation || self.system_prompt.is_some(),
                conversation: self.conversation,
                tokens: self.tokens,
            },
        })
    }
}

/// `domino repl`.
pub fn run(args: ReplArgs) -> anyhow::Result<()> {
    crate::repl::run(args.config()?)
}
