//! A dense bitset over token ids: the mask format shared by the engine and the decoder.

use super::TokenId;

/// A set of token ids, one bit per vocabulary entry.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSet {
    words: Vec<u64>,
    len: usize,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenSet({} of {})", self.count(), self.len)
    }
}

impl TokenSet {
    /// An empty set over a vocabulary of `len` tokens.
    pub fn new(len: usize) -> Self {
        TokenSet {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// The vocabulary size this set ranges over.
    pub fn universe(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn insert(&mut self, t: TokenId) {
        self.words[t.index() >> 6] |= 1u64 << (t.0 & 63);
    }

    #[inline]
    pub fn remove(&mut self, t: TokenId) {
        self.words[t.index() >> 6] &= !(1u64 << (t.0 & 63));
    }

    #[inline]
    pub fn contains(&self, t: TokenId) -> bool {
        t.index() < self.len && self.words[t.index() >> 6] & (1u64 << (t.0 & 63)) != 0
    }

    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// `self |= other` (same universe).
    pub fn union_with(&mut self, other: &TokenSet) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// The raw words, bit `i % 64` of word `i / 64` standing for token `i`.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Members in increasing id order.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros();
                w &= w - 1;
                Some(TokenId((wi as u32) * 64 + b))
            })
        })
    }
}
