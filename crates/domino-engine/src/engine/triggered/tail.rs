//! A region grammar followed by anything: `S' ::= S | S ANY`, where `ANY` is one or more
//! arbitrary bytes.
//!
//! Why: in `Free` mode a token may end a region in its middle (`}\n` closing a JSON call and
//! starting free text). A constraint over `S'` fed the same region text has, as its mask,
//! every token that stays in the region *or leaves it somewhere inside the token*; minus the
//! region's own mask, that is the short list of tokens that need the exact leave-and-go-on
//! check — at the cost of one more cached mask, instead of a walk over the vocabulary.
//!
//! Compiled once per region grammar and kept (weakly keyed by the grammar) so its trees and
//! masks are shared by every triggered constraint over that grammar.

use super::super::{CompiledGrammar, EngineError};
use crate::grammar::ir::{NonterminalId, Production, Symbol, Terminal, TerminalId};
use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};
use std::sync::{Arc, Mutex, Weak};

type Entry = (Weak<CompiledGrammar>, Arc<CompiledGrammar>);
static CACHE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// `g` with an optional arbitrary tail (see the module doc), memoised per grammar.
pub(crate) fn with_tail(g: &Arc<CompiledGrammar>) -> Result<Arc<CompiledGrammar>, EngineError> {
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache.retain(|(w, _)| w.strong_count() > 0);
    if let Some((_, t)) = cache
        .iter()
        .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(g)))
    {
        return Ok(t.clone());
    }
    let mut ir = g.grammar().clone();
    let any = Hir::repetition(Repetition {
        min: 1,
        max: None,
        greedy: true,
        sub: Box::new(Hir::class(Class::Bytes(ClassBytes::new([
            ClassBytesRange::new(0, 255),
        ])))),
    });
    let any_id = TerminalId(ir.terminals.len() as u32);
    ir.terminals
        .push(Terminal::new("ANY_TAIL".into(), any, None));
    let start = NonterminalId(ir.nonterminals.len() as u32);
    ir.nonterminals.push("region_then_anything".into());
    let old = Symbol::Nonterminal(ir.start);
    ir.productions.push(Production {
        lhs: start,
        rhs: vec![old],
    });
    ir.productions.push(Production {
        lhs: start,
        rhs: vec![old, Symbol::Terminal(any_id)],
    });
    ir.start = start;
    let t = CompiledGrammar::new(ir)?;
    cache.push((Arc::downgrade(g), t.clone()));
    Ok(t)
}
