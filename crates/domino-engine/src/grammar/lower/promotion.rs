//! Steps 1 and 2 of lowering: which rules are regular (their bodies as one regular
//! expression, references inlined) and which of those are promoted to a single terminal.

use super::super::dfa::dfa_fits;
use super::hir::{alternation, concat, expr_to_hir, is_fail, repetition, shared_hir};
use super::{
    LowerOptions, MAX_INLINE_DEPTH, MAX_INLINE_HIR, PROMOTION_DFA_LIMIT, PROMOTION_STATE_ESTIMATE,
    RuleRefs, collect_refs,
};
use crate::grammar::expr::{Expr, GrammarDef, RuleId, RuleKind};
use crate::grammar::fixpoint::Csr;
use crate::grammar::hir_key::{HirFacts, hir_facts};
use crate::grammar::regex_hir::RegexHir;
use crate::grammar::{ErrorKind, GrammarError};
use crate::hash::WordHashMap;
use regex_syntax::hir::{Hir, HirKind};

/// What promotion decided, per rule of the [`GrammarDef`].
pub(super) struct Promotion {
    /// The rule's regular expression (references inlined, normalized), for the regular rules
    /// small enough that needed one: promotion candidates and whatever lexical rules reach.
    /// Shared with the rule's `Expr::Regex` when the body is one normalized regex, and with
    /// the terminal the rule becomes.
    pub(super) rule_hir: Vec<Option<RegexHir>>,
    /// The rule becomes one terminal wherever it is referenced.
    pub(super) promoted: Vec<bool>,
}

/// Find the regular rules and promote the lexical and token-like ones (steps 1 and 2 of the
/// module overview); warns about regular rules that derive nothing. Fails when a reachable
/// lexical rule is not regular or too large.
pub(super) fn promote(
    def: &GrammarDef,
    opts: &LowerOptions,
    reachable: &[bool],
    all_refs: &RuleRefs,
    warnings: &mut Vec<String>,
) -> Result<Promotion, GrammarError> {
    let n = def.rules.len();
    // 1. Regular rules in topological order (Kahn over "references").
    // Right-linear self recursion (`ws ::= ([ \t\n] ws)?`, `digits ::= [0-9] digits | [0-9]`)
    // is still regular: R = α₁ R | … | β₁ | … has the language (α₁|…)* (β₁|…).
    // (Decided here without building the split: most such rules — a JSON object's member
    // chain — never need their HIR, and the split copies the whole body.)
    let mut tail_rec = vec![false; n];
    for (i, rule) in def.rules.iter().enumerate() {
        if all_refs.row(i).binary_search(&(i as u32)).is_ok()
            && is_tail_split(&rule.expr, RuleId(i as u32))
        {
            tail_rec[i] = true;
        }
    }
    // The references the order waits on: a right-linear self reference does not count.
    let tail_rec = &tail_rec;
    let refs = |i: usize| {
        all_refs
            .row(i)
            .iter()
            .map(|&r| r as usize)
            .filter(move |&r| !(tail_rec[i] && r == i))
    };
    // Who refers to each rule (the relation transposed, rows of one array).
    let users = Csr::new(n, (0..n).flat_map(|i| refs(i).map(move |r| (r, i as u32))));
    let mut pending: Vec<usize> = (0..n).map(|i| refs(i).count()).collect();
    let mut order: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut k = 0;
    while k < order.len() {
        let r = order[k];
        k += 1;
        for &u in users.row(r) {
            let u = u as usize;
            pending[u] -= 1;
            if pending[u] == 0 {
                order.push(u);
            }
        }
    }
    // rule_hir[r]: the rule's regular expression (inlined), for regular rules small enough.
    let mut rule_hir: Vec<Option<RegexHir>> = vec![None; n];
    let mut promoted = vec![false; n];
    let mut too_big = vec![false; n];
    // Estimated inlined size per rule, computed before building its HIR (inlining can grow
    // exponentially: `a ::= b b`, `b ::= c c`, ...). Only for the rules that get a HIR
    // (below): their references got one first (a candidate's are promoted, a lexical rule's
    // are lexical), so every estimate read was computed. Walking every rule body twice more
    // was a tenth of lowering a big schema, whose member states never need one.
    let mut est_size = vec![usize::MAX; n];
    let mut est_depth = vec![usize::MAX; n];
    // Size, depth and hash of each constrained leaf met, by address, from one walk (a
    // regex leaf keeps its own: `RegexHir::facts`). A big leaf (a format) is referenced by
    // many rules' bodies, and walking it again for each was a sixth of lowering a big schema.
    // (The HIRs live in `def`, so their addresses are stable and distinct here.)
    let mut facts: WordHashMap<*const Hir, HirFacts> = WordHashMap::default();
    // Rules whose HIR a lexical rule needs (everything lexical rules reach). Other rules get
    // a HIR only when they are promotion candidates: building (and cloning) the HIR of every
    // regular rule would be wasted on big fixed records that stay syntactic.
    let mut lexical_reach = vec![false; n];
    {
        let mut stack: Vec<usize> = (0..n)
            .filter(|&i| def.rules[i].kind == RuleKind::Lexical)
            .collect();
        while let Some(r) = stack.pop() {
            if !std::mem::replace(&mut lexical_reach[r], true) {
                stack.extend(refs(r));
            }
        }
    }
    for &r in &order {
        crate::grammar::budget_over("the lowered grammar (promoting rules to terminals)")?;
        let rule = &def.rules[r];
        let candidate = rule.kind != RuleKind::Lexical
            && opts.promote
            && token_like(&rule.expr, all_refs.row(r), r, &promoted)
            && !all_refs
                .row(r)
                .iter()
                .any(|&x| def.rules[x as usize].is_standalone());
        if !candidate && !lexical_reach[r] {
            continue;
        }
        if tail_rec[r] {
            est_size[r] = 1; // its self references
            est_depth[r] = 1;
        }
        est_size[r] = expr_size(&rule.expr, &est_size, &mut facts);
        est_depth[r] = expr_depth(&rule.expr, &est_depth, &mut facts).saturating_add(2);
        if est_size[r] > MAX_INLINE_HIR || est_depth[r] > MAX_INLINE_DEPTH {
            too_big[r] = true;
            continue;
        }
        let hir = {
            let lookup = |id: RuleId| rule_hir[id.0 as usize].as_deref().cloned();
            if let Some(shared) = shared_hir(&rule.expr, &|id| rule_hir[id.0 as usize].clone()) {
                Some(shared)
            } else {
                match tail_rec[r]
                    .then(|| tail_split(&rule.expr, RuleId(r as u32)))
                    .flatten()
                {
                    None => expr_to_hir(&rule.expr, &lookup),
                    Some((prefixes, bases)) => (|| {
                        let prefixes = prefixes
                            .iter()
                            .map(|e| expr_to_hir(e, &lookup))
                            .collect::<Option<Vec<_>>>()?;
                        let bases = bases
                            .iter()
                            .map(|e| expr_to_hir(e, &lookup))
                            .collect::<Option<Vec<_>>>()?;
                        Some(concat(vec![
                            repetition(alternation(prefixes), 0, None),
                            alternation(bases),
                        ]))
                    })(),
                }
                .map(RegexHir::new)
            }
        };
        let Some(hir) = hir else {
            too_big[r] = true;
            continue;
        };
        // (A key set is a non-empty language; asking its HIR would build it.)
        if !hir.is_key_set() && is_fail(&hir) && reachable[r] {
            warnings.push(format!(
                "rule `{}` derives no string (it never terminates)",
                rule.name
            ));
        }
        let promote = match rule.kind {
            RuleKind::Lexical => true,
            RuleKind::Syntactic | RuleKind::Inline => {
                candidate
                    && (!may_blow_up(&hir, est_size[r])
                        || dfa_fits(&hir, PROMOTION_DFA_LIMIT, PROMOTION_STATE_ESTIMATE))
            }
        };
        promoted[r] = promote;
        rule_hir[r] = Some(hir);
    }
    for (i, rule) in def.rules.iter().enumerate() {
        if rule.kind == RuleKind::Lexical && reachable[i] && !promoted[i] {
            let why = if too_big[i] {
                (
                    format!(
                        "terminal rule `{}` is too large to compile as one regular expression",
                        rule.name
                    ),
                    ErrorKind::Limit,
                )
            } else {
                (
                    format!(
                        "terminal rule `{}` is not regular (it is recursive or refers to a recursive rule)",
                        rule.name
                    ),
                    ErrorKind::Invalid,
                )
            };
            let err = if rule.span.line == 0 {
                GrammarError::whole(why.0)
            } else {
                GrammarError::at(rule.span.line, rule.span.column, why.0)
            };
            return Err(err.with_kind(why.1));
        }
    }
    Ok(Promotion { rule_hir, promoted })
}

/// Whether [`tail_split`] succeeds on `e`, without building the split.
fn is_tail_split(e: &Expr, me: RuleId) -> bool {
    let mentions = |x: &Expr| {
        let mut found = false;
        collect_refs(x, &mut |r| found |= r == me);
        found
    };
    if !mentions(e) {
        return true;
    }
    match e {
        Expr::Ref(r) => *r == me,
        Expr::Alt(v) => v.iter().all(|x| is_tail_split(x, me)),
        // Each alternative `a b`: `me` only as `b`.
        Expr::RefPairs(pairs) => pairs.iter().all(|&[a, _]| a != me),
        Expr::Seq(v) => match v.split_last() {
            Some((last, init)) => !init.iter().any(mentions) && is_tail_split(last, me),
            None => false,
        },
        Expr::Repeat {
            expr,
            min: 0,
            max: Some(1),
        } => is_tail_split(expr, me),
        _ => false,
    }
}

/// Split a rule body that refers to `me` only in tail position into the prefixes α with
/// `α me` an alternative and the bases β without `me`: `L = (α₁|…)* (β₁|…)`. `None` when
/// `me` occurs anywhere else.
fn tail_split(e: &Expr, me: RuleId) -> Option<(Vec<Expr>, Vec<Expr>)> {
    let mentions = |x: &Expr| {
        let mut found = false;
        collect_refs(x, &mut |r| found |= r == me);
        found
    };
    if !mentions(e) {
        return Some((vec![], vec![e.clone()]));
    }
    match e {
        Expr::Ref(r) if *r == me => Some((vec![Expr::Empty], vec![])),
        Expr::Alt(v) => {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for x in v {
                let (xa, xb) = tail_split(x, me)?;
                a.extend(xa);
                b.extend(xb);
            }
            Some((a, b))
        }
        Expr::Seq(v) => {
            let (last, init) = v.split_last()?;
            if init.iter().any(mentions) {
                return None;
            }
            let (la, lb) = tail_split(last, me)?;
            let prefix = |x: Expr| {
                let mut items = init.to_vec();
                items.push(x);
                Expr::Seq(items)
            };
            Some((
                la.into_iter().map(prefix).collect(),
                lb.into_iter().map(prefix).collect(),
            ))
        }
        Expr::RefPairs(pairs) => tail_split(&Expr::ref_pairs_expanded(pairs), me),
        Expr::Repeat {
            expr,
            min: 0,
            max: Some(1),
        } => {
            let (a, mut b) = tail_split(expr, me)?;
            b.push(Expr::Empty);
            Some((a, b))
        }
        _ => None,
    }
}

/// The [`HirFacts`] of a constrained leaf of the [`GrammarDef`], walked once.
fn leaf_facts(h: &Hir, facts: &mut WordHashMap<*const Hir, HirFacts>) -> HirFacts {
    *facts.entry(h as *const Hir).or_insert_with(|| hir_facts(h))
}

/// Estimated HIR size of `e` with references inlined (saturating).
fn expr_size(e: &Expr, sizes: &[usize], facts: &mut WordHashMap<*const Hir, HirFacts>) -> usize {
    match e {
        Expr::Empty | Expr::Bytes(_) => 1,
        Expr::Regex(h) => h.facts().size,
        Expr::Constrained { hir: h, .. } => leaf_facts(h, facts).size,
        Expr::Ref(r) => sizes[r.0 as usize],
        Expr::Seq(v) | Expr::Alt(v) => v.iter().fold(1usize, |acc, x| {
            acc.saturating_add(expr_size(x, sizes, facts))
        }),
        Expr::Repeat { expr, .. } => expr_size(expr, sizes, facts).saturating_add(1),
        // As `Alt([Seq([Ref(a), Ref(b)]), …])`.
        Expr::RefPairs(pairs) => pairs.iter().fold(1usize, |acc, &[a, b]| {
            acc.saturating_add(1)
                .saturating_add(sizes[a.0 as usize])
                .saturating_add(sizes[b.0 as usize])
        }),
    }
}

/// Could `h`'s DFA be large? Counted repetitions (`x{2,50}`) and big expressions can blow
/// up determinisation; plain `*`/`+`/`?` over classes and literals (the usual token rules)
/// stay small, so the (costly) DFA size check is skipped for them.
pub(super) fn may_blow_up(h: &Hir, est_size: usize) -> bool {
    if est_size > 1000 {
        return true;
    }
    let mut stack = vec![h];
    while let Some(h) = stack.pop() {
        match h.kind() {
            HirKind::Repetition(r) => {
                if r.min > 1 || r.max.is_some_and(|m| m > 1) {
                    return true;
                }
                stack.push(&r.sub);
            }
            HirKind::Capture(c) => stack.push(&c.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v.iter()),
            _ => {}
        }
    }
    false
}

/// Estimated HIR nesting depth of `e` with references inlined (saturating).
fn expr_depth(e: &Expr, depths: &[usize], facts: &mut WordHashMap<*const Hir, HirFacts>) -> usize {
    match e {
        Expr::Empty | Expr::Bytes(_) => 1,
        Expr::Regex(h) => h.facts().depth,
        Expr::Constrained { hir: h, .. } => leaf_facts(h, facts).depth,
        Expr::Ref(r) => depths[r.0 as usize],
        Expr::Seq(v) | Expr::Alt(v) => v
            .iter()
            .map(|x| expr_depth(x, depths, facts))
            .max()
            .unwrap_or(0)
            .saturating_add(1),
        Expr::Repeat { expr, .. } => expr_depth(expr, depths, facts).saturating_add(1),
        Expr::RefPairs(pairs) => pairs
            .iter()
            .map(|&[a, b]| depths[a.0 as usize].max(depths[b.0 as usize]))
            .max()
            .unwrap_or(0)
            .saturating_add(2),
    }
}

/// Token-like rule body: every reference names a promoted rule, and no literal of two or
/// more bytes sits at a *structural* position (reachable from the top through sequences,
/// alternatives, groups and `?`, but not through `*`/`+`/counted repetition, where literals
/// such as `"\\u"` are part of a token's spelling).
fn token_like(body: &Expr, refs: &[u32], me: usize, promoted: &[bool]) -> bool {
    // Self references are right-linear here (the rule is regular), so they are fine.
    refs.iter()
        .all(|&r| r as usize == me || promoted[r as usize])
        && !has_structural_keyword(body)
}

fn has_structural_keyword(e: &Expr) -> bool {
    match e {
        Expr::Bytes(b) => b.len() >= 2,
        Expr::Seq(v) | Expr::Alt(v) => v.iter().any(has_structural_keyword),
        Expr::Repeat {
            expr, max: Some(1), ..
        } => has_structural_keyword(expr),
        Expr::Repeat { .. }
        | Expr::Empty
        | Expr::Regex(_)
        | Expr::Constrained { .. }
        | Expr::Ref(_)
        | Expr::RefPairs(_) => false,
    }
}
