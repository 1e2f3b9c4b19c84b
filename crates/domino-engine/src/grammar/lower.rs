//! Lowering: a front end's [`GrammarDef`] (rules over extended-BNF expressions) into the
//! engine's [`Grammar`] (BNF productions over regular terminals).
//!
//! # What it does
//! 1. **Regular rules.** A rule is *regular* when it reaches no cycle of rule references;
//!    its body then has an equivalent regular expression (references inlined as HIR), unless
//!    that HIR would exceed [`MAX_INLINE_HIR`] nodes or [`MAX_INLINE_DEPTH`] levels. A rule whose only cycle is a reference
//!    to itself in tail position (`ws ::= ([ \t\n] ws)?`) is regular too:
//!    `R = α R | β` has the language `α* β`.
//! 2. **Promotion** (the engine's speed depends on it: fewer, longer terminals). A rule
//!    becomes ONE terminal, used wherever the rule is referenced, when it is
//!    - [`RuleKind::Lexical`] (it must then be regular, else an error), or
//!    - regular and *token-like*: every rule it refers to is promoted, no literal of two or
//!      more bytes sits at a structural position (reachable from the top through sequences,
//!      alternatives, groups and `?` — not inside `*`/`+`/`{m,n}`), and its DFA stays under [`PROMOTION_DFA_LIMIT`] bytes. So `string`,
//!      `number`, `ws`, `identifier`, `[0-9]+` become one terminal each, while a fixed
//!      record like `"{" ws "\"name\":" ws string "}"` stays a sequence at the parser level
//!      (keywords and punctuation are the natural token boundaries).
//! 3. **Pieces.** Inside the remaining (syntactic) rules, sequences are split into their
//!    items; an item that is a literal, a class/regex, or an alternation or repetition whose
//!    references all name promoted rules, becomes one terminal. Identical HIR (compared by
//!    its printed form) gives the same `TerminalId`.
//! 4. **ε.** A piece whose language contains ε becomes an optional symbol `T?` (a helper
//!    nonterminal `T | ε`); a piece matching only ε disappears; a piece matching nothing
//!    becomes an unproductive symbol (removed in step 7). This keeps IR invariant 1.
//! 5. **Repetition of non-regular things** becomes helper nonterminals: `x{m,n}` is one
//!    production with `m` copies followed by a linear chain of `n-m` optional nonterminals
//!    (`O_k → ε | x O_{k-1}`), `x{m,}` uses a left-recursive star (`S → ε | S x`). Sizes
//!    stay linear in the bounds; nullable bodies (`(x?)*`) are fine for Earley.
//! 6. **`%ignore`.** Promotion of syntactic pieces is off when there is an ignore list
//!    (ignored text may sit between any two terminals, so merging would change the language).
//!    The ignore expressions form one terminal `IGNORE = (i1|i2|…)+`; every
//!    terminal occurrence `T` becomes `T IGNORE?` and the start becomes `IGNORE? start`,
//!    which allows any number of ignored strings before, between and after terminals.
//! 7. **Cleanup.** Unit rules `N → X` (N's only production) are inlined. Unproductive and unreachable nonterminals are removed (warnings name the
//!    user's rules); unused terminals are dropped and IDs made dense; an empty language is an
//!    error.
//!
//! # Why the language is unchanged
//! Each step is a textbook language-preserving rewrite: inlining a non-recursive rule into
//! a regular expression is substitution; a terminal `T` stands for `L(T) \ {ε}` so `T?` has
//! exactly `L(T)`; helper nonterminals spell out `Seq`/`Alt`/`Repeat` by definition; removing
//! useless symbols does not change the derivable strings. The tests check this two ways:
//! the data-driven suites (`tests/cases/*`) run accept/reject strings through the
//! reference recognizer, and `tests/grammar_lowering.rs` compares the promoted lowering with
//! [`LowerOptions::promote`] = `false` (classes and literals only) on every string up to a
//! length over the grammar's alphabet.

use super::expr::{Expr, GrammarDef, RuleId, RuleKind};
use super::ir::{Constraints, Grammar, NonterminalId, Production, Symbol, Terminal, TerminalId};
use super::{ErrorKind, GrammarError};
use regex_automata::dfa::dense;
use regex_automata::nfa::thompson;
use regex_automata::{MatchKind, dfa::StartKind};
use regex_syntax::hir::{Hir, HirKind, Repetition};
use std::collections::HashMap;

/// Largest HIR (in nodes) that inlining rule references may build.
pub const MAX_INLINE_HIR: usize = 250_000;
/// Deepest HIR that inlining may build: HIR cloning, printing and NFA compilation recurse,
/// so a long chain of nested regular rules stays a chain of nonterminals instead.
pub const MAX_INLINE_DEPTH: usize = 200;
/// Largest dense DFA (bytes) for an optional promotion; bigger rules are split instead.
pub const PROMOTION_DFA_LIMIT: usize = 2 << 20;

/// Lowering knobs (the defaults are what the engine wants).
#[derive(Clone, Debug)]
pub struct LowerOptions {
    /// Promote token-like regular rules and regular sub-expressions to single terminals.
    /// With `false`, only literals, classes/regexes and lexical rules are terminals (used by
    /// tests to check that promotion does not change the language).
    pub promote: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions { promote: true }
    }
}

/// Lower with the default options.
pub fn lower(def: &GrammarDef) -> Result<Grammar, GrammarError> {
    lower_with(def, &LowerOptions::default())
}

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

/// Lower `def` to the IR.
pub fn lower_with(def: &GrammarDef, opts: &LowerOptions) -> Result<Grammar, GrammarError> {
    // With `%ignore`, ignored text may appear between any two terminals, so merging a
    // syntactic sequence or repetition into one terminal would forbid it there: only lexical
    // rules and leaves become terminals then.
    let opts = &LowerOptions {
        promote: opts.promote && def.ignore.is_empty(),
    };
    let mut warnings = def.warnings.clone();
    let n = def.rules.len();

    // Rules reachable from the start (or from the ignore expressions).
    let mut reachable = vec![false; n];
    {
        let mut stack = vec![def.start];
        for e in &def.ignore {
            collect_refs(e, &mut |r| stack.push(r));
        }
        while let Some(r) = stack.pop() {
            if std::mem::replace(&mut reachable[r.0 as usize], true) {
                continue;
            }
            collect_refs(&def.rules[r.0 as usize].expr, &mut |x| stack.push(x));
        }
    }
    for (i, rule) in def.rules.iter().enumerate() {
        if !reachable[i] {
            warnings.push(format!(
                "rule `{}` is not reachable from the start rule and is ignored",
                rule.name
            ));
        }
    }

    // 1. Regular rules in topological order (Kahn over "references").
    let mut refs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, rule) in def.rules.iter().enumerate() {
        collect_refs(&rule.expr, &mut |r| refs[i].push(r.0 as usize));
        refs[i].sort_unstable();
        refs[i].dedup();
    }
    // Right-linear self recursion (`ws ::= ([ \t\n] ws)?`, `digits ::= [0-9] digits | [0-9]`)
    // is still regular: R = α₁ R | … | β₁ | … has the language (α₁|…)* (β₁|…).
    let mut tail_rec: Vec<Option<(Vec<Expr>, Vec<Expr>)>> = vec![None; n];
    for (i, rule) in def.rules.iter().enumerate() {
        if refs[i].binary_search(&i).is_ok() {
            if let Some(split) = tail_split(&rule.expr, RuleId(i as u32)) {
                tail_rec[i] = Some(split);
                refs[i].retain(|&r| r != i);
            }
        }
    }
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut pending: Vec<usize> = refs.iter().map(|r| r.len()).collect();
    for (i, rs) in refs.iter().enumerate() {
        for &r in rs {
            users[r].push(i);
        }
    }
    let mut order: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
    let mut k = 0;
    while k < order.len() {
        let r = order[k];
        k += 1;
        for &u in &users[r] {
            pending[u] -= 1;
            if pending[u] == 0 {
                order.push(u);
            }
        }
    }
    // rule_hir[r]: the rule's regular expression (inlined), for regular rules small enough.
    let mut rule_hir: Vec<Option<Hir>> = vec![None; n];
    let mut promoted = vec![false; n];
    let mut too_big = vec![false; n];
    // Estimated inlined size per rule, computed before building anything (inlining can
    // grow exponentially: `a ::= b b`, `b ::= c c`, ...).
    let mut est_size = vec![usize::MAX; n];
    let mut est_depth = vec![usize::MAX; n];
    for &r in &order {
        if tail_rec[r].is_some() {
            est_size[r] = 1; // its self references
            est_depth[r] = 1;
        }
        est_size[r] = expr_size(&def.rules[r].expr, &est_size);
        est_depth[r] = expr_depth(&def.rules[r].expr, &est_depth).saturating_add(2);
    }
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
                stack.extend(refs[r].iter().copied());
            }
        }
    }
    for &r in &order {
        let rule = &def.rules[r];
        let candidate = rule.kind == RuleKind::Syntactic
            && opts.promote
            && token_like(&rule.expr, RuleId(r as u32), &promoted);
        if !candidate && !lexical_reach[r] {
            continue;
        }
        if est_size[r] > MAX_INLINE_HIR || est_depth[r] > MAX_INLINE_DEPTH {
            too_big[r] = true;
            continue;
        }
        let hir = {
            let lookup = |id: RuleId| rule_hir[id.0 as usize].clone();
            match &tail_rec[r] {
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
        };
        let Some(hir) = hir else {
            too_big[r] = true;
            continue;
        };
        if is_fail(&hir) && reachable[r] {
            warnings.push(format!(
                "rule `{}` derives no string (it never terminates)",
                rule.name
            ));
        }
        let promote = match rule.kind {
            RuleKind::Lexical => true,
            RuleKind::Syntactic => {
                candidate
                    && (!may_blow_up(&hir, est_size[r])
                        || build_dfa(&hir, Some(PROMOTION_DFA_LIMIT)).is_ok())
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

    let mut b = Builder {
        def,
        opts,
        rule_hir: &rule_hir,
        promoted: &promoted,
        terminals: Vec::new(),
        terminal_index: HashMap::new(),
        nonterminals: Vec::new(),
        productions: Vec::new(),
        rule_nt: vec![None; n],
        opt_cache: HashMap::new(),
        star_cache: HashMap::new(),
        fail_nt: None,
        piece_counter: vec![0; n],
        dfa_ok: HashMap::new(),
    };
    // Nonterminals for the user's non-promoted reachable rules (in definition order, so the
    // IR's names follow the source).
    for (i, rule) in def.rules.iter().enumerate() {
        if reachable[i] && !promoted[i] {
            b.rule_nt[i] = Some(b.new_nt(rule.name.clone()));
        }
    }
    for (i, rule) in def.rules.iter().enumerate() {
        if let Some(nt) = b.rule_nt[i] {
            b.lower_rule_body(nt, &rule.expr, i)?;
        }
    }
    let start_idx = def.start.0 as usize;
    let mut start = match b.rule_nt[start_idx] {
        Some(nt) => nt,
        None => {
            // A promoted start rule: wrap its terminal in a nonterminal.
            let nt = b.new_nt(def.rules[start_idx].name.clone());
            let hir = rule_hir[start_idx]
                .clone()
                .expect("promoted rules have HIR");
            let sym = b.piece(hir, &def.rules[start_idx].name.clone(), true);
            b.productions.push(Production {
                lhs: nt,
                rhs: sym.into_iter().collect(),
            });
            nt
        }
    };

    // 6. %ignore.
    if !def.ignore.is_empty() {
        let mut alts = Vec::new();
        for e in &def.ignore {
            let lookup = |id: RuleId| {
                if promoted[id.0 as usize] {
                    rule_hir[id.0 as usize].clone()
                } else {
                    None
                }
            };
            match expr_to_hir(e, &lookup) {
                Some(h) => alts.push(h),
                None => return Err(GrammarError::whole("%ignore expressions must be regular")),
            }
        }
        let ign = repetition(alternation(alts), 1, None);
        if let Some(ign_sym) = b.piece(ign, "IGNORE", false) {
            let ign_opt = b.nt_opt_of(ign_sym);
            let ign_prods: Vec<NonterminalId> = match ign_opt {
                Symbol::Nonterminal(nt) => vec![nt],
                Symbol::Terminal(_) => vec![],
            };
            for p in b.productions.iter_mut() {
                if ign_prods.contains(&p.lhs) {
                    continue;
                }
                let mut rhs = Vec::with_capacity(p.rhs.len() * 2);
                for &s in &p.rhs {
                    rhs.push(s);
                    if matches!(s, Symbol::Terminal(_)) {
                        rhs.push(ign_opt);
                    }
                }
                p.rhs = rhs;
            }
            let new_start = b.new_nt(format!("{}#ignore", def.rules[start_idx].name));
            b.productions.push(Production {
                lhs: new_start,
                rhs: vec![ign_opt, Symbol::Nonterminal(start)],
            });
            start = new_start;
        }
    }

    let Builder {
        terminals,
        nonterminals,
        productions,
        ..
    } = b;
    cleanup(
        Grammar {
            terminals,
            nonterminals,
            productions,
            start,
            warnings,
        },
        def,
    )
}

/// Every rule referenced in `e` (bounded recursion: `Expr` depth is bounded).
fn collect_refs(e: &Expr, f: &mut impl FnMut(RuleId)) {
    match e {
        Expr::Ref(r) => f(*r),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| collect_refs(x, f)),
        Expr::Repeat { expr, .. } => collect_refs(expr, f),
        Expr::Empty | Expr::Bytes(_) | Expr::Regex(_) | Expr::Constrained { .. } => {}
    }
}

/// The HIR of `e`, with references resolved by `lookup` (`None` if some reference has none).
/// The result is *normalized* (see [`normalize`]).
fn expr_to_hir(e: &Expr, lookup: &impl Fn(RuleId) -> Option<Hir>) -> Option<Hir> {
    Some(match e {
        Expr::Empty => Hir::empty(),
        Expr::Bytes(b) => Hir::literal(b.clone()),
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
    })
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
fn is_epsilon_only(h: &Hir) -> bool {
    h.properties().maximum_len() == Some(0)
}

fn concat(v: Vec<Hir>) -> Hir {
    if v.iter().any(is_fail) {
        return Hir::fail();
    }
    Hir::concat(
        v.into_iter()
            .filter(|h| !matches!(h.kind(), HirKind::Empty))
            .collect(),
    )
}

fn alternation(v: Vec<Hir>) -> Hir {
    Hir::alternation(v.into_iter().filter(|h| !is_fail(h)).collect())
}

fn repetition(sub: Hir, min: u32, max: Option<u32>) -> Hir {
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
pub(crate) fn normalize(h: &Hir) -> Hir {
    match h.kind() {
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) | HirKind::Look(_) => h.clone(),
        HirKind::Capture(c) => normalize(&c.sub),
        HirKind::Repetition(r) => repetition(normalize(&r.sub), r.min, r.max),
        HirKind::Concat(v) => concat(v.iter().map(normalize).collect()),
        HirKind::Alternation(v) => alternation(v.iter().map(normalize).collect()),
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

/// Estimated HIR size of `e` with references inlined (saturating).
fn expr_size(e: &Expr, sizes: &[usize]) -> usize {
    match e {
        Expr::Empty | Expr::Bytes(_) => 1,
        Expr::Regex(h) | Expr::Constrained { hir: h, .. } => hir_size(h),
        Expr::Ref(r) => sizes[r.0 as usize],
        Expr::Seq(v) | Expr::Alt(v) => v
            .iter()
            .fold(1usize, |acc, x| acc.saturating_add(expr_size(x, sizes))),
        Expr::Repeat { expr, .. } => expr_size(expr, sizes).saturating_add(1),
    }
}

/// Could `h`'s DFA be large? Counted repetitions (`x{2,50}`) and big expressions can blow
/// up determinisation; plain `*`/`+`/`?` over classes and literals (the usual token rules)
/// stay small, so the (costly) DFA size check is skipped for them.
fn may_blow_up(h: &Hir, est_size: usize) -> bool {
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
fn expr_depth(e: &Expr, depths: &[usize]) -> usize {
    match e {
        Expr::Empty | Expr::Bytes(_) => 1,
        Expr::Regex(h) | Expr::Constrained { hir: h, .. } => hir_depth(h),
        Expr::Ref(r) => depths[r.0 as usize],
        Expr::Seq(v) | Expr::Alt(v) => v
            .iter()
            .map(|x| expr_depth(x, depths))
            .max()
            .unwrap_or(0)
            .saturating_add(1),
        Expr::Repeat { expr, .. } => expr_depth(expr, depths).saturating_add(1),
    }
}

/// Nesting depth of a HIR (iterative).
fn hir_depth(h: &Hir) -> usize {
    let mut stack = vec![(h, 1usize)];
    let mut max = 0;
    while let Some((h, d)) = stack.pop() {
        max = max.max(d);
        match h.kind() {
            HirKind::Repetition(r) => stack.push((&r.sub, d + 1)),
            HirKind::Capture(c) => stack.push((&c.sub, d + 1)),
            HirKind::Concat(v) | HirKind::Alternation(v) => {
                stack.extend(v.iter().map(|x| (x, d + 1)))
            }
            _ => {}
        }
    }
    max
}

/// Number of HIR nodes (iterative).
fn hir_size(h: &Hir) -> usize {
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

/// Token-like rule body: every reference names a promoted rule, and no literal of two or
/// more bytes sits at a *structural* position (reachable from the top through sequences,
/// alternatives, groups and `?`, but not through `*`/`+`/counted repetition, where literals
/// such as `"\\u"` are part of a token's spelling).
fn token_like(body: &Expr, me: RuleId, promoted: &[bool]) -> bool {
    let mut all_refs_promoted = true;
    // Self references are right-linear here (the rule is regular), so they are fine.
    collect_refs(body, &mut |r| {
        all_refs_promoted &= r == me || promoted[r.0 as usize]
    });
    all_refs_promoted && !has_structural_keyword(body)
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
        | Expr::Ref(_) => false,
    }
}

struct Builder<'a> {
    def: &'a GrammarDef,
    opts: &'a LowerOptions,
    rule_hir: &'a [Option<Hir>],
    promoted: &'a [bool],
    terminals: Vec<Terminal>,
    /// Printed HIR -> terminal (deduplication).
    terminal_index: HashMap<String, TerminalId>,
    nonterminals: Vec<String>,
    productions: Vec<Production>,
    rule_nt: Vec<Option<NonterminalId>>,
    opt_cache: HashMap<Symbol, Symbol>,
    star_cache: HashMap<Symbol, NonterminalId>,
    fail_nt: Option<NonterminalId>,
    piece_counter: Vec<u32>,
    /// Printed HIR -> whether its DFA stays under the promotion limit.
    dfa_ok: HashMap<String, bool>,
}

impl<'a> Builder<'a> {
    fn new_nt(&mut self, name: String) -> NonterminalId {
        let id = NonterminalId(self.nonterminals.len() as u32);
        self.nonterminals.push(name);
        id
    }

    fn helper_name(&mut self, rule: usize, what: &str) -> String {
        self.piece_counter[rule] += 1;
        format!(
            "{}#{what}{}",
            self.def.rules[rule].name, self.piece_counter[rule]
        )
    }

    fn intern(&mut self, hir: Hir, name: &str) -> TerminalId {
        let key = hir.to_string();
        if let Some(&t) = self.terminal_index.get(&key) {
            return t;
        }
        let id = TerminalId(self.terminals.len() as u32);
        let literal = match hir.kind() {
            HirKind::Literal(l) => Some(l.0.to_vec()),
            _ => None,
        };
        let name = match &literal {
            Some(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
            None => name.to_string(),
        };
        self.terminals.push(Terminal::new(name, hir, literal));
        self.terminal_index.insert(key, id);
        id
    }

    /// A terminal with constraints (the front end has checked that its language holds a
    /// non-empty string and no `ε`), deduplicated like [`Builder::intern`].
    fn intern_constrained(&mut self, hir: Hir, constraints: Constraints, name: &str) -> TerminalId {
        if constraints.is_empty() {
            return self.intern(hir, name);
        }
        let mut key = hir.to_string();
        for h in &constraints.and {
            key.push_str(&format!("\u{0}&{h}"));
        }
        for h in &constraints.and_not {
            key.push_str(&format!("\u{0}!{h}"));
        }
        if let Some(&t) = self.terminal_index.get(&key) {
            return t;
        }
        let id = TerminalId(self.terminals.len() as u32);
        self.terminals.push(Terminal {
            name: name.to_string(),
            hir,
            literal: None,
            constraints,
        });
        self.terminal_index.insert(key, id);
        id
    }

    /// `sym?` as a symbol (a cached helper nonterminal `sym | ε`).
    fn nt_opt_of(&mut self, sym: Symbol) -> Symbol {
        if let Some(&s) = self.opt_cache.get(&sym) {
            return s;
        }
        let name = match sym {
            Symbol::Terminal(t) => format!("{}?", self.terminals[t.0 as usize].name),
            Symbol::Nonterminal(n) => format!("{}?", self.nonterminals[n.0 as usize]),
        };
        let nt = self.new_nt(name);
        self.productions.push(Production {
            lhs: nt,
            rhs: vec![sym],
        });
        self.productions.push(Production {
            lhs: nt,
            rhs: vec![],
        });
        let s = Symbol::Nonterminal(nt);
        self.opt_cache.insert(sym, s);
        s
    }

    /// A nonterminal with no productions (a piece whose language is empty).
    fn fail(&mut self) -> Symbol {
        let nt = match self.fail_nt {
            Some(nt) => nt,
            None => {
                let nt = self.new_nt("#empty-language".into());
                self.fail_nt = Some(nt);
                nt
            }
        };
        Symbol::Nonterminal(nt)
    }

    /// A regular piece as a symbol: `None` = ε only; optional wrapper when nullable.
    fn piece(&mut self, hir: Hir, name: &str, _top: bool) -> Option<Symbol> {
        if is_fail(&hir) {
            return Some(self.fail());
        }
        let props = hir.properties();
        let min = props
            .minimum_len()
            .expect("normalized, non-failing HIR has a minimum length");
        if props.maximum_len() == Some(0) {
            return None;
        }
        let t = Symbol::Terminal(self.intern(hir, name));
        Some(if min == 0 { self.nt_opt_of(t) } else { t })
    }

    /// May `hir` become one terminal? Pieces that could determinise badly are checked
    /// against [`PROMOTION_DFA_LIMIT`] (cached per distinct HIR).
    fn small_enough(&mut self, hir: &Hir) -> bool {
        let size = hir_size(hir);
        if !may_blow_up(hir, size) {
            return true;
        }
        let key = hir.to_string();
        if let Some(&ok) = self.dfa_ok.get(&key) {
            return ok;
        }
        let ok = size <= MAX_INLINE_HIR && build_dfa(hir, Some(PROMOTION_DFA_LIMIT)).is_ok();
        self.dfa_ok.insert(key, ok);
        ok
    }

    /// Is `e` a regular piece (every reference names a promoted rule)? Its HIR if so.
    fn piece_hir(&self, e: &Expr) -> Option<Hir> {
        let leaf = matches!(e, Expr::Bytes(_) | Expr::Regex(_) | Expr::Empty);
        if !self.opts.promote && !leaf {
            return None;
        }
        let lookup = |id: RuleId| {
            if self.promoted[id.0 as usize] {
                self.rule_hir[id.0 as usize].clone()
            } else {
                None
            }
        };
        expr_to_hir(e, &lookup)
    }

    fn lower_rule_body(
        &mut self,
        nt: NonterminalId,
        body: &Expr,
        rule: usize,
    ) -> Result<(), GrammarError> {
        let alts: &[Expr] = match body {
            Expr::Alt(v) => v,
            e => std::slice::from_ref(e),
        };
        for alt in alts {
            let rhs = self.lower_seq(alt, rule)?;
            self.productions.push(Production { lhs: nt, rhs });
        }
        Ok(())
    }

    /// The symbols of one alternative (sequences flattened).
    fn lower_seq(&mut self, e: &Expr, rule: usize) -> Result<Vec<Symbol>, GrammarError> {
        let items: &[Expr] = match e {
            Expr::Seq(v) => v,
            e => std::slice::from_ref(e),
        };
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if let Expr::Seq(_) = item {
                out.extend(self.lower_seq(item, rule)?);
            } else if let Some(s) = self.lower_item(item, rule)? {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// One item as a symbol (`None` = ε).
    fn lower_item(&mut self, e: &Expr, rule: usize) -> Result<Option<Symbol>, GrammarError> {
        match e {
            Expr::Empty => return Ok(None),
            Expr::Bytes(b) if b.is_empty() => return Ok(None),
            Expr::Ref(r) if !self.promoted[r.0 as usize] => {
                return Ok(Some(Symbol::Nonterminal(
                    self.rule_nt[r.0 as usize].expect("reachable rule has a nonterminal"),
                )));
            }
            Expr::Ref(r) => {
                let hir = self.rule_hir[r.0 as usize]
                    .clone()
                    .expect("promoted rules have HIR");
                let name = self.def.rules[r.0 as usize].name.clone();
                return Ok(self.piece(hir, &name, false));
            }
            Expr::Constrained { hir, constraints } => {
                let name = self.helper_name(rule, "t");
                return Ok(Some(Symbol::Terminal(self.intern_constrained(
                    normalize(hir),
                    constraints.clone(),
                    &name,
                ))));
            }
            Expr::Seq(_) => {}
            _ => {
                if let Some(hir) = self.piece_hir(e) {
                    if self.small_enough(&hir) {
                        let name = self.helper_name(rule, "t");
                        return Ok(self.piece(hir, &name, false));
                    }
                    // Too big a DFA as one terminal (e.g. `number*` with counted parts):
                    // lower the structure instead.
                }
            }
        }
        match e {
            Expr::Seq(_) => {
                let rhs = self.lower_seq(e, rule)?;
                let name = self.helper_name(rule, "seq");
                let nt = self.new_nt(name);
                self.productions.push(Production { lhs: nt, rhs });
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Alt(v) => {
                let name = self.helper_name(rule, "alt");
                let nt = self.new_nt(name);
                for alt in v {
                    let rhs = self.lower_seq(alt, rule)?;
                    self.productions.push(Production { lhs: nt, rhs });
                }
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Repeat { expr, min, max } => {
                let Some(inner) = self.lower_item(expr, rule)? else {
                    return Ok(None);
                };
                if *max == Some(0) {
                    return Ok(None);
                }
                let name = self.helper_name(rule, "rep");
                let mut rhs = vec![inner; *min as usize];
                match max {
                    None => {
                        let star = self.star_of(inner, &name);
                        rhs.push(Symbol::Nonterminal(star));
                    }
                    Some(max) => {
                        // Linear chain: O_k → ε | inner O_{k-1}; O_1 → ε | inner.
                        let mut tail: Option<Symbol> = None;
                        for k in 1..=(max - min) {
                            let o = self.new_nt(format!("{name}.opt{k}"));
                            self.productions.push(Production {
                                lhs: o,
                                rhs: vec![],
                            });
                            let mut r = vec![inner];
                            r.extend(tail);
                            self.productions.push(Production { lhs: o, rhs: r });
                            tail = Some(Symbol::Nonterminal(o));
                        }
                        rhs.extend(tail);
                    }
                }
                if *min == 0 && rhs.len() == 1 {
                    // `x*` / `x{0,n}`: the star or chain itself, no unit rule around it.
                    return Ok(rhs.pop());
                }
                let nt = self.new_nt(name);
                self.productions.push(Production { lhs: nt, rhs });
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Empty
            | Expr::Bytes(_)
            | Expr::Regex(_)
            | Expr::Constrained { .. }
            | Expr::Ref(_) => {
                unreachable!("handled above")
            }
        }
    }

    /// `S → ε | S sym` (left recursion: cheap for Earley), cached per symbol.
    fn star_of(&mut self, sym: Symbol, name: &str) -> NonterminalId {
        if let Some(&s) = self.star_cache.get(&sym) {
            return s;
        }
        let s = self.new_nt(format!("{name}*"));
        self.productions.push(Production {
            lhs: s,
            rhs: vec![],
        });
        self.productions.push(Production {
            lhs: s,
            rhs: vec![Symbol::Nonterminal(s), sym],
        });
        self.star_cache.insert(sym, s);
        s
    }
}

/// Replace every nonterminal `N` (other than the start) whose only production is `N → X`
/// by `X` (Earley then predicts and completes one item less per use). `N`'s production
/// stays behind, unreachable, for the cleanup to remove. Cycles of unit rules (which
/// derive nothing) are left alone.
fn inline_unit_rules(productions: &mut [Production], nn: usize, start: NonterminalId) {
    let mut count = vec![0u32; nn];
    for p in productions.iter() {
        count[p.lhs.0 as usize] += 1;
    }
    let mut unit: Vec<Option<Symbol>> = vec![None; nn];
    for p in productions.iter() {
        if p.lhs != start
            && count[p.lhs.0 as usize] == 1
            && p.rhs.len() == 1
            && p.rhs[0] != Symbol::Nonterminal(p.lhs)
        {
            unit[p.lhs.0 as usize] = Some(p.rhs[0]);
        }
    }
    let resolve = |mut s: Symbol| {
        for _ in 0..nn {
            match s {
                Symbol::Nonterminal(n) => match unit[n.0 as usize] {
                    Some(next) => s = next,
                    None => return s,
                },
                Symbol::Terminal(_) => return s,
            }
        }
        s // a cycle of unit rules: unproductive, removed later
    };
    for p in productions.iter_mut() {
        for s in p.rhs.iter_mut() {
            *s = resolve(*s);
        }
    }
}

/// Step 7: drop unproductive and unreachable symbols, renumber densely, check non-emptiness.
fn cleanup(g: Grammar, def: &GrammarDef) -> Result<Grammar, GrammarError> {
    let Grammar {
        terminals,
        nonterminals,
        mut productions,
        start,
        mut warnings,
    } = g;
    let nn = nonterminals.len();
    inline_unit_rules(&mut productions, nn, start);
    // Productive: worklist over "nonterminal occurrences not yet known productive" per
    // production (linear time; a fixpoint loop is quadratic on long helper chains).
    let mut productive = vec![false; nn];
    {
        let mut missing: Vec<usize> = Vec::with_capacity(productions.len());
        let mut occurs_in: Vec<Vec<usize>> = vec![Vec::new(); nn];
        let mut queue: Vec<NonterminalId> = Vec::new();
        for (i, p) in productions.iter().enumerate() {
            let mut count = 0;
            for s in &p.rhs {
                if let Symbol::Nonterminal(n) = s {
                    occurs_in[n.0 as usize].push(i);
                    count += 1;
                }
            }
            missing.push(count);
            if count == 0 && !productive[p.lhs.0 as usize] {
                productive[p.lhs.0 as usize] = true;
                queue.push(p.lhs);
            }
        }
        while let Some(n) = queue.pop() {
            for &pi in &occurs_in[n.0 as usize] {
                missing[pi] -= 1;
                let lhs = productions[pi].lhs;
                if missing[pi] == 0 && !productive[lhs.0 as usize] {
                    productive[lhs.0 as usize] = true;
                    queue.push(lhs);
                }
            }
        }
    }
    if !productive[start.0 as usize] {
        return Err(GrammarError::whole(format!(
            "the grammar's language is empty: the start rule `{}` derives no string",
            def.rules[def.start.0 as usize].name
        )));
    }
    let user_rule: std::collections::HashSet<&str> =
        def.rules.iter().map(|r| r.name.as_str()).collect();
    for (i, name) in nonterminals.iter().enumerate() {
        if !productive[i] && user_rule.contains(name.as_str()) {
            warnings.push(format!(
                "rule `{name}` derives no string (it never terminates) and is removed"
            ));
        }
    }
    let kept: Vec<&Production> = productions
        .iter()
        .filter(|p| {
            productive[p.lhs.0 as usize]
                && p.rhs.iter().all(|s| match s {
                    Symbol::Terminal(_) => true,
                    Symbol::Nonterminal(n) => productive[n.0 as usize],
                })
        })
        .collect();
    // Reachable from start.
    let mut by_lhs: Vec<Vec<usize>> = vec![Vec::new(); nn];
    for (i, p) in kept.iter().enumerate() {
        by_lhs[p.lhs.0 as usize].push(i);
    }
    let mut reach = vec![false; nn];
    let mut term_used = vec![false; terminals.len()];
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut reach[n.0 as usize], true) {
            continue;
        }
        for &pi in &by_lhs[n.0 as usize] {
            for s in &kept[pi].rhs {
                match s {
                    Symbol::Terminal(t) => term_used[t.0 as usize] = true,
                    Symbol::Nonterminal(m) => stack.push(*m),
                }
            }
        }
    }
    let mut nt_map = vec![u32::MAX; nn];
    let mut new_nts = Vec::new();
    for (i, name) in nonterminals.into_iter().enumerate() {
        if reach[i] {
            nt_map[i] = new_nts.len() as u32;
            new_nts.push(name);
        }
    }
    let mut t_map = vec![u32::MAX; terminals.len()];
    let mut new_ts = Vec::new();
    for (i, t) in terminals.into_iter().enumerate() {
        if term_used[i] {
            t_map[i] = new_ts.len() as u32;
            new_ts.push(t);
        }
    }
    let new_prods = kept
        .into_iter()
        .filter(|p| reach[p.lhs.0 as usize])
        .map(|p| Production {
            lhs: NonterminalId(nt_map[p.lhs.0 as usize]),
            rhs: p
                .rhs
                .iter()
                .map(|s| match s {
                    Symbol::Terminal(t) => Symbol::Terminal(TerminalId(t_map[t.0 as usize])),
                    Symbol::Nonterminal(n) => {
                        Symbol::Nonterminal(NonterminalId(nt_map[n.0 as usize]))
                    }
                })
                .collect(),
        })
        .collect();
    Ok(Grammar {
        terminals: new_ts,
        nonterminals: new_nts,
        productions: new_prods,
        start: NonterminalId(nt_map[start.0 as usize]),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::gbnf;

    fn lower_gbnf(text: &str) -> Grammar {
        lower(&gbnf::parse(text, "root").unwrap()).unwrap()
    }

    #[test]
    fn json_string_and_number_become_one_terminal_each() {
        let g = lower_gbnf(
            r#"root ::= "{" ws "\"a\"" ws ":" ws (string | number) ws "}"
string ::= "\"" ([^"\\] | "\\" ["\\nt])* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \t\n]*"#,
        );
        let names: Vec<&str> = g.terminals.iter().map(|t| t.name.as_str()).collect();
        assert!(names.contains(&"ws"), "{names:?}");
        // `(string | number)` is one piece over promoted rules.
        assert_eq!(g.terminals.len(), 6, "{names:?}");
        assert_eq!(g.productions_of(g.start).count(), 1);
    }

    #[test]
    fn identical_pieces_share_a_terminal() {
        let g = lower_gbnf("root ::= \"a\" x \"a\" x\nx ::= [0-9] | \"q\" root");
        assert_eq!(
            g.terminals
                .iter()
                .filter(|t| t.literal.as_deref() == Some(b"a"))
                .count(),
            1
        );
    }

    #[test]
    fn empty_language_is_an_error() {
        let def = gbnf::parse("root ::= \"a\" root", "root").unwrap();
        assert!(lower(&def).unwrap_err().message.contains("empty"));
    }

    #[test]
    fn right_recursive_whitespace_is_one_terminal() {
        let g = lower_gbnf("root ::= \"ab\" ws \"cd\"\nws ::= ([ \\t\\n] ws)?");
        assert_eq!(g.terminals.len(), 3, "{:?}", g.terminals);
        let g = lower_gbnf("root ::= d\nd ::= [0-9] d | [0-9]");
        assert_eq!(g.terminals.len(), 1);
    }

    #[test]
    fn big_bounded_repeat_is_linear() {
        let g = lower_gbnf("root ::= x{0,5000}\nx ::= \"(\" root \")\" | \"a\"");
        assert!(g.productions.len() < 20_000);
    }

    #[test]
    fn unreachable_rules_warn() {
        let g = lower_gbnf("root ::= \"a\"\nunused ::= \"b\"");
        assert!(g.warnings.iter().any(|w| w.contains("unused")));
    }
}
