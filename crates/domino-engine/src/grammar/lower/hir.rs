//! Regular expressions of rule bodies: an [`Expr`] as HIR (references inlined), kept
//! *normalized* so that an empty language or an ε-only part is visible at the top.

use super::MAX_INLINE_HIR;
use crate::grammar::expr::{Expr, RuleId};
use crate::grammar::regex_hir::RegexHir;
use regex_syntax::hir::{Hir, HirKind, Repetition};

/// The HIR of `e`, with references resolved by `lookup` (`None` if some reference has none).
/// The result is *normalized* (see [`normalize`]); a regex leaf that is already (its
/// [`RegexHir::facts`], known without a walk for a big shared HIR) is copied as it is.
pub(super) fn expr_to_hir(e: &Expr, lookup: &impl Fn(RuleId) -> Option<Hir>) -> Option<Hir> {
    Some(match e {
        Expr::Empty => Hir::empty(),
        Expr::Bytes(b) => Hir::literal(b.clone()),
        Expr::Regex(h) if h.facts().normalized => h.hir().clone(),
        Expr::Regex(h) => normalize(h),
        // Not one regular expression: stays its own terminal.
        Expr::Constrained { .. } => return None,
        Expr::Ref(r) => lookup(*r)?,
        Expr::Seq(v) => concat(
            v.iter()
                .map(|x| expr_to_hir(x, lookup))
                .collect::<Option<Vec<_>>>()?,
        ),
        Expr::Alt(v) => alternation(
            v.iter()
                .map(|x| expr_to_hir(x, lookup))
                .collect::<Option<Vec<_>>>()?,
        ),
        Expr::Repeat { expr, min, max } => repetition(expr_to_hir(expr, lookup)?, *min, *max),
        Expr::RefPairs(pairs) => expr_to_hir(&Expr::ref_pairs_expanded(pairs), lookup)?,
    })
}

/// The HIR of an expression that is one normalized regex (shared, and a key set still
/// unbuilt) or one reference (`lookup`'s), shared instead of copied; `None` when it has to
/// be built ([`expr_to_hir`]).
pub(super) fn shared_hir(
    e: &Expr,
    lookup: &impl Fn(RuleId) -> Option<RegexHir>,
) -> Option<RegexHir> {
    match e {
        Expr::Regex(h) if h.facts().normalized => Some(h.clone()),
        Expr::Ref(r) => lookup(*r),
        _ => None,
    }
}

/// Does `h` match nothing? Exact for normalized HIR: there an empty language only occurs as
/// the whole expression (`regex-syntax`'s own length properties give up on alternatives
/// with an empty branch, so we remove those branches).
pub(crate) fn is_fail(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Class(regex_syntax::hir::Class::Unicode(c)) => c.ranges().is_empty(),
        HirKind::Class(regex_syntax::hir::Class::Bytes(c)) => c.ranges().is_empty(),
        _ => false,
    }
}

/// Does `h` match only the empty string (exact for normalized, non-failing HIR)?
pub(super) fn is_epsilon_only(h: &Hir) -> bool {
    h.properties().maximum_len() == Some(0)
}

pub(super) fn concat(v: Vec<Hir>) -> Hir {
    if v.iter().any(is_fail) {
        return Hir::fail();
    }
    Hir::concat(
        v.into_iter()
            .filter(|h| !matches!(h.kind(), HirKind::Empty))
            .collect(),
    )
}

pub(super) fn alternation(v: Vec<Hir>) -> Hir {
    Hir::alternation(v.into_iter().filter(|h| !is_fail(h)).collect())
}

pub(super) fn repetition(sub: Hir, min: u32, max: Option<u32>) -> Hir {
    if max == Some(0) || (is_fail(&sub) && min == 0) || is_epsilon_only(&sub) {
        return Hir::empty();
    }
    if is_fail(&sub) {
        return Hir::fail();
    }
    if min == 1 && max == Some(1) {
        return sub;
    }
    Hir::repetition(Repetition {
        min,
        max,
        greedy: true,
        sub: Box::new(sub),
    })
}

/// Rebuild `h` so that empty-language parts only appear as the whole expression and
/// ε-only repetitions disappear; captures are dropped (meaningless here). Recursion depth
/// is bounded by the front ends' nesting limits.
pub(super) fn normalize(h: &Hir) -> Hir {
    // Most HIRs (the front ends' own: strings, numbers, key sets) are normalized already:
    // a read-only check and a copy instead of rebuilding every node through the smart
    // constructors (which recompute each node's properties).
    if is_normalized(h) {
        return h.clone();
    }
    match h.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => h.clone(),
        HirKind::Capture(c) => normalize(&c.sub),
        HirKind::Repetition(r) => repetition(normalize(&r.sub), r.min, r.max),
        HirKind::Concat(v) => concat(v.iter().map(normalize).collect()),
        HirKind::Alternation(v) => alternation(v.iter().map(normalize).collect()),
    }
}

/// Whether [`normalize`] would leave `h` as it is: no captures, no empty language below the
/// top, no ε-only or `{1,1}` repetition, no `Empty` inside a concatenation (iterative).
pub(super) fn is_normalized(h: &Hir) -> bool {
    let mut stack = vec![h];
    while let Some(h) = stack.pop() {
        if !node_is_normalized(h) {
            return false;
        }
        match h.kind() {
            HirKind::Repetition(r) => stack.push(&r.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v.iter()),
            _ => {}
        }
    }
    true
}

/// Whether one node of a HIR is as [`normalize`] leaves it, its children checked on their
/// own: no capture, no ε-only, `{1,1}`, lazy or failing-body repetition, no failing or
/// `Empty` part of a concatenation, no failing branch. [`is_normalized`] and
/// [`HirFacts::normalized`] are this over every node.
pub(crate) fn node_is_normalized(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => true,
        HirKind::Capture(_) => false,
        HirKind::Repetition(r) => {
            !(r.max == Some(0)
                || (r.min == 1 && r.max == Some(1))
                || !r.greedy
                || is_fail(&r.sub)
                || is_epsilon_only(&r.sub))
        }
        HirKind::Concat(v) => !v
            .iter()
            .any(|x| is_fail(x) || matches!(x.kind(), HirKind::Empty)),
        HirKind::Alternation(v) => !v.iter().any(is_fail),
    }
}

/// Number of HIR nodes (iterative).
pub(super) fn hir_size(h: &Hir) -> usize {
    let mut stack = vec![h];
    let mut n = 0usize;
    while let Some(h) = stack.pop() {
        n += 1;
        if n > MAX_INLINE_HIR {
            return n;
        }
        match h.kind() {
            HirKind::Repetition(r) => stack.push(&r.sub),
            HirKind::Capture(c) => stack.push(&c.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v.iter()),
            _ => {}
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::hir_key::hir_facts;

    fn parse(re: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .utf8(false)
            .build()
            .parse(re)
            .unwrap()
    }

    #[test]
    fn facts_tell_normalized_hir_as_the_walk_does() {
        let mut cases: Vec<Hir> = [
            "a",
            "",
            "(a|b)c",
            "(?:a|b)c",
            "x*?",
            "(?:ab)+[0-9]{2,5}",
            "q(?:x|[^\\x00-\\x{10FFFF}])",
            "(?:){3}z",
            "a(?:b(?:c(d|e)f)g)h|i",
        ]
        .iter()
        .map(|re| parse(re))
        .collect();
        // Shapes the parser does not produce: an ε inside a concatenation, a {1,1}
        // repetition, an ε-only repetition, a failing repetition body.
        let rep = |sub: Hir, min, max| {
            Hir::repetition(Repetition {
                min,
                max,
                greedy: true,
                sub: Box::new(sub),
            })
        };
        cases.push(Hir::concat(vec![parse("a"), Hir::empty(), parse("b")]));
        cases.push(rep(parse("[ab]"), 1, Some(1)));
        cases.push(rep(Hir::empty(), 0, None));
        cases.push(rep(Hir::fail(), 0, Some(2)));
        cases.push(Hir::alternation(vec![
            parse("a"),
            rep(parse("b"), 0, Some(0)),
        ]));
        let mut seen = [false; 2];
        for h in &cases {
            let walked = is_normalized(h);
            assert_eq!(hir_facts(h).normalized, walked, "{h:?}");
            seen[walked as usize] = true;
            let n = normalize(h);
            assert!(
                is_normalized(&n) && hir_facts(&n).normalized,
                "{h:?} -> {n:?}"
            );
            if walked {
                assert_eq!(&n, h);
            }
            assert_eq!(RegexHir::new(h.clone()).facts().normalized, walked);
        }
        assert_eq!(seen, [true, true], "both kinds are tested");
    }
}
