//! What component tree builds of one grammar learn that holds for every later build
//! ([`BuildMemo`]): the scanner's start transitions, which terminal may start after which
//! ([`StartOk`]), each terminal's character steps ([`CharSteps`]) and the subtree walks a
//! later build may take whole ([`QuietSubtree`]; see `tree`'s "Remembered subtrees").

use super::char_steps::CharSteps;
use super::follow::Follow;
use super::trie::VocabTrie;
use crate::grammar::ir::TerminalId;
use crate::lexer::{ScanState, Scanner};

/// Whether a terminal may start after terminal `t` with byte `b`: δ(START, b) has a live
/// terminal that can follow `t`. Memoised per `(t, b)` and computed on first use: a tree
/// build asks it only for the terminals that accept where a walk reaches, while computing it
/// for every `(t, b)` up front cost `256 × terminals × live terminals` per tree — with
/// hundreds or thousands of terminals (key literals, enum members) that was most of a cold
/// tree build.
#[derive(Default)]
pub(super) struct StartOk {
    /// Per terminal asked about, per byte: 0 unknown, 1 no, 2 yes. A row per terminal, made
    /// on first use: the memo lives as long as the grammar's trees ([`BuildMemo`]), and most
    /// terminals are never asked about.
    memo: Vec<Option<Box<[u8; 256]>>>,
    /// Rows made (for [`BuildMemo::memory_bytes`]).
    rows: usize,
}

impl StartOk {
    /// Room for `num_terminals` terminals.
    pub(super) fn reserve(&mut self, num_terminals: usize) {
        if self.memo.len() < num_terminals {
            self.memo.resize(num_terminals, None);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.memo.capacity() * 8 + self.rows * 256
    }

    /// Whether the walk may record a boundary after `t` before byte `b`: a terminal live in
    /// `fresh` = δ(START, b) (not [`DEAD`]) can follow `t` (memoised), and the scanner's state
    /// allows `t` before it.
    #[inline]
    pub(super) fn may_start(
        &mut self,
        scanner: &Scanner,
        follow: &Follow,
        t: TerminalId,
        b: u8,
        fresh: u32,
    ) -> bool {
        let row = &mut self.memo[t.0 as usize];
        if row.is_none() {
            self.rows += 1;
        }
        let slot = &mut row.get_or_insert_with(|| Box::new([0; 256]))[b as usize];
        if *slot == 0 {
            let live = scanner.live_terminals(scanner.live_set(ScanState(fresh)));
            let ok = live.iter().any(|&u| follow.can_follow(t, u));
            *slot = 1 + ok as u8;
        }
        *slot == 2 && scanner.followed_by(t, ScanState(fresh))
    }
}

/// What component builds of one grammar learn that holds for every later build: the
/// scanner's start transitions, [`StartOk`]'s answers, each terminal's [`CharSteps`] and the
/// subtree walks a later build may take whole ([`QuietSubtree`]). The tree cache keeps one
/// and lends it to each build (a counted string or a big object builds a tree at nearly every
/// token, and each build used to start these over).
#[derive(Default)]
pub(crate) struct BuildMemo {
    /// δ(START, b) for every byte, once computed.
    pub(super) fresh_of: Option<Box<[u32; 256]>>,
    pub(super) start_ok: StartOk,
    pub(super) char_steps: std::collections::HashMap<TerminalId, CharSteps>,
    /// Whole subtrees walked without an event (see [`QuietSubtree`]), by (terminal, trie
    /// node, DFA state before the node's byte).
    pub(super) quiet: crate::hash::WordHashMap<(TerminalId, u32, u32), QuietSubtree>,
    /// Bytes [`BuildMemo::quiet`] holds (bounded by [`MAX_QUIET_BYTES`]).
    pub(super) quiet_bytes: usize,
    /// Per terminal, what its builds found in [`BuildMemo::quiet`] (see [`QuietHistory`]).
    pub(super) quiet_history: crate::hash::WordHashMap<TerminalId, QuietHistory>,
    /// Subtrees taken from [`BuildMemo::quiet`] so far.
    pub(super) quiet_hits: u64,
}

/// Whether a terminal's walks are worth storing, from its builds so far. Its first build
/// stores nothing: storing pays only when a later build of the same terminal comes, and a
/// terminal's first build is on some request's path (the first mask's, or the first one that
/// reaches the terminal). Then a build that stored subtrees and took none stops the storing
/// ([`MAX_FRUITLESS_BUILDS`] in a row): a counted pattern never reaches a node again in the
/// same state, and storing its walks for nothing made an anchored UUID's masks take half as
/// long again.
#[derive(Clone, Copy, Default)]
pub(super) struct QuietHistory {
    /// Whether a component of the terminal was built before.
    built: bool,
    /// Builds in a row that stored subtrees and took none.
    fruitless: u8,
}

impl QuietHistory {
    /// Whether the next build should store its quiet subtrees.
    pub(super) fn stores(self) -> bool {
        self.built && self.fruitless < MAX_FRUITLESS_BUILDS
    }

    /// Count a build that took `hits` subtrees and stored `stored`.
    pub(super) fn record(&mut self, hits: u32, stored: usize) {
        self.built = true;
        if hits > 0 {
            self.fruitless = 0;
        } else if stored > 0 {
            self.fruitless += 1;
        }
    }
}

/// See [`QuietHistory`].
const MAX_FRUITLESS_BUILDS: u8 = 1;

/// A subtree a walk has entered and may remember when it leaves it (`SubterminalTree::build`):
/// where it ends, its key, and what the walk had recorded when it entered it.
pub(super) struct OpenSubtree {
    /// The trie node one past the subtree.
    pub(super) end: u32,
    pub(super) node: u32,
    /// The DFA state before the node's byte.
    pub(super) state: u32,
    /// Root ranges, end states and boundaries recorded before it.
    pub(super) ranges_at: usize,
    pub(super) ends_at: usize,
    pub(super) boundaries_at: u64,
}

/// What a component walk found below one trie node entered with the root thread alone, when
/// it recorded no boundary there: the subtree's tokens that stay inside the terminal (ranges
/// of the trie's token array) and the DFA states they end in. The same node reached in the
/// same state by a later build of the same terminal takes them at once.
///
/// This is for the states a walk keeps coming back to: inside a searched `pattern`
/// (`data:image/png;base64,` anywhere in a string) each token moves the partial match to a
/// new state, so every mask builds a new tree over nearly the whole vocabulary, but the first
/// character that breaks the partial match sends the walk back to the few states of no
/// progress, and below that byte the walk is the one an earlier build made.
pub(super) struct QuietSubtree {
    pub(super) ranges: Box<[(u32, u32)]>,
    pub(super) ends: Box<[u32]>,
}

/// Most bytes [`BuildMemo::quiet`] may hold (its entries, their ranges and end states): past
/// it, walks are no longer remembered.
pub(super) const MAX_QUIET_BYTES: usize = 8 << 20;

/// Bytes counted for one remembered subtree besides its ranges and end states (the map's
/// slot and two allocations).
const QUIET_ENTRY_BYTES: usize = 64;

/// Smallest trie subtree (in nodes) remembered in [`BuildMemo::quiet`]: a smaller one costs
/// less to walk again than to look up and store.
pub(super) const MIN_QUIET_SUBTREE: u32 = 128;

/// Most end states a remembered subtree may have.
const MAX_QUIET_ENDS: usize = 64;

impl BuildMemo {
    /// (Subtrees remembered, subtrees taken from the memo so far.)
    pub(crate) fn quiet_counts(&self) -> (usize, u64) {
        (self.quiet.len(), self.quiet_hits)
    }

    /// Bytes held.
    pub(crate) fn memory_bytes(&self) -> usize {
        self.fresh_of.as_ref().map_or(0, |_| 1024)
            + self.start_ok.memory_bytes()
            + self
                .char_steps
                .values()
                .map(CharSteps::memory_bytes)
                .sum::<usize>()
            + self.quiet_bytes
    }
}

/// Store a finished subtree walk `o` (see `SubterminalTree::build`'s `open`) in `quiet` when
/// it recorded no boundary: the root ranges it added, clipped to the subtree's tokens (the
/// first may have merged into the range before it), and the end states pushed since it
/// started (with the one before, which a repeat may have skipped: a superset only seeds
/// `precompute_all`).
#[allow(clippy::too_many_arguments)]
pub(super) fn remember_quiet(
    quiet: &mut crate::hash::WordHashMap<(TerminalId, u32, u32), QuietSubtree>,
    quiet_bytes: &mut usize,
    trie: &VocabTrie,
    t0: TerminalId,
    o: OpenSubtree,
    boundaries: u64,
    root_ranges: &[(u32, u32)],
    end_dfa_states: &[u32],
) {
    let OpenSubtree {
        node,
        state,
        ranges_at,
        ends_at,
        boundaries_at,
        ..
    } = o;
    if boundaries != boundaries_at || *quiet_bytes >= MAX_QUIET_BYTES {
        return;
    }
    let r = trie.subtree_range(node as usize);
    let ranges: Box<[(u32, u32)]> = root_ranges[ranges_at.saturating_sub(1)..]
        .iter()
        .map(|&(a, b)| (a.max(r.start), b.min(r.end)))
        .filter(|&(a, b)| a < b)
        .collect();
    let mut ends = end_dfa_states[ends_at.saturating_sub(1)..].to_vec();
    ends.sort_unstable();
    ends.dedup();
    if ends.len() > MAX_QUIET_ENDS {
        return;
    }
    *quiet_bytes += QUIET_ENTRY_BYTES + ranges.len() * 8 + ends.len() * 4;
    quiet.insert(
        (t0, node, state),
        QuietSubtree {
            ranges,
            ends: ends.into(),
        },
    );
}
