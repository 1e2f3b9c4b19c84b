//! The DOMINO constraint engine: exact, minimally invasive token masks from subterminal trees.
//!
//! # Overview
//! A [`CompiledGrammar`] holds the IR grammar, its [`Scanner`] (one DFA over all terminals,
//! built lazily: only the states tokens and decoding reach),
//! the Earley [`earley::ParserTables`] and the static terminal-adjacency relation used to prune
//! trees. It is built once and shared (`Arc`). For every vocabulary it is used with, it keeps
//! a [`TreeCache`]: the vocabulary's byte trie, one lazily built [`tree::SubterminalTree`] per
//! scanner component, and a bounded cache of finished masks. A [`Constraint`] is one decoding
//! session's state: a small set of configurations `(Earley parser, scanner state)` — usually
//! one; several when the bytes so far split into terminals in more than one way.
//!
//! **Mask.** For each configuration `(P, q)`, walk `T_q` from the root; an edge (a terminal
//! boundary inside the token) is followed when `P` accepts that terminal; a node's token group
//! is allowed when one of the terminals its final piece can still become is expected by the
//! parser there. The union over configurations, plus every end-of-generation token when the
//! text so far is a sentence, is the mask.
//!
//! # Lookahead `k` ([`Options::lookahead`])
//! A token's split has *inside boundaries*: positions `1..len` of the token where one
//! terminal ends and the next begins. (Ending the terminal that was in progress before the
//! token — position 0 — and ending a terminal exactly at the token's end are not inside.)
//! With `k = Some(n)` a token is allowed only through splits with at most `n` inside
//! boundaries, each of them checked by the parser; `None` (∞) allows every split and makes the
//! mask minimally invasive: exactly `{t : prefix · bytes(t) is a prefix of a sentence}`.
//! `k = 0` is the paper's "naive" constraining: a token may finish the current terminal or
//! stay inside one, but not finish one and start another (so bridge tokens such as `",` or
//! ` "` after `{` are blocked). Every `k` is sound.
//!
//! # EOS and special tokens
//! Every end-of-generation id of the vocabulary is allowed exactly when the text so far is
//! in the language (some configuration's scanner state accepts a terminal the parser can
//! take and then accept). Other special tokens are never allowed.
//!
//! # Invariants
//! - The mask is computed from the same split semantics as `commit`: `allows(t)` ==
//!   `mask.contains(t)`, and `commit(t)` succeeds exactly for allowed tokens.
//! - A configuration is only kept when its scanner state still has a live terminal that the
//!   parser expects (so every configuration can be completed to a sentence).
//! - Trees and masks are shared by all constraints of one (grammar, vocabulary) pair; the
//!   mask cache key is (scanner state, parser fingerprint, k), used only when there is a
//!   single configuration.
//!
//! # Example
//! ```
//! use std::sync::Arc;
//! use domino_engine::engine::{CompiledGrammar, Constraint, Options};
//! use domino_engine::grammar::ir::{Grammar, NonterminalId, Production, Symbol, Terminal, TerminalId};
//! use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
//! use regex_syntax::hir::Hir;
//!
//! // root ::= "[" "a"* "]"   (hand-built IR; front ends produce this from GBNF/Lark/…)
//! let lit = |s: &str| Terminal::new(format!("{s:?}"), Hir::literal(s.as_bytes()), Some(s.into()));
//! let (open, a, close) = (Symbol::Terminal(TerminalId(0)), Symbol::Terminal(TerminalId(1)), Symbol::Terminal(TerminalId(2)));
//! let (root, items) = (NonterminalId(0), NonterminalId(1));
//! let g = Grammar {
//!     terminals: vec![lit("["), lit("a"), lit("]")],
//!     nonterminals: vec!["root".into(), "items".into()],
//!     productions: vec![
//!         Production { lhs: root, rhs: vec![open, Symbol::Nonterminal(items), close] },
//!         Production { lhs: items, rhs: vec![] },
//!         Production { lhs: items, rhs: vec![Symbol::Nonterminal(items), a] },
//!     ],
//!     start: root,
//!     warnings: vec![],
//!     lexing: Default::default(),
//! };
//! let grammar = CompiledGrammar::new(g).unwrap();
//! // Tokens: 0 "[", 1 "a", 2 "]", 3 "aa]", 4 "x", 5 = end of generation.
//! let words = ["[", "a", "]", "aa]", "x", ""];
//! let vocab = Arc::new(Vocabulary::new(words.iter().map(|w| w.as_bytes().to_vec()).collect(), vec![false; 6], vec![TokenId(5)]));
//! let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
//! let mut mask = TokenSet::new(vocab.len());
//! c.compute_mask(&mut mask);
//! assert_eq!(mask.iter().collect::<Vec<_>>(), vec![TokenId(0)]);
//! c.commit(TokenId(0)).unwrap();
//! c.compute_mask(&mut mask);
//! assert_eq!(mask.iter().collect::<Vec<_>>(), vec![TokenId(1), TokenId(2), TokenId(3)]);
//! c.commit(TokenId(3)).unwrap(); // a bridge token: "a", "a", "]"
//! assert!(c.is_accepting());
//! c.compute_mask(&mut mask);
//! assert_eq!(mask.iter().collect::<Vec<_>>(), vec![TokenId(5)]);
//! c.rollback(1);
//! assert!(!c.is_accepting());
//! ```

mod build_memo;
mod char_steps;
pub mod drafts;
pub mod earley;
mod error;
mod follow;
pub mod healing;
mod mask_cache;
pub mod persist;
pub(crate) mod root_walk;
mod stats;
pub use stats::TreeStats;
pub mod token_constraint;
mod token_list;
pub mod tree;
pub mod trie;
pub mod triggered;

pub use crate::budget;
pub use error::EngineError;
pub use healing::{HealedConstraint, healing_plan};
pub use token_constraint::TokenConstraint;
pub use triggered::{AfterRegion, Region, Trigger, TriggerSpec, TriggeredConstraint};

use crate::grammar::ir;
use crate::hash::Fnv1a;
use crate::lexer::{ComponentId, DEAD, LexerError, ScanState, Scanner};
use crate::segmented::Segmented;
use crate::vocab::{TokenId, TokenSet, Vocabulary};
use earley::{Parser, ParserTables};
use mask_cache::MaskCache;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tree::{Follow, SubterminalTree};
use trie::VocabTrie;

/// Constraint options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Lookahead `k`: the most inside-token terminal boundaries a token may have (see the
    /// module doc); `None` = ∞ (minimally invasive).
    pub lookahead: Option<u32>,
    /// Budget for the shared finished-mask cache of a (grammar, vocabulary) pair, in bytes.
    /// The cache is created by the first constraint of that pair; 0 disables it. Masks
    /// computed in under 10 µs are not cached (recomputing one costs about what the copy out
    /// of the cache does).
    pub mask_cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lookahead: None,
            mask_cache_bytes: 64 << 20,
        }
    }
}

impl Options {
    fn max_inside(&self) -> u32 {
        self.lookahead.unwrap_or(u32::MAX)
    }
}

/// A grammar compiled for the engine; shared by all constraints (`Arc`).
pub struct CompiledGrammar {
    grammar: ir::Grammar,
    scanner: Scanner,
    follow: Follow,
    tables: Arc<ParserTables>,
    caches: Mutex<Vec<(u64, Arc<TreeCache>)>>,
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGrammar")
            .field("terminals", &self.grammar.terminals.len())
            .field("scanner_states", &self.scanner.num_states())
            .finish()
    }
}

impl CompiledGrammar {
    /// Build the parser tables, follow sets and scanner, under the thread's armed
    /// [`budget`] (if any): over it, [`EngineError::Budget`] names the stage.
    pub fn new(g: ir::Grammar) -> Result<Arc<Self>, EngineError> {
        budget::check("the parser tables")?;
        let tables = Arc::new(ParserTables::new(&g));
        budget::check("the parser tables")?;
        // (With the tables' nullable nonterminals: the same least fixpoint, computed once.)
        let follow = Follow::with_nullable(&g, tables.nullable());
        budget::status()?;
        // The scanner keeps, per live set, which terminals it may follow: tree walks prune
        // pieces that could never become a terminal allowed after the one just ended.
        // (No relation when everything may follow everything: the scanner then keeps no
        // per-terminal rows, which would be quadratic in the terminals.)
        let scanner = Scanner::with_follow(&g, follow.preceders())?;
        budget::check("the scanner")?;
        Ok(Arc::new(CompiledGrammar {
            grammar: g,
            scanner,
            follow,
            tables,
            caches: Mutex::new(Vec::new()),
        }))
    }

    pub fn grammar(&self) -> &ir::Grammar {
        &self.grammar
    }

    pub fn scanner(&self) -> &Scanner {
        &self.scanner
    }

    /// Scanner states built so far (the scanner grows as decoding reaches new ones).
    pub fn scanner_states(&self) -> usize {
        self.scanner.num_states()
    }

    /// Build what the first mask over `vocab` needs (its tree cache, the trees of the start
    /// state) by computing that mask, under the thread's armed [`budget`]: a server or a
    /// command that wants the whole set-up bounded calls this inside the budget's scope.
    /// Errors: the budget ran out ([`EngineError::Budget`]) or a tree hit its work limit.
    pub fn prepare(
        self: &Arc<Self>,
        vocab: &Arc<Vocabulary>,
        opts: Options,
    ) -> Result<(), EngineError> {
        budget::check("the token trees")?;
        let mut c = Constraint::new(self, vocab, opts)?;
        let mut mask = TokenSet::new(vocab.len());
        c.compute_mask_uncached(&mut mask);
        budget::status()?;
        match self.tree_cache(vocab, 0).overflow_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The tree cache for a vocabulary (created on first use; kept for the grammar's life).
    pub fn tree_cache(&self, vocab: &Vocabulary, mask_cache_bytes: usize) -> Arc<TreeCache> {
        let mut caches = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = caches.iter().find(|(fp, _)| *fp == vocab.fingerprint()) {
            return c.clone();
        }
        let c = Arc::new(TreeCache::new(vocab, mask_cache_bytes));
        caches.push((vocab.fingerprint(), c.clone()));
        c
    }
}

/// Build the per-vocabulary structures every grammar shares (the vocabulary trie) now, so
/// the first grammar used with `vocab` does not pay for them (a server calls this at start).
pub fn warm_vocabulary(vocab: &Vocabulary) {
    VocabTrie::shared(vocab);
}

/// Per-(grammar, vocabulary) shared state: the vocabulary trie, the lazily built subterminal
/// trees (one per scanner component), and the finished-mask cache.
pub struct TreeCache {
    /// Shared by every grammar used with this vocabulary ([`VocabTrie::shared`]).
    trie: Arc<VocabTrie>,
    vocab_len: usize,
    /// Per component (numbered as the scanner reaches them), its tree once built.
    components: Segmented<Arc<SubterminalTree>>,
    /// Work limit of one tree build (see [`TreeCache::set_work_limit`]).
    work_limit: std::sync::atomic::AtomicU64,
    /// The first tree build that stopped early (its work limit or the armed compile budget),
    /// as the error reported at the next commit.
    overflow: Mutex<Option<EngineError>>,
    /// Greedy (Lark) lexing: one tree per scanner state instead (see [`tree`]).
    states: std::sync::RwLock<HashMap<ScanState, Arc<SubterminalTree>>>,
    masks: Mutex<MaskCache>,
    /// What component builds have learnt about the grammar's scanner and DFAs
    /// ([`build_memo::BuildMemo`]), lent to each build: a second build running at the same time
    /// starts a memo of its own, and the first one returned is kept.
    build_memo: Mutex<Option<Box<build_memo::BuildMemo>>>,
}

impl TreeCache {
    fn new(vocab: &Vocabulary, mask_cache_bytes: usize) -> Self {
        let trie = VocabTrie::shared(vocab);
        let mask_bytes = vocab.len().div_ceil(64) * 8 + 64;
        let capacity = mask_cache_bytes / mask_bytes;
        TreeCache {
            trie,
            vocab_len: vocab.len(),
            components: Segmented::default(),
            states: Default::default(),
            work_limit: std::sync::atomic::AtomicU64::new(tree::MAX_TREE_WORK),
            overflow: Mutex::new(None),
            masks: Mutex::new(MaskCache::new(capacity)),
            build_memo: Mutex::default(),
        }
    }

    /// The tree of one scanner component, built on first use.
    pub fn component_tree(
        &self,
        grammar: &CompiledGrammar,
        c: ComponentId,
    ) -> &Arc<SubterminalTree> {
        self.components.slot(c.0 as usize).get_or_init(|| {
            let lent = || self.build_memo.lock().unwrap_or_else(|e| e.into_inner());
            let mut memo = lent().take().unwrap_or_default();
            let t = SubterminalTree::build_component(
                &grammar.scanner,
                &grammar.follow,
                &self.trie,
                self.vocab_len,
                c,
                self.work_limit(),
                &mut memo,
            );
            // (Another build that ran at the same time may have returned its memo first: that
            // one stays, without comparing sizes on every build.)
            lent().get_or_insert(memo);
            if t.overflowed() {
                let name = &grammar
                    .grammar
                    .terminal(grammar.scanner.component(c).0)
                    .name;
                self.note_overflow(format!("terminal {name}"));
            }
            Arc::new(t)
        })
    }

    /// Set the most work one tree build may do (default [`tree::MAX_TREE_WORK`]); trees
    /// already built are kept.
    pub fn set_work_limit(&self, steps: u64) {
        self.work_limit
            .store(steps, std::sync::atomic::Ordering::Relaxed);
    }

    fn work_limit(&self) -> u64 {
        self.work_limit.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn note_overflow(&self, part: String) {
        let e = match budget::exceeded() {
            Some(b) => EngineError::Budget(b),
            None => EngineError::TreeLimit {
                part,
                limit: self.work_limit(),
            },
        };
        self.overflow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
    }

    /// The error for a tree that hit the work limit, if one did.
    pub fn overflow_error(&self) -> Option<EngineError> {
        self.overflow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The tree of a whole scanner state (greedy lexing), built on first use.
    pub fn state_tree(&self, grammar: &CompiledGrammar, q: ScanState) -> Arc<SubterminalTree> {
        if let Some(t) = self
            .states
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&q)
        {
            return t.clone();
        }
        let t = Arc::new(SubterminalTree::build_state(
            &grammar.scanner,
            &grammar.follow,
            &self.trie,
            self.vocab_len,
            q,
            self.work_limit(),
        ));
        if t.overflowed() {
            let sc = &grammar.scanner;
            let names: Vec<&str> = sc
                .live_terminals(sc.live_set(q))
                .iter()
                .take(4)
                .map(|&u| grammar.grammar.terminal(u).name.as_str())
                .collect();
            self.note_overflow(format!("the lexeme state of {}", names.join(" | ")));
        }
        self.states
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(q)
            .or_insert(t)
            .clone()
    }

    /// Build every tree a constraint can need (the paper's offline setting): the component
    /// trees reachable from the start state through the states tokens end in. Returns the
    /// number of trees.
    pub fn precompute_all(&self, grammar: &CompiledGrammar) -> usize {
        let sc = &grammar.scanner;
        if sc.is_greedy() {
            let mut seen = std::collections::HashSet::from([Scanner::START]);
            let mut queue = vec![Scanner::START];
            while let Some(q) = queue.pop() {
                for &e in self.state_tree(grammar, q).end_states() {
                    if seen.insert(e) {
                        queue.push(e);
                    }
                }
            }
            return seen.len();
        }
        let mut seen = std::collections::HashSet::new();
        let mut queue: Vec<ComponentId> = Vec::new();
        let visit = |c: ComponentId,
                     seen: &mut std::collections::HashSet<ComponentId>,
                     queue: &mut Vec<ComponentId>| {
            if seen.insert(c) {
                queue.push(c);
            }
        };
        for &c in sc.components(Scanner::START) {
            visit(c, &mut seen, &mut queue);
        }
        let mut state_seen = std::collections::HashSet::from([Scanner::START]);
        let mut n = 0;
        while let Some(c) = queue.pop() {
            n += 1;
            let t = self.component_tree(grammar, c).clone();
            for &e in t.end_components() {
                visit(e, &mut seen, &mut queue);
            }
            for &q in t.end_states() {
                if state_seen.insert(q) {
                    for &e in sc.components(q) {
                        visit(e, &mut seen, &mut queue);
                    }
                }
            }
        }
        n
    }

    pub fn stats(&self) -> TreeStats {
        let mut s = TreeStats {
            trie_bytes: self.trie.memory_bytes(),
            ..Default::default()
        };
        let states = self.states.read().unwrap_or_else(|e| e.into_inner());
        let state_trees = states.values().map(|t| &**t);
        for t in self.components.iter().map(|(_, t)| &**t).chain(state_trees) {
            s.trees += 1;
            s.tree_nodes += t.num_nodes();
            s.groups += t.num_groups();
            s.memory_bytes += t.memory_bytes();
        }
        let memo = self.build_memo.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = memo.as_ref() {
            s.memory_bytes += m.memory_bytes();
            (s.remembered_subtrees, s.remembered_subtree_hits) = m.quiet_counts();
        }
        (
            s.shared_root_walks,
            s.shared_root_walk_bytes,
            s.root_walk_replays,
            s.root_walk_store_emptied,
        ) = self.trie.root_walks.counts();
        s
    }

    /// Forget cached masks (benchmarks use this to time the tree walk itself).
    pub fn clear_mask_cache(&self) {
        self.masks.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// One way the bytes so far split into terminals: the parser after the completed terminals
/// and the scanner state of the terminal in progress.
#[derive(Clone)]
struct Config {
    parser: Parser,
    scan: ScanState,
}

#[derive(Clone)]
struct Snapshot {
    configs: Vec<Config>,
    ended: bool,
}

/// A constraint session (see the module doc). Cloning is cheap: the grammar, vocabulary,
/// trees and caches are shared.
#[derive(Clone)]
pub struct Constraint {
    grammar: Arc<CompiledGrammar>,
    vocab: Arc<Vocabulary>,
    cache: Arc<TreeCache>,
    opts: Options,
    configs: Vec<Config>,
    ended: bool,
    history: Vec<Snapshot>,
}

impl std::fmt::Debug for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Constraint")
            .field("configs", &self.configs.len())
            .field("ended", &self.ended)
            .field("committed", &self.history.len())
            .finish()
    }
}

impl Constraint {
    pub fn new(
        grammar: &Arc<CompiledGrammar>,
        vocab: &Arc<Vocabulary>,
        opts: Options,
    ) -> Result<Self, EngineError> {
        let cache = grammar.tree_cache(vocab, opts.mask_cache_bytes);
        let parser = Parser::new(grammar.tables.clone());
        Ok(Constraint {
            grammar: grammar.clone(),
            vocab: vocab.clone(),
            cache,
            opts,
            configs: vec![Config {
                parser,
                scan: Scanner::START,
            }],
            ended: false,
            history: Vec::new(),
        })
    }

    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.grammar
    }

    /// The shared tree cache of this (grammar, vocabulary) pair.
    pub fn tree_cache(&self) -> &Arc<TreeCache> {
        &self.cache
    }

    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Number of `commit`/`commit_bytes` calls not rolled back.
    pub fn num_committed(&self) -> usize {
        self.history.len()
    }

    /// Number of current configurations (1 unless the text splits ambiguously).
    pub fn num_configurations(&self) -> usize {
        self.configs.len()
    }

    /// Compute the allowed tokens into `out` (resized to the vocabulary if needed).
    pub fn compute_mask(&mut self, out: &mut TokenSet) {
        if out.universe() != self.vocab.len() {
            *out = TokenSet::new(self.vocab.len());
        }
        out.clear();
        if self.ended {
            return;
        }
        let k = self.opts.max_inside();
        let key = if self.configs.len() == 1 {
            let c = &self.configs[0];
            Some((c.scan.0, c.parser.state_fingerprint(), k))
        } else {
            None
        };
        if let Some(key) = key {
            let hit = self
                .cache
                .masks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&key);
            if let Some(m) = hit {
                out.words_mut().copy_from_slice(m.words());
                return;
            }
        }
        // (Timed only when the mask could be cached.)
        let started = key.is_some().then(std::time::Instant::now);
        self.compute_mask_uncached(out);
        if let (Some(key), Some(started)) = (key, started)
            && started.elapsed() >= mask_cache::MIN_CACHED_MASK_TIME
        {
            self.cache
                .masks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, Arc::new(out.clone()));
        }
    }

    /// The mask without consulting or filling the cache (what `compute_mask` does on a miss).
    pub fn compute_mask_uncached(&mut self, out: &mut TokenSet) {
        if out.universe() != self.vocab.len() {
            *out = TokenSet::new(self.vocab.len());
        }
        out.clear();
        if self.ended {
            return;
        }
        let k = self.opts.max_inside();
        let grammar = self.grammar.clone();
        let cache = self.cache.clone();
        let scanner = &grammar.scanner;
        for c in &mut self.configs {
            if scanner.is_greedy() {
                cache
                    .state_tree(&grammar, c.scan)
                    .mask_into(scanner, &mut c.parser, k, out);
                continue;
            }
            // Every path of a component's tree starts by continuing or ending its terminal:
            // only components whose terminal the parser expects can contribute.
            for &comp in scanner.components(c.scan) {
                if !c.parser.expected().contains(scanner.component(comp).0) {
                    continue;
                }
                cache
                    .component_tree(&grammar, comp)
                    .mask_into(scanner, &mut c.parser, k, out);
            }
        }
        if self.is_accepting() {
            for &e in self.vocab.eog_tokens() {
                out.insert(e);
            }
        }
    }

    /// Whether one token is allowed, without computing the full mask.
    pub fn allows(&mut self, t: TokenId) -> bool {
        if self.ended || t.index() >= self.vocab.len() {
            return false;
        }
        if self.vocab.is_eog(t) {
            return self.is_accepting();
        }
        if self.vocab.is_special(t) {
            return false;
        }
        let k = self.opts.max_inside();
        let scanner = &self.grammar.scanner;
        let follow = &self.grammar.follow;
        let bytes = self.vocab.bytes(t);
        self.configs
            .iter_mut()
            .any(|c| token_walk(scanner, follow, &mut c.parser, c.scan, bytes, 0, 0, k, None))
    }

    /// Commit a token: error (state unchanged) if it is not allowed.
    pub fn commit(&mut self, t: TokenId) -> Result<(), EngineError> {
        if self.ended {
            return Err(EngineError::Finished);
        }
        self.check_scanner_limit()?;
        if t.index() >= self.vocab.len() {
            return Err(EngineError::TokenOutOfRange(t));
        }
        let not_allowed = EngineError::TokenNotAllowed {
            token: t,
            after_commits: self.history.len(),
        };
        if self.vocab.is_eog(t) {
            if !self.is_accepting() {
                return Err(not_allowed);
            }
            self.save();
            self.ended = true;
            return Ok(());
        }
        if self.vocab.is_special(t) {
            return Err(not_allowed);
        }
        let vocab = self.vocab.clone();
        match self.advance(vocab.bytes(t), self.opts.max_inside()) {
            Ok(next) => {
                self.save();
                self.configs = next;
                Ok(())
            }
            Err(_) => Err(not_allowed),
        }
    }

    /// Commit raw bytes (a `--prefix`, a template's fixed text): every split is allowed
    /// (no lookahead limit). Counts as one commit for `rollback`.
    pub fn commit_bytes(&mut self, b: &[u8]) -> Result<(), EngineError> {
        if self.ended {
            return Err(EngineError::Finished);
        }
        self.check_scanner_limit()?;
        match self.advance(b, u32::MAX) {
            Ok(next) => {
                self.save();
                self.configs = next;
                Ok(())
            }
            Err(offset) => Err(EngineError::BytesNotAllowed {
                offset,
                after_commits: self.history.len(),
            }),
        }
    }

    /// The scanner refused a state for its size limit: masks may have forbidden tokens the
    /// grammar allows (never the reverse), so decoding stops with an error rather than
    /// silently losing minimal invasiveness.
    fn check_scanner_limit(&self) -> Result<(), EngineError> {
        if let Some(e) = self.cache.overflow_error() {
            return Err(e);
        }
        if self.grammar.scanner.overflowed() {
            return Err(EngineError::Lexer(LexerError::TooManyStates(
                crate::lexer::MAX_SCANNER_STATES,
            )));
        }
        Ok(())
    }

    /// Undo the last `n` commits (all of them if `n` is larger).
    pub fn rollback(&mut self, n_tokens: usize) {
        let n = n_tokens.min(self.history.len());
        if n == 0 {
            return;
        }
        let keep = self.history.len() - n;
        let snap = self.history.swap_remove(keep);
        self.history.truncate(keep);
        self.configs = snap.configs;
        self.ended = snap.ended;
    }

    /// The text so far is a sentence of the grammar (an EOG token would be allowed).
    pub fn is_accepting(&self) -> bool {
        if self.ended {
            return false;
        }
        self.configs
            .iter()
            .any(|c| config_accepts(&self.grammar.scanner, c))
    }

    /// Nothing but end-of-generation can follow (or the constraint has ended).
    pub fn is_finished(&self) -> bool {
        if self.ended {
            return true;
        }
        let scanner = &self.grammar.scanner;
        !self.configs.iter().any(|c| {
            (0..=255u8).any(|b| !step_config(scanner, &self.grammar.follow, c, b, 0).is_empty())
        })
    }

    /// The bytes every continuation starts with (empty when there is a choice, including
    /// the choice to stop here). At most 4096 bytes.
    pub fn forced_bytes(&mut self) -> Vec<u8> {
        let scanner = &self.grammar.scanner;
        let follow = &self.grammar.follow;
        let mut configs = self.configs.clone();
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        while out.len() < 4096 {
            if configs.iter().any(|c| config_accepts(scanner, c)) {
                break;
            }
            let mut only: Option<(u8, Vec<Config>)> = None;
            let mut several = false;
            for b in 0..=255u8 {
                let next: Vec<Config> = configs
                    .iter()
                    .flat_map(|c| step_config(scanner, follow, c, b, 0))
                    .collect();
                if next.is_empty() {
                    continue;
                }
                if only.is_some() {
                    several = true;
                    break;
                }
                only = Some((b, next));
            }
            match (only, several) {
                (Some((b, next)), false) => {
                    out.push(b);
                    configs = dedup_configs(next);
                }
                _ => break,
            }
        }
        out
    }

    /// A key for count-based speculation: the (sub)terminal in progress (scanner state) and
    /// a parser sub-state (its fingerprint), hashed together over all configurations.
    pub fn draft_context(&self) -> u64 {
        let mut h = Fnv1a::resume(Fnv1a::OFFSET_BASIS ^ self.ended as u64);
        for c in &self.configs {
            h.write_word(c.scan.0 as u64);
            h.write_word(c.parser.state_fingerprint());
        }
        h.finish()
    }

    fn save(&mut self) {
        self.history.push(Snapshot {
            configs: self.configs.clone(),
            ended: self.ended,
        });
    }

    /// The configurations after `bytes` (with at most `max_inside` inside boundaries), or
    /// the offset of the first byte no configuration survives.
    fn advance(&self, bytes: &[u8], max_inside: u32) -> Result<Vec<Config>, usize> {
        let scanner = &self.grammar.scanner;
        let follow = &self.grammar.follow;
        // (config, inside boundaries so far)
        let mut cur: Vec<(Config, u32)> = self.configs.iter().map(|c| (c.clone(), 0)).collect();
        for (pos, &b) in bytes.iter().enumerate() {
            let mut next: Vec<(Config, u32)> = Vec::new();
            let mut index: HashMap<(u32, u64), usize> = HashMap::new();
            for (c, inside) in &cur {
                for (n, boundary) in step_config_marked(scanner, follow, c, b) {
                    let ins = inside + (boundary && pos > 0) as u32;
                    if ins > max_inside {
                        continue;
                    }
                    let key = (n.scan.0, n.parser.state_fingerprint());
                    match index.get(&key) {
                        Some(&i) => next[i].1 = next[i].1.min(ins),
                        None => {
                            index.insert(key, next.len());
                            next.push((n, ins));
                        }
                    }
                }
            }
            if next.is_empty() {
                return Err(pos);
            }
            cur = next;
        }
        Ok(cur.into_iter().map(|(c, _)| c).collect())
    }
}

/// Whether the text of this configuration is a sentence: some accepting terminal of the
/// scanner state can be pushed and leaves the parser accepting (or nothing has been read and
/// the start symbol is nullable).
fn config_accepts(scanner: &Scanner, c: &Config) -> bool {
    if c.scan == Scanner::START {
        return c.parser.is_accepting();
    }
    scanner.accepting(c.scan).iter().any(|&t| {
        if !scanner.may_end(c.scan, t, None) {
            return false;
        }
        let mut p = c.parser.clone();
        p.push(t) && p.is_accepting()
    })
}

/// A configuration is viable when its terminal in progress can still become one the parser
/// expects.
fn viable(scanner: &Scanner, parser: &Parser, q: ScanState) -> bool {
    let expected = parser.expected();
    scanner
        .live_terminals(scanner.live_set(q))
        .iter()
        .any(|&t| expected.contains(t))
}

fn step_config(scanner: &Scanner, follow: &Follow, c: &Config, b: u8, _pos: usize) -> Vec<Config> {
    step_config_marked(scanner, follow, c, b)
        .into_iter()
        .map(|(c, _)| c)
        .collect()
}

/// Successor configurations after one byte; `true` marks those that ended a terminal
/// before the byte.
fn step_config_marked(
    scanner: &Scanner,
    _follow: &Follow,
    c: &Config,
    b: u8,
) -> Vec<(Config, bool)> {
    let mut out = Vec::new();
    let cont = scanner.next(c.scan, b);
    if cont != DEAD && viable(scanner, &c.parser, ScanState(cont)) {
        out.push((
            Config {
                parser: c.parser.clone(),
                scan: ScanState(cont),
            },
            false,
        ));
    }
    let fresh = scanner.next(Scanner::START, b);
    if fresh != DEAD {
        for &t in scanner.accepting(c.scan) {
            if !scanner.may_end(c.scan, t, Some(b)) {
                continue;
            }
            let mut p = c.parser.clone();
            if p.push(t) && viable(scanner, &p, ScanState(fresh)) {
                out.push((
                    Config {
                        parser: p,
                        scan: ScanState(fresh),
                    },
                    true,
                ));
            }
        }
    }
    out
}

fn dedup_configs(cs: Vec<Config>) -> Vec<Config> {
    let mut seen = std::collections::HashSet::new();
    cs.into_iter()
        .filter(|c| seen.insert((c.scan.0, c.parser.state_fingerprint())))
        .collect()
}

/// Depth-first search over the splits of one token's bytes from `(parser, q)`: true when
/// some split with at most `max_inside` inside boundaries leaves a viable configuration.
/// Recursion depth is bounded by the token's length. `parser` is restored.
#[allow(clippy::too_many_arguments)]
fn token_walk(
    scanner: &Scanner,
    follow: &Follow,
    parser: &mut Parser,
    mut q: ScanState,
    bytes: &[u8],
    mut pos: usize,
    inside: u32,
    max_inside: u32,
    last: Option<ir::TerminalId>,
) -> bool {
    while pos < bytes.len() {
        let b = bytes[pos];
        // Option 1: end the terminal in progress before this byte.
        let fresh = scanner.next(Scanner::START, b);
        let ins = inside + (pos > 0) as u32;
        if fresh != DEAD && ins <= max_inside {
            for &t in scanner.accepting(q) {
                if last.is_some_and(|l| !follow.can_follow(l, t)) {
                    continue;
                }
                if !scanner.may_end(q, t, Some(b)) {
                    continue;
                }
                if parser.push(t) {
                    let ok = token_walk(
                        scanner,
                        follow,
                        parser,
                        ScanState(fresh),
                        bytes,
                        pos + 1,
                        ins,
                        max_inside,
                        Some(t),
                    );
                    parser.pop();
                    if ok {
                        return true;
                    }
                }
            }
        }
        // Option 2: continue the terminal in progress.
        let cont = scanner.next(q, b);
        if cont == DEAD {
            return false;
        }
        q = ScanState(cont);
        pos += 1;
    }
    viable(scanner, parser, q)
}
