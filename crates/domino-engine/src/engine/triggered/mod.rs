//! Triggered constraints: free text with tagged regions, each constrained by its own grammar
//! from the moment its trigger appears (reasoning then JSON after `</think>`, tool calls after
//! `<tool_call>`, structural tags).
//!
//! # Language
//! A [`TriggerSpec`] lists regions `i`, each a trigger `T_i` (a byte string, or one token id)
//! and a grammar `G_i`. Its language, over the committed text, is
//! - [`AfterRegion::Free`]: `F (T_i G_i F)*` — free text again after each region;
//! - [`AfterRegion::End`]: `F` or `F T_i G_i` — after the region only end-of-generation;
//!
//! with the number of regions between `min_regions` and `max_regions`. `F` is free text in
//! which no text trigger occurs: a region begins at the FIRST occurrence of any text trigger
//! (the one whose last byte comes earliest); when several triggers end at the same byte (one
//! is a suffix of another) the region listed first wins. So `F·T_i` contains a trigger only
//! as its suffix, and once `max_regions` regions have been written, no trigger may appear in
//! the free text any more (it would have to begin another region). Right after a region's
//! text is a sentence of `G_i` the text may go on inside the region (where `G_i` allows) or
//! continue as free text: both readings are kept (a small set of configurations, like
//! [`Constraint`]'s), and either may turn out to be the one that survives.
//!
//! # Tokens
//! The committed text is the concatenation of the committed tokens' bytes (special tokens
//! included, end-of-generation excluded) and of `commit_bytes` arguments; byte offsets
//! ([`TriggeredConstraint::region_spans`]) count in it.
//! - A [`Trigger::Token`] is matched by id, in free text only: committing that token there
//!   begins its region (its bytes are not matched against the text triggers). Inside a region
//!   the same id is ordinary text of the region grammar.
//! - Other special (non-EOG) tokens are allowed in free text as opaque pieces — the free part
//!   must stay what the unconstrained model would write — and a text trigger cannot straddle
//!   one (the matcher restarts after it). Region grammars never allow special tokens.
//! - End-of-generation tokens are allowed exactly when the text is a sentence: in free text
//!   with at least `min_regions` regions written (in `End` mode: no region at all and
//!   `min_regions == 0`), or inside a region whose text is a sentence of its grammar.
//!
//! # Mask
//! At lookahead ∞ the mask is `{t : text·bytes(t) is a prefix of a sentence}` — including
//! a token that ends the free text, completes a trigger and begins the region (`>{"` over
//! `</think>` + JSON), or ends a region and goes on freely (`}<`): each is allowed exactly
//! when the rest of its bytes is viable there. Region grammars see their own text only, from
//! their initial state, so:
//! - **Free text.** The mask is a function of the matcher state and the (saturated) region
//!   count alone. One pass over the vocabulary finds the few tokens that can complete a
//!   trigger from *some* matcher state (they contain a trigger, or begin with a proper
//!   suffix of one); every other token is free text from every state. The mask of a state
//!   is then "everything but EOG" minus the candidates that complete a trigger there into
//!   text the region grammar refuses, computed once per state and cached: a free-text mask
//!   costs one copy of a bitset. EOG is added per the language.
//! - **Inside region `i`.** The region's [`Constraint`] mask (same cost as a plain
//!   constraint), minus its EOG. In `Free` mode, plus the tokens that leave the region
//!   inside the token (after at least one of its bytes; leaving before it is the free
//!   configuration's part): the candidates are, while the region's text is not a sentence,
//!   the mask of a twin constraint over "the region grammar followed by anything" (module
//!   `tail`, one more cached mask) minus the region's own mask — a short list (`}\n`, `"}`)
//!   — and while it is a sentence, only the few tokens the free text itself refuses
//!   (those containing a trigger); each candidate is then checked exactly, byte by byte.
//!   The twin only helps while no earlier point of the region's text was a sentence (else
//!   its "anything" may have begun there); in such a "dirty" state (`12.` in a decimal
//!   region) the exits come from a walk over the vocabulary trie along the region grammar,
//!   pruned where it dies — short, since such states are near a region's end.
//!   `End` mode (reasoning) needs neither: a region is never left.
//!
//! With a finite lookahead `k` ([`Options::lookahead`]) the tokens lying wholly inside a
//! region obey `k` (the region's own mask); tokens that cross a region boundary are checked
//! with every split (k = ∞) on both sides. Every `k` is sound.
//!
//! # Sharing
//! Clones share the free-text masks and candidate lists (and, like every [`Constraint`],
//! the region grammars' trees and mask caches): build one constraint per spec and clone it
//! for each generation. A new spec costs one pass over the vocabulary (about 1 ms for 49k
//! tokens) on its first mask.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use domino_engine::engine::{
//!     AfterRegion, CompiledGrammar, Options, Region, TokenConstraint, Trigger, TriggerSpec,
//!     TriggeredConstraint,
//! };
//! use domino_engine::grammar::GrammarSource;
//! use domino_engine::vocab::{TokenId, Vocabulary};
//!
//! // Think freely, then a number after `</think>`.
//! let ir = GrammarSource::Regex("[0-9]+".into()).compile(&Default::default()).unwrap();
//! let spec = Arc::new(TriggerSpec {
//!     regions: vec![Region {
//!         trigger: Trigger::Text(b"</think>".to_vec()),
//!         grammar: CompiledGrammar::new(ir).unwrap(),
//!         name: "answer".into(),
//!     }],
//!     after: AfterRegion::End,
//!     min_regions: 1,
//!     max_regions: None,
//! });
//! // Tokens: 0 "hmm", 1 "</think>", 2 ">4", 3 "</", 4 "think", 5 "2", 6 ">x", 7 = EOG.
//! let words = ["hmm", "</think>", ">4", "</", "think", "2", ">x", ""];
//! let vocab = Arc::new(Vocabulary::new(
//!     words.iter().map(|w| w.as_bytes().to_vec()).collect(),
//!     vec![false; 8],
//!     vec![TokenId(7)],
//! ));
//! let mut c = TriggeredConstraint::new(spec, &vocab, Options::default()).unwrap();
//! assert!(c.allows(TokenId(0)) && !c.allows(TokenId(7))); // free text; a region is required
//! c.commit(TokenId(3)).unwrap();
//! c.commit(TokenId(4)).unwrap(); // "</think": one byte short of the trigger
//! assert!(c.allows(TokenId(0))); // "</thinkhmm" is still free text
//! assert!(c.allows(TokenId(2))); // `>4` completes the trigger and begins the number
//! assert!(!c.allows(TokenId(6))); // `>x` would complete it into a non-number
//! c.commit(TokenId(2)).unwrap();
//! assert_eq!(c.current_region(), Some(0));
//! assert_eq!(c.region_spans(), vec![(0, 8, None)]);
//! assert!(c.allows(TokenId(7)) && c.allows(TokenId(5)) && !c.allows(TokenId(0)));
//! ```
//!
//! # State and rollback
//! A configuration is free text (matcher state, region count) or a region (index, region
//! count, a [`Constraint`] in a pool slot). Slots are append-only between rollbacks; a
//! snapshot per commit records the configurations with each region constraint's commit
//! count, so `rollback` rewinds each constraint by exactly its own commits and truncates the
//! pool. Invariant: a region configuration's slot is referenced by no other current
//! configuration, and its constraint's `num_committed` equals the count recorded for it.

mod matcher;
mod spec;
mod state;
mod tail;

pub use spec::{AfterRegion, Region, Trigger, TriggerSpec};

use super::{Constraint, EngineError, Options, TokenConstraint};
use crate::hash::Fnv1a;
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use matcher::{Matcher, START};
use state::{Cfg, Next, Place, Shared, Slot, Snapshot, close_last};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Free text with triggered, grammar-constrained regions (see the module doc).
#[derive(Clone)]
pub struct TriggeredConstraint {
    shared: Arc<Shared>,
    pool: Vec<Slot>,
    configs: Vec<Cfg>,
    ended: bool,
    text_len: usize,
    history: Vec<Snapshot>,
    /// Reused mask buffers (no allocation per mask).
    scratch: Vec<TokenSet>,
}

impl std::fmt::Debug for TriggeredConstraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriggeredConstraint")
            .field("regions", &self.shared.spec.regions.len())
            .field("configs", &self.configs)
            .field("ended", &self.ended)
            .field("committed", &self.history.len())
            .finish()
    }
}

impl TriggeredConstraint {
    /// A constraint at the start of the text. Errors: an empty text trigger, a trigger token
    /// outside the vocabulary or ending generation, or region bounds no text can meet.
    pub fn new(
        spec: Arc<TriggerSpec>,
        vocab: &Arc<Vocabulary>,
        opts: Options,
    ) -> Result<Self, EngineError> {
        spec.validate(vocab)?;
        let patterns: Vec<(usize, &[u8])> = spec
            .regions
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.trigger {
                Trigger::Text(b) => Some((i, b.as_slice())),
                Trigger::Token(_) => None,
            })
            .collect();
        let matcher = Matcher::new(&patterns);
        let mut token_triggers = HashMap::new();
        for (i, r) in spec.regions.iter().enumerate() {
            if let Trigger::Token(t) = r.trigger {
                token_triggers.entry(t).or_insert(i);
            }
        }
        let n_cap = match spec.max_regions {
            Some(m) => m.max(spec.min_regions),
            None => spec.min_regions,
        }
        .max(1);
        let tails = spec
            .regions
            .iter()
            .map(|r| match spec.after {
                AfterRegion::Free => tail::with_tail(&r.grammar).map(Some),
                AfterRegion::End => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let shared = Arc::new(Shared {
            spec,
            vocab: vocab.clone(),
            opts,
            matcher,
            token_triggers,
            n_cap,
            tails,
            trie: OnceLock::new(),
            free_masks: Mutex::new(HashMap::new()),
            base: OnceLock::new(),
            trigger_tokens: Mutex::new(HashMap::new()),
        });
        Ok(TriggeredConstraint {
            shared,
            pool: Vec::new(),
            configs: vec![Cfg {
                place: Place::Free { ac: START },
                n: 0,
                spans: Vec::new(),
            }],
            ended: false,
            text_len: 0,
            history: Vec::new(),
            scratch: Vec::new(),
        })
    }

    pub fn spec(&self) -> &Arc<TriggerSpec> {
        &self.shared.spec
    }

    /// Where the text is now: `None` = free text; `Some(i)` = inside region `i`. When both
    /// readings are open (a region's text is a sentence and may go on), the region.
    pub fn current_region(&self) -> Option<usize> {
        self.preferred().and_then(|c| match c.place {
            Place::Region { region, .. } => Some(region),
            Place::Free { .. } => None,
        })
    }

    /// Byte spans of the completed and open regions in the committed text: (region index,
    /// start, end) with start = the first byte after the trigger and end = one past the
    /// region's last byte (`None` while it is open; after end-of-generation every region is
    /// closed). Of several readings, the one [`Self::current_region`] reports.
    pub fn region_spans(&self) -> Vec<(usize, usize, Option<usize>)> {
        let mut spans = self
            .preferred()
            .map(|c| c.spans.clone())
            .unwrap_or_default();
        if self.ended {
            for s in &mut spans {
                s.2.get_or_insert(self.text_len);
            }
        }
        spans
    }

    /// Number of configurations (readings of the text so far).
    pub fn num_configurations(&self) -> usize {
        self.configs.len()
    }

    /// Bytes of committed text (see the module doc).
    pub fn text_len(&self) -> usize {
        self.text_len
    }

    /// Open regions first (configurations are kept in that order), then free text.
    fn preferred(&self) -> Option<&Cfg> {
        self.configs.first()
    }

    fn cfg_accepting(&self, c: &Cfg) -> bool {
        let sh = &self.shared;
        if c.n < sh.spec.min_regions {
            return false;
        }
        match c.place {
            Place::Free { .. } => true,
            Place::Region { slot, .. } => self.pool[slot].c.is_accepting(),
        }
    }

    /// The configurations after `bytes` (a token's when `token` is set), before `finish`.
    fn advance(&mut self, bytes: &[u8], token: Option<TokenId>) -> Vec<Next> {
        let sh = self.shared.clone();
        let at = self.text_len;
        let mut out = Vec::new();
        let special = token.is_some_and(|t| sh.vocab.is_special(t));
        for cfg in self.configs.clone() {
            match cfg.place {
                Place::Free { ac } => {
                    if let Some(&region) = token.and_then(|t| sh.token_triggers.get(&t)) {
                        if sh.enabled(cfg.n) {
                            let mut spans = cfg.spans.clone();
                            spans.push((region, at + bytes.len(), None));
                            out.push(Next::Fresh {
                                region,
                                c: sh.fresh(region),
                                n: sh.bump(cfg.n),
                                spans,
                                fed: Vec::new(),
                            });
                        }
                    } else if special {
                        out.push(Next::Free {
                            ac: START,
                            n: cfg.n,
                            spans: cfg.spans.clone(),
                        });
                    } else {
                        sh.sim_free(ac, cfg.n, cfg.spans.clone(), bytes, at, &mut out);
                    }
                }
                Place::Region { region, slot, .. } => {
                    let s = &mut self.pool[slot];
                    if special {
                        continue;
                    }
                    // Leaving the region inside the piece, after at least one byte of it
                    // (leaving before it is the free configuration already present).
                    let mut passes_sentence = sh.free_after() && s.c.is_accepting();
                    if sh.free_after() {
                        let mut stepped = 0;
                        for p in 0..bytes.len() {
                            if p > 0 && s.c.is_accepting() {
                                passes_sentence = true;
                                let mut sp = cfg.spans.clone();
                                close_last(&mut sp, at + p);
                                sh.sim_free(START, cfg.n, sp, &bytes[p..], at + p, &mut out);
                            }
                            if s.c.commit_bytes(&bytes[p..p + 1]).is_err() {
                                break;
                            }
                            stepped += 1;
                        }
                        s.c.rollback(stepped);
                    }
                    let ok = match token {
                        Some(t) => s.commit(t, bytes),
                        None => s.commit_bytes(bytes),
                    };
                    if ok && passes_sentence {
                        s.mark_dirty();
                    }
                    if ok {
                        out.push(Next::Old {
                            cfg: Cfg {
                                place: Place::Region {
                                    region,
                                    slot,
                                    count: s.c.num_committed(),
                                },
                                n: cfg.n,
                                spans: cfg.spans.clone(),
                            },
                        });
                    }
                }
            }
        }
        out
    }

    /// Undo the region-constraint commits `advance` made (the state is unchanged).
    fn undo_advance(&mut self, next: &[Next]) {
        for n in next {
            if let Next::Old { cfg } = n {
                if let Place::Region { slot, .. } = cfg.place {
                    self.pool[slot].rollback(1);
                }
            }
        }
    }

    /// Install the configurations `advance` produced: new regions join the pool; regions
    /// whose text is a sentence may also be left (free text again); finished regions are
    /// dropped when free text follows (their free reading stands for them); duplicates go.
    fn install(&mut self, next: Vec<Next>, len: usize) {
        let sh = self.shared.clone();
        self.text_len += len;
        let end = self.text_len;
        let mut regions: Vec<Cfg> = Vec::new();
        let mut frees: Vec<Cfg> = Vec::new();
        for n in next {
            let cfg = match n {
                Next::Free { ac, n, spans } => {
                    frees.push(Cfg {
                        place: Place::Free { ac },
                        n,
                        spans,
                    });
                    continue;
                }
                Next::Old { cfg } => cfg,
                Next::Fresh {
                    region,
                    mut c,
                    n,
                    spans,
                    fed,
                } => {
                    if let Some(g) = &sh.tails[region] {
                        let opts = Options {
                            lookahead: None,
                            ..sh.opts.clone()
                        };
                        let mut t = Constraint::new(g, &sh.vocab, opts)
                            .expect("Constraint::new does not fail");
                        for b in &fed {
                            t.commit_bytes(std::slice::from_ref(b))
                                .expect("the tail grammar's prefixes include the region grammar's");
                        }
                        c.tail = Some(t);
                    }
                    self.pool.push(*c);
                    let slot = self.pool.len() - 1;
                    Cfg {
                        place: Place::Region {
                            region,
                            slot,
                            count: self.pool[slot].c.num_committed(),
                        },
                        n,
                        spans,
                    }
                }
            };
            let Place::Region { slot, .. } = cfg.place else {
                unreachable!("region configurations only")
            };
            let c = &self.pool[slot].c;
            if sh.free_after() && c.is_accepting() {
                let mut spans = cfg.spans.clone();
                close_last(&mut spans, end);
                frees.push(Cfg {
                    place: Place::Free { ac: START },
                    n: cfg.n,
                    spans,
                });
                if c.is_finished() {
                    continue;
                }
            }
            regions.push(cfg);
        }
        let mut seen_free = std::collections::HashSet::new();
        let mut seen_region = std::collections::HashSet::new();
        let pool = &self.pool;
        regions.retain(|c| match c.place {
            Place::Region { region, slot, .. } => {
                seen_region.insert((region, c.n, pool[slot].c.draft_context()))
            }
            Place::Free { .. } => true,
        });
        frees.retain(|c| match c.place {
            Place::Free { ac } => seen_free.insert((ac, c.n)),
            Place::Region { .. } => true,
        });
        regions.extend(frees);
        self.configs = regions;
    }

    fn save(&mut self) {
        self.history.push(Snapshot {
            configs: self.configs.clone(),
            pool_len: self.pool.len(),
            ended: self.ended,
            text_len: self.text_len,
        });
    }

    fn step(&mut self, bytes: &[u8], token: Option<TokenId>) -> bool {
        let next = self.advance(bytes, token);
        if next.is_empty() {
            return false;
        }
        self.save();
        self.install(next, bytes.len());
        true
    }

    /// Region configuration `slot`'s mask (without EOG) into `out`: the tokens that stay in
    /// the region (its constraint's mask) and, in `Free` mode, those that leave it inside
    /// the token, after at least one byte (leaving before the token is the free
    /// configuration's part). Candidates for leaving: while the region's text is not a
    /// sentence, the tail twin's mask minus the region's; while it is, only the tokens the
    /// free text itself refuses (all others the free configuration already allows).
    /// Region exits for a dirty slot (see [`Slot`]): a walk over the vocabulary trie along
    /// the region grammar (pruned where it dies); below every node where the region's text
    /// is a sentence, the deeper tokens whose rest is free text are added to `dst`.
    fn exit_walk(&mut self, slot: usize, n: usize, dst: &mut TokenSet) {
        let sh = self.shared.clone();
        let trie = sh
            .trie
            .get_or_init(|| super::healing::shared_trie(&sh.vocab));
        let c = &mut self.pool[slot].c;
        let nodes = &trie.nodes;
        let mut stack: Vec<u32> = Vec::new();
        let mut i = 0usize;
        while i < nodes.len() {
            while stack.last().is_some_and(|&end| i as u32 >= end) {
                stack.pop();
                c.rollback(1);
            }
            let node = nodes[i];
            if c.commit_bytes(&[node.byte]).is_err() {
                i = node.next as usize;
                continue;
            }
            stack.push(node.next);
            if c.is_accepting() {
                let last = node.next as usize - 1;
                let depth = node.depth as usize;
                for &t in &trie.tokens[node.tok_end as usize..nodes[last].tok_end as usize] {
                    if !dst.contains(t) && sh.free_viable(START, n, &sh.vocab.bytes(t)[depth..]) {
                        dst.insert(t);
                    }
                }
            }
            i += 1;
        }
        c.rollback(stack.len());
    }

    fn region_mask(&mut self, slot: usize, n: usize, dst: &mut TokenSet) {
        let sh = self.shared.clone();
        let s = &mut self.pool[slot];
        s.c.compute_mask(dst);
        if !sh.free_after() {
            return;
        }
        if !s.c.is_accepting() && s.is_dirty() {
            self.exit_walk(slot, n, dst);
            return;
        }
        let candidates: Vec<TokenId> = if s.c.is_accepting() {
            sh.trigger_tokens(n)
                .iter()
                .copied()
                .filter(|&t| !dst.contains(t))
                .collect()
        } else {
            let mut with_tail = self.scratch.pop().unwrap_or_else(|| TokenSet::new(0));
            s.tail
                .as_mut()
                .expect("Free mode keeps a tail twin")
                .compute_mask(&mut with_tail);
            let mut c = Vec::new();
            for (w, (&a, &b)) in with_tail.words().iter().zip(dst.words()).enumerate() {
                let mut d = a & !b;
                while d != 0 {
                    let t = TokenId((w * 64) as u32 + d.trailing_zeros());
                    d &= d - 1;
                    if !sh.vocab.is_special(t) {
                        c.push(t);
                    }
                }
            }
            self.scratch.push(with_tail);
            c
        };
        let s = &mut self.pool[slot];
        for t in candidates {
            if sh.exits_inside(s, n, sh.vocab.bytes(t)) {
                dst.insert(t);
            }
        }
    }
}

impl TokenConstraint for TriggeredConstraint {
    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.shared.vocab
    }

    fn compute_mask(&mut self, out: &mut TokenSet) {
        let sh = self.shared.clone();
        if out.universe() != sh.vocab.len() {
            *out = TokenSet::new(sh.vocab.len());
        }
        out.clear();
        if self.ended {
            return;
        }
        // One configuration (the usual case) writes straight into `out`.
        let single = self.configs.len() == 1;
        let mut tmp = if single {
            None
        } else {
            Some(self.scratch.pop().unwrap_or_else(|| TokenSet::new(0)))
        };
        for k in 0..self.configs.len() {
            let Cfg { place, n, .. } = self.configs[k].clone();
            match (place, tmp.as_mut()) {
                (Place::Free { ac }, None) => {
                    out.words_mut().copy_from_slice(sh.free_mask(ac, n).words())
                }
                (Place::Free { ac }, Some(_)) => out.union_with(&sh.free_mask(ac, n)),
                (Place::Region { slot, .. }, None) => self.region_mask(slot, n, out),
                (Place::Region { slot, .. }, Some(tmp)) => {
                    self.region_mask(slot, n, tmp);
                    out.union_with(tmp);
                }
            }
        }
        if let Some(tmp) = tmp {
            self.scratch.push(tmp);
        }
        for &e in sh.vocab.eog_tokens() {
            out.remove(e);
        }
        if self.is_accepting() {
            for &e in sh.vocab.eog_tokens() {
                out.insert(e);
            }
        }
    }

    fn allows(&mut self, t: TokenId) -> bool {
        if self.ended || t.index() >= self.shared.vocab.len() {
            return false;
        }
        if self.shared.vocab.is_eog(t) {
            return self.is_accepting();
        }
        if let [
            Cfg {
                place: Place::Free { ac },
                n,
                ..
            },
        ] = self.configs[..]
        {
            return self.shared.free_mask(ac, n).contains(t);
        }
        let vocab = self.shared.vocab.clone();
        let next = self.advance(vocab.bytes(t), Some(t));
        let ok = !next.is_empty();
        self.undo_advance(&next);
        ok
    }

    fn commit(&mut self, t: TokenId) -> Result<(), EngineError> {
        if self.ended {
            return Err(EngineError::Finished);
        }
        let vocab = self.shared.vocab.clone();
        if t.index() >= vocab.len() {
            return Err(EngineError::TokenOutOfRange(t));
        }
        let not_allowed = EngineError::TokenNotAllowed {
            token: t,
            after_commits: self.history.len(),
        };
        if vocab.is_eog(t) {
            if !self.is_accepting() {
                return Err(not_allowed);
            }
            self.save();
            let configs = std::mem::take(&mut self.configs);
            let mut kept: Vec<Cfg> = configs
                .into_iter()
                .filter(|c| self.cfg_accepting(c))
                .collect();
            // A free reading closes every region: report it first once the text has ended.
            kept.sort_by_key(|c| matches!(c.place, Place::Region { .. }));
            self.configs = kept;
            self.ended = true;
            return Ok(());
        }
        if self.step(vocab.bytes(t), Some(t)) {
            Ok(())
        } else {
            Err(not_allowed)
        }
    }

    fn commit_bytes(&mut self, b: &[u8]) -> Result<(), EngineError> {
        if self.ended {
            return Err(EngineError::Finished);
        }
        if self.step(b, None) {
            return Ok(());
        }
        // The longest prefix some configuration survives.
        let offset = (0..b.len())
            .rev()
            .find(|&k| {
                let next = self.advance(&b[..k], None);
                let ok = !next.is_empty();
                self.undo_advance(&next);
                ok
            })
            .unwrap_or(0);
        Err(EngineError::BytesNotAllowed {
            offset,
            after_commits: self.history.len(),
        })
    }

    fn rollback(&mut self, n: usize) {
        let n = n.min(self.history.len());
        if n == 0 {
            return;
        }
        let keep = self.history.len() - n;
        let snap = self.history.swap_remove(keep);
        self.history.truncate(keep);
        self.pool.truncate(snap.pool_len);
        for c in &snap.configs {
            if let Place::Region { slot, count, .. } = c.place {
                let cur = self.pool[slot].c.num_committed();
                self.pool[slot].rollback(cur - count);
            }
        }
        self.configs = snap.configs;
        self.ended = snap.ended;
        self.text_len = snap.text_len;
    }

    fn num_committed(&self) -> usize {
        self.history.len()
    }

    fn is_accepting(&self) -> bool {
        !self.ended && self.configs.iter().any(|c| self.cfg_accepting(c))
    }

    fn is_finished(&self) -> bool {
        self.ended
            || self.configs.iter().all(|c| match c.place {
                Place::Free { .. } => false,
                Place::Region { slot, .. } => self.pool[slot].c.is_finished(),
            })
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        match self.configs[..] {
            [
                Cfg {
                    place: Place::Region { slot, .. },
                    ..
                },
            ] if !self.ended => self.pool[slot].c.forced_bytes(),
            _ => Vec::new(),
        }
    }

    fn draft_context(&self) -> u64 {
        let mut keys: Vec<u64> = self
            .configs
            .iter()
            .map(|c| {
                let mut h = Fnv1a::new();
                match c.place {
                    Place::Free { ac } => {
                        h.write_word(0).write_word(ac as u64);
                    }
                    Place::Region { region, slot, .. } => {
                        h.write_word(1)
                            .write_word(region as u64)
                            .write_word(self.pool[slot].c.draft_context());
                    }
                }
                h.write_word(c.n as u64).finish()
            })
            .collect();
        keys.sort_unstable();
        let mut h = Fnv1a::resume(Fnv1a::OFFSET_BASIS ^ self.ended as u64);
        for k in keys {
            h.write_word(k);
        }
        h.finish()
    }

    fn clone_box(&self) -> Box<dyn TokenConstraint> {
        Box::new(self.clone())
    }
}
