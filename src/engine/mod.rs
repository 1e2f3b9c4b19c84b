//! The DOMINO constraint engine (being built).
pub mod earley;
