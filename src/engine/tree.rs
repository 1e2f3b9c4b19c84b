//! Vocabulary-aligned subterminal trees (DOMINO §3.3).
//!
//! For one scanner state `q`, [`SubterminalTree::build`] walks every vocabulary token's bytes
//! through the scanner and enumerates **every** way to split them into terminal pieces: the
//! rest of the terminal in progress, zero or more whole terminals, and the start of a next
//! terminal. A split is recorded as its sequence of *boundary events* — "terminal `t` ends
//! here" — followed by the scanner state reached at the token's end (its live terminals
//! are what the final partial piece could still become). Sequences are organised as a
//! prefix tree over boundary events; each node carries groups `(live set, tokens)`: the tokens
//! whose split has exactly this event sequence and ends in a state with that live set.
//!
//! A mask walks the tree with the parser: an edge is taken when the parser accepts its
//! terminal, and a group is allowed when one of its live terminals is expected by the parser
//! at that point (so the final partial piece can still be completed into an acceptable
//! terminal). This is exact: the grammar allows `prefix · token` iff some split passes.
//!
//! # Boundaries and lookahead
//! A boundary at byte position 0 of a token ends the terminal that was in progress before
//! the token; a boundary at position `1..len` is *inside* the token. Each node records how
//! many inside boundaries its path has ([`TreeNode::inside`]); lookahead `k` drops nodes with
//! more than `k` (see [`crate::engine::Options::lookahead`]). A boundary exactly at the token's
//! end is never an event: the next token's tree handles it (it is the position-0 boundary
//! there), so each split is represented once.
//!
//! # Pruning
//! Splits that no sentence of the grammar can contain are not stored: two consecutive events
//! `a, b` require `b` to be able to follow `a` somewhere in the grammar ([`Follow`]), and a new
//! terminal started after `a` must have a live terminal that can follow `a`. Without this, a
//! token of 16 spaces would have 2^15 splits into whitespace terminals. The pruning is a
//! static over-approximation of the parser, so it never removes a split the parser accepts.
//!
//! # Invariants
//! - Node 0 is the root (no events); children of a node have distinct edge labels.
//! - Token ids in a group are sorted and distinct; special tokens never appear.

use super::earley::Parser;
use super::trie::VocabTrie;
use crate::grammar::ir::{self, TerminalId};
use crate::lexer::{DEAD, LiveSetId, ScanState, Scanner};
use crate::vocab::TokenSet;

/// Which terminal can immediately follow which in some sentential form of the grammar.
#[derive(Clone, Debug)]
pub struct Follow {
    n: usize,
    bits: Vec<u64>,
}

impl Follow {
    /// Pairs `(a, b)` such that `… a b …` occurs in a derivation: for every production and
    /// every two right-hand-side positions with only nullable symbols between, LAST of the
    /// first × FIRST of the second.
    pub fn new(g: &ir::Grammar) -> Self {
        let nt = g.nonterminals.len();
        let n = g.terminals.len();
        let words = n.div_ceil(64).max(1);
        let mut nullable = vec![false; nt];
        loop {
            let mut changed = false;
            for p in &g.productions {
                if !nullable[p.lhs.0 as usize]
                    && p.rhs.iter().all(|s| matches!(s, ir::Symbol::Nonterminal(x) if nullable[x.0 as usize]))
                {
                    nullable[p.lhs.0 as usize] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // FIRST / LAST sets of nonterminals as bitsets over terminals.
        let mut first = vec![vec![0u64; words]; nt];
        let mut last = vec![vec![0u64; words]; nt];
        let set_of = |sets: &Vec<Vec<u64>>, s: &ir::Symbol| -> Vec<u64> {
            match s {
                ir::Symbol::Terminal(t) => {
                    let mut v = vec![0u64; words];
                    v[t.0 as usize / 64] |= 1 << (t.0 % 64);
                    v
                }
                ir::Symbol::Nonterminal(x) => sets[x.0 as usize].clone(),
            }
        };
        let is_nullable = |s: &ir::Symbol| matches!(s, ir::Symbol::Nonterminal(x) if nullable[x.0 as usize]);
        loop {
            let mut changed = false;
            for p in &g.productions {
                let l = p.lhs.0 as usize;
                for s in &p.rhs {
                    let add = set_of(&first, s);
                    for (a, b) in first[l].iter_mut().zip(&add) {
                        if *a | b != *a {
                            *a |= b;
                            changed = true;
                        }
                    }
                    if !is_nullable(s) {
                        break;
                    }
                }
                for s in p.rhs.iter().rev() {
                    let add = set_of(&last, s);
                    for (a, b) in last[l].iter_mut().zip(&add) {
                        if *a | b != *a {
                            *a |= b;
                            changed = true;
                        }
                    }
                    if !is_nullable(s) {
                        break;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let mut bits = vec![0u64; n * words];
        for p in &g.productions {
            for i in 0..p.rhs.len() {
                let lasts = set_of(&last, &p.rhs[i]);
                for j in i + 1..p.rhs.len() {
                    let firsts = set_of(&first, &p.rhs[j]);
                    for a in 0..n {
                        if lasts[a / 64] >> (a % 64) & 1 == 1 {
                            for (w, f) in bits[a * words..(a + 1) * words].iter_mut().zip(&firsts) {
                                *w |= f;
                            }
                        }
                    }
                    if !is_nullable(&p.rhs[j]) {
                        break;
                    }
                }
            }
        }
        Follow { n: words, bits }
    }

    /// Everything may follow everything (no pruning).
    pub fn all(num_terminals: usize) -> Self {
        let words = num_terminals.div_ceil(64).max(1);
        Follow { n: words, bits: vec![u64::MAX; num_terminals * words] }
    }

    #[inline]
    pub fn can_follow(&self, a: TerminalId, b: TerminalId) -> bool {
        self.bits[a.0 as usize * self.n + b.0 as usize / 64] >> (b.0 % 64) & 1 == 1
    }
}

/// A set of token ids stored as a sorted list or a bitset, whichever is smaller.
#[derive(Clone, Debug)]
pub enum TokenList {
    Sparse(Box<[u32]>),
    Dense(Box<[u64]>),
}

impl TokenList {
    fn from_sorted(ids: Vec<u32>, vocab_len: usize) -> Self {
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

    fn memory_bytes(&self) -> usize {
        match self {
            TokenList::Sparse(ids) => ids.len() * 4,
            TokenList::Dense(bits) => bits.len() * 8,
        }
    }
}

#[derive(Clone, Debug)]
pub struct Group {
    pub live: LiveSetId,
    pub tokens: TokenList,
}

#[derive(Clone, Debug)]
pub struct TreeNode {
    /// The boundary event on the edge into this node (meaningless for the root).
    pub terminal: TerminalId,
    /// Number of boundaries strictly inside the token on the path from the root.
    pub inside: u32,
    children: std::ops::Range<u32>,
    groups: std::ops::Range<u32>,
}

/// The subterminal tree `T_q` of one scanner state (see the module doc).
#[derive(Debug)]
pub struct SubterminalTree {
    nodes: Vec<TreeNode>,
    children: Vec<u32>,
    groups: Vec<Group>,
}

/// Build-time node.
struct BuildNode {
    terminal: TerminalId,
    inside: u32,
    /// (edge label, child): label = terminal << 1 | at_position_0.
    children: Vec<(u32, u32)>,
    groups: Vec<(LiveSetId, Vec<u32>)>,
}

impl SubterminalTree {
    /// Build `T_q` for scanner state `q` over the vocabulary trie.
    pub fn build(scanner: &Scanner, follow: &Follow, trie: &VocabTrie, vocab_len: usize, q: ScanState) -> Self {
        let mut nodes = vec![BuildNode { terminal: TerminalId(0), inside: 0, children: vec![], groups: vec![] }];
        // levels[d] = threads (scanner state, tree node) after d bytes of the current trie path.
        let mut levels: Vec<Vec<(ScanState, u32)>> = vec![vec![(q, 0)]];
        let mut next_threads: Vec<(ScanState, u32)> = Vec::new();
        let follows_live = |t: TerminalId, s: ScanState| {
            scanner.live_terminals(scanner.live_set(s)).iter().any(|&u| follow.can_follow(t, u))
        };
        let mut i = 0usize;
        while i < trie.nodes.len() {
            let tn = trie.nodes[i];
            let d = tn.depth as usize;
            levels.truncate(d);
            let pos = d - 1;
            let b = tn.byte;
            next_threads.clear();
            for &(s, n) in &levels[d - 1] {
                let cont = scanner.next(s, b);
                if cont != DEAD && !next_threads.contains(&(ScanState(cont), n)) {
                    next_threads.push((ScanState(cont), n));
                }
                let acc = scanner.accepting(s);
                if acc.is_empty() {
                    continue;
                }
                let fresh = scanner.next(Scanner::START, b);
                if fresh == DEAD {
                    continue;
                }
                let fresh = ScanState(fresh);
                for &t in acc {
                    if n != 0 && !follow.can_follow(nodes[n as usize].terminal, t) {
                        continue;
                    }
                    if !follows_live(t, fresh) {
                        continue;
                    }
                    let label = (t.0 << 1) | (pos == 0) as u32;
                    let child = match nodes[n as usize].children.iter().find(|c| c.0 == label) {
                        Some(c) => c.1,
                        None => {
                            let id = nodes.len() as u32;
                            let inside = nodes[n as usize].inside + (pos > 0) as u32;
                            nodes.push(BuildNode { terminal: t, inside, children: vec![], groups: vec![] });
                            nodes[n as usize].children.push((label, id));
                            id
                        }
                    };
                    if !next_threads.contains(&(fresh, child)) {
                        next_threads.push((fresh, child));
                    }
                }
            }
            if next_threads.is_empty() {
                i = tn.next as usize;
                continue;
            }
            let toks = &trie.tokens[tn.tok_start as usize..tn.tok_end as usize];
            if !toks.is_empty() {
                for &(s, n) in &next_threads {
                    let live = scanner.live_set(s);
                    let groups = &mut nodes[n as usize].groups;
                    let g = match groups.iter().position(|g| g.0 == live) {
                        Some(g) => g,
                        None => {
                            groups.push((live, Vec::new()));
                            groups.len() - 1
                        }
                    };
                    groups[g].1.extend(toks.iter().map(|t| t.0));
                }
            }
            levels.push(std::mem::take(&mut next_threads));
            next_threads = Vec::new();
            i += 1;
        }
        // Freeze: children and groups contiguous, breadth-irrelevant order.
        let mut out_nodes = Vec::with_capacity(nodes.len());
        let mut children = Vec::new();
        let mut groups = Vec::new();
        for n in nodes {
            let c0 = children.len() as u32;
            children.extend(n.children.iter().map(|c| c.1));
            let g0 = groups.len() as u32;
            for (live, mut ids) in n.groups {
                ids.sort_unstable();
                ids.dedup();
                groups.push(Group { live, tokens: TokenList::from_sorted(ids, vocab_len) });
            }
            out_nodes.push(TreeNode {
                terminal: n.terminal,
                inside: n.inside,
                children: c0..children.len() as u32,
                groups: g0..groups.len() as u32,
            });
        }
        SubterminalTree { nodes: out_nodes, children, groups }
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn num_groups(&self) -> usize {
        self.groups.len()
    }

    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<TreeNode>()
            + self.children.len() * 4
            + self.groups.iter().map(|g| std::mem::size_of::<Group>() + g.tokens.memory_bytes()).sum::<usize>()
    }

    /// OR into `out` every token whose split the parser accepts, checking at most
    /// `max_inside` inside-token boundaries. `parser` is restored before returning.
    pub fn mask_into(&self, scanner: &Scanner, parser: &mut Parser, max_inside: u32, out: &mut TokenSet) {
        self.walk(0, scanner, parser, max_inside, out);
    }

    fn walk(&self, node: u32, scanner: &Scanner, parser: &mut Parser, max_inside: u32, out: &mut TokenSet) {
        let n = &self.nodes[node as usize];
        {
            let expected = parser.expected();
            for g in &self.groups[n.groups.start as usize..n.groups.end as usize] {
                if scanner.live_terminals(g.live).iter().any(|&t| expected.contains(t)) {
                    g.tokens.union_into(out);
                }
            }
        }
        for &c in &self.children[n.children.start as usize..n.children.end as usize] {
            let child = &self.nodes[c as usize];
            if child.inside > max_inside {
                continue;
            }
            if parser.push(child.terminal) {
                self.walk(c, scanner, parser, max_inside, out);
                parser.pop();
            }
        }
    }
}
