//! The `domino` binary: parse arguments, run, print the error once, map it to an exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    domino::cli::main()
}
