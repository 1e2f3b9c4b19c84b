//! TODO(owner): see grammar/mod.rs
use super::{expr::GrammarDef, ir::Grammar, GrammarError};
pub fn lower(_def: &GrammarDef) -> Result<Grammar, GrammarError> { Err(GrammarError::whole("lowering not built yet")) }
