//! [`RegexHir`]: a regular language as shared `regex-syntax` HIR — built by the front end,
//! or, for a JSON object's key set, built only when something reads it.
//!
//! # Why
//! Every object with named properties that allows others gets a terminal for "a JSON string
//! that is none of these keys" (the JSON Schema front end's `key_except`). Its HIR spells
//! the names' trie with the ways of leaving it at every node: thousands of nodes, each made
//! by `regex-syntax`'s constructors (about 8,000 instructions per trie node). On the slowest
//! JSONSchemaBench schemas that was a third of the front end and about a tenth of the time
//! to first mask, yet a normal compile no longer reads that HIR: the terminal's DFA is the
//! names' trie ([`crate::grammar::key_set_dfa`]) and lowering keeps the key set a terminal of
//! its own ([`crate::grammar::expr::Rule::is_standalone`]). So a key set is kept as its names,
//! and the HIR is built on first use.
//!
//! # What reads what
//! - [`RegexHir::facts`] (size, depth, hash, normalized) never builds the HIR. For a key set
//!   they describe a *leaf*: size and depth 1 (it is never inlined into a bigger expression,
//!   and its DFA does not come from the HIR, so the HIR's nesting does not bound anything),
//!   a hash of the names, and normalized (the HIR `except_hir` builds is; a test checks).
//! - Equality: two key sets are equal when their names are; otherwise the HIRs are compared.
//!   A key set and a built HIR of the same structure are thus never merged into one
//!   terminal (they hash differently): a duplicate terminal at worst, never a wrong one.
//! - [`RegexHir::key_set_dfa`]: the terminal DFA of a key set, from its names.
//! - Everything else (the reference recognizer, printing, sampling, a test) reads the HIR
//!   through `Deref`, which builds it once.
//!
//! # Invariants
//! - A key set's names are sorted, deduplicated, and all ordinary
//!   ([`crate::grammar::key_set_dfa::from_trie`]); other name sets are built at once.
//! - The HIR behind a `RegexHir` never changes once built, and its address is stable (the
//!   node is shared by `Arc`): maps may key facts by [`RegexHir::as_ptr`].
//!
//! # Example
//! ```
//! use domino_engine::grammar::regex_hir::RegexHir;
//!
//! let names: Vec<Vec<char>> = ["id", "name"].iter().map(|n| n.chars().collect()).collect();
//! let keys = RegexHir::key_set(names).expect("ordinary names");
//! assert_eq!(keys.facts().size, 1); // known without building the HIR
//! assert!(keys.key_set_dfa().is_some());
//! // Reading the HIR builds it: a JSON string, quotes included.
//! assert_eq!(keys.properties().minimum_len(), Some(2));
//! ```

use crate::grammar::hir_key::{HirFacts, hir_facts};
use crate::grammar::key_set_dfa::{self, KeySetDfa};
use regex_syntax::hir::Hir;
use std::sync::{Arc, OnceLock};

/// A shared regular language: a HIR, or a key set whose HIR is built on first use (see the
/// module doc). Cloning shares it.
#[derive(Clone)]
pub struct RegexHir(Arc<Node>);

struct Node {
    /// The HIR: set at construction, or, for a key set, on first read.
    hir: OnceLock<Hir>,
    /// [`RegexHir::facts`], once asked (or at once, for the front end's shared HIRs).
    facts: OnceLock<HirFacts>,
    key_set: Option<KeySet>,
}

/// A key set: the strings that are none of `names` (see `json_schema::keys::except_hir`).
struct KeySet {
    names: Vec<Vec<char>>,
    dfa: OnceLock<Arc<KeySetDfa>>,
}

/// Tag of a key set's hash, so it does not collide by construction with a HIR's.
const KEY_SET_HASH_TAG: u8 = 0x4b;

impl RegexHir {
    /// A built HIR.
    pub fn new(hir: Hir) -> Self {
        RegexHir(Arc::new(Node {
            hir: OnceLock::from(hir),
            facts: OnceLock::new(),
            key_set: None,
        }))
    }

    /// The JSON strings (quotes included) that are none of `names` (sorted, deduplicated;
    /// the empty name refuses `""`), with the HIR left unbuilt; `None` when some name has a
    /// character that is not ordinary ([`key_set_dfa::from_trie`]: the caller builds the
    /// HIR instead).
    pub fn key_set(names: Vec<Vec<char>>) -> Option<Self> {
        if !key_set_dfa::from_trie(&names) {
            return None;
        }
        debug_assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "names sorted, distinct"
        );
        Some(RegexHir(Arc::new(Node {
            hir: OnceLock::new(),
            facts: OnceLock::new(),
            key_set: Some(KeySet {
                names,
                dfa: OnceLock::new(),
            }),
        })))
    }

    /// Whether this is a key set (its HIR possibly not built yet).
    pub fn is_key_set(&self) -> bool {
        self.0.key_set.is_some()
    }

    /// The HIR, built now if it was not.
    pub fn hir(&self) -> &Hir {
        self.0.hir.get_or_init(|| match &self.0.key_set {
            Some(k) => crate::grammar::json_schema::keys::except_hir(&k.names),
            None => unreachable!("a RegexHir without a key set is built at construction"),
        })
    }

    /// Size, depth, hash and normalization (see the module doc: a key set's without
    /// building its HIR). Computed once.
    pub fn facts(&self) -> HirFacts {
        *self.0.facts.get_or_init(|| match &self.0.key_set {
            Some(k) => {
                let mut h = crate::hash::Fnv1a::new();
                h.write_u8(KEY_SET_HASH_TAG)
                    .write_word(k.names.len() as u64);
                let mut buf = [0u8; 4];
                for name in &k.names {
                    h.write_word(name.len() as u64);
                    for c in name {
                        h.write(c.encode_utf8(&mut buf).as_bytes());
                    }
                }
                HirFacts {
                    size: 1,
                    depth: 1,
                    hash: h.finish(),
                    normalized: true,
                }
            }
            None => hir_facts(self.hir()),
        })
    }

    /// A key set's terminal DFA, from its names' trie (built once); `None` for a HIR.
    pub fn key_set_dfa(&self) -> Option<Arc<KeySetDfa>> {
        let k = self.0.key_set.as_ref()?;
        Some(
            k.dfa
                .get_or_init(|| {
                    Arc::new(KeySetDfa::new(&k.names).expect("key set names are ordinary"))
                })
                .clone(),
        )
    }

    /// The shared node's address: equal for clones, distinct for live `RegexHir`s that were
    /// made separately (a key for per-HIR maps).
    pub fn as_ptr(&self) -> *const () {
        Arc::as_ptr(&self.0) as *const ()
    }

    /// Whether both are the same shared node.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for RegexHir {
    type Target = Hir;
    fn deref(&self) -> &Hir {
        self.hir()
    }
}

impl From<Hir> for RegexHir {
    fn from(hir: Hir) -> Self {
        RegexHir::new(hir)
    }
}

impl PartialEq for RegexHir {
    fn eq(&self, other: &Self) -> bool {
        if RegexHir::ptr_eq(self, other) {
            return true;
        }
        match (&self.0.key_set, &other.0.key_set) {
            (Some(a), Some(b)) => a.names == b.names,
            _ => self.hir() == other.hir(),
        }
    }
}

impl Eq for RegexHir {}

impl std::fmt::Display for RegexHir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self.hir(), f)
    }
}

impl std::fmt::Debug for RegexHir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.hir(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::key_set_dfa::tests::sorted as names;

    #[test]
    fn a_key_set_is_built_only_when_read() {
        let k = RegexHir::key_set(names(&["apiVersion", "kind", "metadata"])).unwrap();
        let facts = k.facts();
        assert!(k.0.hir.get().is_none(), "facts must not build the HIR");
        assert!(k.key_set_dfa().is_some());
        let twin = RegexHir::key_set(names(&["kind", "apiVersion", "metadata"])).unwrap();
        assert_eq!(k, twin);
        assert_eq!(twin.facts().hash, facts.hash);
        assert!(
            k.0.hir.get().is_none(),
            "comparing key sets must not build the HIR"
        );
        let other = RegexHir::key_set(names(&["kind"])).unwrap();
        assert_ne!(k, other);
        assert_ne!(k.facts().hash, other.facts().hash);
        // Reading builds exactly the front end's HIR.
        let built = crate::grammar::json_schema::keys::except_hir(&names(&[
            "apiVersion",
            "kind",
            "metadata",
        ]));
        assert_eq!(*k, built);
        assert!(hir_facts(&built).normalized);
    }

    #[test]
    fn names_that_are_not_ordinary_are_not_a_lazy_key_set() {
        assert!(RegexHir::key_set(names(&["a/b"])).is_none());
        assert!(RegexHir::key_set(names(&["é"])).is_none());
        assert!(RegexHir::key_set(names(&["ok", ""])).is_some());
    }

    #[test]
    fn a_built_hir_has_its_own_facts() {
        let h: Hir = regex_syntax::Parser::new().parse("a[bc]*").unwrap();
        let r = RegexHir::new(h.clone());
        assert_eq!(r.facts(), hir_facts(&h));
        assert!(!r.is_key_set() && r.key_set_dfa().is_none());
        assert_eq!(r, RegexHir::new(h));
    }
}
