//! Token healing at the prompt boundary.
//!
//! A prompt that ends mid-word (`The capital of Fra`) or mid-URL (`http:`) ends on a token
//! the model would rarely have chosen there had it been writing the text itself: the
//! tokenizer split the prompt without knowing what follows, so the natural continuation
//! (`France`, `://`) needs a token that *extends* the prompt's last token. Healing backs the
//! last token(s) off the prompt ([`healing_plan`]) and makes the generation re-write their
//! bytes: the first generated tokens must spell the removed bytes, and may run past them.
//!
//! # Semantics ([`HealedConstraint`])
//! The output must begin with `healed` (the bytes backed off); the bytes after them go to
//! `inner` (a grammar, triggered constraint, …; `None` = unconstrained). While healed bytes
//! remain (`rem`), a token `t` is allowed exactly when
//! - `bytes(t)` is a prefix of `rem` (the healing goes on over several tokens), or
//! - `bytes(t)` starts with `rem` and `inner` can take the rest of `bytes(t)` as its first
//!   bytes (checked with every split, `k = ∞`, like `commit_bytes`);
//!
//! no special or end-of-generation token is allowed before the healed bytes are written.
//! Once they are, the constraint is exactly `inner` (unconstrained: every token, EOG
//! included). Candidates come from the vocabulary trie: the tokens on the path spelling `rem`
//! and the subtree below it, walked along `inner` so dead branches are skipped.
//!
//! Invariant: `inner` receives no commit before the healed bytes are consumed, so while
//! healing it is at its initial state; the history records per commit whether `inner` got
//! one, so rollback is exact.

use super::trie::VocabTrie;
use super::{EngineError, TokenConstraint};
use crate::hash::{Fnv1a, fnv1a};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The byte trie of a vocabulary, built once per vocabulary for the whole process (kept
/// while some constraint holds it): healing and region exits need it per request, and a
/// 49k-token trie takes milliseconds to build.
pub(crate) fn shared_trie(vocab: &Vocabulary) -> Arc<VocabTrie> {
    static TRIES: Mutex<Vec<(u64, Weak<VocabTrie>)>> = Mutex::new(Vec::new());
    let mut tries = TRIES.lock().unwrap_or_else(|e| e.into_inner());
    tries.retain(|(_, w)| w.strong_count() > 0);
    if let Some(t) = tries
        .iter()
        .find(|(fp, _)| *fp == vocab.fingerprint())
        .and_then(|(_, w)| w.upgrade())
    {
        return t;
    }
    let t = Arc::new(VocabTrie::new(vocab));
    tries.push((vocab.fingerprint(), Arc::downgrade(&t)));
    t
}

/// Which prompt tokens to back off: the last `k ≤ max_back` tokens (not crossing a special
/// token) whose concatenated bytes some token of the vocabulary strictly extends, with the
/// largest such `k` (a prompt ending in `http:` or mid-word). Returns `k` and their bytes;
/// `(0, [])` when healing would change nothing.
pub fn healing_plan(vocab: &Vocabulary, prompt: &[TokenId], max_back: usize) -> (usize, Vec<u8>) {
    let mut best = (0, Vec::new());
    let mut suffix: Vec<u8> = Vec::new();
    for k in 1..=max_back.min(prompt.len()) {
        let t = prompt[prompt.len() - k];
        if t.index() >= vocab.len() || vocab.is_special(t) {
            break;
        }
        suffix.splice(0..0, vocab.bytes(t).iter().copied());
        let extended = vocab
            .text_tokens()
            .any(|(_, b)| b.len() > suffix.len() && b.starts_with(&suffix));
        if extended {
            best = (k, suffix.clone());
        }
    }
    best
}

#[derive(Clone, Copy, Debug)]
struct Step {
    /// Healed bytes consumed before this commit.
    pos: usize,
    /// Whether this commit reached `inner`.
    inner: bool,
    ended: bool,
}

/// A constraint whose output begins with the healed bytes (see the module doc).
#[derive(Clone)]
pub struct HealedConstraint {
    vocab: Arc<Vocabulary>,
    healed: Vec<u8>,
    pos: usize,
    inner: Option<Box<dyn TokenConstraint>>,
    /// Only used when `inner` is `None` (otherwise `inner` knows it has ended).
    ended: bool,
    history: Vec<Step>,
    trie: Arc<OnceLock<Arc<VocabTrie>>>,
}

impl std::fmt::Debug for HealedConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealedConstraint")
            .field("healed", &String::from_utf8_lossy(&self.healed))
            .field("pos", &self.pos)
            .field("inner", &self.inner.is_some())
            .field("committed", &self.history.len())
            .finish()
    }
}

impl HealedConstraint {
    /// Output must begin with `healed` (the bytes backed off from the prompt); the bytes
    /// after them go to `inner` (None = unconstrained).
    pub fn new(
        healed: Vec<u8>,
        inner: Option<Box<dyn TokenConstraint>>,
        vocab: &Arc<Vocabulary>,
    ) -> Self {
        HealedConstraint {
            vocab: vocab.clone(),
            healed,
            pos: 0,
            inner,
            ended: false,
            history: Vec::new(),
            trie: Arc::new(OnceLock::new()),
        }
    }

    /// The healed bytes not written yet.
    pub fn remaining(&self) -> &[u8] {
        &self.healed[self.pos..]
    }

    /// The constraint after the healed bytes.
    pub fn inner(&self) -> Option<&dyn TokenConstraint> {
        self.inner.as_deref()
    }

    fn healing(&self) -> bool {
        self.pos < self.healed.len()
    }

    /// The healing mask (while healed bytes remain) into `out` (cleared by the caller).
    fn healing_mask(&mut self, out: &mut TokenSet) {
        let trie = self.trie.clone();
        let trie = trie.get_or_init(|| shared_trie(&self.vocab));
        let rem = self.healed[self.pos..].to_vec();
        let nodes = &trie.nodes;
        // Follow `rem` down the trie: every token on the path is a prefix of it.
        let (mut lo, mut hi) = (0usize, nodes.len());
        let mut at = None;
        for &b in &rem {
            let mut i = lo;
            let mut found = None;
            while i < hi {
                if nodes[i].byte == b {
                    found = Some(i);
                    break;
                }
                i = nodes[i].next as usize;
            }
            let Some(i) = found else { return };
            let n = nodes[i];
            for &t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
                out.insert(t);
            }
            at = Some(i);
            (lo, hi) = (i + 1, n.next as usize);
        }
        let Some(root) = at else { return };
        // The subtree below: tokens running past the healed bytes.
        let Some(inner) = self.inner.as_mut() else {
            let last = nodes[root].next as usize - 1;
            for &t in &trie.tokens[nodes[root].tok_end as usize..nodes[last].tok_end as usize] {
                out.insert(t);
            }
            return;
        };
        let mut stack: Vec<u32> = Vec::new();
        let mut i = root + 1;
        let end = nodes[root].next as usize;
        while i < end {
            while stack.last().is_some_and(|&e| i as u32 >= e) {
                stack.pop();
                inner.rollback(1);
            }
            let n = nodes[i];
            if inner.commit_bytes(&[n.byte]).is_err() {
                i = n.next as usize;
                continue;
            }
            stack.push(n.next);
            for &t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
                out.insert(t);
            }
            i += 1;
        }
        inner.rollback(stack.len());
    }

    fn push(&mut self, inner: bool) {
        self.history.push(Step {
            pos: self.pos,
            inner,
            ended: self.ended,
        });
    }

    /// Consume `b` while healing: `Err(offset)` of the first byte that is not allowed.
    fn heal_bytes(&mut self, b: &[u8]) -> Result<(), usize> {
        let rem = &self.healed[self.pos..];
        if rem.starts_with(b) {
            self.push(false);
            self.pos += b.len();
            return Ok(());
        }
        if !b.starts_with(rem) {
            return Err(rem.iter().zip(b).take_while(|(x, y)| x == y).count());
        }
        let skip = rem.len();
        if let Some(inner) = self.inner.as_mut() {
            inner.commit_bytes(&b[skip..]).map_err(|e| match e {
                EngineError::BytesNotAllowed { offset, .. } => skip + offset,
                _ => skip,
            })?;
        }
        self.push(self.inner.is_some());
        self.pos = self.healed.len();
        Ok(())
    }
}

impl TokenConstraint for HealedConstraint {
    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    fn compute_mask(&mut self, out: &mut TokenSet) {
        if out.universe() != self.vocab.len() {
            *out = TokenSet::new(self.vocab.len());
        }
        out.clear();
        if self.healing() {
            self.healing_mask(out);
            return;
        }
        match self.inner.as_mut() {
            Some(inner) => inner.compute_mask(out),
            None if self.ended => {}
            None => {
                for i in 0..self.vocab.len() as u32 {
                    out.insert(TokenId(i));
                }
            }
        }
    }

    fn allows(&mut self, t: TokenId) -> bool {
        if t.index() >= self.vocab.len() {
            return false;
        }
        if self.healing() {
            if self.vocab.is_special(t) {
                return false;
            }
            let b = self.vocab.bytes(t);
            let rem = &self.healed[self.pos..];
            if rem.starts_with(b) {
                return true;
            }
            if !b.starts_with(rem) {
                return false;
            }
            return match self.inner.as_mut() {
                None => true,
                Some(inner) => {
                    let ok = inner.commit_bytes(&b[rem.len()..]).is_ok();
                    if ok {
                        inner.rollback(1);
                    }
                    ok
                }
            };
        }
        match self.inner.as_mut() {
            Some(inner) => inner.allows(t),
            None => !self.ended,
        }
    }

    fn commit(&mut self, t: TokenId) -> Result<(), EngineError> {
        if t.index() >= self.vocab.len() {
            return Err(EngineError::TokenOutOfRange(t));
        }
        let not_allowed = EngineError::TokenNotAllowed {
            token: t,
            after_commits: self.history.len(),
        };
        if self.healing() {
            if self.vocab.is_special(t) {
                return Err(not_allowed);
            }
            let vocab = self.vocab.clone();
            return self.heal_bytes(vocab.bytes(t)).map_err(|_| not_allowed);
        }
        match self.inner.as_mut() {
            Some(inner) => inner.commit(t).map_err(|e| match e {
                EngineError::TokenNotAllowed { token, .. } => EngineError::TokenNotAllowed {
                    token,
                    after_commits: self.history.len(),
                },
                e => e,
            })?,
            None if self.ended => return Err(EngineError::Finished),
            None => {}
        }
        self.push(self.inner.is_some());
        if self.inner.is_none() && self.vocab.is_eog(t) {
            self.ended = true;
        }
        Ok(())
    }

    fn commit_bytes(&mut self, b: &[u8]) -> Result<(), EngineError> {
        if self.healing() {
            let after_commits = self.history.len();
            return self
                .heal_bytes(b)
                .map_err(|offset| EngineError::BytesNotAllowed {
                    offset,
                    after_commits,
                });
        }
        match self.inner.as_mut() {
            Some(inner) => inner.commit_bytes(b)?,
            None if self.ended => return Err(EngineError::Finished),
            None => {}
        }
        self.push(self.inner.is_some());
        Ok(())
    }

    fn rollback(&mut self, n: usize) {
        for _ in 0..n.min(self.history.len()) {
            let s = self.history.pop().expect("checked length");
            if s.inner {
                if let Some(inner) = self.inner.as_mut() {
                    inner.rollback(1);
                }
            }
            self.pos = s.pos;
            self.ended = s.ended;
        }
    }

    fn num_committed(&self) -> usize {
        self.history.len()
    }

    fn is_accepting(&self) -> bool {
        !self.healing()
            && match &self.inner {
                Some(inner) => inner.is_accepting(),
                None => !self.ended,
            }
    }

    fn is_finished(&self) -> bool {
        !self.healing()
            && match &self.inner {
                Some(inner) => inner.is_finished(),
                None => self.ended,
            }
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        let mut out = self.healed[self.pos..].to_vec();
        if let Some(inner) = self.inner.as_mut() {
            out.extend(inner.forced_bytes());
        }
        out
    }

    fn draft_context(&self) -> u64 {
        if self.healing() {
            let mut h = Fnv1a::new();
            h.write_word(1)
                .write_word(fnv1a(&self.healed))
                .write_word(self.pos as u64);
            return h.finish();
        }
        match &self.inner {
            Some(inner) => inner.draft_context(),
            None => Fnv1a::new().write_word(2 + self.ended as u64).finish(),
        }
    }

    fn clone_box(&self) -> Box<dyn TokenConstraint> {
        Box::new(self.clone())
    }
}
