//! The model's vocabulary as the engine sees it: token id → exact bytes, plus which tokens
//! end generation and which are special (never produced by a grammar).
//!
//! Sources: a GGUF model through the `domino` crate's `runtime` module (which calls [`Vocabulary::new`]) or a
//! Hugging Face `tokenizer.json` (see [`tokenizer_json`]), so the engine can be used and
//! benchmarked without model weights.

mod token_set;
pub mod tokenizer_json;
pub use token_set::TokenSet;

use crate::hash::Fnv1a;

/// A token id of the model's vocabulary.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct TokenId(pub u32);

impl TokenId {
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Turns text into token ids the way the model does (for benchmarks and templates).
pub trait Tokenize: Send + Sync {
    fn tokenize(&self, text: &str) -> anyhow::Result<Vec<TokenId>>;
}

/// Token id → bytes, end-of-generation ids, special flags.
///
/// Invariants: `tokens.len() == special.len()`; every EOG id is `< len()`; EOG tokens and
/// special tokens are never returned by byte-level lookups (the grammar can only allow an
/// EOG token as "end of document", and never a special token).
pub struct Vocabulary {
    tokens: Vec<Vec<u8>>,
    special: Vec<bool>,
    eog: Vec<TokenId>,
    fingerprint: u64,
    tokenizer: Option<Box<dyn Tokenize>>,
}

impl std::fmt::Debug for Vocabulary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocabulary")
            .field("len", &self.tokens.len())
            .field("eog", &self.eog)
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

impl Vocabulary {
    /// `tokens[i]` is the exact byte string of token `i` (empty for control tokens);
    /// `special[i]` marks tokens a grammar may never produce (control, unused, BOS, …);
    /// `eog` lists every end-of-generation id.
    pub fn new(tokens: Vec<Vec<u8>>, mut special: Vec<bool>, eog: Vec<TokenId>) -> Self {
        assert_eq!(tokens.len(), special.len(), "one special flag per token");
        for &t in &eog {
            assert!(t.index() < tokens.len(), "EOG id out of range");
            special[t.index()] = true;
        }
        // Empty tokens can never make progress: treat them as special.
        for (i, t) in tokens.iter().enumerate() {
            if t.is_empty() {
                special[i] = true;
            }
        }
        let fingerprint = fingerprint(&tokens, &special, &eog);
        Vocabulary {
            tokens,
            special,
            eog,
            fingerprint,
            tokenizer: None,
        }
    }

    /// Attach the tokenizer used by [`Vocabulary::tokenize`].
    pub fn with_tokenizer(mut self, tokenizer: Box<dyn Tokenize>) -> Self {
        self.tokenizer = Some(tokenizer);
        self
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    #[inline]
    pub fn bytes(&self, id: TokenId) -> &[u8] {
        &self.tokens[id.index()]
    }

    /// Special tokens (control, EOG, empty): never allowed as grammar text.
    #[inline]
    pub fn is_special(&self, id: TokenId) -> bool {
        self.special[id.index()]
    }

    pub fn is_eog(&self, id: TokenId) -> bool {
        self.eog.contains(&id)
    }

    pub fn eog_tokens(&self) -> &[TokenId] {
        &self.eog
    }

    /// Stable hash of (bytes, special flags, EOG ids): keys on-disk caches.
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// Tokenize text with the attached tokenizer.
    pub fn tokenize(&self, text: &str) -> anyhow::Result<Vec<TokenId>> {
        match &self.tokenizer {
            Some(t) => t.tokenize(text),
            None => anyhow::bail!("this vocabulary has no tokenizer attached"),
        }
    }

    /// Iterate over `(id, bytes)` of the tokens a grammar may produce (not special).
    pub fn text_tokens(&self) -> impl Iterator<Item = (TokenId, &[u8])> {
        self.tokens
            .iter()
            .enumerate()
            .filter(move |(i, _)| !self.special[*i])
            .map(|(i, b)| (TokenId(i as u32), b.as_slice()))
    }
}

/// FNV-1a over the vocabulary; stable across runs and platforms.
fn fingerprint(tokens: &[Vec<u8>], special: &[bool], eog: &[TokenId]) -> u64 {
    let mut h = Fnv1a::new();
    for (t, &s) in tokens.iter().zip(special) {
        h.write(&(t.len() as u32).to_le_bytes());
        h.write(t);
        h.write_u8(s as u8);
    }
    for e in eog {
        h.write(&e.0.to_le_bytes());
    }
    h.finish()
}
