//! TODO(owner): see grammar/mod.rs
