//! A REPL session's settings and history: what a prompt is generated with ([`Settings`]),
//! the constraint in force ([`Active`]) and the turns kept for `:stats`, `:mask` and `:save`.

use super::command::Method;
use super::generation::Outcome;
use crate::constraint::ConstraintSpec;
use crate::decode::SamplingConfig;
use crate::decode::draft_policy::DraftPolicy;
use crate::engine::CompiledGrammar;
use crate::vocab::TokenId;
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;

/// The settings a prompt is generated with.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How the constraint is applied (`:method`).
    pub method: Method,
    /// Lookahead (`:k`); `None` = ∞.
    pub k: Option<u32>,
    /// Speculative draft length (`:draft`; 0 = off).
    pub draft: usize,
    pub draft_threshold: f32,
    pub draft_policy: DraftPolicy,
    pub sampling: SamplingConfig,
    /// Most tokens per generation (`:max`).
    pub max_tokens: usize,
    /// Wrap each prompt in the chat template (`:chat`).
    pub chat: bool,
    /// Multi-turn chat (`:conversation`, `--conversation`): each prompt is the next user turn
    /// after the earlier turns, rendered through the chat template.
    pub conversation: bool,
    /// Show token boundaries (`:tokens`).
    pub tokens: bool,
}

impl Settings {
    /// Lookahead actually used by the engine.
    pub(super) fn lookahead(&self) -> Option<u32> {
        match self.method {
            Method::Naive => Some(0),
            _ => self.k,
        }
    }

    /// Whether decode's loops run this generation (speculation and the template and
    /// llama-grammar baselines live there); otherwise the REPL's own loop runs, which
    /// reports every token's heat and interventions as it streams.
    pub(super) fn uses_decoder(&self, constrained: bool) -> bool {
        constrained
            && (self.draft > 0 || matches!(self.method, Method::Template | Method::LlamaGrammar))
    }
}

pub(super) fn k_str(k: Option<u32>) -> String {
    k.map_or("inf".to_string(), |k| k.to_string())
}

/// The constraint in force.
pub(super) struct Active {
    /// What was asked for; its label is how `:show` and the prompt name it (`json`,
    /// `schema gsm8k.schema.json`, …).
    pub(super) spec: ConstraintSpec,
    pub(super) grammar: Arc<CompiledGrammar>,
}

impl Active {
    /// Compile a constraint choice (errors name the choice).
    pub(super) fn compile(spec: ConstraintSpec) -> anyhow::Result<Active> {
        let grammar = spec.compile().with_context(|| spec.label.clone())?;
        Ok(Active { spec, grammar })
    }

    pub(super) fn label(&self) -> &str {
        &self.spec.label
    }
}

/// One generation, kept for `:stats`, `:mask` and `:save`.
pub(super) struct Turn {
    pub(super) prompt: String,
    pub(super) prompt_tokens: Vec<TokenId>,
    pub(super) constraint: Option<String>,
    pub(super) settings: Settings,
    pub(super) outcome: Outcome,
}

impl Turn {
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "prompt": self.prompt,
            "chat": self.settings.chat,
            "conversation": self.settings.conversation,
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

/// The constraint's name as the input prompt shows it.
pub(super) fn short_label(label: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
