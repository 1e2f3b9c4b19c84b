//! TODO(owner): see grammar/mod.rs
use super::{expr::GrammarDef, CompileOptions, GrammarError};
pub fn compile(_schema: &serde_json::Value, _opts: &CompileOptions) -> Result<GrammarDef, GrammarError> { Err(GrammarError::whole("JSON Schema front end not built yet")) }
