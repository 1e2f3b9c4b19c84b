//! The DFA states a component build's root-group tokens end in ([`EndStates`]).

/// Slots of [`EndStates`]' filter of recently added states: `1 << SLOT_BITS`.
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;

/// An empty filter slot (no `u32` state widens to it).
const EMPTY: u64 = u64::MAX;

/// The DFA states a component build's root-group tokens end in, in the order the walk
/// meets them, with most repeats dropped as they come.
///
/// A walk adds a state at every trie node that ends a root-group token or takes a subtree:
/// hundreds of thousands of times over a 262k-token vocabulary, among a handful of distinct
/// states (a `maxLength` string ends tokens in one state per length, so consecutive repeats
/// are rare). Keeping every addition and sorting at the end made the sorts about a twentieth
/// of the builds' instructions on JSONSchemaBench over Gemma 3; a direct-mapped filter of the
/// states added since the last [`EndStates::mark`] drops almost all of them at once.
///
/// # Invariant
/// Every state added since the last `mark` is in `list()[at..]`, where `at` is what that
/// `mark` returned: a subtree the build may remember (`build_memo::remember_quiet`) marks
/// when it is entered and reads its end states from there. The list may still hold repeats
/// (filter collisions, states added again after a mark); its reader sorts and deduplicates.
#[derive(Debug)]
pub(super) struct EndStates {
    list: Vec<u32>,
    recent: [u64; SLOTS],
}

impl Default for EndStates {
    fn default() -> Self {
        EndStates {
            list: Vec::new(),
            recent: [EMPTY; SLOTS],
        }
    }
}

impl EndStates {
    /// Add state `s` (dropped when it was added since the last mark and is still in the
    /// filter).
    #[inline]
    pub(super) fn push(&mut self, s: u32) {
        let slot = (s.wrapping_mul(0x9E37_79B9) >> (32 - SLOT_BITS)) as usize;
        if self.recent[slot] != s as u64 {
            self.recent[slot] = s as u64;
            self.list.push(s);
        }
    }

    /// Empty the filter (every later state is added to the list again at least once) and
    /// return the list's length, where the states added from now on start.
    pub(super) fn mark(&mut self) -> usize {
        self.recent = [EMPTY; SLOTS];
        self.list.len()
    }

    /// The states added so far (see the invariant).
    pub(super) fn list(&self) -> &[u32] {
        &self.list
    }

    /// Add states stored elsewhere (a replayed walk's), without the filter.
    pub(super) fn extend_from_slice(&mut self, states: &[u32]) {
        self.list.extend_from_slice(states);
    }

    /// The distinct states, sorted.
    pub(super) fn into_sorted(mut self) -> Vec<u32> {
        self.list.sort_unstable();
        self.list.dedup();
        self.list
    }
}

#[cfg(test)]
mod tests {
    use super::EndStates;

    /// Every state added since a mark is in the list from the mark on, whatever the filter
    /// dropped, and the sorted result is exactly the distinct states added.
    #[test]
    fn states_added_since_a_mark_are_listed_after_it() {
        let mut e = EndStates::default();
        let mut all = std::collections::BTreeSet::new();
        let mut pushes = 0;
        let mut rng = crate::test_rng::Rng(3);
        for round in 0..50 {
            let at = e.mark();
            let mut since = std::collections::BTreeSet::new();
            for _ in 0..rng.below(400) {
                // Few distinct states, as a walk has, and some large ones.
                let s = match rng.below(10) {
                    0 => u32::MAX - rng.below(3) as u32,
                    _ => rng.below(12 + round) as u32,
                };
                e.push(s);
                pushes += 1;
                since.insert(s);
                all.insert(s);
            }
            let listed: std::collections::BTreeSet<u32> = e.list()[at..].iter().copied().collect();
            assert_eq!(listed, since, "round {round}");
        }
        let kept = e.list().len();
        assert!(kept * 3 < pushes, "the filter kept {kept} of {pushes}");
        assert_eq!(e.into_sorted(), all.into_iter().collect::<Vec<_>>());
    }
}
