//! Byte DFAs of terminals, built with `regex-automata`.

use regex_automata::dfa::dense;
use regex_automata::nfa::thompson;
use regex_automata::{MatchKind, dfa::StartKind};
use regex_syntax::hir::Hir;

/// Build a dense, anchored, all-matches DFA for a terminal's HIR, with an optional size
/// limit in bytes (shared with the reference recognizer).
pub(crate) fn build_dfa(hir: &Hir, limit: Option<usize>) -> Result<dense::DFA<Vec<u32>>, String> {
    let nfa = thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .shrink(false)
                .nfa_size_limit(limit.map(|l| l * 4)),
        )
        .build_from_hir(hir)
        .map_err(|e| e.to_string())?;
    dense::Builder::new()
        .configure(
            dense::Config::new()
                .match_kind(MatchKind::All)
                .start_kind(StartKind::Anchored)
                .dfa_size_limit(limit)
                .determinize_size_limit(limit),
        )
        .build_from_nfa(&nfa)
        .map_err(|e| e.to_string())
}
