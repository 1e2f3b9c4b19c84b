//! The state pieces of a triggered constraint (see the parent module's doc): configurations,
//! region slots, snapshots, and what all clones share — the matcher, the free-text mask
//! cache, and the byte-level simulation of free text and regions that commits and masks use.

use super::AfterRegion;
use super::TriggerSpec;
use super::matcher::{Matcher, START};
use crate::engine::trie::VocabTrie;
use crate::engine::{CompiledGrammar, Constraint, Options};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Where a configuration is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    Free {
        ac: u32,
    },
    /// `count` = the slot constraint's `num_committed` for this configuration.
    Region {
        region: usize,
        slot: usize,
        count: usize,
    },
}

/// A span: (region index, first byte after the trigger, end of the region's text).
pub(super) type Span = (usize, usize, Option<usize>);

#[derive(Clone, Debug)]
pub(super) struct Cfg {
    pub(super) place: Place,
    /// Regions begun so far, saturated (see `Shared::bump`).
    pub(super) n: usize,
    pub(super) spans: Vec<Span>,
}

/// A configuration produced by `advance` before its new region constraints join the pool.
pub(super) enum Next {
    Free {
        ac: u32,
        n: usize,
        spans: Vec<Span>,
    },
    Old {
        cfg: Cfg,
    },
    /// A region begun inside this piece; `fed` = the bytes its constraint took (one commit
    /// each). Its tail twin is made only when it is installed (viability checks skip it).
    Fresh {
        region: usize,
        c: Box<Slot>,
        n: usize,
        spans: Vec<Span>,
        fed: Vec<u8>,
    },
}

/// A region's constraint, and in `Free` mode its twin over the region grammar followed by
/// anything ([`tail`](super::tail)), fed the same text (so both have the same commit count).
///
/// The twin's mask names the tokens that leave the region inside them only while no proper
/// prefix of the region's text was a sentence (else its "anything" may have begun earlier
/// and its mask is everything): `dirty_since` is the commit count from which that holds
/// (set by `mark_dirty`, cleared by a rollback below it).
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) c: Constraint,
    pub(super) tail: Option<Constraint>,
    pub(super) dirty_since: Option<usize>,
}

impl Slot {
    /// Some proper prefix of the region's text is a sentence (the twin is no help).
    pub(super) fn is_dirty(&self) -> bool {
        self.dirty_since
            .is_some_and(|k| k <= self.c.num_committed())
    }

    /// The last commit went past a point where the region's text was a sentence.
    pub(super) fn mark_dirty(&mut self) {
        self.dirty_since.get_or_insert(self.c.num_committed());
    }

    pub(super) fn commit_bytes(&mut self, b: &[u8]) -> bool {
        if self.c.commit_bytes(b).is_err() {
            return false;
        }
        if let Some(t) = &mut self.tail {
            t.commit_bytes(b)
                .expect("the tail grammar's prefixes include the region grammar's");
        }
        true
    }

    pub(super) fn commit(&mut self, tok: TokenId, bytes: &[u8]) -> bool {
        if self.c.commit(tok).is_err() {
            return false;
        }
        if let Some(t) = &mut self.tail {
            t.commit_bytes(bytes)
                .expect("the tail grammar's prefixes include the region grammar's");
        }
        true
    }

    pub(super) fn rollback(&mut self, n: usize) {
        self.c.rollback(n);
        if let Some(t) = &mut self.tail {
            t.rollback(n);
        }
        if self.dirty_since.is_some_and(|k| k > self.c.num_committed()) {
            self.dirty_since = None;
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Snapshot {
    pub(super) configs: Vec<Cfg>,
    pub(super) pool_len: usize,
    pub(super) ended: bool,
    pub(super) text_len: usize,
}

/// What all clones of one triggered constraint share.
pub(super) struct Shared {
    pub(super) spec: Arc<TriggerSpec>,
    pub(super) vocab: Arc<Vocabulary>,
    pub(super) opts: Options,
    pub(super) matcher: Matcher,
    /// Token id → the first region it triggers.
    pub(super) token_triggers: HashMap<TokenId, usize>,
    /// Saturation bound of the region count (the count only matters up to here).
    pub(super) n_cap: usize,
    /// Per region, in `Free` mode: its grammar followed by anything ([`tail`](super::tail)).
    pub(super) tails: Vec<Option<Arc<CompiledGrammar>>>,
    /// The vocabulary trie (built on first use: region exits while a region is dirty).
    pub(super) trie: OnceLock<Arc<VocabTrie>>,
    /// Free-text masks (without EOG) by (matcher state, region count).
    pub(super) free_masks: Mutex<HashMap<(u32, usize), Arc<TokenSet>>>,
    /// See [`Shared::free_base`] (built on first use).
    pub(super) base: OnceLock<(TokenSet, Vec<TokenId>)>,
    /// Text tokens outside the free mask of the matcher's start state, by region count.
    pub(super) trigger_tokens: Mutex<HashMap<usize, Arc<Vec<TokenId>>>>,
}

impl Shared {
    pub(super) fn enabled(&self, n: usize) -> bool {
        match self.spec.after {
            AfterRegion::End => n == 0 && self.spec.max_regions.is_none_or(|m| m > 0),
            AfterRegion::Free => self.spec.max_regions.is_none_or(|m| n < m),
        }
    }

    pub(super) fn bump(&self, n: usize) -> usize {
        (n + 1).min(self.n_cap)
    }

    pub(super) fn free_after(&self) -> bool {
        self.spec.after == AfterRegion::Free
    }

    /// A region's constraint at its start (its tail twin comes at install, see [`Next`]).
    pub(super) fn fresh(&self, region: usize) -> Box<Slot> {
        let g = &self.spec.regions[region].grammar;
        Box::new(Slot {
            c: Constraint::new(g, &self.vocab, self.opts.clone())
                .expect("Constraint::new does not fail"),
            tail: None,
            dirty_since: None,
        })
    }

    /// Text tokens that free text from the start state cannot take (they contain a trigger
    /// whose region refuses the rest), cached per region count.
    pub(super) fn trigger_tokens(&self, n: usize) -> Arc<Vec<TokenId>> {
        if let Some(v) = self
            .trigger_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&n)
        {
            return v.clone();
        }
        let free = self.free_mask(START, n);
        let (_, candidates) = self.base.get().expect("built by free_mask");
        let v: Arc<Vec<TokenId>> = Arc::new(
            candidates
                .iter()
                .copied()
                .filter(|&t| !free.contains(t))
                .collect(),
        );
        self.trigger_tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(n, v.clone());
        v
    }

    /// Whether region slot `s` (count `n`) can take `bytes` by leaving the region after at
    /// least one of them and going on as free text. `s` is restored.
    pub(super) fn exits_inside(&self, s: &mut Slot, n: usize, bytes: &[u8]) -> bool {
        let mut stepped = 0;
        let mut ok = false;
        for p in 0..bytes.len() {
            if p > 0 && s.c.is_accepting() && self.free_viable(START, n, &bytes[p..]) {
                ok = true;
                break;
            }
            if s.c.commit_bytes(&bytes[p..p + 1]).is_err() {
                break;
            }
            stepped += 1;
        }
        s.c.rollback(stepped);
        ok
    }

    /// Free text from matcher state `ac` over `rest` (text starting at offset `at`).
    pub(super) fn sim_free(
        &self,
        ac: u32,
        n: usize,
        spans: Vec<Span>,
        rest: &[u8],
        at: usize,
        out: &mut Vec<Next>,
    ) {
        let mut s = ac;
        for (p, &b) in rest.iter().enumerate() {
            s = self.matcher.step(s, b);
            if let Some(region) = self.matcher.matched(s) {
                if !self.enabled(n) {
                    return;
                }
                let mut spans = spans;
                spans.push((region, at + p + 1, None));
                let c = self.fresh(region);
                self.sim_fresh(
                    region,
                    c,
                    self.bump(n),
                    spans,
                    &rest[p + 1..],
                    at + p + 1,
                    out,
                );
                return;
            }
        }
        out.push(Next::Free { ac: s, n, spans });
    }

    /// A region begun inside this piece of text (constraint `c` at its start) over `rest`:
    /// leaving it wherever its text is a sentence (before a byte of `rest`), or staying.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn sim_fresh(
        &self,
        region: usize,
        mut c: Box<Slot>,
        n: usize,
        spans: Vec<Span>,
        rest: &[u8],
        at: usize,
        out: &mut Vec<Next>,
    ) {
        for p in 0..rest.len() {
            let accepting = self.free_after() && c.c.is_accepting();
            if accepting {
                let mut s = spans.clone();
                close_last(&mut s, at + p);
                self.sim_free(START, n, s, &rest[p..], at + p, out);
            }
            if !c.commit_bytes(&rest[p..p + 1]) {
                return;
            }
            if accepting {
                c.mark_dirty();
            }
        }
        out.push(Next::Fresh {
            region,
            c,
            n,
            spans,
            fed: rest.to_vec(),
        });
    }

    /// Whether free text from `(ac, n)` can take these bytes (fast path: no trigger).
    pub(super) fn free_viable(&self, ac: u32, n: usize, bytes: &[u8]) -> bool {
        let mut s = ac;
        for &b in bytes {
            s = self.matcher.step(s, b);
            if self.matcher.matched(s).is_some() {
                let mut out = Vec::new();
                self.sim_free(ac, n, Vec::new(), bytes, 0, &mut out);
                return !out.is_empty();
            }
        }
        true
    }

    /// What every free-text mask starts from (one pass over the vocabulary): every token
    /// but EOG and the trigger tokens; and the text tokens that may complete a text trigger
    /// from some matcher state (the only ones a free mask may have to drop).
    pub(super) fn free_base(&self) -> (TokenSet, Vec<TokenId>) {
        let v = &self.vocab;
        let mut base = TokenSet::new(v.len());
        let mut candidates = Vec::new();
        for i in 0..v.len() as u32 {
            let t = TokenId(i);
            if v.is_eog(t) || self.token_triggers.contains_key(&t) {
                continue;
            }
            base.insert(t);
            if !v.is_special(t) && self.matcher.may_complete(v.bytes(t)) {
                candidates.push(t);
            }
        }
        (base, candidates)
    }

    /// The free-text mask of `(ac, n)` without EOG (cached): the base minus the candidate
    /// tokens that complete a trigger whose region refuses the rest, plus the trigger
    /// tokens while a region may begin.
    pub(super) fn free_mask(&self, ac: u32, n: usize) -> Arc<TokenSet> {
        let key = (ac, n);
        if let Some(m) = self
            .free_masks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return m.clone();
        }
        let (base, candidates) = self.base.get_or_init(|| self.free_base());
        let mut m = base.clone();
        for &t in candidates {
            if !self.free_viable(ac, n, self.vocab.bytes(t)) {
                m.remove(t);
            }
        }
        if self.enabled(n) {
            for &t in self.token_triggers.keys() {
                m.insert(t);
            }
        }
        let m = Arc::new(m);
        self.free_masks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, m.clone());
        m
    }
}

pub(super) fn close_last(spans: &mut [Span], end: usize) {
    if let Some(last) = spans.last_mut() {
        last.2 = Some(end);
    }
}
