//! TODO(owner): being built.
