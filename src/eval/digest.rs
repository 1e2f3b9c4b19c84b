//! SHA-256 of the files a run depends on (data splits, schema, model), for `run.json`.
//!
//! Why: `--resume` continues a run from its `results.jsonl`; resuming with another data file
//! or model would silently mix two runs in one report. `run.json` therefore records each
//! input's digest, and a resume compares them (see [`super::runner`]). File names are not
//! enough (the same name may hold other data, a model may be re-quantised in place).
//! The digest itself comes from the `sha2` crate.

use sha2::Digest;
use std::io::Read;
use std::path::Path;

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&sha2::Sha256::digest(data))
}

/// Lower-case hex SHA-256 of the file at `path`, read in 1 MiB pieces (models are large).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_test_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn files_hash_like_their_bytes() {
        let path = std::env::temp_dir().join(format!("domino-digest-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let got = sha256_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(got, sha256_hex(&data));
    }
}
