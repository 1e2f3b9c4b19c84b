//! The grammar IR the engine consumes: BNF productions over regular terminals.
//!
//! [`Grammar`] is produced by [`crate::grammar::lower`] from a front end's
//! [`crate::grammar::expr::GrammarDef`]. It is deliberately small: terminals are byte-level
//! regular languages (`regex-syntax` HIR, compiled to DFAs by [`crate::lexer`]), nonterminals
//! have plain sequences of symbols as productions, and the start symbol is one nonterminal.
//!
//! # Semantics (what the reference recognizer and the engine both implement)
//! `L(G)` is the context-free language obtained by substituting, for every terminal `t`, the
//! language `L(t) \ {ε}` of its regular expression, where `L(t)` is `L(hir)` intersected
//! with every `constraints.and` language and minus every `constraints.and_not` language
//! (JSON Schema's `pattern` with `maxLength`, keys that match a pattern but are no named
//! property: regular, but not writable as one regular expression of reasonable size). Under
//! [`Lexing::Characters`] (GBNF, regex, JSON Schema) there is **no lexer policy**: no maximal
//! munch, no priorities. A byte string is in `L(G)` if *any* split of it into terminal
//! strings is a sentence of the productions. Under [`Lexing::Greedy`] (Lark) only the splits
//! Lark's contextual lexer can produce count (longest match decided by the next byte, string
//! literals before regexes): see [`crate::lexer`] for the precise rule.
//!
//! # Invariants (established by `lower`, relied on by the engine)
//! 1. Every terminal's language contains a non-empty string; `ε` is never a terminal match
//!    (a regular piece that matches `ε` is lowered as an optional symbol instead).
//! 2. Every nonterminal is productive (derives some terminal string) and reachable from
//!    `start`; unproductive and unreachable rules are removed (with warnings).
//! 3. `L(G)` is non-empty (an empty language is a compile error).
//! 4. Productions may be empty (nullable nonterminals), left- or right-recursive, ambiguous.
//! 5. IDs are dense: `TerminalId(i)` indexes `terminals`, `NonterminalId(i)` `nonterminals`.

use regex_syntax::hir::Hir;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TerminalId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NonterminalId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Symbol {
    Terminal(TerminalId),
    Nonterminal(NonterminalId),
}

#[derive(Clone, Debug)]
pub struct Terminal {
    /// A readable name (`"\"{\""` for literals, `STRING`, `rule_name#3` for promoted pieces).
    pub name: String,
    /// The terminal's language (only its non-empty strings count, see the module doc).
    /// Shared with the rule it came from (see [`crate::grammar::expr::Expr::Regex`]).
    pub hir: crate::grammar::regex_hir::RegexHir,
    /// `Some(bytes)` when the language is exactly one string.
    pub literal: Option<Vec<u8>>,
    /// Further languages the terminal's strings must (not) belong to; usually empty.
    pub constraints: Constraints,
    /// `hir.facts().hash` ([`crate::grammar::regex_hir::RegexHir::facts`]), once known
    /// (lowering sets it). A
    /// stale value after `hir` is replaced costs only a cache miss: the terminal-DFA cache
    /// compares HIRs on a hash match.
    pub(crate) hir_hash: std::sync::OnceLock<u64>,
}

/// Intersections and differences on a terminal's language (see the module doc). Both lists
/// empty for every terminal a GBNF or Lark grammar produces.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constraints {
    /// The terminal's strings also match each of these.
    pub and: Vec<Hir>,
    /// The terminal's strings match none of these.
    pub and_not: Vec<Hir>,
}

impl Constraints {
    pub fn is_empty(&self) -> bool {
        self.and.is_empty() && self.and_not.is_empty()
    }
}

impl Terminal {
    /// A terminal without constraints.
    pub fn new(
        name: String,
        hir: impl Into<crate::grammar::regex_hir::RegexHir>,
        literal: Option<Vec<u8>>,
    ) -> Self {
        Terminal {
            name,
            hir: hir.into(),
            literal,
            constraints: Constraints::default(),
            hir_hash: std::sync::OnceLock::new(),
        }
    }

    /// [`crate::grammar::hir_key::hir_hash`] of the terminal's HIR (computed once).
    pub fn hir_hash(&self) -> u64 {
        *self.hir_hash.get_or_init(|| self.hir.facts().hash)
    }
}

#[derive(Clone, Debug)]
pub struct Production {
    pub lhs: NonterminalId,
    pub rhs: Vec<Symbol>,
}

/// How a grammar's text is cut into terminals (see [`crate::lexer`] for the full rule).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Lexing {
    /// No lexer policy (GBNF, regex, JSON Schema; llama.cpp's character-level semantics):
    /// any split of the text into terminal strings counts.
    #[default]
    Characters,
    /// Lark's and llguidance's lexer: a lexeme ends only where the next byte cannot extend
    /// any terminal the parser allows there (longest match, decided by the next byte), and a
    /// string-literal terminal wins a tie against a regex terminal matching the same text.
    Greedy,
}

#[derive(Clone, Debug)]
pub struct Grammar {
    pub terminals: Vec<Terminal>,
    /// Nonterminal names, indexed by `NonterminalId`.
    pub nonterminals: Vec<String>,
    pub productions: Vec<Production>,
    pub start: NonterminalId,
    /// Non-fatal findings of lowering (unreachable rules, …), for `domino grammar check`.
    pub warnings: Vec<String>,
    /// The lexer policy ([`Lexing::Characters`] unless the front end is Lark).
    pub lexing: Lexing,
}

impl Grammar {
    pub fn terminal(&self, id: TerminalId) -> &Terminal {
        &self.terminals[id.0 as usize]
    }

    /// Productions of `lhs`, in definition order.
    pub fn productions_of(&self, lhs: NonterminalId) -> impl Iterator<Item = &Production> {
        self.productions.iter().filter(move |p| p.lhs == lhs)
    }
}
