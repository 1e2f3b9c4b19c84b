//! Greedy lexing: where a lexeme may end under [`crate::grammar::ir::Lexing::Greedy`]
//! (Lark grammars).
//!
//! # The rule (design note)
//! GBNF keeps llama.cpp's character-level semantics: any split of the text into terminal
//! strings counts ([`crate::grammar::ir::Lexing::Characters`]). A Lark grammar's language is
//! defined through a lexer instead. We use llguidance's end rule on Lark's standard ("basic")
//! lexer, which lexes without looking at the parser:
//!
//! 1. **Longest match, decided by the next byte.** After the bytes `w` of a lexeme
//!    (scanner state `q`), the lexeme may end before the next byte `b` only when no terminal
//!    of the grammar is live after `w·b` (`q` has no transition on `b`). At the end of the
//!    text (EOS) it may always end. A token that ends inside a lexeme that could still grow
//!    keeps both possibilities open: the next byte decides, nothing is committed early.
//! 2. **Ties.** When several terminals accept `w`, a string-literal terminal beats a regex
//!    terminal (Lark's `_create_unless`: the keyword `"int"` over `IDENT` on the text `int`);
//!    among terminals of the same kind each may be the lexeme (the Earley parser keeps every
//!    reading, as llguidance does). Lark's terminal priorities (`NAME.2`) are refused by the
//!    front end ([`crate::grammar::lark`]), so they never need ranking.
//! 3. The lexeme is then one of those terminals, the parser must accept it, and the next
//!    lexeme starts at [`Scanner::START`]. `%ignore` text is lexed the same way (lowering
//!    writes `T IGNORE?` after every terminal, so it is only ever between lexemes).
//!
//! So `start: decl+  decl: type_spec IDENT ";"  type_spec: "int" | "float"` with
//! `IDENT: /[a-zA-Z_][a-zA-Z0-9_]*/` rejects `intx;` (`int` cannot end before `x`: `IDENT`
//! still grows, and the lexeme `intx` is an `IDENT`, not a type) and `intint;`, accepts
//! `int x;`, and rejects `int int;` (the literal `"int"` wins the tie, as in Lark).
//!
//! Differences from Lark, on purpose: no backtracking to an earlier accepting position (Lark's
//! regex alternation would; llguidance does not), and no contextual lexer (Lark's LALR default
//! restricts the terminals to those the parser accepts, which accepts `intx;` as `int x;` —
//! the very ambiguity this rule exists to remove).
//!
//! Prefix viability (what a mask allows): the text so far lexes by the rule above into
//! lexemes the parser accepts, and the lexeme in progress can still become a terminal the
//! parser expects. Like llguidance this does not look further ahead: a grammar whose greedy
//! lexing paints itself into a corner (`start: A "a"` with `A: /a+/`) gets masks that allow
//! the dead end (EOS is still only allowed on a sentence, so outputs stay sound).
//!
//! The rule is parser-independent, so the engine applies it where bytes are stepped: in
//! configuration steps (`commit`), in one token's walk (`allows`), and when building
//! subterminal trees (a boundary is simply not recorded where [`Scanner::may_end`] says no;
//! trees are built per scanner state, since the decision depends on every terminal of the
//! state, see [`crate::engine::tree`]). The reference recognizer re-implements it
//! independently ([`crate::grammar::reference::GreedyReference`]).

use super::{DEAD, ScanState, Scanner};
use crate::grammar::ir::TerminalId;

impl Scanner {
    /// Whether the grammar is lexed greedily ([`crate::grammar::ir::Lexing::Greedy`]).
    #[inline]
    pub fn is_greedy(&self) -> bool {
        self.literal.is_some()
    }

    /// Whether terminal `t` is a string literal (wins ties against regexes under greedy
    /// lexing).
    #[inline]
    pub fn is_literal(&self, t: TerminalId) -> bool {
        self.literal
            .as_ref()
            .is_some_and(|l| l.get(t.0 as usize).copied().unwrap_or(false))
    }

    /// May the lexeme in state `q` (which accepts `t`) end as terminal `t` before byte
    /// `next` (`None`: at the end of the text)? Always true under character-level lexing.
    /// See the module doc for the rule.
    #[inline]
    pub fn may_end(&self, q: ScanState, t: TerminalId, next: Option<u8>) -> bool {
        if !self.is_greedy() {
            return true;
        }
        if let Some(b) = next {
            if self.next(q, b) != DEAD {
                return false;
            }
        }
        self.is_literal(t) || !self.accepting(q).iter().any(|&u| self.is_literal(u))
    }
}
