//! Vocabulary-aligned subterminal trees (DOMINO §3.3).
//!
//! For one scanner state `q`, the tree `T_q` records, for every vocabulary token, **every**
//! way to split the token's bytes into terminal pieces: the
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
//! # Components: how trees are built and shared
//! A scanner state is a set of *components* `(terminal t, state of t's DFA)`. Before a
//! token's first boundary each component runs on its own, and the first boundary ends one
//! specific terminal, after which the walk continues from the scanner's start state whatever
//! the component was. So `SubterminalTree::build_component` walks the vocabulary trie once
//! per component (a byte trie: shared prefixes are stepped once, and a dead scanner state
//! skips the whole subtree), and the tree of a scanner state is the union of its components'
//! trees: the mask walks each of them and ORs the results (`Constraint::compute_mask_uncached`),
//! so nothing is copied per scanner state. At the root each component
//! contributes one group, "tokens that stay inside `t`", with live set `{t}`; a token that
//! keeps several components alive is in several root groups, which is exact because a group
//! is allowed when *some* live terminal is expected. The expensive walks (open-ended
//! terminals like a string body, present in many scanner states such as every prefix of
//! every key literal) thus happen once.
//!
//! **Greedy (Lark) lexing** breaks this sharing: whether a lexeme may end before a byte
//! depends on every terminal of the scanner state still growing ([`Scanner::may_end`]), not
//! on one component. So a Lark grammar gets one tree per scanner state
//! ([`SubterminalTree::build_state`]): the root walks the whole state, and a boundary is only
//! recorded where the lexeme may end. Greedy lexing also removes the splits that made those
//! trees large (an identifier cut into keyword + identifier pieces), so they stay small: the
//! shipped Lark C grammar needs 45 trees of 4,256 nodes in all for its benchmark documents
//! over SmolLM2's vocabulary (`eval/bench/lark.md`).
//!
//! # Taking a subtree at once
//! Most of a component tree's walk is inside an open-ended terminal (a string body keeps
//! almost every token alive), and there the walk records nothing but "this token stays
//! inside `t0`". While the only thread is the root's, a trie subtree is therefore taken in one
//! step — its tokens join the root group — when the walk provably records no event below it:
//! every byte of the subtree loops on the thread's state, or, for a subtree of well-formed
//! UTF-8 ([`VocabTrie::char_start`]), every whole character steps the state to one next state
//! (module `char_steps`: non-ASCII text, counted repetitions such as `maxLength`), for as
//! many characters as its longest token, and no state of that chain could end `t0` before a byte
//! of the subtree (not accepting, or no byte of the subtree starts a terminal that may follow
//! `t0`). Each token then ends in the chain state of its length. On Gemma 3's vocabulary
//! (588k trie nodes, most of them non-ASCII) a JSON string body's tree visits ~8k nodes instead
//! of ~325k (10 ms → 0.5 ms); the oracle tests over a whole-character vocabulary and over
//! Gemma's 262k tokens check that nothing changes the masks.
//!
//! A chain may also end because the terminal does: at a `maxLength`, every character of
//! the subtree dies. If no state before that could end `t0` either, the subtree's tokens of
//! that many characters or more have no split at all, and the shorter ones end in their chain
//! states, so the subtree is still taken: its tokens shorter than the cut
//! ([`VocabTrie::token_len_chars`]) join the root group, as runs of the token array. Without
//! this, every count of a short bounded string walked most of the trie byte by byte (SmolLM2,
//! `maxLength: 8`: 3.9 ms for the first cold mask inside the string, 0.7 ms with the cut).
//!
//! Where characters lead to *different* live states (a searched `pattern`'s partial matches:
//! a hex digit advances one, another character restarts it), the chain is one of state sets
//! instead (`CharSteps::targets`), tried on ASCII subtrees of at least 32 nodes while such
//! chains pay in the build. On SmolLM2 over JSONSchemaBench this took cold masks over 1 ms from
//! 0.074–0.086 % to 0.061–0.063 % (a uuid-searching schema's 37 such masks to none), with
//! Gemma 3's unchanged; the oracle walks through searched patterns check the masks.
//!
//! Subtrees taken at once are recorded as ranges of the trie's token array (a subtree's tokens
//! are contiguous in preorder) and added to the root group at the end of the build; when they
//! cover most of the trie, the group is built from the other side — every trie token minus the
//! gaps between the ranges (`IdBuf::add_trie_ranges`) — so a string body costs a 32 KB copy and
//! a few thousand cleared bits instead of a quarter of a million set one by one (0.5 → 0.34 ms).
//!
//! # Remembered subtrees
//! Inside a searched `pattern` (`data:image/png;base64,` anywhere in a string) each token
//! moves the partial match to a new DFA state, so each mask needs a new component tree over
//! nearly the whole vocabulary, and neither a loop nor a chain takes the mixed subtrees where
//! letters advance the match and other characters restart it (Gemma 3: 4.5 ms a mask for that
//! pattern, 9–21 ms for a searched UUID). But below the first character that breaks the
//! partial match the walk starts again from the few states of no progress, and that walk is
//! one an earlier build made. So a component walk that enters a subtree of at least
//! `MIN_QUIET_SUBTREE` (128) nodes with the root thread alone, where no fast path took it, and
//! records no boundary below it, is remembered in the grammar's `build_memo::BuildMemo` by
//! (terminal, trie node, state): its root-group token ranges and end states. A later build
//! reaching the same node in the same state takes them at once (0.56–1.1 ms a mask for
//! `data:image`, 1.3–2.3 ms for the UUID, from the third build on). Storing costs the build
//! that stores, so a terminal's first build stores nothing (it is on some request's path),
//! and a terminal whose storing build took nothing stops storing: a counted pattern never
//! reaches a node in the same state twice (`build_memo::QuietHistory`). The memo holds at
//! most `MAX_QUIET_BYTES` (8 MB).
//! Test `remembered_subtree_walks_keep_masks_equal_to_the_oracle` walks such strings against
//! the oracle over Gemma's tokens.
//!
//! # Root walks shared between grammars
//! The root thread of a component build — `t0`'s DFA from the component's state, before any
//! boundary — does the same in every grammar with that automaton: which tokens stay inside
//! `t0`, in which states, and before which trie nodes it accepts. Only at those nodes does
//! the grammar decide anything (whether a boundary falls there). Terminal DFAs are shared
//! by every grammar through the process-wide DFA cache, so a build of an automaton with a
//! [`crate::grammar::dfa::TerminalDfa::shared_id`] records that (module `root_walk`: the root
//! group's ranges, its end states and the accepting nodes, kept per vocabulary in the trie),
//! and a later build of the same `(automaton, state)`, in any grammar, replays it: the root
//! thread is not walked at all, a boundary is made at each accepting node this grammar
//! allows, and the walk goes only below them, with the threads they start. A character
//! chain that took a subtree across an accepting state (allowed there because this grammar
//! lets no byte of the subtree start a terminal after `t0`) is recorded as a node where the
//! replay walks the subtree with the root thread again. A walk whose accepting nodes are a
//! quarter or more of its visits is not kept (an integer's digits accept everywhere), nor
//! one that took a per-grammar remembered subtree; the store holds at most
//! `root_walk::MAX_ROOT_WALK_BYTES` (32 MiB) per vocabulary. Test
//! `replayed_root_walks_build_the_trees_a_fresh_walk_builds` compares every replayed tree
//! with a fresh build's; on JSONSchemaBench over Gemma 3, the first builds of 834 schemas
//! replayed 14,148 walks (`eval/bench/breadth.md`, twenty-third pass). Key sets, per grammar,
//! share their common tail's walks, and a key spelled so far replays the tail's (module
//! `root_walk`, "Key sets").
//!
//! # Work limit
//! One build may take at most [`MAX_TREE_WORK`] split-thread steps (settable per tree cache);
//! beyond it the tree is marked overflowed and the engine reports an error naming the grammar
//! part at the next commit (see [`crate::engine::EngineError::TreeLimit`]), never a hang.
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
//! - Token ids in a group are distinct; special tokens never appear.

use super::build_memo::{
    BuildMemo, MAX_QUIET_BYTES, MIN_QUIET_SUBTREE, OpenSubtree, remember_quiet,
};
pub use super::follow::{FOLLOW_MAX_TERMINALS, Follow};
use super::root_walk::{
    KEY_SET_TAIL, MIN_VISITS_PER_ACCEPT, RootEvent, RootWalk, TopEnds, walk_for,
};
use super::token_list::IdBuf;
pub use super::token_list::TokenList;
use super::trie::{NO_NODE, VocabTrie};
use crate::grammar::ir::TerminalId;
use crate::lexer::{ComponentId, DEAD, LiveSetId, ScanState, Scanner};

mod ends;
mod frozen;

use ends::EndStates;

/// The default most work one tree build may do, in split-thread steps (one thread — a split
/// in progress — advanced over one byte of the vocabulary trie, plus the threads it is
/// compared with to drop duplicates; a 262k-token vocabulary over an ordinary grammar needs
/// a few million). A grammar whose tokens split in
/// exponentially many ways (`"a" | "aa" | "aaa"` repeated, under a vocabulary of long `a…`
/// tokens) stops there: the tree is marked [`SubterminalTree::overflowed`] and the engine
/// reports [`crate::engine::EngineError::TreeLimit`] naming the grammar part, instead of
/// hanging. About a second of building at the default.
pub const MAX_TREE_WORK: u64 = 100_000_000;

/// Most states a character chain may hold at one length (see "Taking a subtree at once"):
/// a searched `pattern` has one per partial match in progress; past this the walk goes byte
/// by byte.
const MAX_CHAIN_FRONT: usize = 16;

/// Smallest trie subtree (in nodes) a chain of several states is tried for: below it the walk
/// costs less than a chain that fails.
const MIN_MULTI_CHAIN_SUBTREE: usize = 32;

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

impl TreeNode {
    pub(crate) fn new(
        terminal: TerminalId,
        inside: u32,
        children: std::ops::Range<u32>,
        groups: std::ops::Range<u32>,
    ) -> Self {
        TreeNode {
            terminal,
            inside,
            children,
            groups,
        }
    }

    /// (children, groups) index ranges.
    pub(crate) fn ranges(&self) -> (std::ops::Range<u32>, std::ops::Range<u32>) {
        (self.children.clone(), self.groups.clone())
    }
}

/// The subterminal tree of one scanner component (see the module doc).
#[derive(Debug, Default)]
pub struct SubterminalTree {
    /// Components some token ends in without a boundary (component trees only).
    end_components: Box<[ComponentId]>,
    /// Scanner states some token ends in after a boundary (component trees only).
    end_states: Box<[ScanState]>,
    nodes: Vec<TreeNode>,
    children: Vec<u32>,
    groups: Vec<Group>,
    /// The build stopped at its work limit: the tree is incomplete (masks from it may only
    /// forbid more than the grammar does).
    overflowed: bool,
}

/// Build-time node.
struct BuildNode {
    terminal: TerminalId,
    inside: u32,
    /// (edge label, child): label = terminal << 1 | at_position_0.
    children: Vec<(u32, u32)>,
    groups: Vec<(LiveSetId, IdBuf)>,
}

/// The child of build node `n` for a boundary ending terminal `t` at byte position `pos` of
/// the token, created on first use.
fn boundary_child(nodes: &mut Vec<BuildNode>, n: u32, t: TerminalId, pos: usize) -> u32 {
    let label = (t.0 << 1) | (pos == 0) as u32;
    match nodes[n as usize].children.iter().find(|c| c.0 == label) {
        Some(c) => c.1,
        None => {
            let id = nodes.len() as u32;
            let inside = nodes[n as usize].inside + (pos > 0) as u32;
            nodes.push(BuildNode {
                terminal: t,
                inside,
                children: vec![],
                groups: vec![],
            });
            nodes[n as usize].children.push((label, id));
            id
        }
    }
}

/// The index of the group with live set `live` among a node's `groups`, created on first use.
fn group_index(groups: &mut Vec<(LiveSetId, IdBuf)>, live: LiveSetId) -> usize {
    match groups.iter().position(|g| g.0 == live) {
        Some(g) => g,
        None => {
            groups.push((live, IdBuf::new()));
            groups.len() - 1
        }
    }
}

impl SubterminalTree {
    /// Build the tree of one component `(t, s)`: the scanner state holding only terminal `t`
    /// in its DFA state `s`. The tree of a scanner state is the union of its components'
    /// trees (the mask walks each and ORs them): before the first boundary each component runs
    /// alone (a token that keeps several alive lands in each of their root groups, and the
    /// mask ORs them), and the first boundary ends one specific terminal, after which every
    /// walk continues from the scanner's start state whatever the component was. So the
    /// expensive walks (open-ended terminals such as string bodies) happen once per
    /// component, not once per scanner state that contains it.
    ///
    /// `memo` is the grammar's [`BuildMemo`] (kept by the caller across builds: its answers
    /// are facts about the grammar's scanner and DFAs).
    pub(crate) fn build_component(
        scanner: &Scanner,
        follow: &Follow,
        trie: &VocabTrie,
        vocab_len: usize,
        component: ComponentId,
        work_limit: u64,
        memo: &mut BuildMemo,
    ) -> Self {
        let root = Err(scanner.component(component));
        Self::build(scanner, follow, trie, vocab_len, root, work_limit, memo)
    }

    /// Build the tree of a whole scanner state `q` (greedy lexing: whether a lexeme may end
    /// depends on every terminal still live in it, so trees cannot be shared per component).
    /// Its root groups carry the live sets of the states tokens reach from `q`, and a
    /// boundary is only recorded where [`Scanner::may_end`] allows the lexeme to end.
    pub fn build_state(
        scanner: &Scanner,
        follow: &Follow,
        trie: &VocabTrie,
        vocab_len: usize,
        q: ScanState,
        work_limit: u64,
    ) -> Self {
        // (A state tree takes no subtree at once: no character steps to remember.)
        let memo = &mut BuildMemo::default();
        Self::build(scanner, follow, trie, vocab_len, Ok(q), work_limit, memo)
    }

    /// `root`: `Ok(scanner state)` or `Err((terminal, state of its DFA))`.
    fn build(
        scanner: &Scanner,
        follow: &Follow,
        trie: &VocabTrie,
        vocab_len: usize,
        root: Result<ScanState, (TerminalId, u32)>,
        work_limit: u64,
        memo: &mut BuildMemo,
    ) -> Self {
        let mut work = 0u64;
        let mut overflowed = false;
        let state_root = root.is_ok();
        let (t0, s0) = match root {
            Ok(q) => (TerminalId(0), q.0),
            Err(c) => c,
        };
        let dfa = scanner.terminal_dfa(t0);
        let root_live = scanner.singleton_live(t0);
        debug_assert!(
            !scanner.is_greedy() || state_root,
            "greedy lexing needs state trees"
        );
        let mut nodes = vec![BuildNode {
            terminal: TerminalId(0),
            inside: 0,
            children: vec![],
            groups: vec![],
        }];
        // Threads (state, tree node) of every depth of the current trie path, flat: depth d's
        // threads are `threads[level_start[d]..level_start[d + 1]]` (no allocation per trie
        // node). At the root node (0) the state is a state of `t0`'s DFA; below it, a scanner
        // state.
        //
        // A component tree of an automaton grammars share replays the root walk an earlier
        // build of `(automaton, s0)` stored (module `root_walk`): the root thread is then not
        // among the threads at all, its tokens and end states come from the stored walk, and
        // its boundaries are made at the stored accepting nodes. Otherwise this build records
        // its root walk, for the next grammar.
        // (A key set's trie node replays its tail's walk from `Free`: `walk_for`.)
        let literal = dfa.literal_bytes();
        let (walk_key, replay, mut recording) = walk_for(trie, dfa, s0, state_root, |free| {
            let root = Err((t0, free));
            Self::build(scanner, follow, trie, vocab_len, root, work_limit, memo);
        });
        // End states by first byte: only walks sibling replays may start from (the key-set
        // tail's `Free`, a shared automaton's state that accepts nothing) need them.
        let by_top = recording
            && match walk_key {
                Some((KEY_SET_TAIL, s, _)) => s == 0,
                Some(_) => !dfa.is_accepting(s0),
                None => false,
            };
        let mut top_ends = TopEnds::default();
        let mut events: Vec<RootEvent> = Vec::new();
        let mut next_event = 0usize;
        // Replaying: (the node past the subtree walked again with the root thread, its depth).
        let mut rewalk_end: Option<(usize, usize)> = None;
        let mut visited = 0usize;
        let mut threads: Vec<(u32, u32)> = match replay {
            Some(_) => Vec::new(),
            None => vec![(s0, 0)],
        };
        let mut level_start: Vec<usize> = vec![0, threads.len()];
        let BuildMemo {
            fresh_of,
            start_ok,
            char_steps,
            quiet,
            quiet_bytes,
            quiet_history,
            quiet_hits: total_quiet_hits,
        } = memo;
        let fresh_of: &[u32; 256] = fresh_of.get_or_insert_with(|| {
            let mut f = Box::new([DEAD; 256]);
            for b in 0..=255u8 {
                f[b as usize] = scanner.next(Scanner::START, b);
            }
            f
        });
        start_ok.reserve(scanner.num_terminals());
        let char_steps = char_steps.entry(t0).or_default();
        let mut group_cache = vec![(u32::MAX, u32::MAX, 0u32); 256];
        // Grows with the states the walk reaches (the scanner is built lazily).
        let mut end_seen: Vec<u64> = Vec::new();
        let mut end_states: Vec<ScanState> = Vec::new();
        let mut end_dfa_states = EndStates::default();
        // Whole subtrees whose tokens join the root group, as ranges of `trie.tokens`
        // (increasing: the walk is in preorder), added at the end (`IdBuf::add_trie_ranges`).
        let mut root_ranges: Vec<(u32, u32)> = Vec::new();
        let push_range = |ranges: &mut Vec<(u32, u32)>, a: u32, b: u32| match ranges.last_mut() {
            Some(last) if last.1 == a => last.1 = b,
            _ => ranges.push((a, b)),
        };
        let chain_ok = literal.is_none();
        let mut chain_ends: Vec<u32> = Vec::new();
        // The chain's states after `j` characters and after `j + 1` (see below).
        let (mut front, mut next_front): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
        // Multi-state chains that took their subtree, and that did not (this build).
        let (mut multi_ok, mut multi_fail) = (0u32, 0u32);
        // Bytes (subtree bits) that may start a terminal after `t0` ends (component trees):
        // (bits decided so far, bits that may), decided as chains meet them.
        let mut boundary_bytes: ([u64; 2], [u64; 2]) = ([0; 2], [0; 2]);
        // Boundaries recorded so far, and the subtrees being walked that may be remembered.
        let mut boundaries = 0u64;
        let mut open: Vec<OpenSubtree> = Vec::new();
        let quiet_ok = literal.is_none() && !state_root;
        let history = quiet_history.entry(t0).or_default();
        let store_ok = quiet_ok && history.stores();
        let (mut quiet_hits, quiet_before) = (0u32, quiet.len());
        let mut i = 0usize;
        loop {
            // Subtrees the walk has left: at the end of the trie, all of them (an overflowed
            // walk leaves the loop below instead, storing nothing).
            let at_end = i >= trie.nodes.len();
            let left = if at_end { usize::MAX } else { i };
            while open.last().is_some_and(|o| o.end as usize <= left) {
                let Some(o) = open.pop() else { break };
                remember_quiet(
                    quiet,
                    quiet_bytes,
                    trie,
                    t0,
                    o,
                    boundaries,
                    &root_ranges,
                    end_dfa_states.list(),
                );
            }
            if at_end {
                break;
            }
            let tn = trie.nodes[i];
            let d = tn.depth as usize;
            visited += 1;
            if by_top && d == 1 {
                top_ends.close(end_dfa_states.list());
                top_ends.enter(i as u32, end_dfa_states.mark());
            }
            // A replay may jump below levels it never entered: they hold no thread.
            if level_start.len() < d + 1 {
                level_start.resize(d + 1, threads.len());
            }
            // Drop deeper levels left from the previous path.
            level_start.truncate(d + 1);
            threads.truncate(level_start[d]);
            // Past a subtree walked again: its root thread leaves the parent level (the
            // level's last thread) unless that level is gone too.
            if let Some((end, depth)) = rewalk_end.filter(|&(end, _)| i >= end) {
                debug_assert!(d <= depth && end <= i);
                if d == depth {
                    debug_assert_eq!(threads.last().map(|t| t.1), Some(0));
                    threads.pop();
                    level_start[d] -= 1;
                }
                rewalk_end = None;
            }
            let (p0, mut p1) = (level_start[d - 1], level_start[d]);
            let pos = d - 1;
            let b = tn.byte;
            // Replaying: the stored root thread accepts before this node's byte, or a chain
            // took this subtree across a state that accepts and the root thread walks it
            // again, or no thread reaches the node and the walk goes on at the next event in
            // the subtree (or past the subtree).
            let mut root_accepts_here = None;
            if let Some(w) = &replay {
                let next = w.events.get(next_event);
                match next {
                    Some(e) if e.node as usize == i => {
                        next_event += 1;
                        if e.rewalk {
                            threads.push((e.state, 0));
                            p1 += 1;
                            level_start[d] = p1;
                            rewalk_end = Some((tn.next as usize, d));
                        } else {
                            root_accepts_here = Some(e.state);
                        }
                    }
                    _ if p0 == p1 => {
                        i = next.map_or(tn.next, |e| e.node.min(tn.next)) as usize;
                        continue;
                    }
                    _ => {}
                }
            }
            // Fast path: the only thread is inside `t0` (tree root) in a state that does not
            // accept, and every byte of this trie subtree loops on that state. Then every
            // node below keeps exactly that thread and records no event, so all the subtree's
            // tokens join the root group with live set {t0} and end in that state.
            // (Component trees only: a state tree's root thread holds a scanner state, not a
            // state of `t0`'s DFA.)
            if !state_root && p1 - p0 == 1 && threads[p0].1 == 0 {
                let s = threads[p0].0;
                // A literal's root thread (a key, a keyword, an enum value): only the
                // literal's next byte lives, and no boundary falls before it (a literal
                // accepts only at its end), so the node's siblings die. At the top level the
                // trie's index of the root's children goes straight to the one that lives (a
                // key's tree otherwise stepped ~250 top-level nodes to find it: most of a key
                // tree's build).
                if let Some(lit) = literal {
                    let k = s as usize;
                    if k < lit.len() && b != lit[k] {
                        i = match (d, trie.root_child.get(lit[k] as usize)) {
                            (1, Some(&c)) if c != NO_NODE && c as usize > i => c as usize,
                            (1, _) => trie.nodes.len(),
                            _ => tn.next as usize,
                        };
                        continue;
                    }
                }
                let l = char_steps.loops(dfa, s);
                let sub = trie.subtree_bytes[i];
                if sub[0] & !l[0] == 0 && sub[1] & !l[1] == 0 {
                    let r = trie.subtree_range(i);
                    if !r.is_empty() {
                        end_dfa_states.push(s);
                        push_range(&mut root_ranges, r.start, r.end);
                    }
                    i = tn.next as usize;
                    continue;
                }
                // Character chain: every whole character of the subtree steps the state
                // alike (`char_steps`: non-ASCII text, counted repetitions). Follow the
                // chain for the subtree's longest token; with no boundary possible before a
                // token's end (no accepting state, or none from which a byte of the subtree
                // could start a terminal that may follow `t0`) every token stays inside
                // `t0`, ending in the chain state of its length. The first character is the
                // node's own byte when it is ASCII (exact: a key-exclusion state tells the
                // next byte of an excluded key from the others), else any of the subtree's.
                // The node's own tokens are one byte from `s` whatever they are (a lone
                // lead byte, a byte-fallback token), so only the tokens below must be clean.
                // (Not for a literal's chain, nor a leaf: walking those costs less.)
                let lengths = match chain_ok && tn.next as usize > i + 1 {
                    true => trie.clean_lengths(i),
                    false => None,
                };
                if let Some(lengths) = lengths {
                    let longest = match lengths {
                        0 => 0,
                        l => 63 - l.leading_zeros(),
                    };
                    // (A chain that crosses a state that accepts, taken because no byte of
                    // the subtree may start a terminal after `t0` in this grammar, is
                    // recorded as a subtree a replay walks with the root thread again.)
                    let met_accepting = std::cell::Cell::new(false);
                    let mut blocks = |accepting: bool| {
                        met_accepting.set(met_accepting.get() | accepting);
                        accepting && {
                            // Only the bits this subtree holds that are not known yet.
                            let (known, bits) = &mut boundary_bytes;
                            for w in 0..2 {
                                let mut missing = sub[w] & !known[w];
                                while missing != 0 {
                                    let bit = w * 64 + missing.trailing_zeros() as usize;
                                    missing &= missing - 1;
                                    // Bit 127: DEL and every byte >= 0x80.
                                    let bytes = if bit == 127 {
                                        127..=255u8
                                    } else {
                                        bit as u8..=bit as u8
                                    };
                                    let starts = bytes.into_iter().any(|c| {
                                        let f = fresh_of[c as usize];
                                        f != DEAD && start_ok.may_start(scanner, follow, t0, c, f)
                                    });
                                    known[w] |= 1 << (bit % 64);
                                    if starts {
                                        bits[w] |= 1 << (bit % 64);
                                    }
                                }
                            }
                            sub[0] & bits[0] != 0 || sub[1] & bits[1] != 0
                        }
                    };
                    let mut complete = true;
                    // Set when the chain dies at character `j` for every character of the
                    // subtree (a `maxLength` reached): the tokens of `j` characters or more
                    // have no split (none continues `t0`, and none can end it before: the
                    // boundary test passed), so the subtree is still taken, without them.
                    let mut cut: Option<u32> = None;
                    let mut q = s;
                    chain_ends.clear();
                    for j in 1..=longest {
                        let char_step = j > 1 || b >= 0x80;
                        let next = if char_step {
                            char_steps.step(dfa, q, sub, trie.subtree_leads[i])
                        } else {
                            dfa.next(q, b)
                        };
                        if next == DEAD || blocks(char_steps.accepting(dfa, q)) {
                            // (Checked only once the chain stopped, and not at the first
                            // character: a subtree whose first character dies is skipped by
                            // the walk at once, while taking it here would scan its tokens.)
                            if next == DEAD
                                && j > 1
                                && char_steps.all_die(dfa, q, sub)
                                && !blocks(char_steps.accepting(dfa, q))
                            {
                                cut = Some(j);
                            } else {
                                complete = false;
                            }
                            break;
                        }
                        if lengths >> j & 1 == 1 {
                            chain_ends.push(next);
                        }
                        if char_step && next == q {
                            // A fixed point (a string body's state on text): every further
                            // character steps `q` to itself and meets the same boundary
                            // test, so the longer tokens end here too.
                            if lengths >> (j + 1) != 0 {
                                chain_ends.push(q);
                            }
                            break;
                        }
                        q = next;
                    }
                    // A chain of state *sets*, when the one-state chain failed on an ASCII
                    // subtree big enough to pay for trying, and such chains have paid in
                    // this build (a searched `pattern`: a hex digit advances a partial match,
                    // another character restarts it, so no one next state exists).
                    if !complete
                        && tn.next as usize - i >= MIN_MULTI_CHAIN_SUBTREE
                        && sub[1] >> 63 == 0
                        && (multi_fail < 8 || multi_ok * 4 > multi_fail)
                    {
                        complete = true;
                        front.clear();
                        front.push(s);
                        chain_ends.clear();
                        'chain: for j in 1..=longest {
                            let char_step = j > 1;
                            next_front.clear();
                            for &q in &front {
                                // A single state's transitions are built (the walk would
                                // build them too); a set uses only those already built.
                                let stepped = if char_step {
                                    let build = front.len() == 1;
                                    let cap = MAX_CHAIN_FRONT;
                                    let leads = trie.subtree_leads[i];
                                    char_steps.targets(
                                        dfa,
                                        q,
                                        sub,
                                        leads,
                                        build,
                                        cap,
                                        &mut next_front,
                                    )
                                } else {
                                    let n = dfa.next(q, b);
                                    if !next_front.contains(&n) {
                                        next_front.push(n);
                                    }
                                    n != DEAD
                                } && !blocks(char_steps.accepting(dfa, q));
                                if !stepped || next_front.len() > MAX_CHAIN_FRONT {
                                    complete = false;
                                    break 'chain;
                                }
                            }
                            // Every state of the set: a superset of those tokens end in
                            // (the end states only seed `precompute_all`, which may then
                            // build a tree no token needs).
                            if lengths >> j & 1 == 1 {
                                chain_ends.extend_from_slice(&next_front);
                            }
                            if char_step
                                && next_front.len() == front.len()
                                && next_front.iter().all(|q| front.contains(q))
                            {
                                // A fixed point, as above: the longer tokens end in the set.
                                if lengths >> (j + 1) != 0 {
                                    chain_ends.extend_from_slice(&front);
                                }
                                break;
                            }
                            std::mem::swap(&mut front, &mut next_front);
                        }
                        match complete {
                            true => multi_ok += 1,
                            false => multi_fail += 1,
                        }
                    }
                    // Only the node's own tokens (one byte from `s`): no boundary before it.
                    if longest == 0 {
                        complete = !blocks(char_steps.accepting(dfa, s));
                    }
                    if complete {
                        if recording && met_accepting.get() {
                            events.push(RootEvent {
                                node: i as u32,
                                state: s,
                                rewalk: true,
                            });
                        }
                        let own_end = if tn.tok_end > tn.tok_start {
                            dfa.next(s, b)
                        } else {
                            DEAD
                        };
                        for &e in &chain_ends {
                            end_dfa_states.push(e);
                        }
                        // The tokens below, and the node's own (one byte from `s`) when they
                        // stay inside `t0`: contiguous in the trie's token array.
                        let mut start = tn.tok_end;
                        if own_end != DEAD {
                            end_dfa_states.push(own_end);
                            start = tn.tok_start;
                        }
                        let end = trie.subtree_range(i).end;
                        match cut {
                            None if end > start => push_range(&mut root_ranges, start, end),
                            None => {}
                            Some(j) => {
                                // The own tokens, then the runs of tokens below shorter
                                // than `j` characters from here (a scan of the subtree's
                                // tokens, which steps no automaton).
                                if start < tn.tok_end {
                                    push_range(&mut root_ranges, start, tn.tok_end);
                                }
                                let limit = trie.char_start[i] as u32 + j;
                                let short =
                                    |k: u32| (trie.token_len_chars[k as usize] as u32) < limit;
                                let mut k = tn.tok_end;
                                while k < end {
                                    if short(k) {
                                        let run = k;
                                        while k < end && short(k) {
                                            k += 1;
                                        }
                                        push_range(&mut root_ranges, run, k);
                                    } else {
                                        k += 1;
                                    }
                                }
                            }
                        }
                        i = tn.next as usize;
                        continue;
                    }
                }
            }
            // A subtree entered with the root thread alone, where no fast path took it: an
            // earlier build may have walked it from this state already, or this walk may
            // be remembered for a later one (`BuildMemo::quiet`).
            if quiet_ok
                && p1 - p0 == 1
                && threads[p0].1 == 0
                && tn.next - i as u32 >= MIN_QUIET_SUBTREE
            {
                let s = threads[p0].0;
                if let Some(q) = quiet.get(&(t0, i as u32, s)) {
                    // (It may have passed states that accept: not a walk to share.)
                    recording = false;
                    for &(a, b) in q.ranges.iter() {
                        push_range(&mut root_ranges, a, b);
                    }
                    for &e in q.ends.iter() {
                        end_dfa_states.push(e);
                    }
                    quiet_hits += 1;
                    i = tn.next as usize;
                    continue;
                }
                if store_ok && *quiet_bytes < MAX_QUIET_BYTES {
                    open.push(OpenSubtree {
                        end: tn.next,
                        node: i as u32,
                        state: s,
                        ranges_at: root_ranges.len(),
                        ends_at: end_dfa_states.mark(),
                        boundaries_at: boundaries,
                    });
                }
            }
            let fresh = fresh_of[b as usize];
            if let Some(s) = root_accepts_here {
                // The stored root thread's boundary: `t0` ends before `b` (its continuation
                // is in the stored walk).
                work += 1;
                if fresh != DEAD && start_ok.may_start(scanner, follow, t0, b, fresh) {
                    debug_assert!(dfa.is_accepting(s));
                    boundaries += 1;
                    let child = boundary_child(&mut nodes, 0, t0, pos);
                    if !threads[p1..].contains(&(fresh, child)) {
                        threads.push((fresh, child));
                    }
                }
            }
            for ti in p0..p1 {
                // Work: this thread, plus the duplicate scans over this level's new threads.
                work += 1 + (threads.len() - p1) as u64;
                if work > work_limit || crate::budget::over("the token trees") {
                    overflowed = true;
                    break;
                }
                let (s, n) = threads[ti];
                // The terminals that may end before this byte, and the continuation.
                let (cont, accepting): (u32, &[TerminalId]) = if n == 0 && !state_root {
                    let acc: &[TerminalId] = if dfa.is_accepting(s) {
                        if recording {
                            events.push(RootEvent {
                                node: i as u32,
                                state: s,
                                rewalk: false,
                            });
                        }
                        std::slice::from_ref(&t0)
                    } else {
                        &[]
                    };
                    (dfa.next(s, b), acc)
                } else {
                    let c = scanner.next(ScanState(s), b);
                    let ok = c != DEAD
                        && (n == 0
                            || scanner.followed_by(nodes[n as usize].terminal, ScanState(c)));
                    (if ok { c } else { DEAD }, scanner.accepting(ScanState(s)))
                };
                if cont != DEAD && !threads[p1..].contains(&(cont, n)) {
                    threads.push((cont, n));
                }
                if fresh == DEAD {
                    continue;
                }
                for &t in accepting {
                    if !start_ok.may_start(scanner, follow, t, b, fresh) {
                        continue;
                    }
                    if n != 0 && !follow.can_follow(nodes[n as usize].terminal, t) {
                        continue;
                    }
                    // Greedy lexing: the lexeme may not end here (the next byte extends it,
                    // or a literal wins the tie); always true otherwise.
                    if state_root && !scanner.may_end(ScanState(s), t, Some(b)) {
                        continue;
                    }
                    boundaries += 1;
                    let child = boundary_child(&mut nodes, n, t, pos);
                    if !threads[p1..].contains(&(fresh, child)) {
                        threads.push((fresh, child));
                    }
                }
            }
            if overflowed {
                break;
            }
            if threads.len() == p1 {
                i = match &replay {
                    // (The next accepting node may be inside the subtree.)
                    Some(w) => w
                        .events
                        .get(next_event)
                        .map_or(tn.next, |e| e.node.min(tn.next))
                        as usize,
                    None => tn.next as usize,
                };
                continue;
            }
            let toks = &trie.tokens[tn.tok_start as usize..tn.tok_end as usize];
            if !toks.is_empty() {
                for &(s, n) in &threads[p1..] {
                    let live = if n == 0 && !state_root {
                        end_dfa_states.push(s);
                        // With the subtree ranges (preorder keeps them increasing; a level
                        // has at most one root thread: `t0`'s DFA is deterministic).
                        push_range(&mut root_ranges, tn.tok_start, tn.tok_end);
                        continue;
                    } else {
                        if end_seen.len() <= s as usize / 64 {
                            end_seen.resize(s as usize / 64 + 1, 0);
                        }
                        if end_seen[s as usize / 64] >> (s % 64) & 1 == 0 {
                            end_seen[s as usize / 64] |= 1 << (s % 64);
                            end_states.push(ScanState(s));
                        }
                        scanner.live_set(ScanState(s))
                    };
                    // Direct-mapped cache of (node, live set) → group index: nodes may have
                    // hundreds of groups, and neighbouring trie nodes hit the same ones.
                    let slot = (n.wrapping_mul(0x9E37_79B9) ^ live.0.wrapping_mul(0x85EB_CA6B))
                        as usize
                        >> 24;
                    let groups = &mut nodes[n as usize].groups;
                    let g = match group_cache[slot] {
                        (cn, cl, g) if cn == n && cl == live.0 => g as usize,
                        _ => {
                            let g = group_index(groups, live);
                            group_cache[slot] = (n, live.0, g as u32);
                            g
                        }
                    };
                    groups[g].1.extend(toks, vocab_len);
                }
            }
            level_start.push(threads.len());
            i += 1;
        }
        *total_quiet_hits += quiet_hits as u64;
        history.record(quiet_hits, quiet.len() - quiet_before);
        if let Some(w) = &replay {
            // The stored walk's tokens include those of the subtrees walked again.
            let rewalked = !root_ranges.is_empty();
            root_ranges.extend_from_slice(&w.ranges);
            if rewalked {
                root_ranges.sort_unstable();
                let mut merged: Vec<(u32, u32)> = Vec::with_capacity(root_ranges.len());
                for &(a, b) in &root_ranges {
                    match merged.last_mut() {
                        Some(last) if a <= last.1 => last.1 = last.1.max(b),
                        _ => merged.push((a, b)),
                    }
                }
                root_ranges = merged;
            }
            end_dfa_states.extend_from_slice(&w.ends);
        }
        if !root_ranges.is_empty() {
            let groups = &mut nodes[0].groups;
            let g = group_index(groups, root_live);
            groups[g].1.add_trie_ranges(trie, &root_ranges, vocab_len);
        }
        // Freeze: children and groups contiguous.
        let mut out_nodes = Vec::with_capacity(nodes.len());
        let mut children = Vec::new();
        let mut groups = Vec::new();
        for n in nodes {
            let c0 = children.len() as u32;
            children.extend(n.children.iter().map(|c| c.1));
            let g0 = groups.len() as u32;
            for (live, ids) in n.groups {
                groups.push(Group {
                    live,
                    tokens: ids.into_list(vocab_len),
                });
            }
            out_nodes.push(TreeNode {
                terminal: n.terminal,
                inside: n.inside,
                children: c0..children.len() as u32,
                groups: g0..groups.len() as u32,
            });
        }
        end_states.sort_unstable();
        if by_top {
            top_ends.close(end_dfa_states.list());
        }
        let end_dfa_states = end_dfa_states.into_sorted();
        if let Some((id, s, shift)) =
            walk_key.filter(|_| recording && !overflowed && !dfa.overflowed())
        {
            let walk = (events.len() * MIN_VISITS_PER_ACCEPT <= visited).then(|| RootWalk {
                ranges: root_ranges.into(),
                ends: end_dfa_states.as_slice().into(),
                events: events.into(),
                ends_by_top: top_ends.pairs.into(),
            });
            // (Stored with the states the store counts: a key set's tail from 0.)
            let walk = walk.map(|w| match shift {
                0 => w,
                t => w.shifted(t.wrapping_neg()),
            });
            trie.root_walks
                .insert(id, s, walk, by_top && id != KEY_SET_TAIL);
        }
        let mut end_components: Vec<ComponentId> = end_dfa_states
            .iter()
            .filter_map(|&s| scanner.component_id(t0, s))
            .collect();
        end_components.sort_unstable();
        SubterminalTree {
            end_components: end_components.into(),
            end_states: end_states.into(),
            nodes: out_nodes,
            children,
            groups,
            overflowed,
        }
    }
}
