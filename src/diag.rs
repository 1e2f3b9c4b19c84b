//! The ground floor: errors that choose exit codes, and logging to stderr.
//!
//! Every layer (runtime, decode, eval, repl, serve, cli) may use this module; it uses none
//! of them. The binary prints an error once, at the top, and maps it to an exit code with
//! [`exit_code_for`]: 2 for usage and grammar errors, 3 for output the constraint did not
//! finish ([`Incomplete`], only under `--strict`), 1 for everything else.

use std::sync::atomic::{AtomicU8, Ordering};

/// A usage error: bad flags, arguments or request options detected after parsing (exit
/// code 2, HTTP 400).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Constrained output cut short (by the token limit) before the grammar was complete, made
/// an error by `--strict` (exit code 3), so that a script can tell "the model ran out of
/// tokens" from "the run failed" and from "bad flags".
#[derive(Debug)]
pub struct Incomplete(pub String);

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Incomplete {}

/// Exit code of [`Incomplete`].
pub const EXIT_INCOMPLETE: u8 = 3;

/// Exit code for an error: 2 for usage and grammar errors, 3 for [`Incomplete`] output, 1
/// for everything else.
pub fn exit_code_for(err: &anyhow::Error) -> u8 {
    if is_usage_error(err) {
        2
    } else if err.chain().any(|c| c.is::<Incomplete>()) {
        EXIT_INCOMPLETE
    } else {
        1
    }
}

/// Whether any cause in the chain is the caller's fault (a [`UsageError`] or a
/// [`GrammarError`](crate::grammar::GrammarError)) rather than the machine's.
pub fn is_usage_error(err: &anyhow::Error) -> bool {
    err.chain()
        .any(|c| c.is::<UsageError>() || c.is::<crate::grammar::GrammarError>())
}

/// Logging verbosity chosen with `-v`, readable from anywhere.
static VERBOSITY: AtomicU8 = AtomicU8::new(0);

/// The current verbosity (0 = warnings only, 1 = `-v`, 2 = `-vv`).
pub fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Set the verbosity (the binary does this once, from `-v`).
pub fn set_verbosity(level: u8) {
    VERBOSITY.store(level, Ordering::Relaxed);
}

/// Log a line to stderr when `-v` was given at least `level` times.
#[macro_export]
macro_rules! log {
    ($level:expr, $($arg:tt)*) => {
        if $crate::diag::verbosity() >= $level {
            eprintln!($($arg)*);
        }
    };
}
