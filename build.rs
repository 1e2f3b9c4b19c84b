//! Build facts recorded in eval `run.json` files (see `src/eval/runner.rs`, `Provenance`):
//! `DOMINO_COMMIT` (the checkout's `git rev-parse HEAD`, `unknown` without git) and
//! `DOMINO_LLAMA_CPP` (the `llama-cpp-sys-2` version in `Cargo.lock`, which pins one
//! llama.cpp commit). A resumed run compares them, so two builds' results never mix.

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
    println!("cargo:rerun-if-changed=Cargo.lock");
    let lock = std::fs::read_to_string("Cargo.lock").unwrap_or_default();
    let mut llama = "unknown".to_string();
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == "name = \"llama-cpp-sys-2\"" {
            if let Some(v) = lines.next().and_then(|l| l.strip_prefix("version = ")) {
                llama = format!("llama-cpp-sys-2 {}", v.trim_matches('"'));
            }
            break;
        }
    }
    println!("cargo:rustc-env=DOMINO_LLAMA_CPP={llama}");
}
