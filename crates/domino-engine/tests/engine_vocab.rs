//! Vocabularies from real `tokenizer.json` files decode to exact bytes.
//!
//! Reads /work/shared/tokenizers (../shared/tokenizers from the repo root); fails loudly when
//! the files are missing.

mod common;

use domino_engine::vocab::{TokenId, Vocabulary, tokenizer_json};
use std::path::PathBuf;

fn tokenizer_path(name: &str) -> PathBuf {
    common::shared(&format!("tokenizers/{name}"))
}

fn load(name: &str) -> (Vocabulary, tokenizers::Tokenizer) {
    let p = tokenizer_path(name);
    (
        tokenizer_json::load(&p).unwrap(),
        tokenizers::Tokenizer::from_file(&p).unwrap(),
    )
}

/// Every non-special token whose bytes are valid UTF-8 decodes (with `tokenizers`) to exactly
/// those bytes.
fn check_decodes_like_tokenizers(v: &Vocabulary, tok: &tokenizers::Tokenizer) -> usize {
    let mut checked = 0;
    for (id, bytes) in v.text_tokens() {
        if let Ok(s) = std::str::from_utf8(bytes) {
            let d = tok.decode(&[id.0], false).unwrap();
            assert_eq!(d, s, "token {} decodes differently", id.0);
            checked += 1;
        }
    }
    checked
}

#[test]
fn smollm2_byte_level_vocabulary() {
    let (v, tok) = load("SmolLM2-135M-Instruct.tokenizer.json");
    assert_eq!(v.len(), 49152);
    // <|endoftext|> and <|im_end|> end generation; <|im_start|> is special.
    assert!(v.is_eog(TokenId(0)) && v.is_eog(TokenId(2)));
    assert!(v.is_special(TokenId(1)) && !v.is_eog(TokenId(1)));
    let checked = check_decodes_like_tokenizers(&v, &tok);
    assert!(checked > 45_000, "{checked}");
    // Partial UTF-8: some tokens are not valid UTF-8 on their own (byte-level BPE splits
    // multi-byte characters), and every printable ASCII byte and every non-ASCII byte is a
    // token on its own (0xC0, 0xC1 never occur in UTF-8; 4-byte leads above 0xF0 are absent here).
    assert!(
        v.text_tokens()
            .any(|(_, b)| std::str::from_utf8(b).is_err())
    );
    for b in (0x20..=0x7eu8).chain(0x80..=0xbf).chain(0xc2..=0xf0) {
        assert!(
            v.text_tokens().any(|(_, t)| t == [b]),
            "no token for byte {b}"
        );
    }
    // Round trip through the attached tokenizer.
    let ids = v.tokenize("{\"name\": \"Ünïcode\", \"n\": 12}").unwrap();
    let bytes: Vec<u8> = ids.iter().flat_map(|&t| v.bytes(t).to_vec()).collect();
    assert_eq!(bytes, "{\"name\": \"Ünïcode\", \"n\": 12}".as_bytes());
}

#[test]
fn gemma_sentencepiece_vocabulary() {
    let (v, tok) = load("gemma-3-270m.tokenizer.json");
    assert!(v.len() > 262_000);
    // <eos> (1) and <end_of_turn> end generation; <bos>, <pad> are special.
    assert!(v.is_eog(TokenId(1)));
    let eot = tok.token_to_id("<end_of_turn>").unwrap();
    assert!(v.is_eog(TokenId(eot)));
    assert!(v.is_special(TokenId(0)) && v.is_special(TokenId(2)));
    // Byte-fallback tokens are single bytes.
    let nl = tok.token_to_id("<0x0A>").unwrap();
    assert_eq!(v.bytes(TokenId(nl)), b"\n");
    let e2 = tok.token_to_id("<0xE2>").unwrap();
    assert_eq!(v.bytes(TokenId(e2)), [0xE2]);
    // ▁ is a space.
    let the = tok.token_to_id("▁the").unwrap();
    assert_eq!(v.bytes(TokenId(the)), b" the");
    let checked = check_decodes_like_tokenizers(&v, &tok);
    assert!(checked > 250_000, "{checked}");
    let text = "{\"a\": [1, 2.5e3, true], \"b\": \"x y\"}\n";
    let ids = v.tokenize(text).unwrap();
    let bytes: Vec<u8> = ids.iter().flat_map(|&t| v.bytes(t).to_vec()).collect();
    assert_eq!(bytes, text.as_bytes());
}
