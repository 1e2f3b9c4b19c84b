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

/// Why llama.cpp refused `gbnf`: domino's GBNF parser's positioned error when it has one,
/// else a message that says llama.cpp's stricter parser refused a grammar domino reads.
pub fn refusal(gbnf: &str, root: &str) -> crate::grammar::GrammarError {
    use crate::grammar::GrammarError;
    match crate::grammar::gbnf::parse(gbnf, root) {
        Err(e) => GrammarError {
            message: format!(
                "llama.cpp's grammar sampler cannot use this grammar: {}",
                e.message
            ),
            ..e
        },
        Ok(_) => GrammarError::whole(format!(
            "llama.cpp's grammar parser refused the grammar (root rule `{root}`) although domino's GBNF parser reads it: llama.cpp's is stricter (an alternative continued on a new line, a repetition form or an escape it does not know); use --method domino, or `domino grammar convert` to print the grammar in the one-rule-per-line form"
        )),
    }
}

/// llama.cpp's grammar sampler over one model's vocabulary (see the module doc).
pub struct LlamaGrammar {
    sampler: LlamaSampler,
    /// The candidate array of the full pass, reused across steps.
    candidates: Vec<LlamaTokenData>,
}

impl LlamaGrammar {
    /// Build llama.cpp's grammar sampler, turning its refusal into a grammar error (exit 2)
    /// that says what was refused: llama.cpp itself answers only "null", so the grammar is
    /// first read with domino's GBNF parser, whose error has a line and column.
    pub fn new(model: &Model, gbnf: &str, root: &str) -> anyhow::Result<LlamaGrammar> {
        let sampler = LlamaSampler::grammar(model.llama(), gbnf, root)
            .map_err(|_| anyhow::Error::new(refusal(gbnf, root)))?;
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

#[cfg(test)]
mod tests {
    use super::refusal;
    use crate::grammar::Location;

    #[test]
    fn a_refused_grammar_says_where_or_why() {
        let e = refusal("root ::= \"a\" b\nb ::= [a-\n", "root");
        assert!(
            matches!(e.location, Location::LineColumn { line: 2, .. }),
            "{e}"
        );
        assert!(
            e.message
                .starts_with("llama.cpp's grammar sampler cannot use"),
            "{e}"
        );
        let e = refusal("root ::= \"a\"\n", "start");
        assert!(e.to_string().contains("start"), "{e}");
        let e = refusal("root ::= \"a\"\n", "root");
        assert!(
            e.message.contains("refused the grammar (root rule `root`)"),
            "{e}"
        );
        assert!(!e.message.contains("null"), "{e}");
    }
}
