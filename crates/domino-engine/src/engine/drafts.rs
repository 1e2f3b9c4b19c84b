//! Count-based draft model for speculative constrained decoding (DOMINO §3.6).
//!
//! # Overview
//! `P(l | α, β)` is estimated by counting which token the decoder actually chose in each
//! grammar context. The context key is [`crate::engine::Constraint::draft_context`]: a hash of
//! the scanner (sub)terminal state α and a parser sub-state β of every configuration. Each
//! context keeps its total count and the counts of up to [`MAX_TOKENS_PER_CONTEXT`] distinct
//! tokens (later newcomers only raise the total, so probabilities stay conservative).
//!
//! A draft proposes the context's most frequent token while its relative frequency is at
//! least the threshold and the context has been seen at least [`MIN_OBSERVATIONS`] times.
//! A draft never proposes twice from one context (the decode loop stops it there): where the
//! key does not move after a token (free text), the counts would otherwise predict the same
//! token over and over (measured on the XML workload: 16 drafts of `" Motors"` in a row).
//! The model never decides what is *output*: every proposal is checked against the grammar
//! and verified by the language model, so bad counts cost speed, never correctness.
//!
//! # Persistence
//! [`DraftModel::save`] writes JSON `{"version", "key", "contexts": [[ctx, total, [[token,
//! count], …]], …]}`. `key` identifies the (grammar, vocabulary) pair the contexts belong to;
//! [`DraftModel::load`] ignores (with a warning) a file written for another pair, because its
//! context hashes would be meaningless here.

use crate::vocab::TokenId;
use anyhow::Context as _;
use std::collections::HashMap;
use std::path::Path;

/// Distinct tokens remembered per context.
pub const MAX_TOKENS_PER_CONTEXT: usize = 32;
/// A context must have been seen this often before it drafts anything (once: under greedy
/// decoding the same context tends to repeat the same choice, and a wrong draft costs only
/// verification time).
pub const MIN_OBSERVATIONS: u32 = 1;
/// Contexts kept at most (a runaway grammar cannot grow the table without bound).
pub const MAX_CONTEXTS: usize = 1 << 20;

const FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq)]
struct ContextCounts {
    total: u32,
    /// `(token, count)`, most frequent first.
    tokens: Vec<(TokenId, u32)>,
}

impl ContextCounts {
    fn observe(&mut self, token: TokenId) {
        self.total = self.total.saturating_add(1);
        if let Some(i) = self.tokens.iter().position(|&(t, _)| t == token) {
            self.tokens[i].1 = self.tokens[i].1.saturating_add(1);
            // Keep most-frequent-first with one bubble step (counts change by one).
            let mut j = i;
            while j > 0 && self.tokens[j - 1].1 < self.tokens[j].1 {
                self.tokens.swap(j - 1, j);
                j -= 1;
            }
        } else if self.tokens.len() < MAX_TOKENS_PER_CONTEXT {
            self.tokens.push((token, 1));
        }
    }
}

/// Counts of chosen tokens per grammar context (see the module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DraftModel {
    key: u64,
    contexts: HashMap<u64, ContextCounts>,
    /// Frozen: [`DraftModel::observe`] changes nothing (the paper's protocol: priors learned
    /// during warm-up, then fixed for the measured repetitions).
    frozen: bool,
}

impl DraftModel {
    /// An empty model for the (grammar, vocabulary) pair identified by `key`.
    pub fn new(key: u64) -> Self {
        DraftModel {
            key,
            contexts: HashMap::new(),
            frozen: false,
        }
    }

    pub fn key(&self) -> u64 {
        self.key
    }

    /// Number of contexts seen.
    pub fn len(&self) -> usize {
        self.contexts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.contexts.is_empty()
    }

    /// Stop learning: later [`DraftModel::observe`] calls are ignored.
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Record that `token` was chosen in context `ctx` (nothing once frozen).
    pub fn observe(&mut self, ctx: u64, token: TokenId) {
        if self.frozen {
            return;
        }
        if self.contexts.len() >= MAX_CONTEXTS && !self.contexts.contains_key(&ctx) {
            return;
        }
        self.contexts.entry(ctx).or_default().observe(token);
    }

    /// The most frequent token of `ctx` and its relative frequency, once the context has
    /// been seen [`MIN_OBSERVATIONS`] times.
    pub fn best(&self, ctx: u64) -> Option<(TokenId, f32)> {
        let c = self.contexts.get(&ctx)?;
        if c.total < MIN_OBSERVATIONS {
            return None;
        }
        let &(t, n) = c.tokens.first()?;
        Some((t, n as f32 / c.total as f32))
    }

    /// The token to draft in `ctx` when its probability reaches `threshold`.
    pub fn propose(&self, ctx: u64, threshold: f32) -> Option<TokenId> {
        self.best(ctx)
            .filter(|&(_, p)| p >= threshold)
            .map(|(t, _)| t)
    }

    /// Load counts saved by [`save`](Self::save). A missing file gives an empty model; a file
    /// for another grammar or vocabulary (different key) is ignored with a warning; a
    /// malformed file is an error.
    pub fn load(path: &Path, key: u64) -> anyhow::Result<Self> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new(key)),
            Err(e) => {
                return Err(e).with_context(|| format!("reading draft stats {}", path.display()));
            }
        };
        Self::parse(&text, key, &path.display().to_string())
    }

    /// The counts in `text`, a file written by [`save`](Self::save) (named `origin` in
    /// errors and warnings), with [`load`](Self::load)'s rules for another key.
    pub fn parse(text: &str, key: u64, origin: &str) -> anyhow::Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)
            .with_context(|| format!("draft stats {origin} are not valid JSON"))?;
        let bad = |what: &str| anyhow::anyhow!("draft stats {origin}: {what}");
        if v.get("version").and_then(|x| x.as_u64()) != Some(FORMAT_VERSION as u64) {
            return Err(bad("unknown or missing \"version\" (expected 1)"));
        }
        let file_key = v
            .get("key")
            .and_then(|x| x.as_str())
            .and_then(|s| u64::from_str_radix(s, 16).ok())
            .ok_or_else(|| bad("missing \"key\""))?;
        if file_key != key {
            eprintln!(
                "warning: draft stats {origin} were collected for another grammar or model; starting from empty counts"
            );
            return Ok(Self::new(key));
        }
        let mut model = Self::new(key);
        let contexts = v
            .get("contexts")
            .and_then(|x| x.as_array())
            .ok_or_else(|| bad("missing \"contexts\""))?;
        for (i, entry) in contexts.iter().enumerate() {
            let err = || {
                bad(&format!(
                    "/contexts/{i} is not [context, total, [[token, count], …]]"
                ))
            };
            let a = entry.as_array().filter(|a| a.len() == 3).ok_or_else(err)?;
            let ctx = a[0]
                .as_str()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
                .ok_or_else(err)?;
            let total = a[1].as_u64().ok_or_else(err)?.min(u32::MAX as u64) as u32;
            let mut tokens = Vec::new();
            for tc in a[2].as_array().ok_or_else(err)? {
                let tc = tc.as_array().filter(|x| x.len() == 2).ok_or_else(err)?;
                let t = tc[0]
                    .as_u64()
                    .filter(|&t| t <= u32::MAX as u64)
                    .ok_or_else(err)?;
                let n = tc[1].as_u64().ok_or_else(err)?.min(u32::MAX as u64) as u32;
                tokens.push((TokenId(t as u32), n));
            }
            tokens.sort_by_key(|x| std::cmp::Reverse(x.1));
            tokens.truncate(MAX_TOKENS_PER_CONTEXT);
            // Saturating: a file's counts are anything up to u32::MAX each.
            let seen = tokens.iter().fold(0u32, |sum, x| sum.saturating_add(x.1));
            let total = total.max(seen);
            if model.contexts.len() < MAX_CONTEXTS {
                model.contexts.insert(ctx, ContextCounts { total, tokens });
            }
        }
        Ok(model)
    }

    /// Write the counts as JSON (atomically: a temporary file renamed over `path`).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut keys: Vec<&u64> = self.contexts.keys().collect();
        keys.sort();
        let contexts: Vec<serde_json::Value> = keys
            .into_iter()
            .map(|k| {
                let c = &self.contexts[k];
                serde_json::json!([
                    format!("{k:016x}"),
                    c.total,
                    c.tokens.iter().map(|&(t, n)| [t.0, n]).collect::<Vec<_>>()
                ])
            })
            .collect();
        let v = serde_json::json!({
            "version": FORMAT_VERSION,
            "key": format!("{:016x}", self.key),
            "contexts": contexts,
        });
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(&v)?)
            .with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposes_the_most_frequent_token_above_the_threshold() {
        let mut m = DraftModel::new(7);
        assert_eq!(m.propose(1, 0.0), None, "an unseen context drafts nothing");
        m.observe(1, TokenId(5));
        assert_eq!(m.propose(1, 0.5), Some(TokenId(5)));
        m.observe(1, TokenId(5));
        m.observe(1, TokenId(6));
        m.observe(1, TokenId(6));
        m.observe(1, TokenId(6));
        assert_eq!(m.best(1), Some((TokenId(6), 0.6)));
        assert_eq!(m.propose(1, 0.6), Some(TokenId(6)));
        assert_eq!(m.propose(1, 0.61), None);
        assert_eq!(m.propose(2, 0.0), None);
    }

    #[test]
    fn a_frozen_model_keeps_its_counts() {
        let mut m = DraftModel::new(0);
        m.observe(1, TokenId(5));
        m.freeze();
        assert!(m.is_frozen());
        m.observe(1, TokenId(6));
        m.observe(1, TokenId(6));
        m.observe(2, TokenId(6));
        assert_eq!(m.best(1), Some((TokenId(5), 1.0)));
        assert_eq!(m.best(2), None);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn newcomers_beyond_the_cap_only_raise_the_total() {
        let mut m = DraftModel::new(0);
        for t in 0..(MAX_TOKENS_PER_CONTEXT as u32 + 10) {
            m.observe(3, TokenId(t));
        }
        m.observe(3, TokenId(0));
        let (t, p) = m.best(3).unwrap();
        assert_eq!(t, TokenId(0));
        assert!((p - 2.0 / (MAX_TOKENS_PER_CONTEXT as f32 + 11.0)).abs() < 1e-6);
    }

    #[test]
    fn save_and_load_round_trip_and_key_mismatch_starts_empty() {
        let dir = std::env::temp_dir().join(format!("domino-draft-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.json");
        let mut m = DraftModel::new(42);
        for _ in 0..3 {
            m.observe(u64::MAX, TokenId(9));
        }
        m.observe(u64::MAX, TokenId(1));
        m.save(&path).unwrap();
        let back = DraftModel::load(&path, 42).unwrap();
        assert_eq!(back.best(u64::MAX), Some((TokenId(9), 0.75)));
        assert!(DraftModel::load(&path, 43).unwrap().is_empty());
        assert!(
            DraftModel::load(&dir.join("missing.json"), 42)
                .unwrap()
                .is_empty()
        );
        std::fs::write(
            &path,
            "{\"version\": 1, \"key\": \"2a\", \"contexts\": [[1]]}",
        )
        .unwrap();
        let err = DraftModel::load(&path, 42).unwrap_err().to_string();
        assert!(err.contains("/contexts/0"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    /// Counts near u32::MAX in a file (hand-edited or corrupt) load saturated, not by
    /// overflowing the sum of a context's tokens.
    #[test]
    fn huge_counts_in_a_file_saturate() {
        let text =
            r#"{"version": 1, "key": "7", "contexts": [["1", 0, [[5, 4294967295], [6, 2]]]]}"#;
        let m = DraftModel::parse(text, 7, "test").unwrap();
        let (t, p) = m.best(1).unwrap();
        assert_eq!(t, TokenId(5));
        assert!((p - 1.0).abs() < 1e-6, "{p}");
    }
}
