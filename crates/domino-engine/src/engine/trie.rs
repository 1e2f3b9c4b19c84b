//! A byte trie of the vocabulary, flattened in preorder.
//!
//! Building a subterminal tree walks every token through the scanner; tokens share prefixes
//! (`"`, `",`, `", "`…), so walking the trie instead visits each shared prefix once. Preorder
//! with a "subtree end" index per node lets a walk skip a whole subtree with one jump when
//! the scanner dies, and keeps the walk a linear scan over one array.
//!
//! The trie depends only on the vocabulary, so it is built once per vocabulary and process
//! ([`VocabTrie::shared`]) and shared by every grammar's tree cache: compiling a grammar does
//! no work proportional to the vocabulary (a 49k vocabulary's trie takes ~8 ms to build).
//!
//! Invariants: node `i`'s subtree is `i+1 .. nodes[i].next`; `depth` is 1 for the first byte;
//! special tokens (control, EOG, empty) are not in the trie.

use crate::vocab::{TokenId, Vocabulary};
use std::sync::{Arc, Mutex};

/// Most vocabularies whose tries the process keeps (a server uses one or two; evicting the
/// oldest bounds memory when a program cycles through many test vocabularies).
const SHARED_TRIES: usize = 8;

/// The process-wide tries, newest last, keyed by (fingerprint, vocabulary size).
static TRIES: Mutex<Vec<(u64, usize, Arc<VocabTrie>)>> = Mutex::new(Vec::new());

#[derive(Clone, Copy, Debug)]
pub struct TrieNode {
    /// The byte on the edge into this node.
    pub byte: u8,
    /// Number of bytes from the root (1 for a token's first byte).
    pub depth: u32,
    /// Index one past this node's subtree.
    pub next: u32,
    /// `tokens[tok_start..tok_end]` end exactly at this node.
    pub tok_start: u32,
    pub tok_end: u32,
}

#[derive(Debug, Default)]
pub struct VocabTrie {
    pub nodes: Vec<TrieNode>,
    pub tokens: Vec<TokenId>,
    pub max_depth: usize,
    /// Per node, the bytes on the edges of its subtree (the node's own byte included), as
    /// bits over ASCII 0..127; bit 127 stands for DEL *and every byte ≥ 0x80* (so a test
    /// "every byte of the subtree does X" must check all of those for bit 127). Tree builds
    /// use it to take a whole subtree at once when every byte in it loops on one state.
    pub subtree_bytes: Vec<[u64; 2]>,
}

/// The [`VocabTrie::subtree_bytes`] bit of byte `b`.
#[inline]
pub fn byte_bit(b: u8) -> (usize, u64) {
    let i = b.min(127);
    ((i >> 6) as usize, 1u64 << (i & 63))
}

impl VocabTrie {
    /// The trie of `vocab`, built on the first call for that vocabulary in this process and
    /// shared afterwards (keyed by the vocabulary's fingerprint and size).
    pub fn shared(vocab: &Vocabulary) -> Arc<VocabTrie> {
        let key = (vocab.fingerprint(), vocab.len());
        {
            let tries = TRIES.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, _, t)) = tries.iter().find(|(f, n, _)| (*f, *n) == key) {
                return t.clone();
            }
        }
        // Built outside the lock (two threads may both build it; one copy is kept).
        let built = Arc::new(VocabTrie::new(vocab));
        let mut tries = TRIES.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, _, t)) = tries.iter().find(|(f, n, _)| (*f, *n) == key) {
            return t.clone();
        }
        if tries.len() >= SHARED_TRIES {
            tries.remove(0);
        }
        tries.push((key.0, key.1, built.clone()));
        built
    }

    pub fn new(vocab: &Vocabulary) -> Self {
        let mut toks: Vec<(&[u8], TokenId)> = vocab.text_tokens().map(|(id, b)| (b, id)).collect();
        toks.sort_unstable();
        let mut nodes: Vec<TrieNode> = Vec::new();
        let mut tokens = Vec::with_capacity(toks.len());
        let mut path: Vec<u32> = Vec::new();
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for (bytes, id) in toks {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > lcp {
                let n = path.pop().unwrap();
                nodes[n as usize].next = nodes.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(lcp) {
                let t = tokens.len() as u32;
                nodes.push(TrieNode {
                    byte: b,
                    depth: d as u32 + 1,
                    next: 0,
                    tok_start: t,
                    tok_end: t,
                });
                path.push(nodes.len() as u32 - 1);
            }
            let last = *path.last().expect("tokens are non-empty");
            tokens.push(id);
            nodes[last as usize].tok_end = tokens.len() as u32;
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(n) = path.pop() {
            nodes[n as usize].next = nodes.len() as u32;
        }
        // Subtree byte sets, children before parents (reverse preorder).
        let mut subtree_bytes = vec![[0u64; 2]; nodes.len()];
        for i in (0..nodes.len()).rev() {
            let (w, bit) = byte_bit(nodes[i].byte);
            let mut m = subtree_bytes[i];
            m[w] |= bit;
            let mut c = i + 1;
            while c < nodes[i].next as usize {
                m[0] |= subtree_bytes[c][0];
                m[1] |= subtree_bytes[c][1];
                c = nodes[c].next as usize;
            }
            subtree_bytes[i] = m;
        }
        VocabTrie {
            nodes,
            tokens,
            max_depth,
            subtree_bytes,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * (std::mem::size_of::<TrieNode>() + 16) + self.tokens.len() * 4
    }

    /// The tokens of node `i`'s subtree (contiguous: tokens are stored in preorder).
    pub fn subtree_tokens(&self, i: usize) -> &[TokenId] {
        let end = self
            .nodes
            .get(self.nodes[i].next as usize)
            .map_or(self.tokens.len(), |n| n.tok_start as usize);
        &self.tokens[self.nodes[i].tok_start as usize..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_trie_is_built_once_per_vocabulary() {
        let v = |words: &[&str]| {
            Vocabulary::new(
                words.iter().map(|w| w.as_bytes().to_vec()).collect(),
                vec![false; words.len()],
                vec![],
            )
        };
        let (a, b) = (v(&["x", "xy", "shared-trie-test"]), v(&["x", "y"]));
        let a1 = VocabTrie::shared(&a);
        let a2 = VocabTrie::shared(&v(&["x", "xy", "shared-trie-test"]));
        assert!(Arc::ptr_eq(&a1, &a2), "same vocabulary, same trie");
        let b1 = VocabTrie::shared(&b);
        assert!(!Arc::ptr_eq(&a1, &b1));
        assert_eq!(b1.tokens.len(), 2);
        assert_eq!(a1.tokens.len(), 3);
    }

    #[test]
    fn preorder_trie_spells_every_token() {
        let words: Vec<&[u8]> = vec![b"ab", b"a", b"abc", b"b", b"ab", b"", b"ba"];
        let v = Vocabulary::new(
            words.iter().map(|w| w.to_vec()).collect(),
            vec![false; words.len()],
            vec![],
        );
        let trie = VocabTrie::new(&v);
        // Rebuild each token's bytes from the preorder walk.
        let mut path: Vec<u8> = Vec::new();
        let mut seen = vec![None; words.len()];
        for n in &trie.nodes {
            path.truncate(n.depth as usize - 1);
            path.push(n.byte);
            for t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
                seen[t.index()] = Some(path.clone());
            }
        }
        for (i, w) in words.iter().enumerate() {
            if w.is_empty() {
                assert!(seen[i].is_none(), "empty tokens are special");
            } else {
                assert_eq!(seen[i].as_deref(), Some(*w));
            }
        }
        // Subtree ends: "a" spans "ab", "abc".
        let a = trie
            .nodes
            .iter()
            .position(|n| n.depth == 1 && n.byte == b'a')
            .unwrap();
        assert_eq!(trie.nodes[a].next as usize, a + 3);
        assert_eq!(trie.max_depth, 3);
        // Subtree tokens and bytes of "a": "a", "ab" (twice), "abc".
        let mut sub: Vec<u32> = trie.subtree_tokens(a).iter().map(|t| t.0).collect();
        sub.sort();
        assert_eq!(sub, vec![0, 1, 2, 4]);
        let bits = |s: &[u8]| {
            let mut m = [0u64; 2];
            for &b in s {
                let (w, bit) = byte_bit(b);
                m[w] |= bit;
            }
            m
        };
        assert_eq!(trie.subtree_bytes[a], bits(b"abc"));
        let bn = trie
            .nodes
            .iter()
            .position(|n| n.depth == 1 && n.byte == b'b')
            .unwrap();
        assert_eq!(trie.subtree_bytes[bn], bits(b"ba"));
        assert_eq!(byte_bit(0xC3), byte_bit(127));
    }
}
