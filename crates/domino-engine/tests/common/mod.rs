//! Helpers shared by the engine crate's integration tests: where the workspace's data lives
//! (`grammars/`, `tests/cases/`, `../shared/`), loud failures when it is missing (tests that
//! need data never skip silently), regex membership checks for constrained terminals, and the
//! one seeded test RNG.
//!
//! Each test binary includes this module and uses a subset of it, hence the crate-level
//! `dead_code` allowance (an item unused by one test binary is used by another).
#![allow(dead_code)]

pub mod cases;
pub mod rng;

use std::path::PathBuf;

/// A synthetic vocabulary: `words` in order (ids 0, 1, …), the ones at `special` marked
/// special (never allowed), and one empty end-of-generation token appended last.
pub fn vocab_with_eog(
    mut words: Vec<Vec<u8>>,
    special: &[usize],
) -> std::sync::Arc<domino_engine::vocab::Vocabulary> {
    words.push(Vec::new());
    let n = words.len();
    let mut is_special = vec![false; n];
    for &i in special {
        is_special[i] = true;
    }
    std::sync::Arc::new(domino_engine::vocab::Vocabulary::new(
        words,
        is_special,
        vec![domino_engine::vocab::TokenId(n as u32 - 1)],
    ))
}

/// The workspace root (two levels above this crate's manifest directory): where `grammars/`
/// and `tests/cases/` live.
pub fn workspace_root() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize()
        .unwrap_or_else(|e| panic!("workspace root {}: {e}", root.display()))
}

/// The shared test data folder (`../shared` next to the repository; a worktree one level deeper
/// finds it further up, so search upwards); panics when missing.
pub fn shared_dir() -> PathBuf {
    workspace_root()
        .ancestors()
        .map(|a| a.join("shared"))
        .find(|p| p.is_dir())
        .unwrap_or_else(|| {
            panic!(
                "missing ../shared next to the repository {} (tokenizers and data; see the README)",
                workspace_root().display()
            )
        })
}

/// A file under the shared folder; panics when it is missing.
pub fn shared(rel: &str) -> PathBuf {
    let p = shared_dir().join(rel);
    assert!(
        p.exists(),
        "missing {} (../shared/{rel} next to the repository)",
        p.display()
    );
    p
}

/// Does `hir` match all of `bytes` (anchored both ends)? Through the lexer's single-language
/// DFA (not its product construction, which the constrained checks below stand apart from).
pub fn full_match(hir: &regex_syntax::hir::Hir, bytes: &[u8]) -> bool {
    use std::collections::HashMap;
    thread_local! {
        static DFAS: std::cell::RefCell<HashMap<String, Option<domino_engine::grammar::dfa::TerminalDfa>>> = Default::default();
    }
    DFAS.with(|cache| {
        let mut cache = cache.borrow_mut();
        let dfa = cache
            .entry(hir.to_string())
            .or_insert_with(|| domino_engine::grammar::dfa::TerminalDfa::new(hir).ok());
        let Some(dfa) = dfa else { return false };
        let mut s = 0u32;
        for &b in bytes {
            s = dfa.next(s, b);
            if s == domino_engine::grammar::dfa::DEAD {
                return false;
            }
        }
        dfa.is_accepting(s)
    })
}

/// Assert that two terminal DFAs (every state of each can reach a match) accept the same
/// strings: walk both in step from their start states over all 256 bytes, comparing
/// acceptance and dead transitions at every pair reached. The number of pairs compared.
pub fn assert_same_dfa_language(
    a: &domino_engine::grammar::dfa::TerminalDfa,
    b: &domino_engine::grammar::dfa::TerminalDfa,
    what: &str,
) -> usize {
    use domino_engine::grammar::dfa::DEAD;
    let mut seen = std::collections::HashSet::from([(0u32, 0u32)]);
    let mut stack = vec![(0u32, 0u32)];
    while let Some((x, y)) = stack.pop() {
        assert_eq!(
            a.is_accepting(x),
            b.is_accepting(y),
            "{what}: accepting differs at state {x}"
        );
        for byte in 0..=255u8 {
            let (nx, ny) = (a.next(x, byte), b.next(y, byte));
            assert_eq!(
                nx == DEAD,
                ny == DEAD,
                "{what}: byte {byte:#04x} from state {x} is dead in one DFA only"
            );
            if nx != DEAD && seen.insert((nx, ny)) {
                stack.push((nx, ny));
            }
        }
    }
    seen.len()
}

/// Is `bytes` in `hir` ∩ every `and` ∖ every `and_not` (an `Expr::Constrained` leaf)?
pub fn constrained_match(
    hir: &regex_syntax::hir::Hir,
    constraints: &domino_engine::grammar::ir::Constraints,
    bytes: &[u8],
) -> bool {
    full_match(hir, bytes)
        && constraints.and.iter().all(|h| full_match(h, bytes))
        && !constraints.and_not.iter().any(|h| full_match(h, bytes))
}

/// A string of a constrained terminal: samples of its base language (from `generator`) until
/// one satisfies the constraints (rejection sampling; `None` when none does within the budget).
pub fn sample_constrained(
    generator: &mut domino_engine::grammar::json_schema::instances::Generator,
    hir: &regex_syntax::hir::Hir,
    constraints: &domino_engine::grammar::ir::Constraints,
) -> Option<String> {
    (0..400)
        .map(|_| generator.sample(hir))
        .find(|x| constrained_match(hir, constraints, x.as_bytes()))
}

/// The number of alternatives of `alts` as a grammar lists them: an [`Expr::RefPairs`] counts
/// each of its pairs (so a sampler picking uniformly among them draws as it did from the
/// nested form).
///
/// [`Expr::RefPairs`]: domino_engine::grammar::expr::Expr::RefPairs
#[allow(dead_code)]
pub fn alternative_count(alts: &[domino_engine::grammar::expr::Expr]) -> usize {
    use domino_engine::grammar::expr::Expr;
    alts.iter()
        .map(|a| match a {
            Expr::RefPairs(pairs) => pairs.len(),
            _ => 1,
        })
        .sum()
}

/// Alternative `i` of `alts` counted as [`alternative_count`] does (a pair as its sequence).
#[allow(dead_code)]
pub fn alternative(
    alts: &[domino_engine::grammar::expr::Expr],
    mut i: usize,
) -> std::borrow::Cow<'_, domino_engine::grammar::expr::Expr> {
    use domino_engine::grammar::expr::Expr;
    use std::borrow::Cow;
    for a in alts {
        let n = match a {
            Expr::RefPairs(pairs) => pairs.len(),
            _ => 1,
        };
        if i < n {
            return match a {
                Expr::RefPairs(pairs) => {
                    let [x, y] = pairs[i];
                    Cow::Owned(Expr::Seq(vec![Expr::Ref(x), Expr::Ref(y)]))
                }
                a => Cow::Borrowed(a),
            };
        }
        i -= n;
    }
    panic!("alternative {i} past the end")
}
