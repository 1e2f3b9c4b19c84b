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
    /// Per node, the UTF-8 lead bytes (`0xC0..=0xFF`, bit `b - 0xC0`) on the edges of its
    /// subtree: which multi-byte characters bit 127 of [`VocabTrie::subtree_bytes`] may
    /// stand for. A DFA that treats a few characters apart (a pattern's `.` refusing U+2028)
    /// still steps the subtrees without their lead byte alike (`char_steps`).
    pub subtree_leads: Vec<u64>,
    /// Per node, the number of whole characters before it (the path to its parent) when the
    /// node starts a character and every token *strictly below* it is well-formed UTF-8
    /// without DEL, of fewer than 63 characters; [`NOT_CLEAN`] otherwise. (The node's own
    /// tokens may be anything, e.g. a lone lead byte: they are one byte from the node's
    /// parent. Without DEL, bit 127 of such a subtree's [`VocabTrie::subtree_bytes`] means
    /// exactly "a multi-byte character" — or the node's own byte.) Tree builds take such a
    /// subtree at once when every character of it steps the walk's state alike (`char_steps`).
    pub char_start: Vec<u8>,
    /// Per node, bit `c` for each token strictly below it that is `c` characters long (whole
    /// path; meaningful where [`VocabTrie::char_start`] is not [`NOT_CLEAN`]).
    pub token_chars: Vec<u64>,
    /// Per entry of [`VocabTrie::tokens`], the token's length in characters when it is
    /// well-formed UTF-8 of fewer than 63 characters, else [`NOT_CLEAN`]. A tree build whose
    /// character chain dies at some length keeps the shorter tokens of a subtree by it.
    pub token_len_chars: Vec<u8>,
    /// Per byte, the root's child on that byte ([`NO_NODE`]: no token starts with it; empty
    /// in a default trie). A literal's tree build goes straight to the one child its next
    /// byte can take.
    pub root_child: Vec<u32>,
    /// Every token of the trie as a bitset over token ids (`vocab.len()` bits): tree builds
    /// that take most of the vocabulary into one group start from it and clear what they
    /// did not take (see `SubterminalTree::build`'s root ranges).
    all_bits: Box<[u64]>,
    /// The root walks of component builds over this vocabulary, shared by every grammar
    /// (module `root_walk`).
    pub(crate) root_walks: super::root_walk::RootWalks,
}

/// [`VocabTrie::char_start`] of a node whose subtree is not all well-formed UTF-8 from a
/// character boundary.
pub const NOT_CLEAN: u8 = u8::MAX;

/// [`VocabTrie::root_child`] of a byte no token starts with.
pub const NO_NODE: u32 = u32::MAX;

/// Tokens of this many characters or more make their subtrees not clean (the length mask
/// is one word).
const MAX_CLEAN_CHARS: usize = 63;

/// Whether `b` continues a UTF-8 character.
#[inline]
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The [`VocabTrie::subtree_bytes`] bit of byte `b`.
#[inline]
pub fn byte_bit(b: u8) -> (usize, u64) {
    let i = b.min(127);
    ((i >> 6) as usize, 1u64 << (i & 63))
}

/// The [`VocabTrie::subtree_leads`] bit of byte `b` (none below `0xC0`).
#[inline]
pub fn lead_bit(b: u8) -> u64 {
    match b {
        0xC0.. => 1u64 << (b - 0xC0),
        _ => 0,
    }
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
        // Per node: characters before it when the path to its parent is well-formed UTF-8
        // ending on a character boundary (else NOT_CLEAN), and whether the path through it is.
        let mut start_chars: Vec<u8> = Vec::new();
        let mut end_chars: Vec<u8> = Vec::new();
        let mut token_chars_of: Vec<u8> = Vec::with_capacity(toks.len());
        for (bytes, id) in toks {
            let lcp = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > lcp {
                let n = path.pop().unwrap();
                nodes[n as usize].next = nodes.len() as u32;
            }
            // DEL counts as ill-formed here, so that in a clean subtree the byte-set bit 127
            // stands for multi-byte characters only.
            let valid_up_to = match std::str::from_utf8(bytes) {
                Ok(_) => bytes.len(),
                Err(e) => e.valid_up_to(),
            }
            .min(bytes.iter().position(|&b| b == 0x7F).unwrap_or(bytes.len()));
            // `bytes[..d]` is well-formed and whole: within the valid part, on a boundary.
            let whole =
                |d: usize| d <= valid_up_to && (d == valid_up_to || !is_continuation(bytes[d]));
            let chars_in = |d: usize| {
                let c = bytes[..d].iter().filter(|&&b| !is_continuation(b)).count();
                if c < MAX_CLEAN_CHARS {
                    c as u8
                } else {
                    NOT_CLEAN
                }
            };
            for (d, &b) in bytes.iter().enumerate().skip(lcp) {
                start_chars.push(if whole(d) { chars_in(d) } else { NOT_CLEAN });
                end_chars.push(if whole(d + 1) {
                    chars_in(d + 1)
                } else {
                    NOT_CLEAN
                });
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
            token_chars_of.push(end_chars[last as usize]);
            nodes[last as usize].tok_end = tokens.len() as u32;
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(n) = path.pop() {
            nodes[n as usize].next = nodes.len() as u32;
        }
        // Subtree byte sets, children before parents (reverse preorder).
        let mut subtree_bytes = vec![[0u64; 2]; nodes.len()];
        let mut subtree_leads = vec![0u64; nodes.len()];
        for i in (0..nodes.len()).rev() {
            let (w, bit) = byte_bit(nodes[i].byte);
            let mut m = subtree_bytes[i];
            m[w] |= bit;
            let mut leads = lead_bit(nodes[i].byte);
            let mut c = i + 1;
            while c < nodes[i].next as usize {
                m[0] |= subtree_bytes[c][0];
                m[1] |= subtree_bytes[c][1];
                leads |= subtree_leads[c];
                c = nodes[c].next as usize;
            }
            subtree_bytes[i] = m;
            subtree_leads[i] = leads;
        }
        // Clean subtrees and their token lengths in characters, children before parents:
        // per node, over the tokens strictly below it (`token_chars`, `char_start`), and over
        // its whole subtree (`full_*`, what its parent aggregates).
        let mut full_chars = vec![0u64; nodes.len()];
        let mut full_clean = vec![true; nodes.len()];
        let mut token_chars = vec![0u64; nodes.len()];
        let mut char_start = vec![NOT_CLEAN; nodes.len()];
        for i in (0..nodes.len()).rev() {
            let n = nodes[i];
            let (mut m, mut ok) = (0u64, true);
            let mut c = i + 1;
            while c < n.next as usize {
                m |= full_chars[c];
                ok &= full_clean[c];
                c = nodes[c].next as usize;
            }
            token_chars[i] = m;
            if ok {
                char_start[i] = start_chars[i];
            }
            if n.tok_end > n.tok_start {
                match end_chars[i] {
                    NOT_CLEAN => ok = false,
                    c => m |= 1 << c,
                }
            }
            full_chars[i] = m;
            full_clean[i] = ok;
        }
        let mut root_child = vec![NO_NODE; 256];
        let mut c = 0;
        while c < nodes.len() {
            root_child[nodes[c].byte as usize] = c as u32;
            c = nodes[c].next as usize;
        }
        let mut all_bits = vec![0u64; vocab.len().div_ceil(64)];
        for t in &tokens {
            all_bits[t.0 as usize >> 6] |= 1 << (t.0 & 63);
        }
        VocabTrie {
            nodes,
            tokens,
            max_depth,
            subtree_bytes,
            subtree_leads,
            char_start,
            token_chars,
            token_len_chars: token_chars_of,
            root_child,
            all_bits: all_bits.into_boxed_slice(),
            root_walks: Default::default(),
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * (std::mem::size_of::<TrieNode>() + 16 + 8 + 1 + 8)
            + self.tokens.len() * 5
            + self.all_bits.len() * 8
            + 1024
    }

    /// Every token of the trie as a bitset over token ids (words for the vocabulary's size).
    pub fn all_bits(&self) -> &[u64] {
        &self.all_bits
    }

    /// The lengths in characters of the tokens strictly below node `i`, counted from the node
    /// (bit `j`: a token of `j` characters from here), when they are clean
    /// ([`VocabTrie::char_start`]).
    #[inline]
    pub fn clean_lengths(&self, i: usize) -> Option<u64> {
        match self.char_start[i] {
            NOT_CLEAN => None,
            before => Some(self.token_chars[i] >> before),
        }
    }

    /// The indices into [`VocabTrie::tokens`] of node `i`'s subtree (contiguous: tokens are
    /// stored in preorder, the node's own tokens first).
    pub fn subtree_range(&self, i: usize) -> std::ops::Range<u32> {
        let end = self
            .nodes
            .get(self.nodes[i].next as usize)
            .map_or(self.tokens.len() as u32, |n| n.tok_start);
        self.nodes[i].tok_start..end
    }

    /// The tokens of node `i`'s subtree.
    pub fn subtree_tokens(&self, i: usize) -> &[TokenId] {
        let r = self.subtree_range(i);
        &self.tokens[r.start as usize..r.end as usize]
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

    #[test]
    fn clean_subtrees_are_whole_characters_below_a_character_start() {
        let words: Vec<&[u8]> = vec![
            "é".as_bytes(),
            "éa".as_bytes(),
            "éé".as_bytes(),
            &[0xC3], // lone lead byte: ill-formed, but a node's own token
            b"ab",
            b"abc",
            b"a\x7f", // DEL: never clean
            "a€".as_bytes(),
            &[b'x', 0xC3], // ends inside a character
            b"xy",
        ];
        let v = Vocabulary::new(
            words.iter().map(|w| w.to_vec()).collect(),
            vec![false; words.len()],
            vec![],
        );
        let trie = VocabTrie::new(&v);
        let node = |path: &[u8]| {
            let mut at = 0usize;
            let mut i = 0usize;
            while i < trie.nodes.len() {
                let n = trie.nodes[i];
                if n.depth as usize == at + 1 && n.byte == path[at] {
                    at += 1;
                    if at == path.len() {
                        return i;
                    }
                    i += 1;
                } else {
                    i = n.next as usize;
                }
            }
            panic!("no node {path:?}");
        };
        // 0xC3: its own token is the lone byte; below it é, éa, éé (1, 2, 2 characters).
        let c3 = node(&[0xC3]);
        assert_eq!(trie.char_start[c3], 0);
        assert_eq!(trie.clean_lengths(c3), Some(0b110));
        // The continuation byte of é starts no character.
        assert_eq!(trie.char_start[node("é".as_bytes())], NOT_CLEAN);
        // `a`: below it a DEL token, so not clean; `ab`: abc (3 characters, 2 from `b`).
        assert_eq!(trie.char_start[node(b"a")], NOT_CLEAN);
        assert_eq!(trie.char_start[node(b"ab")], 1);
        assert_eq!(trie.clean_lengths(node(b"ab")), Some(0b100));
        // `x`: below it a token ending inside a character.
        assert_eq!(trie.char_start[node(b"x")], NOT_CLEAN);
        assert_eq!(trie.clean_lengths(node(b"xy")), Some(0));
    }
}
