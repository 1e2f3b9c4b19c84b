//! TODO(owner): see grammar/mod.rs
use super::{expr::GrammarDef, GrammarError};
pub fn parse(_text: &str, _start: &str) -> Result<GrammarDef, GrammarError> { Err(GrammarError::whole("GBNF front end not built yet")) }
