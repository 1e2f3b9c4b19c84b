//! Load a [`Vocabulary`] from a Hugging Face `tokenizer.json` (the `tokenizers` crate).
//!
//! # What
//! Every token id gets its **exact bytes**, as the model would emit them:
//! - byte-level BPE (GPT-2 style, decoder `ByteLevel`): each character of the token string
//!   stands for one byte through GPT-2's byte↔unicode table (printable bytes map to
//!   themselves, the other 68 to U+0100…); a token containing a character outside that table
//!   is taken as its raw UTF-8, as the `tokenizers` decoder does;
//! - SentencePiece-style (any other decoder, e.g. Gemma's `Replace ▁→' '`, `ByteFallback`):
//!   `<0xNN>` is the single byte `NN`, and `▁` (U+2581) becomes a space;
//! - added tokens flagged `special` (BOS, `<|im_start|>`, `<unusedN>`, …) are special: never
//!   produced by a grammar. Non-special added tokens are text like any other.
//!
//! # End of generation
//! `tokenizer.json` has no generation config, so the EOG ids are the added tokens whose
//! content is one of [`EOG_NAMES`] (`<|im_end|>`, `<|endoftext|>`, `</s>`, `<eos>`,
//! `<end_of_turn>`, `<|eot_id|>`, `<|end|>`, `<|end_of_text|>`): every such token present
//! counts (llama.cpp also treats all of them as end-of-generation). A model loaded from GGUF
//! gets its EOG ids from the model instead (the `domino` crate's `runtime` module).
//!
//! The returned vocabulary carries a [`Tokenize`] implementation (encoding without special
//! tokens added) for benchmarks and templates.

use super::{TokenId, Tokenize, Vocabulary};
use anyhow::Context;
use std::path::Path;

/// Added-token names taken as end of generation (see the module doc).
pub const EOG_NAMES: &[&str] = &[
    "<|im_end|>",
    "<|endoftext|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
    "<|eot_id|>",
    "<|end|>",
    "<|end_of_text|>",
];

/// How token strings map to bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenEncoding {
    /// GPT-2 byte-level BPE.
    ByteLevel,
    /// SentencePiece pieces: `▁` is a space, `<0xNN>` a byte.
    SentencePiece,
}

struct HfTokenizer(tokenizers::Tokenizer);

impl Tokenize for HfTokenizer {
    fn tokenize(&self, text: &str) -> anyhow::Result<Vec<TokenId>> {
        let enc = self
            .0
            .encode(text, false)
            .map_err(|e| anyhow::anyhow!("tokenizer failed: {e}"))?;
        Ok(enc.get_ids().iter().map(|&i| TokenId(i)).collect())
    }
}

/// GPT-2's table: unicode character → byte.
fn gpt2_char_to_byte() -> std::collections::HashMap<char, u8> {
    let mut map = std::collections::HashMap::new();
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable =
            (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
        let c = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(256 + n).expect("valid scalar");
            n += 1;
            c
        };
        map.insert(c, b);
    }
    map
}

/// Decode one token string to bytes under `encoding`.
pub fn token_bytes(
    piece: &str,
    encoding: TokenEncoding,
    table: &std::collections::HashMap<char, u8>,
) -> Vec<u8> {
    match encoding {
        TokenEncoding::ByteLevel => {
            let mut out = Vec::with_capacity(piece.len());
            for c in piece.chars() {
                match table.get(&c) {
                    Some(&b) => out.push(b),
                    None => return piece.as_bytes().to_vec(),
                }
            }
            out
        }
        TokenEncoding::SentencePiece => {
            if piece.len() == 6 && piece.starts_with("<0x") && piece.ends_with('>') {
                if let Ok(b) = u8::from_str_radix(&piece[3..5], 16) {
                    return vec![b];
                }
            }
            piece.replace('\u{2581}', " ").into_bytes()
        }
    }
}

/// Load a vocabulary (with tokenizer attached) from a `tokenizer.json` file.
pub fn load(path: &Path) -> anyhow::Result<Vocabulary> {
    let tok = tokenizers::Tokenizer::from_file(path)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("cannot load tokenizer {}", path.display()))?;
    from_tokenizer(tok)
}

/// Build a vocabulary from a loaded tokenizer.
pub fn from_tokenizer(tok: tokenizers::Tokenizer) -> anyhow::Result<Vocabulary> {
    let encoding = match tok.get_decoder() {
        Some(tokenizers::decoders::DecoderWrapper::ByteLevel(_)) => TokenEncoding::ByteLevel,
        _ => TokenEncoding::SentencePiece,
    };
    let table = gpt2_char_to_byte();
    let n = tok.get_vocab_size(true);
    anyhow::ensure!(n > 0, "the tokenizer has an empty vocabulary");
    let added = tok.get_added_tokens_decoder();
    let mut tokens = Vec::with_capacity(n);
    let mut special = Vec::with_capacity(n);
    let mut eog = Vec::new();
    for id in 0..n as u32 {
        let added_tok = added.get(&id);
        let Some(piece) = added_tok
            .map(|a| a.content.clone())
            .or_else(|| tok.id_to_token(id))
        else {
            tokens.push(Vec::new());
            special.push(true);
            continue;
        };
        if let Some(a) = added_tok {
            if EOG_NAMES.contains(&a.content.as_str()) {
                eog.push(TokenId(id));
            }
            if a.special {
                tokens.push(a.content.as_bytes().to_vec());
                special.push(true);
                continue;
            }
        }
        tokens.push(token_bytes(&piece, encoding, &table));
        special.push(false);
    }
    Ok(Vocabulary::new(tokens, special, eog).with_tokenizer(Box::new(HfTokenizer(tok))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_table_is_a_bijection_on_bytes() {
        let t = gpt2_char_to_byte();
        assert_eq!(t.len(), 256);
        assert_eq!(t[&'Ġ'], b' ');
        assert_eq!(t[&'Ċ'], b'\n');
        assert_eq!(token_bytes("Ġ\"", TokenEncoding::ByteLevel, &t), b" \"");
    }

    #[test]
    fn sentencepiece_pieces() {
        let t = gpt2_char_to_byte();
        assert_eq!(
            token_bytes("▁the", TokenEncoding::SentencePiece, &t),
            b" the"
        );
        assert_eq!(
            token_bytes("<0x0A>", TokenEncoding::SentencePiece, &t),
            b"\n"
        );
        assert_eq!(
            token_bytes("<0xE2>", TokenEncoding::SentencePiece, &t),
            vec![0xE2]
        );
    }
}
