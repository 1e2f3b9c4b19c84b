//! [`TokenConstraint`]: what a decoder needs from any constraint, so that one generation loop
//! drives a plain grammar ([`Constraint`]), a triggered constraint (free text with tagged
//! regions) or a constraint composed with token healing alike.
//!
//! # Contract (every implementation)
//! - `compute_mask(out)` leaves in `out` exactly the tokens `t` for which `allows(t)` is true,
//!   and `commit(t)` succeeds exactly for those (state unchanged on error).
//! - At lookahead ∞ the mask is minimally invasive for the constraint's language:
//!   `{t : text · bytes(t) is a prefix of some sentence}`, plus every end-of-generation token
//!   when the text so far is a sentence.
//! - `rollback(n)` undoes the last `n` successful `commit`/`commit_bytes` calls exactly.
//! - `draft_context` depends only on the state (equal states give equal keys), so count-based
//!   drafts learned in one run apply in the next.

use super::{Constraint, EngineError};
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;

/// A decoding-time constraint over a vocabulary (see the module doc for the contract).
pub trait TokenConstraint: Send {
    /// The vocabulary masks are computed over.
    fn vocab(&self) -> &Arc<Vocabulary>;
    /// The allowed tokens, into `out` (resized to the vocabulary if needed).
    fn compute_mask(&mut self, out: &mut TokenSet);
    /// Whether one token is allowed, without computing the full mask.
    fn allows(&mut self, t: TokenId) -> bool;
    /// Commit a token: error (state unchanged) if it is not allowed.
    fn commit(&mut self, t: TokenId) -> Result<(), EngineError>;
    /// Commit raw bytes (a prefix, a forced text); counts as one commit for `rollback`.
    fn commit_bytes(&mut self, b: &[u8]) -> Result<(), EngineError>;
    /// Undo the last `n` commits (all of them if `n` is larger).
    fn rollback(&mut self, n: usize);
    /// Number of commits not rolled back.
    fn num_committed(&self) -> usize;
    /// The text so far is a sentence (an end-of-generation token would be allowed).
    fn is_accepting(&self) -> bool;
    /// Nothing but end-of-generation can follow (or the constraint has ended).
    fn is_finished(&self) -> bool;
    /// The bytes every continuation starts with (empty when there is a choice).
    fn forced_bytes(&mut self) -> Vec<u8>;
    /// A key for count-based speculative drafts.
    fn draft_context(&self) -> u64;
    /// A copy of this constraint's state (grammars, trees and caches stay shared).
    fn clone_box(&self) -> Box<dyn TokenConstraint>;
}

impl Clone for Box<dyn TokenConstraint> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

impl TokenConstraint for Constraint {
    fn vocab(&self) -> &Arc<Vocabulary> {
        Constraint::vocab(self)
    }
    fn compute_mask(&mut self, out: &mut TokenSet) {
        Constraint::compute_mask(self, out)
    }
    fn allows(&mut self, t: TokenId) -> bool {
        Constraint::allows(self, t)
    }
    fn commit(&mut self, t: TokenId) -> Result<(), EngineError> {
        Constraint::commit(self, t)
    }
    fn commit_bytes(&mut self, b: &[u8]) -> Result<(), EngineError> {
        Constraint::commit_bytes(self, b)
    }
    fn rollback(&mut self, n: usize) {
        Constraint::rollback(self, n)
    }
    fn num_committed(&self) -> usize {
        Constraint::num_committed(self)
    }
    fn is_accepting(&self) -> bool {
        Constraint::is_accepting(self)
    }
    fn is_finished(&self) -> bool {
        Constraint::is_finished(self)
    }
    fn forced_bytes(&mut self) -> Vec<u8> {
        Constraint::forced_bytes(self)
    }
    fn draft_context(&self) -> u64 {
        Constraint::draft_context(self)
    }
    fn clone_box(&self) -> Box<dyn TokenConstraint> {
        Box::new(self.clone())
    }
}
