//! On-disk cache of subterminal trees, keyed by (grammar hash, vocabulary fingerprint).
//!
//! A server (or `domino bench masks --tree-cache FILE`) can save the trees it built and load
//! them in the next process instead of walking the vocabulary again. The file is a flat
//! little-endian `u32`/`u64` stream: magic, format version, the grammar hash
//! ([`grammar_hash`]: terminals' regexes, productions, start — everything the scanner and
//! trees are a function of), the vocabulary fingerprint, the live sets and scanner states the
//! trees mention and the components they name, all by content (a live set by its sorted
//! terminal ids; a component by its terminal and its DFA state's key — a lazily built DFA's
//! state by its NFA set, see `TerminalDfa::state_key` —; a scanner state by its components), because the lazy scanner and
//! the lazy terminal DFAs number them in the order a process happens to reach them; then
//! each built component tree (naming those by table index), and an FNV-1a checksum of
//! everything before it.
//! Loading checks the key and every index against the current scanner and vocabulary, so a
//! stale or corrupt file is an error value, never a wrong mask or a panic.

use super::tree::{Group, SubterminalTree, TokenList, TreeNode};
use super::{CompiledGrammar, TreeCache};
use crate::grammar::ir;
use crate::hash::{Fnv1a, fnv1a};
use crate::lexer::{ComponentId, LiveSetId, ScanState};
use crate::vocab::Vocabulary;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

const MAGIC: u64 = 0x444f_4d49_4e4f_5452; // "DOMINOTR"
/// 5: a key set's DFA states are keyed `[KEY_SET_STATE, number]` (`TerminalDfa::state_key`).
const VERSION: u32 = 5;

/// Why a tree cache file could not be used.
#[derive(Debug)]
pub enum PersistError {
    Io(std::io::Error),
    /// The file belongs to another grammar or vocabulary (or another format version).
    KeyMismatch,
    /// The file is truncated or inconsistent with the grammar it claims to be for.
    Corrupt(&'static str),
    /// Lark grammars (greedy lexing) keep one tree per scanner state, which the file format
    /// does not store yet.
    GreedyLexing,
}

impl std::fmt::Display for PersistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PersistError::Io(e) => write!(f, "tree cache file: {e}"),
            PersistError::KeyMismatch => write!(
                f,
                "tree cache file is for another grammar, vocabulary or version"
            ),
            PersistError::Corrupt(what) => write!(f, "tree cache file is corrupt ({what})"),
            PersistError::GreedyLexing => write!(
                f,
                "tree cache files are not supported for Lark grammars (greedy lexing) yet"
            ),
        }
    }
}
impl std::error::Error for PersistError {}

/// FNV-1a over the grammar's terminals (name, regex, literal), productions and start.
pub fn grammar_hash(g: &ir::Grammar) -> u64 {
    let mut h = Fnv1a::new();
    let mut eat = |bytes: &[u8]| {
        h.write(&(bytes.len() as u64).to_le_bytes());
        h.write(bytes);
    };
    for t in &g.terminals {
        eat(t.name.as_bytes());
        eat(t.hir.to_string().as_bytes());
        for (tag, hs) in [(b"&", &t.constraints.and), (b"!", &t.constraints.and_not)] {
            for h in hs {
                eat(tag);
                eat(h.to_string().as_bytes());
            }
        }
        eat(t.literal.as_deref().unwrap_or(b"-"));
    }
    for p in &g.productions {
        eat(&p.lhs.0.to_le_bytes());
        for s in &p.rhs {
            match s {
                ir::Symbol::Terminal(t) => eat(&[&[0u8][..], &t.0.to_le_bytes()].concat()),
                ir::Symbol::Nonterminal(n) => eat(&[&[1u8][..], &n.0.to_le_bytes()].concat()),
            }
        }
    }
    eat(&g.start.0.to_le_bytes());
    h.finish()
}

/// FNV-1a of the file body (detects truncation and bit rot).
fn checksum(bytes: &[u8]) -> u64 {
    fnv1a(bytes)
}

struct Writer(Vec<u8>);
impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, v: usize) {
        self.u32(v as u32);
    }
}

struct Reader<'a>(&'a [u8]);
impl Reader<'_> {
    fn u32(&mut self) -> Result<u32, PersistError> {
        let (a, b) = self
            .0
            .split_at_checked(4)
            .ok_or(PersistError::Corrupt("truncated"))?;
        self.0 = b;
        Ok(u32::from_le_bytes(a.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, PersistError> {
        let (a, b) = self
            .0
            .split_at_checked(8)
            .ok_or(PersistError::Corrupt("truncated"))?;
        self.0 = b;
        Ok(u64::from_le_bytes(a.try_into().expect("8 bytes")))
    }
    /// A length, bounded by what the rest of the file could hold (`unit` bytes each).
    fn len(&mut self, unit: usize) -> Result<usize, PersistError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(unit) > self.0.len() {
            return Err(PersistError::Corrupt("length beyond end of file"));
        }
        Ok(n)
    }
}

impl TreeCache {
    /// Write every tree built so far to `path`. Returns the number of trees written.
    pub fn save(
        &self,
        grammar: &CompiledGrammar,
        vocab: &Vocabulary,
        path: &Path,
    ) -> Result<usize, PersistError> {
        if grammar.scanner().is_greedy() {
            return Err(PersistError::GreedyLexing);
        }
        let mut w = Writer(Vec::new());
        w.u64(MAGIC);
        w.u32(VERSION);
        w.u64(grammar_hash(grammar.grammar()));
        w.u64(vocab.fingerprint());
        let built: Vec<(usize, &Arc<SubterminalTree>)> = self.components.iter().collect();
        // Tables of the live sets, components and states the trees mention, by content.
        let sc = grammar.scanner();
        let mut live_index: HashMap<LiveSetId, u32> = HashMap::new();
        let mut state_index: HashMap<ScanState, u32> = HashMap::new();
        let mut comp_index: HashMap<ComponentId, u32> = HashMap::new();
        let (mut lives, mut states, mut comps) = (Vec::new(), Vec::new(), Vec::new());
        let mut comp = |c: ComponentId| {
            *comp_index.entry(c).or_insert_with(|| {
                comps.push(c);
                (comps.len() - 1) as u32
            })
        };
        for (i, t) in &built {
            comp(ComponentId(*i as u32));
            t.end_components().iter().for_each(|&c| {
                comp(c);
            });
            for &s in t.end_states() {
                state_index.entry(s).or_insert_with(|| {
                    states.push(s);
                    (states.len() - 1) as u32
                });
                sc.components(s).iter().for_each(|&c| {
                    comp(c);
                });
            }
            for g in t.parts().2 {
                live_index.entry(g.live).or_insert_with(|| {
                    lives.push(g.live);
                    (lives.len() - 1) as u32
                });
            }
        }
        w.len(lives.len());
        for &l in &lives {
            let ts = sc.live_terminals(l);
            w.len(ts.len());
            ts.iter().for_each(|t| w.u32(t.0));
        }
        w.len(comps.len());
        for &c in &comps {
            let (t, key) = sc.component_key(c);
            w.u32(t.0);
            w.len(key.len());
            key.iter().for_each(|&k| w.u32(k));
        }
        w.len(states.len());
        for &q in &states {
            let cs = sc.components(q);
            w.len(cs.len());
            cs.iter().for_each(|c| w.u32(comp_index[c]));
        }
        w.len(built.len());
        for (i, t) in &built {
            w.len(comp_index[&ComponentId(*i as u32)] as usize);
            let (ec, es) = (t.end_components(), t.end_states());
            w.len(ec.len());
            ec.iter().for_each(|c| w.u32(comp_index[c]));
            w.len(es.len());
            es.iter().for_each(|s| w.u32(state_index[s]));
            let (nodes, children, groups) = t.parts();
            w.len(nodes.len());
            for n in nodes {
                w.u32(n.terminal.0);
                w.u32(n.inside);
                let (c, g) = n.ranges();
                w.u32(c.start);
                w.u32(c.end);
                w.u32(g.start);
                w.u32(g.end);
            }
            w.len(children.len());
            children.iter().for_each(|&c| w.u32(c));
            w.len(groups.len());
            for g in groups {
                w.u32(live_index[&g.live]);
                match &g.tokens {
                    TokenList::Sparse(ids) => {
                        w.u32(0);
                        w.len(ids.len());
                        ids.iter().for_each(|&i| w.u32(i));
                    }
                    TokenList::Dense(bits) => {
                        w.u32(1);
                        w.len(bits.len());
                        bits.iter().for_each(|&b| w.u64(b));
                    }
                }
            }
        }
        let sum = checksum(&w.0);
        w.u64(sum);
        std::fs::write(path, &w.0).map_err(PersistError::Io)?;
        Ok(built.len())
    }

    /// Load trees saved by [`TreeCache::save`] for this grammar and vocabulary; trees already
    /// built are kept. Returns the number of trees loaded.
    pub fn load(
        &self,
        grammar: &CompiledGrammar,
        vocab: &Vocabulary,
        path: &Path,
    ) -> Result<usize, PersistError> {
        if grammar.scanner().is_greedy() {
            return Err(PersistError::GreedyLexing);
        }
        let bytes = std::fs::read(path).map_err(PersistError::Io)?;
        let body_len = bytes
            .len()
            .checked_sub(8)
            .ok_or(PersistError::Corrupt("truncated"))?;
        let (body, sum) = bytes.split_at(body_len);
        if checksum(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
            return Err(PersistError::Corrupt("checksum"));
        }
        let mut r = Reader(body);
        if r.u64()? != MAGIC || r.u32()? != VERSION {
            return Err(PersistError::KeyMismatch);
        }
        if r.u64()? != grammar_hash(grammar.grammar()) || r.u64()? != vocab.fingerprint() {
            return Err(PersistError::KeyMismatch);
        }
        let sc = grammar.scanner();
        let words = vocab.len().div_ceil(64);
        let mut lives = Vec::new();
        for _ in 0..r.len(4)? {
            let mut ts = Vec::new();
            for _ in 0..r.len(4)? {
                ts.push(ir::TerminalId(r.u32()?));
            }
            lives.push(
                sc.live_set_of(&ts)
                    .ok_or(PersistError::Corrupt("live set"))?,
            );
        }
        let mut comps = Vec::new();
        for _ in 0..r.len(8)? {
            let t = ir::TerminalId(r.u32()?);
            let mut key = Vec::new();
            for _ in 0..r.len(4)? {
                key.push(r.u32()?);
            }
            comps.push(
                sc.component_of_key(t, &key)
                    .ok_or(PersistError::Corrupt("component"))?,
            );
        }
        let comp = |i: u32| {
            comps
                .get(i as usize)
                .copied()
                .ok_or(PersistError::Corrupt("component id"))
        };
        let mut states = Vec::new();
        for _ in 0..r.len(4)? {
            let mut cs = Vec::new();
            for _ in 0..r.len(4)? {
                cs.push(comp(r.u32()?)?);
            }
            states.push(
                sc.state_of_components(&cs)
                    .ok_or(PersistError::Corrupt("scanner state"))?,
            );
        }
        let mut trees = Vec::new();
        for _ in 0..r.len(4)? {
            let id = comp(r.u32()?)?.0 as usize;
            let mut end_components = Vec::new();
            for _ in 0..r.len(4)? {
                end_components.push(comp(r.u32()?)?);
            }
            end_components.sort_unstable();
            let mut end_states = Vec::new();
            for _ in 0..r.len(4)? {
                let s = r.u32()? as usize;
                end_states.push(
                    *states
                        .get(s)
                        .ok_or(PersistError::Corrupt("scanner state"))?,
                );
            }
            let num_nodes = r.len(24)?;
            let mut raw_nodes = Vec::with_capacity(num_nodes);
            for _ in 0..num_nodes {
                let v = [r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?, r.u32()?];
                if v[0] as usize >= sc.num_terminals() || v[2] > v[3] || v[4] > v[5] {
                    return Err(PersistError::Corrupt("node"));
                }
                raw_nodes.push(v);
            }
            let mut children = Vec::new();
            for _ in 0..r.len(4)? {
                let c = r.u32()?;
                if c as usize >= num_nodes || c == 0 {
                    return Err(PersistError::Corrupt("child index"));
                }
                children.push(c);
            }
            let mut groups = Vec::new();
            for _ in 0..r.len(8)? {
                let live = *lives
                    .get(r.u32()? as usize)
                    .ok_or(PersistError::Corrupt("live set"))?;
                let tokens = match r.u32()? {
                    0 => {
                        let mut ids = Vec::new();
                        for _ in 0..r.len(4)? {
                            let t = r.u32()?;
                            if t as usize >= vocab.len()
                                || vocab.is_special(crate::vocab::TokenId(t))
                            {
                                return Err(PersistError::Corrupt("token id"));
                            }
                            ids.push(t);
                        }
                        TokenList::Sparse(ids.into())
                    }
                    1 => {
                        let n = r.len(8)?;
                        if n != words {
                            return Err(PersistError::Corrupt("bitset size"));
                        }
                        let mut bits = Vec::with_capacity(n);
                        for _ in 0..n {
                            bits.push(r.u64()?);
                        }
                        TokenList::Dense(bits.into())
                    }
                    _ => return Err(PersistError::Corrupt("token list kind")),
                };
                groups.push(Group { live, tokens });
            }
            let mut nodes = Vec::with_capacity(num_nodes);
            for v in raw_nodes {
                if v[3] as usize > children.len() || v[5] as usize > groups.len() {
                    return Err(PersistError::Corrupt("node range"));
                }
                nodes.push(TreeNode::new(
                    ir::TerminalId(v[0]),
                    v[1],
                    v[2]..v[3],
                    v[4]..v[5],
                ));
            }
            if nodes.is_empty() {
                return Err(PersistError::Corrupt("empty tree"));
            }
            // Children come after their parent (as built), so walks cannot loop.
            for (i, n) in nodes.iter().enumerate() {
                let (c, _) = n.ranges();
                if children[c.start as usize..c.end as usize]
                    .iter()
                    .any(|&ch| ch as usize <= i)
                {
                    return Err(PersistError::Corrupt("child before parent"));
                }
            }
            trees.push((
                id,
                SubterminalTree::from_parts(end_components, end_states, nodes, children, groups),
            ));
        }
        if !r.0.is_empty() {
            return Err(PersistError::Corrupt("trailing bytes"));
        }
        let n = trees.len();
        for (id, t) in trees {
            let _ = self.components.slot(id).set(Arc::new(t));
        }
        Ok(n)
    }
}
