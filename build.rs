//! Build facts recorded in eval `run.json` files (see `src/eval/runner.rs`, `Provenance`):
//! `DOMINO_COMMIT` (the checkout's `git rev-parse HEAD`, `unknown` without git; the llama.cpp
//! version is `runtime::LLAMA_CPP_VERSION`, checked against `Cargo.lock` by a test). A resumed
//! run compares them, so two builds' results never mix.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=DOMINO_COMMIT={commit}");
    // Rebuild when HEAD moves (a worktree's HEAD and the branch ref it names).
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
        git(&["rev-parse", "--git-path", "packed-refs"]),
    ]
    .into_iter()
    .flatten()
    .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
