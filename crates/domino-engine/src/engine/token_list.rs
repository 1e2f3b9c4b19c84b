//! Token sets of subterminal-tree groups: [`TokenList`] (frozen: a sorted list or a bitset,
//! whichever is smaller) and [`IdBuf`] (while a tree is built).

use super::trie::VocabTrie;
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

    /// `self ∪=` the trie tokens of `ranges` (half-open ranges of indices into `trie.tokens`,
    /// increasing and disjoint: whole subtrees taken in preorder). When they cover most of
    /// the trie the set is built from the other side: every trie token minus the tokens in
    /// the gaps between the ranges. A string body keeps ~250k of Gemma 3's 262k tokens, so
    /// that is a 32 KB copy and ~12k cleared bits instead of ~250k bits set one by one
    /// (setting them was ~40 % of such a tree's build).
    pub(super) fn add_trie_ranges(
        &mut self,
        trie: &VocabTrie,
        ranges: &[(u32, u32)],
        vocab_len: usize,
    ) {
        debug_assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0));
        let covered: usize = ranges.iter().map(|&(a, b)| (b - a) as usize).sum();
        let all = trie.all_bits();
        if covered * 2 > trie.tokens.len() && all.len() == vocab_len.div_ceil(64) {
            let mut bits = all.to_vec();
            let mut at = 0usize;
            let end = trie.tokens.len() as u32;
            for &(a, b) in ranges.iter().chain(std::iter::once(&(end, end))) {
                for t in &trie.tokens[at..a as usize] {
                    bits[t.0 as usize >> 6] &= !(1 << (t.0 & 63));
                }
                at = b as usize;
            }
            // What the buffer held joins the new bitset, which replaces it.
            match self {
                IdBuf::List(ids) => {
                    for &i in ids.iter() {
                        bits[i as usize >> 6] |= 1 << (i & 63);
                    }
                }
                IdBuf::Bits(w) => {
                    for (a, b) in bits.iter_mut().zip(w.iter()) {
                        *a |= *b;
                    }
                }
            }
            *self = IdBuf::Bits(bits);
        } else {
            for &(a, b) in ranges {
                self.extend(&trie.tokens[a as usize..b as usize], vocab_len);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{TokenId, Vocabulary};

    fn ids(list: TokenList, vocab_len: usize) -> Vec<u32> {
        let mut set = TokenSet::new(vocab_len);
        list.union_into(&mut set);
        (0..vocab_len as u32)
            .filter(|&i| set.contains(TokenId(i)))
            .collect()
    }

    /// Both ways of adding trie ranges (token by token when they cover little, every token
    /// minus the gaps when they cover most) give the ranges' tokens plus what the buffer held,
    /// whether it was a list or a bitset.
    #[test]
    fn trie_ranges_add_exactly_their_tokens() {
        let words: Vec<Vec<u8>> = (0..300u32)
            .map(|i| format!("{}{}", (b'a' + (i % 7) as u8) as char, i).into_bytes())
            .chain([vec![], b"x".to_vec()])
            .collect();
        let n = words.len();
        let mut special = vec![false; n];
        special[n - 1] = true;
        let vocab = Vocabulary::new(words, special, vec![]);
        let trie = VocabTrie::new(&vocab);
        let len = trie.tokens.len() as u32;
        let mut seed = 7u64;
        let mut rand = |m: u32| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((seed >> 33) % m as u64) as u32
        };
        for round in 0..200 {
            // Disjoint increasing ranges, sparse or dense.
            let mut ranges = Vec::new();
            let mut at = 0;
            while at < len {
                let gap = rand(if round % 2 == 0 { 40 } else { 3 });
                let a = (at + gap).min(len);
                let b = (a + rand(30)).min(len);
                if b > a {
                    ranges.push((a, b));
                }
                at = b + 1;
            }
            let held: Vec<TokenId> = (0..rand(5)).map(|_| TokenId(rand(n as u32 - 1))).collect();
            let mut expected: Vec<u32> = ranges
                .iter()
                .flat_map(|&(a, b)| trie.tokens[a as usize..b as usize].iter().map(|t| t.0))
                .chain(held.iter().map(|t| t.0))
                .collect();
            expected.sort_unstable();
            expected.dedup();
            for bits_first in [false, true] {
                let mut buf = if bits_first {
                    IdBuf::Bits(vec![0; n.div_ceil(64)])
                } else {
                    IdBuf::new()
                };
                buf.extend(&held, n);
                buf.add_trie_ranges(&trie, &ranges, n);
                assert_eq!(ids(buf.into_list(n), n), expected, "round {round}");
            }
        }
    }
}
