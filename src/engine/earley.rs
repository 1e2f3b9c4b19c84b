//! Earley parser over the grammar IR's terminals (being built).
