//! llguidance in the same process: the `--vs llguidance` row of `domino bench masks` and the
//! engine-vs-llguidance mask cross-check (`tests/engine_vs_llguidance.rs`).
//!
//! Only built with cargo feature `bench-llguidance` (it pulls in the `llguidance` crate, which
//! ordinary builds and CI do not need).
//!
//! # What is shared with our engine
//! - **Vocabulary**: llguidance's `TokTrie` is built from our [`Vocabulary`]: the exact bytes of
//!   every non-special token under the same id. Special tokens get no bytes (so no grammar can
//!   produce them), except the first end-of-generation id, which is llguidance's EOS and gets
//!   llguidance's special-token spelling (`0xFF` + `<eos>`), so it is in no byte path either.
//! - **Tokenizer**: llguidance's `tokenize_bytes` is our [`Vocabulary::tokenize`] (falling back
//!   to greedy trie tokenisation for bytes that are not UTF-8 or when no tokenizer is attached).
//! - **Grammar**: JSON Schema / `--json` go to llguidance as JSON Schema, with the whitespace
//!   policy translated (`flexible` → runs of 1..=`max_whitespace` JSON whitespace bytes,
//!   `compact` → none; `pretty` has no llguidance equivalent and is an error); Lark files as
//!   Lark; `--regex` as a regex. GBNF has no llguidance front end: a usage error.
//!
//! # Comparing masks
//! [`LlgMatcher::mask_into`] converts llguidance's mask to a [`TokenSet`] over our ids, with
//! "EOS allowed" expanded to all of the vocabulary's EOG ids (our engine allows every EOG id
//! when the grammar can end). Principled difference (DESIGN.md invariant 2): where a grammar
//! forces a literal (a key name in a schema), llguidance admits only tokens that keep the
//! canonical tokenisation reachable, while our engine admits every token whose bytes the
//! grammar can still accept, so our mask is a superset there. The cross-check test also finds
//! and classifies differences of the two *grammars* (not engines): our flexible JSON allows
//! whitespace before/after the document, unescaped U+007F and the `\/` escape in strings; our
//! JSON numbers bound their digit counts (llguidance's do not).
//!
//! # Timing
//! `--vs llguidance` times `Matcher::compute_mask_or_eos` at every step of the same documents,
//! fresh matcher per document (a clone of one compiled parser, sharing its lexer cache), best
//! of `--repeat` per step. Compare it with our `uncached` row (llguidance keeps no finished-mask
//! cache keyed by parser state; our `warm` row hits ours, a copy of the mask).
//! ```text
//! cargo build --features bench-llguidance
//! domino bench masks --tokenizer ../shared/tokenizers/SmolLM2-135M-Instruct.tokenizer.json \
//!     --schema grammars/gsm8k.schema.json --docs DOCS.jsonl --vs llguidance --repeat 3
//! ```

use crate::diag::UsageError;
use crate::grammar::{CompileOptions, GrammarSource, WhitespacePolicy};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use anyhow::Context;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{Matcher, ParserFactory};
use std::sync::Arc;

/// Our vocabulary and tokenizer seen through llguidance's `TokenizerEnv`.
struct DominoTokEnv {
    trie: TokTrie,
    vocab: Arc<Vocabulary>,
}

impl TokenizerEnv for DominoTokEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        match std::str::from_utf8(s)
            .ok()
            .map(|text| self.vocab.tokenize(text))
        {
            Some(Ok(toks)) => toks.into_iter().map(|t| t.0).collect(),
            // Not UTF-8 (a partial character) or no tokenizer attached: llguidance's own
            // greedy tokenisation over the same trie.
            _ => self.trie.greedy_tokenize(s),
        }
    }
}

/// Build llguidance's tokenizer environment from our vocabulary (see the module doc).
pub fn tok_env(vocab: &Arc<Vocabulary>) -> anyhow::Result<TokEnv> {
    let eos = *vocab
        .eog_tokens()
        .first()
        .context("the vocabulary has no end-of-generation token; llguidance needs an EOS id")?;
    let words: Vec<Vec<u8>> = (0..vocab.len())
        .map(|i| {
            let id = TokenId(i as u32);
            if id == eos {
                let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                w.extend_from_slice(b"<eos>");
                w
            } else if vocab.is_special(id) {
                Vec::new()
            } else {
                vocab.bytes(id).to_vec()
            }
        })
        .collect();
    let info = TokRxInfo::new(vocab.len() as u32, eos.0);
    let trie = TokTrie::from(&info, &words);
    Ok(Arc::new(DominoTokEnv {
        trie,
        vocab: vocab.clone(),
    }))
}

/// llguidance's grammar for one of our grammar sources, with the same options (see the
/// module doc).
pub fn grammar_for_source(
    source: &GrammarSource,
    opts: &CompileOptions,
) -> anyhow::Result<TopLevelGrammar> {
    let json = |schema: &serde_json::Value| -> anyhow::Result<TopLevelGrammar> {
        let guidance = match opts.whitespace {
            WhitespacePolicy::Flexible => serde_json::json!({
                "whitespace_pattern": format!(r"[\x20\x0A\x0D\x09]{{1,{}}}", opts.max_whitespace.max(1)),
                "json_allow_general_unicode_escapes": true,
            }),
            WhitespacePolicy::Compact => serde_json::json!({
                "whitespace_flexible": false,
                "json_allow_general_unicode_escapes": true,
            }),
            other => {
                return Err(UsageError(format!(
                    "--vs llguidance: whitespace policy {other:?} has no llguidance equivalent (use flexible or compact)"
                ))
                .into());
            }
        };
        let schema = match schema {
            serde_json::Value::Object(m) => {
                let mut m = m.clone();
                m.insert("x-guidance".into(), guidance);
                serde_json::Value::Object(m)
            }
            serde_json::Value::Bool(true) => serde_json::json!({ "x-guidance": guidance }),
            other => other.clone(),
        };
        Ok(TopLevelGrammar::from_json_schema(schema))
    };
    match source {
        GrammarSource::Json => json(&serde_json::json!({})),
        GrammarSource::JsonSchema(schema) => json(schema),
        GrammarSource::Lark(text) => {
            if let Some(start) = &opts.start {
                anyhow::ensure!(
                    start == "start",
                    UsageError(format!(
                        "--vs llguidance: Lark grammars must start at `start`, not `{start}`"
                    ))
                );
            }
            Ok(TopLevelGrammar::from_lark(text.clone()))
        }
        GrammarSource::Regex(pattern) => Ok(TopLevelGrammar::from_regex(pattern)),
        GrammarSource::Gbnf(_) => Err(UsageError(
            "--vs llguidance: llguidance has no GBNF front end; give the grammar as a .lark file"
                .into(),
        )
        .into()),
    }
}

/// llguidance's per-vocabulary set-up (tokenizer environment, token trie and slices), quiet.
pub fn factory(vocab: &Arc<Vocabulary>) -> anyhow::Result<ParserFactory> {
    let env = tok_env(vocab)?;
    let mut factory = ParserFactory::new_simple(&env)?;
    factory.quiet();
    Ok(factory)
}

/// One llguidance parser over our vocabulary, stepped like our `Constraint`.
pub struct LlgMatcher {
    matcher: Matcher,
    vocab: Arc<Vocabulary>,
}

/// A compiled llguidance grammar: clone-able starting point for [`LlgMatcher`]s.
pub struct LlgGrammar {
    /// Compiled once; matchers are shallow clones, which share llguidance's lexer state
    /// (its lazily built lexer DFA), as a server reusing one compiled grammar would.
    parser: llguidance::TokenParser,
    vocab: Arc<Vocabulary>,
}

impl LlgGrammar {
    pub fn new(vocab: &Arc<Vocabulary>, grammar: TopLevelGrammar) -> anyhow::Result<Self> {
        Self::with_factory(&factory(vocab)?, vocab, grammar)
    }

    /// Compile with a parser factory built once for the vocabulary ([`factory`]: the
    /// tokenizer environment and llguidance's vocabulary slices) and shared by many grammars,
    /// as a server does; the breadth benchmark times only this per schema.
    pub fn with_factory(
        factory: &ParserFactory,
        vocab: &Arc<Vocabulary>,
        grammar: TopLevelGrammar,
    ) -> anyhow::Result<Self> {
        let parser = factory
            .create_parser(grammar)
            .map_err(|e| anyhow::anyhow!("llguidance rejected the grammar: {e}"))?;
        Ok(LlgGrammar {
            parser,
            vocab: vocab.clone(),
        })
    }

    /// A fresh parser at the start of the grammar.
    pub fn matcher(&self) -> anyhow::Result<LlgMatcher> {
        Ok(LlgMatcher {
            matcher: Matcher::new(Ok(self.parser.clone())),
            vocab: self.vocab.clone(),
        })
    }
}

impl LlgMatcher {
    /// llguidance's full mask for the next token (what is timed).
    pub fn compute_mask(&mut self) -> anyhow::Result<llguidance::toktrie::SimpleVob> {
        self.matcher.compute_mask_or_eos()
    }

    /// The mask as a [`TokenSet`] over our ids (EOS expanded to every EOG id).
    pub fn mask_into(&mut self, out: &mut TokenSet) -> anyhow::Result<()> {
        let m = self.compute_mask()?;
        *out = TokenSet::new(self.vocab.len());
        let eos = self.vocab.eog_tokens()[0];
        let n = self.vocab.len().min(m.len());
        m.iter_set_entries(|i| {
            if i < n {
                out.insert(TokenId(i as u32));
            }
        });
        if out.contains(eos) {
            for &e in self.vocab.eog_tokens() {
                out.insert(e);
            }
        }
        Ok(())
    }

    pub fn commit(&mut self, t: TokenId) -> anyhow::Result<()> {
        let t = if self.vocab.is_eog(t) {
            self.vocab.eog_tokens()[0]
        } else {
            t
        };
        self.matcher.consume_token(t.0)
    }

    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }
}

/// Time llguidance's full mask at every step of every document (same stepping as our
/// `bench masks`: mask, then commit the document's token), one thread. Returns each step's
/// fastest time over `repeat` passes (µs), the first pass's very first mask, and how many
/// documents llguidance stopped accepting part-way (their remaining steps are not timed).
pub fn time_documents(
    g: &LlgGrammar,
    docs: &[Vec<TokenId>],
    repeat: usize,
) -> anyhow::Result<(Vec<f64>, f64, usize)> {
    let mut best: Vec<f64> = Vec::new();
    let mut first = 0.0;
    let mut diverged = 0;
    for r in 0..repeat.max(1) {
        let mut times = Vec::new();
        for (di, doc) in docs.iter().enumerate() {
            let mut m = g.matcher()?;
            for (step, &t) in doc.iter().enumerate() {
                let t0 = std::time::Instant::now();
                let mask = m.compute_mask()?;
                let us = t0.elapsed().as_secs_f64() * 1e6;
                if r == 0 && di == 0 && step == 0 {
                    first = us;
                }
                times.push(us);
                let tl = if g.vocab.is_eog(t) {
                    g.vocab.eog_tokens()[0]
                } else {
                    t
                };
                if !mask.is_allowed(tl.0) || m.commit(t).is_err() {
                    if r == 0 {
                        diverged += 1;
                        eprintln!(
                            "warning: llguidance does not accept document {} at token {step} ({:?}); rest of it untimed",
                            di + 1,
                            String::from_utf8_lossy(g.vocab.bytes(t))
                        );
                    }
                    break;
                }
            }
        }
        if best.is_empty() {
            best = times;
        } else {
            best.iter_mut().zip(times).for_each(|(b, t)| *b = b.min(t));
        }
    }
    Ok((best, first, diverged))
}
