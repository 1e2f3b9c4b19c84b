//! What a grammar's tree cache reports about the trees built so far ([`TreeStats`]).

/// Totals over the trees built so far.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct TreeStats {
    /// Component trees built (each one walk over the vocabulary trie).
    pub trees: usize,
    pub tree_nodes: usize,
    pub groups: usize,
    /// Bytes of the trees (nodes, edges, token lists) and of what their builds remember
    /// (`build_memo::BuildMemo`).
    pub memory_bytes: usize,
    /// Bytes of the vocabulary trie (one per vocabulary, shared by every grammar).
    pub trie_bytes: usize,
    /// Subtree walks remembered for later builds, and the times a build took one instead of
    /// walking it (`build_memo::BuildMemo`: the states a searched `pattern` keeps returning to).
    pub remembered_subtrees: usize,
    pub remembered_subtree_hits: u64,
    /// Root walks the vocabulary's component builds stored for other builds, the bytes they
    /// hold, and the builds that replayed one so far (module `root_walk`): shared by every
    /// grammar over the same vocabulary in the process, so these are the process's totals,
    /// not this grammar's.
    pub shared_root_walks: usize,
    pub shared_root_walk_bytes: usize,
    pub root_walk_replays: u64,
    /// Times that store was emptied because it reached its budget
    /// (`root_walk::MAX_ROOT_WALK_BYTES`).
    pub root_walk_store_emptied: u64,
}
