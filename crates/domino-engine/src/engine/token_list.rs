//! Token sets of subterminal-tree groups: [`TokenList`] (frozen: a sorted list or a bitset,
//! whichever is smaller) and [`IdBuf`] (while a tree is built).

use crate::vocab::TokenSet;

/// A set of token ids stored as a sorted list or a bitset, whichever is smaller.
#[derive(Clone, Debug)]
pub enum TokenList {
    Sparse(Box<[u32]>),
    Dense(Box<[u64]>),
}

impl TokenList {
    /// From ids in any order, duplicates allowed (big sets go straight to a bitset: no sort).
    pub(super) fn from_unsorted(mut ids: Vec<u32>, vocab_len: usize) -> Self {
        if ids.len() * 32 <= vocab_len {
            ids.sort_unstable();
            ids.dedup();
        }
        Self::from_sorted(ids, vocab_len)
    }

    pub(super) fn from_sorted(ids: Vec<u32>, vocab_len: usize) -> Self {
        if ids.len() * 32 > vocab_len {
            let mut w = vec![0u64; vocab_len.div_ceil(64)];
            for &i in &ids {
                w[i as usize / 64] |= 1 << (i % 64);
            }
            TokenList::Dense(w.into())
        } else {
            TokenList::Sparse(ids.into())
        }
    }

    /// `out |= self`.
    #[inline]
    pub fn union_into(&self, out: &mut TokenSet) {
        match self {
            TokenList::Sparse(ids) => {
                let w = out.words_mut();
                for &i in ids.iter() {
                    w[i as usize >> 6] |= 1 << (i & 63);
                }
            }
            TokenList::Dense(bits) => {
                for (a, b) in out.words_mut().iter_mut().zip(bits.iter()) {
                    *a |= *b;
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TokenList::Sparse(ids) => ids.len(),
            TokenList::Dense(bits) => bits.iter().map(|w| w.count_ones() as usize).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn memory_bytes(&self) -> usize {
        match self {
            TokenList::Sparse(ids) => ids.len() * 4,
            TokenList::Dense(bits) => bits.len() * 8,
        }
    }
}

/// One group's token ids while a tree is built: a list until it holds more than 1/32 of the
/// vocabulary (where [`TokenList`] keeps a bitset anyway), then a bitset, so a string body's
/// hundreds of thousands of tokens are set as bits rather than pushed, grown and copied.
pub(super) enum IdBuf {
    List(Vec<u32>),
    Bits(Vec<u64>),
}

impl IdBuf {
    pub(super) fn new() -> Self {
        IdBuf::List(Vec::new())
    }

    pub(super) fn extend(&mut self, toks: &[crate::vocab::TokenId], vocab_len: usize) {
        if let IdBuf::List(ids) = self {
            if (ids.len() + toks.len()) * 32 > vocab_len {
                let mut w = vec![0u64; vocab_len.div_ceil(64)];
                for &i in ids.iter() {
                    w[i as usize >> 6] |= 1 << (i & 63);
                }
                *self = IdBuf::Bits(w);
            }
        }
        match self {
            IdBuf::List(ids) => ids.extend(toks.iter().map(|t| t.0)),
            IdBuf::Bits(w) => {
                for t in toks {
                    w[t.0 as usize >> 6] |= 1 << (t.0 & 63);
                }
            }
        }
    }

    pub(super) fn into_list(self, vocab_len: usize) -> TokenList {
        match self {
            IdBuf::List(ids) => TokenList::from_unsorted(ids, vocab_len),
            IdBuf::Bits(w) => TokenList::Dense(w.into()),
        }
    }
}
