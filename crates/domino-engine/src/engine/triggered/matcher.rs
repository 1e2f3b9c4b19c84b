//! The free-text trigger matcher: an Aho–Corasick automaton over the text triggers, as a dense
//! DFA that stops at the first match.
//!
//! State `s` stands for the longest suffix of the free text so far that is a proper prefix of
//! some trigger. A state is a *match* state when some trigger is a suffix of its string: the
//! region whose trigger it is begins there. When several triggers end at the same byte (one
//! is a suffix of the other, or two are equal) the tie rule picks the region listed first.
//! Match states have no successors: the free text ends at the first trigger occurrence.
//!
//! Invariant: `next[s * 256 + b]` is defined for every non-match state `s` (the goto function
//! with failure links folded in); `START` is the empty string.

/// A dense Aho–Corasick DFA over trigger strings (see the module doc).
#[derive(Clone, Debug)]
pub(crate) struct Matcher {
    next: Vec<u32>,
    /// The region whose trigger ends in each state (`u32::MAX`: none).
    matched: Vec<u32>,
}

pub(crate) const START: u32 = 0;
const NONE: u32 = u32::MAX;

impl Matcher {
    /// Build from `(region index, trigger bytes)` pairs (non-empty bytes).
    pub(crate) fn new(patterns: &[(usize, &[u8])]) -> Self {
        // The trie of the patterns.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new()];
        let mut own: Vec<u32> = vec![NONE];
        for &(region, bytes) in patterns {
            let mut s = 0usize;
            for &b in bytes {
                s = match children[s].iter().find(|(c, _)| *c == b) {
                    Some(&(_, t)) => t as usize,
                    None => {
                        let t = children.len() as u32;
                        children[s].push((b, t));
                        children.push(Vec::new());
                        own.push(NONE);
                        t as usize
                    }
                };
            }
            own[s] = own[s].min(region as u32);
        }
        // Breadth-first: failure links, inherited matches, dense transitions.
        let n = children.len();
        let mut next = vec![START; n * 256];
        let mut fail = vec![START; n];
        let mut matched = own.clone();
        let mut queue = std::collections::VecDeque::new();
        for &(b, t) in &children[0] {
            next[b as usize] = t;
            queue.push_back(t as usize);
        }
        while let Some(s) = queue.pop_front() {
            let f = fail[s] as usize;
            if matched[f] != NONE {
                matched[s] = matched[s].min(matched[f]);
            }
            for b in 0..256usize {
                next[s * 256 + b] = next[f * 256 + b];
            }
            for &(b, t) in &children[s] {
                fail[t as usize] = next[f * 256 + b as usize];
                next[s * 256 + b as usize] = t;
                queue.push_back(t as usize);
            }
        }
        Matcher { next, matched }
    }

    /// The state after one more byte of free text (only for non-match states).
    #[inline]
    pub(crate) fn step(&self, s: u32, b: u8) -> u32 {
        self.next[s as usize * 256 + b as usize]
    }

    /// The region whose trigger has just been completed in state `s`, if any.
    #[inline]
    pub(crate) fn matched(&self, s: u32) -> Option<usize> {
        let m = self.matched[s as usize];
        (m != NONE).then_some(m as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first trigger occurrence by brute force: (end offset, region) with the tie rule.
    fn brute(patterns: &[(usize, &[u8])], text: &[u8]) -> Option<(usize, usize)> {
        (1..=text.len()).find_map(|end| {
            patterns
                .iter()
                .filter(|(_, p)| text[..end].ends_with(p))
                .map(|(r, _)| *r)
                .min()
                .map(|r| (end, r))
        })
    }

    #[test]
    fn first_match_equals_brute_force() {
        let patterns: Vec<(usize, &[u8])> = vec![
            (0, b"</think>"),
            (1, b"<tool>"),
            (2, b"ol>"),
            (3, b"<to"),
            (4, b"aab"),
            (5, b"ab"),
        ];
        let m = Matcher::new(&patterns);
        let alphabet = b"<>/thinkoladb";
        let mut seed = 0x1234_5678u64;
        for _ in 0..20_000 {
            let len = (seed % 12) as usize;
            let mut text = Vec::new();
            for _ in 0..len {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push(alphabet[(seed % alphabet.len() as u64) as usize]);
            }
            let mut s = START;
            let mut got = None;
            for (i, &b) in text.iter().enumerate() {
                s = m.step(s, b);
                if let Some(r) = m.matched(s) {
                    got = Some((i + 1, r));
                    break;
                }
            }
            assert_eq!(
                got,
                brute(&patterns, &text),
                "text {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}
