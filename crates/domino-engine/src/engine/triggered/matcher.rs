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
    /// A byte trie of the triggers' proper non-empty suffixes: children, and whether a
    /// suffix ends at the node.
    suffixes: Vec<(Vec<(u8, u32)>, bool)>,
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
        let mut suffixes: Vec<(Vec<(u8, u32)>, bool)> = vec![(Vec::new(), false)];
        for &(_, bytes) in patterns {
            for k in 1..bytes.len() {
                let mut s = 0usize;
                for &b in &bytes[k..] {
                    s = match suffixes[s].0.iter().find(|(c, _)| *c == b) {
                        Some(&(_, t)) => t as usize,
                        None => {
                            let t = suffixes.len() as u32;
                            suffixes[s].0.push((b, t));
                            suffixes.push((Vec::new(), false));
                            t as usize
                        }
                    };
                }
                suffixes[s].1 = true;
            }
        }
        Matcher {
            next,
            matched,
            suffixes,
        }
    }

    /// The state after one more byte of free text (only for non-match states).
    #[inline]
    pub(crate) fn step(&self, s: u32, b: u8) -> u32 {
        self.next[s as usize * 256 + b as usize]
    }

    /// Whether these bytes could complete a trigger from SOME state: they contain a whole
    /// trigger, or begin with a proper non-empty suffix of one (the rest of a trigger begun
    /// before them). Bytes for which this is false are plain free text from every state.
    pub(crate) fn may_complete(&self, bytes: &[u8]) -> bool {
        let mut s = 0usize;
        for &b in bytes {
            match self.suffixes[s].0.iter().find(|(c, _)| *c == b) {
                Some(&(_, t)) => s = t as usize,
                None => break,
            }
            if self.suffixes[s].1 {
                return true;
            }
        }
        let mut s = START;
        bytes.iter().any(|&b| {
            s = self.step(s, b);
            self.matched(s).is_some()
        })
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
            // `may_complete` is exactly "some state reaches a match inside these bytes".
            let some_state = (0..m.matched.len() as u32)
                .filter(|&s| m.matched(s).is_none())
                .any(|s0| {
                    let mut s = s0;
                    text.iter().any(|&b| {
                        s = m.step(s, b);
                        m.matched(s).is_some()
                    })
                });
            assert_eq!(
                m.may_complete(&text),
                some_state,
                "{:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}
