//! The `domino` binary: parse arguments, run, print the error once, map it to an exit code.

use std::process::ExitCode;

/// Counts each thread's allocations so compile budgets can measure memory (`domino::memory`).
#[global_allocator]
static ALLOCATOR: domino::memory::CountingAllocator = domino::memory::CountingAllocator;

fn main() -> ExitCode {
    domino::memory::install();
    domino::cli::main()
}
