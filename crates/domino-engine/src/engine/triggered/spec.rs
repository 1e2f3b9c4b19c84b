//! The public description of a triggered constraint: regions, their triggers and grammars,
//! what follows a region and how many regions there must be (semantics in the parent
//! module's doc), and its validation.

use super::super::{CompiledGrammar, EngineError};
use crate::vocab::{TokenId, Vocabulary};
use std::sync::Arc;

/// What begins a region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger {
    /// A byte string occurring in the free text (its first occurrence begins the region).
    Text(Vec<u8>),
    /// One token id committed in free text (typically a special token like `<tool_call>`).
    Token(TokenId),
}

impl Trigger {
    /// The trigger for `text`: [`Trigger::Token`] when a special token of the vocabulary is
    /// exactly that text (the model writes such a marker as one special token, never as
    /// bytes), else [`Trigger::Text`].
    pub fn for_text(vocab: &Vocabulary, text: &[u8]) -> Trigger {
        (0..vocab.len() as u32)
            .map(TokenId)
            .find(|&t| vocab.is_special(t) && !vocab.is_eog(t) && vocab.bytes(t) == text)
            .map_or_else(|| Trigger::Text(text.to_vec()), Trigger::Token)
    }
}

/// A tagged region: its trigger, its grammar, a name (a tool's name, `answer`, …).
#[derive(Clone, Debug)]
pub struct Region {
    pub trigger: Trigger,
    pub grammar: Arc<CompiledGrammar>,
    pub name: String,
}

/// What follows a completed region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterRegion {
    /// Free text again (more regions may follow, up to `max_regions`).
    Free,
    /// Only end-of-generation.
    End,
}

/// The regions, what follows them and how many there must be (see the module doc).
#[derive(Clone, Debug)]
pub struct TriggerSpec {
    /// Several triggers may lead to different grammars (one per tool).
    pub regions: Vec<Region>,
    pub after: AfterRegion,
    /// 0: free text alone is a sentence; 1: at least one region ("required").
    pub min_regions: usize,
    pub max_regions: Option<usize>,
}

impl TriggerSpec {
    /// The spec's language is non-empty and its triggers are usable.
    pub(super) fn validate(&self, vocab: &Vocabulary) -> Result<(), EngineError> {
        let bad = |m: String| Err(EngineError::InvalidSpec(m));
        for (i, r) in self.regions.iter().enumerate() {
            match &r.trigger {
                Trigger::Text(b) if b.is_empty() => {
                    return bad(format!("region {i} ({}) has an empty trigger", r.name));
                }
                Trigger::Token(t) if t.index() >= vocab.len() => {
                    return bad(format!(
                        "region {i} ({}): trigger token {} is outside the vocabulary",
                        r.name, t.0
                    ));
                }
                Trigger::Token(t) if vocab.is_eog(*t) => {
                    return bad(format!(
                        "region {i} ({}): trigger token {} ends generation",
                        r.name, t.0
                    ));
                }
                _ => {}
            }
        }
        let most = match (self.after, self.max_regions) {
            (AfterRegion::End, m) => m.unwrap_or(1).min(1),
            (AfterRegion::Free, m) => m.unwrap_or(usize::MAX),
        };
        if self.min_regions > most {
            return bad(format!(
                "min_regions {} exceeds the most regions the spec allows ({most})",
                self.min_regions
            ));
        }
        if self.min_regions > 0 && self.regions.is_empty() {
            return bad("min_regions > 0 but there are no regions".into());
        }
        Ok(())
    }
}
