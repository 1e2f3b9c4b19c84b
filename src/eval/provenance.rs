//! Where a run's numbers came from, recorded in `run.json`: the domino commit, the llama.cpp
//! it linked, and the model file's SHA-256. A file name (`SmolLM2-135M-Instruct.Q4_1.gguf`)
//! does not pin a model — the same name is re-quantised and re-uploaded — so a result can
//! only be reproduced, or two runs compared, with the hash.
//!
//! The commit is asked of git at run time in the source tree the binary was built from
//! (`-dirty` when it has uncommitted changes); an installed binary whose tree is gone
//! records `unknown`. Resuming a run checks the model hash (a different model is a different
//! run) but not the commit or the llama.cpp version, which a fix may legitimately change.

use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// A run's provenance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    pub domino_commit: String,
    pub llama_cpp: String,
    /// SHA-256 of the GGUF file, hex; `None` for backends without a model file (tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
}

impl Provenance {
    /// This binary's provenance, with the hash of `model` if given.
    pub fn current(model: Option<&Path>) -> anyhow::Result<Provenance> {
        Ok(Provenance {
            domino_commit: domino_commit(),
            llama_cpp: crate::runtime::LLAMA_CPP_VERSION.to_string(),
            model_sha256: model.map(sha256_file).transpose()?,
        })
    }
}

/// The commit of the source tree this binary was built from (see the module doc).
pub fn domino_commit() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) if !commit.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}-dirty")
            } else {
                commit
            }
        }
        _ => "unknown".to_string(),
    }
}

/// SHA-256 of a file, lower-case hex.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    use anyhow::Context;
    use sha2::Digest;
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("cannot read {} to hash it", path.display()))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_a_known_file() {
        let path = std::env::temp_dir().join(format!("domino-sha-{}", std::process::id()));
        std::fs::write(&path, b"abc").unwrap();
        assert_eq!(
            sha256_file(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn the_commit_is_this_checkouts() {
        let commit = domino_commit();
        // Built from a git checkout: 40 hex digits, perhaps marked dirty.
        let hash = commit.trim_end_matches("-dirty");
        assert_eq!(hash.len(), 40, "{commit}");
        assert!(hash.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
    }
}
