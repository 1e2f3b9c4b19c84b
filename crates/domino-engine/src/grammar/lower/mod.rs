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
//!    - [`RuleKind::Lexical`](super::expr::RuleKind::Lexical) (it must then be regular, else an
//!      error), or
//!    - regular and *token-like*: every rule it refers to is promoted, no literal of two or
//!      more bytes sits at a structural position (reachable from the top through sequences,
//!      alternatives, groups and `?` — not inside `*`/`+`/`{m,n}`), and its DFA stays under [`PROMOTION_DFA_LIMIT`] bytes. So `string`,
//!      `number`, `ws`, `identifier`, `[0-9]+` become one terminal each, while a fixed
//!      record like `"{" ws "\"name\":" ws string "}"` stays a sequence at the parser level
//!      (keywords and punctuation are the natural token boundaries). A rule that refers to a
//!      [standalone](super::expr::Rule::is_standalone) rule (a JSON Schema key set whose DFA
//!      is its names' trie) is not token-like: the standalone rule stays a terminal of its
//!      own, and so does it in step 3.
//! 3. **Pieces.** Inside the remaining (syntactic) rules, sequences are split into their
//!    items; an item that is a literal, a class/regex, or an alternation or repetition whose
//!    references all name promoted rules, becomes one terminal. Identical HIR (compared by
//!    its printed form) gives the same `TerminalId`.
//!    A rule whose body is an alternation of [`LITERAL_SET_MIN`] or more literals (a
//!    100,000-word list) is one terminal too, whatever the literals' length: the scanner
//!    and the follow sets then see one trie, not 100,000 terminals.
//! 4. **ε.** A piece whose language contains ε becomes an optional symbol `T?` (a helper
//!    nonterminal `T | ε`); a piece matching only ε disappears; a piece matching nothing
//!    becomes an unproductive symbol (removed in step 7). This keeps IR invariant 1.
//! 5. **Repetition of non-regular things** becomes helper nonterminals: `x{m,n}` is one
//!    production with `m` copies followed by a linear chain of `n-m` optional nonterminals
//!    (`O_k → ε | x O_{k-1}`), `x{m,}` uses a left-recursive star (`S → ε | S x`). Bounds
//!    above [`LINEAR_REPEAT`] are built by doubling instead (`x{m}` from `x^(2^k)` pairs,
//!    `x{0,n}` as `x? (xx){0,n/2}` / `(xx){0,n/2} | x (xx){0,n/2-1}`), so a schema's
//!    `maxItems: 1000000000` or `maxLength: 1e10` costs O(log n) productions, not a
//!    billion: no numeric bound can make lowering grow beyond the grammar's text. Whatever
//!    else could still grow (e.g. `%ignore` doubling) is capped by [`MAX_PRODUCTIONS`],
//!    which fails closed with an error naming the rule. Nullable bodies (`(x?)*`) are fine
//!    for Earley.
//! 6. **`%ignore`.** Promotion of syntactic pieces is off when there is an ignore list
//!    (ignored text may sit between any two terminals, so merging would change the language).
//!    The ignore expressions form one terminal `IGNORE = (i1|i2|…)+` (under greedy Lark
//!    lexing a nonterminal `IGNORE → i_k | IGNORE i_k` over one terminal each instead, as
//!    Lark lexes them one at a time); every
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

mod cleanup;
mod expand;
mod hir;
mod promotion;

use super::GrammarError;
use super::expr::{Expr, GrammarDef, RuleId};
use super::ir::{Grammar, NonterminalId, Production, Symbol};
use cleanup::cleanup;
use expand::Builder;
use hir::{alternation, expr_to_hir, repetition};
pub(crate) use hir::{is_fail, node_is_normalized};
use promotion::{Promotion, promote};

/// Largest HIR (in nodes) that inlining rule references may build.
pub const MAX_INLINE_HIR: usize = 250_000;
/// Deepest HIR that inlining may build: HIR cloning, printing and NFA compilation recurse,
/// so a long chain of nested regular rules stays a chain of nonterminals instead.
pub const MAX_INLINE_DEPTH: usize = 200;
/// Largest dense DFA (bytes) for an optional promotion; bigger rules are split instead.
pub const PROMOTION_DFA_LIMIT: usize = 2 << 20;
/// Largest [`crate::grammar::dfa::state_estimate`] of an optional promotion: bigger pieces are
/// split without determinising them. Terminal DFAs are built lazily, but lowering's size
/// check builds them whole; on JSONSchemaBench the pieces estimated over 2,048 states were
/// 23 of 264 checks and 1.27 s of their 1.5 s (the exact check refused 47 of them anyway).
pub const PROMOTION_STATE_ESTIMATE: usize = 2048;
/// Repetition bounds up to this are spelled out (copies and a linear chain of optional
/// nonterminals, as before); larger ones are built by doubling (O(log n) productions).
pub const LINEAR_REPEAT: usize = 64;
/// A rule body that is an alternation of at least this many literals becomes one terminal
/// (the literals' trie) instead of one terminal per literal.
pub const LITERAL_SET_MIN: usize = 256;
/// The most productions lowering may create: a grammar that needs more is refused with an
/// error naming the rule (fail closed, never an allocation failure).
pub const MAX_PRODUCTIONS: usize = 4_000_000;

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

/// Lower `def` to the IR.
pub fn lower_with(def: &GrammarDef, opts: &LowerOptions) -> Result<Grammar, GrammarError> {
    // With `%ignore`, ignored text may appear between any two terminals, so merging a
    // syntactic sequence or repetition into one terminal would forbid it there: only lexical
    // rules and leaves become terminals then.
    // Under greedy (Lark) lexing the terminals ARE the lexer's lexemes: merging pieces into
    // longer terminals would change where lexemes end, so nothing is promoted either.
    let opts = &LowerOptions {
        promote: opts.promote
            && def.ignore.is_empty()
            && def.lexing == crate::grammar::ir::Lexing::Characters,
    };
    let mut warnings = def.warnings.clone();
    let n = def.rules.len();

    // The rules each rule refers to (sorted, distinct), once: reachability and promotion
    // both need them (each walked every rule body again, 4 % of compiling a big schema).
    let refs = RuleRefs::new(def);
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
            stack.extend(refs.row(r.0 as usize).iter().map(|&x| RuleId(x)));
        }
    }
    // Only rules the user wrote (they have a source position) are worth a warning: the
    // JSON Schema front end's generated rules (`members-223`) left over from a discarded
    // branch mean nothing to its user (a large schema gave hundreds of such warnings).
    for (i, rule) in def.rules.iter().enumerate() {
        if !reachable[i] && rule.span.line != 0 {
            warnings.push(format!(
                "rule `{}` is not reachable from the start rule and is ignored",
                rule.name
            ));
        }
    }

    let Promotion { rule_hir, promoted } = promote(def, opts, &reachable, &refs, &mut warnings)?;

    let mut b = Builder::new(def, opts, &rule_hir, &promoted);
    // Nonterminals for the user's non-promoted reachable rules (in definition order, so the
    // IR's names follow the source).
    // (An inline rule gets one only if something refers to it other than by splicing it into
    // a sequence: `Builder::ref_symbol` makes it then. A JSON Schema object's members are
    // inline rules, two per member, always spliced: their own nonterminals and productions
    // were built only for cleanup to drop them.)
    for (i, rule) in def.rules.iter().enumerate() {
        if reachable[i] && !promoted[i] && (!b.is_spliced(i) || i == def.start.0 as usize) {
            b.rule_nt[i] = Some(b.new_nt(rule.name.clone()));
        }
    }
    for (i, rule) in def.rules.iter().enumerate() {
        if let Some(nt) = b.rule_nt[i] {
            crate::grammar::budget_over("the lowered grammar")?;
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
                    rule_hir[id.0 as usize].as_deref().cloned()
                } else {
                    None
                }
            };
            match expr_to_hir(e, &lookup) {
                Some(h) => alts.push(h),
                None => return Err(GrammarError::whole("%ignore expressions must be regular")),
            }
        }
        let mut ign_prods: Vec<NonterminalId> = Vec::new();
        let ign_sym = if def.lexing == crate::grammar::ir::Lexing::Greedy {
            // Greedy (Lark) lexing: each ignore expression stays its own terminal, as Lark
            // lexes them one by one (one merged `(WS|COMMENT)+` terminal would read ` /`
            // after a space as the start of a comment and never end the space before `/`).
            let nt = b.new_nt("IGNORE".into());
            ign_prods.push(nt);
            let mut any = false;
            for (i, h) in alts.into_iter().enumerate() {
                if let Some(sym) = b.piece(h.into(), &format!("IGNORE{}", i + 1), false) {
                    any = true;
                    b.productions.push(Production {
                        lhs: nt,
                        rhs: vec![sym],
                    });
                    b.productions.push(Production {
                        lhs: nt,
                        rhs: vec![Symbol::Nonterminal(nt), sym],
                    });
                }
            }
            any.then_some(Symbol::Nonterminal(nt))
        } else {
            b.piece(
                repetition(alternation(alts), 1, None).into(),
                "IGNORE",
                false,
            )
        };
        if let Some(ign_sym) = ign_sym {
            let ign_opt = b.nt_opt_of(ign_sym);
            if let Symbol::Nonterminal(nt) = ign_opt {
                ign_prods.push(nt);
            }
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

    crate::budget::check("the lowered grammar")?;
    let Builder {
        terminals,
        nonterminals,
        productions,
        ..
    } = b;
    let lowered = cleanup(
        Grammar {
            terminals,
            nonterminals,
            productions,
            start,
            warnings,
            lexing: def.lexing,
        },
        def,
    );
    // Every rule's HIR (each promoted rule's is copied into its parents'):
    // tens of thousands of nodes on a big schema, freed off this thread.
    crate::grammar::free_later(rule_hir, def.rules.len());
    lowered
}

/// The rules each rule of a [`GrammarDef`] refers to, sorted and distinct, as rows of one
/// array. (A vector per rule, copied again by promotion and transposed into another vector
/// per rule, was three allocations per rule: the slowest schemas have tens of thousands of
/// rules, and allocating was a fifth of lowering them.)
pub(super) struct RuleRefs {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl RuleRefs {
    fn new(def: &GrammarDef) -> Self {
        let mut start = Vec::with_capacity(def.rules.len() + 1);
        start.push(0);
        let mut items = Vec::with_capacity(2 * def.rules.len());
        for rule in &def.rules {
            let from = items.len();
            collect_refs(&rule.expr, &mut |r| items.push(r.0));
            items[from..].sort_unstable();
            // Distinct, in place.
            let mut kept = from;
            for i in from..items.len() {
                if kept == from || items[kept - 1] != items[i] {
                    items[kept] = items[i];
                    kept += 1;
                }
            }
            items.truncate(kept);
            start.push(items.len() as u32);
        }
        RuleRefs { start, items }
    }

    /// The rules rule `r` refers to, sorted and distinct.
    pub(super) fn row(&self, r: usize) -> &[u32] {
        &self.items[self.start[r] as usize..self.start[r + 1] as usize]
    }
}

/// Every rule referenced in `e` (bounded recursion: `Expr` depth is bounded).
fn collect_refs(e: &Expr, f: &mut impl FnMut(RuleId)) {
    match e {
        Expr::Ref(r) => f(*r),
        Expr::Seq(v) | Expr::Alt(v) => v.iter().for_each(|x| collect_refs(x, f)),
        Expr::RefPairs(pairs) => pairs.iter().flatten().for_each(|&r| f(r)),
        Expr::Repeat { expr, .. } => collect_refs(expr, f),
        Expr::Empty | Expr::Bytes(_) | Expr::Regex(_) | Expr::Constrained { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::gbnf;
    use crate::grammar::reference::ReferenceRecognizer;

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

    /// `root ::= x{min,max}` over a recursive `x ::= "(" root ")" | "a"`, with bounds beyond
    /// what GBNF's parser accepts.
    fn repeat_def(min: u32, max: Option<u32>) -> GrammarDef {
        let mut def =
            gbnf::parse("root ::= x{1,2}\nx ::= \"(\" root \")\" | \"a\"", "root").unwrap();
        let root = def.start.0 as usize;
        let Expr::Repeat { min: m, max: x, .. } = &mut def.rules[root].expr else {
            panic!("{:?}", def.rules[root].expr)
        };
        (*m, *x) = (min, max);
        def
    }

    #[test]
    fn huge_bounds_lower_logarithmically() {
        // A billion items or a 4-billion-long minimum: a few dozen productions each.
        for (min, max) in [
            (0, Some(999_999_999)),
            (1_000_000_000, None),
            (4_000_000_000, Some(4_000_000_000)),
            (7, Some(u32::MAX)),
        ] {
            let g = lower(&repeat_def(min, max)).unwrap();
            assert!(
                g.productions.len() < 400,
                "{min} {max:?}: {}",
                g.productions.len()
            );
        }
        let g = lower_gbnf("root ::= (\"a\"{0,100000}){0,100000}");
        assert!(g.productions.len() < 400, "{}", g.productions.len());
    }

    #[test]
    fn doubled_repeats_keep_the_language() {
        // Every count of `x` in and around the bounds, through the reference recognizer.
        for (lo, hi) in [
            (0u32, 65u32),
            (0, 66),
            (0, 131),
            (3, 100),
            (70, 70),
            (65, 200),
            (67, u32::MAX),
        ] {
            let max = if hi == u32::MAX {
                String::new()
            } else {
                hi.to_string()
            };
            let g = lower_gbnf(&format!(
                "root ::= x{{{lo},{max}}}\nx ::= \"(\" root \")\" | \"a\""
            ));
            let r = ReferenceRecognizer::new(&g).unwrap();
            let top = if hi == u32::MAX { lo + 70 } else { hi + 3 };
            for n in 0..=top {
                let s = "a".repeat(n as usize);
                assert_eq!(
                    r.accepts(s.as_bytes()),
                    n >= lo && n <= hi,
                    "x{{{lo},{max}}} on {n}"
                );
            }
        }
    }

    #[test]
    fn many_literal_alternatives_are_one_terminal() {
        let words: Vec<String> = (0..1000).map(|i| format!("\"w{i}x\"")).collect();
        let g = lower_gbnf(&format!("root ::= {}", words.join(" | ")));
        assert_eq!(g.terminals.len(), 1);
        let r = ReferenceRecognizer::new(&g).unwrap();
        assert!(r.accepts(b"w0x") && r.accepts(b"w999x") && !r.accepts(b"w1000x"));
        // Fewer than LITERAL_SET_MIN: one terminal each, as before.
        let g = lower_gbnf("root ::= \"ab\" | \"cd\"");
        assert_eq!(g.terminals.len(), 2);
    }

    #[test]
    fn unreachable_rules_warn() {
        let g = lower_gbnf("root ::= \"a\"\nunused ::= \"b\"");
        assert!(g.warnings.iter().any(|w| w.contains("unused")));
        // A generated rule (no source position, e.g. a JSON Schema front end's member
        // state left from a discarded branch) is dropped without a warning.
        let mut def = gbnf::parse("root ::= \"a\"\nunused ::= \"b\"", "root").unwrap();
        for r in &mut def.rules {
            r.span = crate::grammar::expr::Span::default();
        }
        let g = lower(&def).unwrap();
        assert!(g.warnings.is_empty(), "{:?}", g.warnings);
    }

    /// Every alternation of two-reference sequences in `e` as [`Expr::RefPairs`] (the
    /// alternatives that are pairs, the others kept around them).
    fn to_ref_pairs(e: &mut Expr) {
        match e {
            Expr::Alt(v) => {
                v.iter_mut().for_each(to_ref_pairs);
                let pair = |x: &Expr| match x {
                    Expr::Seq(s) => match s.as_slice() {
                        [Expr::Ref(a), Expr::Ref(b)] => Some([*a, *b]),
                        _ => None,
                    },
                    _ => None,
                };
                let pairs: Vec<[RuleId; 2]> = v.iter().filter_map(pair).collect();
                if pairs.is_empty() {
                    return;
                }
                let rest: Vec<Expr> = v.drain(..).filter(|x| pair(x).is_none()).collect();
                let refs = Expr::RefPairs(pairs.into());
                *e = if rest.is_empty() {
                    refs
                } else {
                    Expr::Alt(std::iter::once(refs).chain(rest).collect())
                };
            }
            Expr::Seq(v) => v.iter_mut().for_each(to_ref_pairs),
            Expr::Repeat { expr, .. } => to_ref_pairs(expr),
            _ => {}
        }
    }

    /// The IR with everything that tells two lowerings apart: productions, names, terminals.
    fn ir_text(g: &Grammar) -> String {
        let terminals: Vec<_> = g
            .terminals
            .iter()
            .map(|t| (&t.name, t.hir.to_string(), &t.literal))
            .collect();
        format!(
            "{:?} {:?} {:?} {:?}",
            g.productions, g.nonterminals, terminals, g.start
        )
    }

    #[test]
    fn ref_pairs_lower_exactly_as_their_alternation() {
        // Pairs as a rule body, beside other alternatives, nested in a sequence and in a
        // repetition, with inline, syntactic and promoted (regular) references, and a
        // right-recursive pair (promoted as `(a b)* c`).
        let text = r#"root ::= s1 | "[" (x y | y x) "]" | ("<" (x z | z z) ">")* | tail
s1 ::= m1 s2 | m2 s2 | "e"
s2 ::= m2 end | m1 end
end ::= "}"
m1 ::= "\"a\":" x
m2 ::= "\"b\":" y
x ::= "1" | "2" root
y ::= [0-9]+
z ::= [a-z]
tail ::= y tail | z tail | "."
"#;
        let base = gbnf::parse(text, "root").unwrap();
        for inline in [false, true] {
            let mut def = base.clone();
            if inline {
                for r in &mut def.rules {
                    if r.name.starts_with('m') {
                        r.kind = crate::grammar::expr::RuleKind::Inline;
                    }
                }
            }
            let want = lower(&def).unwrap();
            let mut compact = def.clone();
            compact
                .rules
                .iter_mut()
                .for_each(|r| to_ref_pairs(&mut r.expr));
            let used = compact
                .rules
                .iter()
                .filter(|r| {
                    let mut found = false;
                    let mut stack = vec![&r.expr];
                    while let Some(e) = stack.pop() {
                        match e {
                            Expr::RefPairs(_) => found = true,
                            Expr::Seq(v) | Expr::Alt(v) => stack.extend(v),
                            Expr::Repeat { expr, .. } => stack.push(expr),
                            _ => {}
                        }
                    }
                    found
                })
                .count();
            assert_eq!(used, 4, "rules with pairs: root, s1, s2, tail");
            let got = lower(&compact).unwrap();
            assert_eq!(ir_text(&got), ir_text(&want), "inline members: {inline}");
            // And the printed grammar reads the same.
            assert_eq!(
                crate::grammar::print::to_gbnf(&compact).ok(),
                crate::grammar::print::to_gbnf(&def).ok()
            );
        }
    }

    #[test]
    fn an_inline_rule_used_as_a_nonterminal_gets_one_on_demand() {
        // `m` is spliced into sequences and alternatives, and used as a whole under a
        // repetition (`m*`: its nonterminal is made then, its body lowered then).
        let mut def = gbnf::parse(
            "root ::= m \"-\" n* \"-\" k m*\nn ::= m | \"z\"\nk ::= \"(\" m \")\" k | \"!\"\nm ::= \"a\" root? \"b\" | \"c\"",
            "root",
        )
        .unwrap();
        for r in &mut def.rules {
            if r.name == "m" {
                r.kind = crate::grammar::expr::RuleKind::Inline;
            }
        }
        let g = lower(&def).unwrap();
        let r = ReferenceRecognizer::new(&g).unwrap();
        for (text, want) in [
            ("c--!", true),
            ("ab--(c)!", true),
            ("ab-", false),
            ("ac--!b--!", true),
            ("c-zcz-(c)(c)!", true),
            ("c-zacb-!", false),
            ("c-a c-- ! b-!", false),
            ("c-ac--!b-!", true),
            ("c--(ac--!b)!", true),
            ("c--(a)!", false),
            ("c--!cabc", true),
            ("c--!ac--!b", true),
            ("c--!ab--!b", false),
            ("c--!a", false),
        ] {
            assert_eq!(r.accepts(text.as_bytes()), want, "{text}");
        }
    }
}
