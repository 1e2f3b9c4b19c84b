//! llama.cpp's own GBNF grammar sampler, wrapped so that the `llama-grammar` baseline can
//! run inside decode's loop without naming `llama-cpp-2` outside this module.
//!
//! [`LlamaGrammar`] offers what llama.cpp's "sample, then check" use needs: whether one token
//! is allowed ([`LlamaGrammar::allows`], a one-element candidate array through
//! `llama_sampler_apply`), the whole allowed set ([`LlamaGrammar::allowed`], the full pass
//! over the vocabulary), and [`LlamaGrammar::accept`] (`try_accept`, which turns llama.cpp's
//! grammar exceptions into errors instead of aborting the process).

use super::Model;
use crate::vocab::{TokenId, TokenSet};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

/// llama.cpp's grammar sampler over one model's vocabulary (see the module doc).
pub struct LlamaGrammar {
    sampler: LlamaSampler,
    /// The candidate array of the full pass, reused across steps.
    candidates: Vec<LlamaTokenData>,
}

impl LlamaGrammar {
    /// Build llama.cpp's grammar sampler, turning its refusal into a grammar error (exit 2).
    pub fn new(model: &Model, gbnf: &str, root: &str) -> anyhow::Result<LlamaGrammar> {
        let sampler = LlamaSampler::grammar(model.llama(), gbnf, root).map_err(|e| {
            anyhow::Error::new(crate::grammar::GrammarError::whole(format!(
                "llama.cpp could not parse the grammar (root rule `{root}`): {e}"
            )))
        })?;
        Ok(LlamaGrammar {
            sampler,
            candidates: Vec::new(),
        })
    }

    /// Whether llama.cpp accepts `gbnf` with root rule `root` for `model`.
    pub fn parses(model: &Model, gbnf: &str, root: &str) -> bool {
        LlamaSampler::grammar(model.llama(), gbnf, root).is_ok()
    }

    /// Whether the grammar allows `token` next (its logit is passed along as llama.cpp
    /// sees it; only whether the grammar sets it to −∞ matters).
    pub fn allows(&mut self, token: TokenId, logit: f32) -> bool {
        let mut one = LlamaTokenDataArray::new(
            vec![LlamaTokenData::new(LlamaToken(token.0 as i32), logit, 0.0)],
            false,
        );
        self.sampler.apply(&mut one);
        one.data[0].logit() != f32::NEG_INFINITY
    }

    /// Every token the grammar allows next, into `mask` (cleared first): the grammar applied
    /// to the whole vocabulary with these logits.
    pub fn allowed(&mut self, logits: &[f32], mask: &mut TokenSet) {
        self.candidates.clear();
        self.candidates.extend(
            logits
                .iter()
                .enumerate()
                .map(|(i, &l)| LlamaTokenData::new(LlamaToken(i as i32), l, 0.0)),
        );
        let mut all = LlamaTokenDataArray::new(std::mem::take(&mut self.candidates), false);
        self.sampler.apply(&mut all);
        mask.clear();
        for d in &all.data {
            if d.logit() != f32::NEG_INFINITY {
                mask.insert(TokenId(d.id().0 as u32));
            }
        }
        self.candidates = all.data;
    }

    /// Advance the grammar by `token` (which it must allow).
    pub fn accept(&mut self, token: TokenId) -> anyhow::Result<()> {
        self.sampler
            .try_accept(LlamaToken(token.0 as i32))
            .map_err(|e| {
                anyhow::anyhow!(
                    "llama.cpp's grammar sampler failed to accept token {}: {e:?}",
                    token.0
                )
            })
    }
}
