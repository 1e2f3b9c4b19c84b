//! The count-based draft model (DOMINO §3.6) lives in the engine crate
//! ([`crate::engine::drafts`]): it knows nothing of llama.cpp, and there the fuzz crate's
//! `files` target can feed its file format. Re-exported here, where the decode loop uses it.

pub use crate::engine::drafts::*;
