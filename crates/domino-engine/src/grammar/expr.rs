//! The front ends' common output: rules over extended-BNF expressions.
//!
//! Every front end (GBNF, Lark, regex, JSON Schema) parses its input into a [`GrammarDef`]:
//! named rules whose bodies are [`Expr`] trees (sequence, alternation, bounded repetition,
//! byte literals, character classes, arbitrary regular expressions, rule references).
//! [`crate::grammar::lower`] then turns a `GrammarDef` into the engine's
//! [`crate::grammar::ir::Grammar`]: BNF productions over regular terminals.
//!
//! # Invariants
//! - `Expr` trees are at most [`MAX_EXPR_DEPTH`] deep: front ends reject deeper input with a
//!   positioned error, so every recursive walk over an `Expr` is bounded (and dropping one
//!   cannot overflow the stack).
//! - `Ref(r)` always names an existing rule (front ends report undefined names with their
//!   position before building a `GrammarDef`).
//! - Text is bytes: `Bytes` holds UTF-8 of the literal as written; `Class` and `Regex` are
//!   `regex-syntax` HIR, Unicode classes meaning one UTF-8 encoded scalar value.

use crate::grammar::regex_hir::RegexHir;
use regex_syntax::hir::Hir;

/// Expressions nested deeper than this are a grammar error, not a stack overflow.
pub const MAX_EXPR_DEPTH: usize = 512;

/// Index of a rule in [`GrammarDef::rules`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(pub u32);

/// A position in a grammar source text, for error messages (1-based line and column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    pub line: u32,
    pub column: u32,
}

/// How a rule may be lowered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// A parser-level rule. Lowering may still promote its regular parts to terminals.
    Syntactic,
    /// A lexical rule (Lark's UPPERCASE terminals, a JSON string, a number): must be regular
    /// and becomes exactly one terminal wherever it is used.
    Lexical,
    /// A syntactic rule that lowering splices into every sequence that refers to it, as if
    /// its body were written there: a front end's way to share one expression between many
    /// places (a JSON object's member in each of its 2^N member states) without copying it
    /// and without adding a nonterminal level to the parser (an extra level per member made
    /// every Earley set in a member chain twice as large). Its body must not refer to itself.
    /// Elsewhere (not inside a sequence, or promoted) it behaves as [`RuleKind::Syntactic`].
    Inline,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The empty string.
    Empty,
    /// A byte string (UTF-8 of the literal as written).
    Bytes(Vec<u8>),
    /// Any regular language, as `regex-syntax` HIR (classes, `.`, `/re/`, schema patterns).
    /// Must not contain look-around or anchors other than the implicit whole-match.
    /// Shared ([`RegexHir`]): lowering hands a lexical rule's HIR to its terminal without
    /// copying the tree (deep copies and frees of big key-set and format HIRs were a fifth of
    /// compiling a large schema), and a key set's HIR is only built when read.
    Regex(RegexHir),
    /// A regular language given as `hir` ∩ every `and` ∖ every `and_not`: always exactly one
    /// terminal (never merged into a larger regular expression), see
    /// [`crate::grammar::ir::Constraints`]. Boxed: inline, these two made every `Expr`
    /// 96 bytes instead of 32, and a big schema's rules are 100,000+ nodes that lowering walks
    /// several times (rare leaves should not set the size of every node).
    Constrained {
        hir: Box<Hir>,
        constraints: Box<crate::grammar::ir::Constraints>,
    },
    /// A reference to another rule.
    Ref(RuleId),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    /// `min..=max` repetitions (`max: None` = unbounded).
    Repeat {
        expr: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
    /// Alternatives, each two referenced rules in sequence: the language of
    /// `Alt([Seq([Ref(a), Ref(b)]), …])` ([`Expr::ref_pairs_expanded`]), stored flat.
    ///
    /// The JSON Schema front end's member states are this shape (a member, then the next
    /// state), `N·2^(N-1)` alternatives over the states of an object of N members in any
    /// order. As nested vectors each alternative was an allocation to build, to walk in
    /// every pass of lowering, and to free: on the slowest schemas, a large part of the
    /// first request. Never empty (an empty alternation is `Alt(vec![])`).
    RefPairs(Box<[[RuleId; 2]]>),
}

impl Expr {
    /// The same language as [`Expr::RefPairs`]`(pairs)` in nested form, for the walks where
    /// its size does not matter (printing, regular expressions of small rules).
    pub fn ref_pairs_expanded(pairs: &[[RuleId; 2]]) -> Expr {
        Expr::Alt(
            pairs
                .iter()
                .map(|&[a, b]| Expr::Seq(vec![Expr::Ref(a), Expr::Ref(b)]))
                .collect(),
        )
    }
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub name: String,
    pub expr: Expr,
    pub kind: RuleKind,
    /// Where the rule was defined (zero for generated rules).
    pub span: Span,
    /// The JSON pointer of the schema the rule was compiled from (JSON Schema front end),
    /// so an error about the rule can say where it came from.
    /// Shared: every rule compiled from one subschema holds the same pointer (a deep
    /// Kubernetes definition's is 150 bytes, copied for each of thousands of rules before).
    pub pointer: Option<std::sync::Arc<str>>,
}

impl Rule {
    /// Whether the rule stays a terminal of its own: lowering does not inline it into a
    /// bigger terminal (a promoted rule or a regular piece that refers to it is lowered as
    /// structure instead). So is a key set kept as its names ([`RegexHir::key_set`]): its DFA
    /// is its names' trie (`crate::grammar::key_set_dfa`), while a bigger terminal's DFA
    /// would be determinised from the key set's HIR, built for it (on JSONSchemaBench's
    /// slowest schemas, a fifth of lowering).
    pub fn is_standalone(&self) -> bool {
        matches!(&self.expr, Expr::Regex(h) if h.is_key_set())
    }
}

/// A grammar as the front ends produce it.
#[derive(Clone, Debug)]
pub struct GrammarDef {
    pub rules: Vec<Rule>,
    pub start: RuleId,
    /// Lark's `%ignore`: expressions allowed (any number of times) before, between and after
    /// terminals. Lowering compiles them into the grammar; the IR has no ignore concept.
    pub ignore: Vec<Expr>,
    /// Non-fatal findings of the front end (e.g. schema keywords ignored under `--lenient`).
    pub warnings: Vec<String>,
    /// The lexer policy the grammar's language is defined with (Lark: greedy).
    pub lexing: crate::grammar::ir::Lexing,
}
