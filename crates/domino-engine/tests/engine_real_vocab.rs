//! Oracle tests with a real vocabulary (SmolLM2's 49k byte-level BPE tokens): on random walks
//! through JSON, a GSM8K-shaped JSON grammar and the shipped C grammar, the k = ∞ mask equals
//! the brute-force set computed by the reference recognizer over **all** tokens (a walk over
//! the vocabulary's byte trie shares the work of common prefixes). Fails loudly when the
//! tokenizer file is missing.

mod common;
use common::rng::Rng;

use domino_engine::engine::trie::VocabTrie;
use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::{RefState, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary, tokenizer_json};
use std::sync::Arc;

fn smollm2() -> Arc<Vocabulary> {
    Arc::new(
        tokenizer_json::load(&common::shared(
            "tokenizers/SmolLM2-135M-Instruct.tokenizer.json",
        ))
        .unwrap(),
    )
}

fn gemma() -> Arc<Vocabulary> {
    Arc::new(
        tokenizer_json::load(&common::shared("tokenizers/gemma-3-270m.tokenizer.json")).unwrap(),
    )
}

/// [`check_walks_vocab`] of a JSON Schema over SmolLM2's and then Gemma 3's vocabulary.
fn check_schema_walks_both(schema: &serde_json::Value, docs: &[&str], walks: usize, steps: usize) {
    for vocab in [smollm2(), gemma()] {
        check_walks_vocab(
            vocab,
            GrammarSource::JsonSchema(schema.clone()),
            docs,
            walks,
            steps,
        );
    }
}

/// Brute force over every token via the vocabulary trie.
fn oracle_mask(
    r: &ReferenceRecognizer,
    state: &RefState,
    vocab: &Vocabulary,
    trie: &VocabTrie,
) -> TokenSet {
    let mut m = TokenSet::new(vocab.len());
    let mut stack: Vec<RefState> = vec![state.clone()];
    let mut i = 0;
    while i < trie.nodes.len() {
        let n = trie.nodes[i];
        stack.truncate(n.depth as usize);
        match r.feed(&stack[n.depth as usize - 1], n.byte) {
            None => {
                i = n.next as usize;
                continue;
            }
            Some(s) => {
                if r.is_viable(&s) {
                    for &t in &trie.tokens[n.tok_start as usize..n.tok_end as usize] {
                        m.insert(t);
                    }
                }
                stack.push(s);
            }
        }
        i += 1;
    }
    if r.is_accepting(state) {
        for &e in vocab.eog_tokens() {
            m.insert(e);
        }
    }
    m
}

/// Random walks; tokens are drawn from the mask, preferring those of a sample document so
/// walks go deep into realistic states.
fn check_walks(gbnf: &str, docs: &[&str], walks: usize, steps: usize) {
    check_walks_source(GrammarSource::Gbnf(gbnf.into()), docs, walks, steps);
}

fn check_walks_source(
    source: GrammarSource,
    docs: &[&str],
    walks: usize,
    steps: usize,
) -> Arc<CompiledGrammar> {
    check_walks_vocab(smollm2(), source, docs, walks, steps)
}

fn check_walks_vocab(
    vocab: Arc<Vocabulary>,
    source: GrammarSource,
    docs: &[&str],
    walks: usize,
    steps: usize,
) -> Arc<CompiledGrammar> {
    let trie = VocabTrie::new(&vocab);
    let g = source.compile(&Default::default()).unwrap();
    let grammar = CompiledGrammar::new(g).unwrap();
    let r = ReferenceRecognizer::new(grammar.grammar()).unwrap();
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let mut mask = TokenSet::new(vocab.len());
    for w in 0..walks {
        let doc = match docs.get(w % docs.len().max(1)) {
            Some(d) => vocab.tokenize(d).unwrap(),
            None => Vec::new(),
        };
        let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
        let mut state = r.start();
        let mut text = Vec::new();
        for step in 0..steps {
            c.compute_mask(&mut mask);
            let want = oracle_mask(&r, &state, &vocab, &trie);
            if mask != want {
                let show = |a: &TokenSet, b: &TokenSet| -> Vec<String> {
                    a.iter()
                        .filter(|t| !b.contains(*t))
                        .take(10)
                        .map(|t| format!("{:?}", String::from_utf8_lossy(vocab.bytes(t))))
                        .collect()
                };
                panic!(
                    "walk {w} step {step} after {:?}: engine-only {:?} oracle-only {:?}",
                    String::from_utf8_lossy(&text),
                    show(&mask, &want),
                    show(&want, &mask)
                );
            }
            // Follow the document while it is allowed, else a random allowed token.
            let pick = match doc.get(step) {
                Some(&t) if mask.contains(t) && rng.below(4) != 0 => t,
                _ => {
                    let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eog(*t)).collect();
                    if allowed.is_empty() {
                        break;
                    }
                    allowed[rng.below(allowed.len())]
                }
            };
            c.commit(pick).unwrap();
            text.extend_from_slice(vocab.bytes(pick));
            for &b in vocab.bytes(pick) {
                state = r.feed(&state, b).unwrap();
            }
        }
    }
    grammar
}

const JSON: &str = r#"
root   ::= ws value ws
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* ws )? "}"
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n\r]*
"#;

/// The GSM8K schema's shape (thoughts: [{step, calculation, result}], answer), as GBNF.
const GSM8K: &str = r#"
root    ::= "{" ws "\"thoughts\"" ws ":" ws "[" ws thought ( ws "," ws thought )* ws "]" ws "," ws "\"answer\"" ws ":" ws number ws "}"
thought ::= "{" ws "\"step\"" ws ":" ws string ws "," ws "\"calculation\"" ws ":" ws string ws "," ws "\"result\"" ws ":" ws number ws "}"
string  ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n]{0,20}
"#;

#[test]
fn json_masks_equal_the_oracle_over_all_smollm2_tokens() {
    check_walks(
        JSON,
        &[
            "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poetry\"], \"alive\": false}",
            "[\n  {\"a\": -1.5e3, \"b\": null},\n  \"x\\ny\"\n]",
        ],
        6,
        40,
    );
}

#[test]
fn gsm8k_shaped_masks_equal_the_oracle_over_all_smollm2_tokens() {
    check_walks(
        GSM8K,
        &[
            "{\"thoughts\": [{\"step\": \"Add the apples\", \"calculation\": \"3 + 4 = 7\", \"result\": 7}], \"answer\": 7}",
        ],
        4,
        70,
    );
}

#[test]
fn gsm8k_schema_masks_equal_the_oracle_over_all_smollm2_tokens() {
    let path = common::workspace_root().join("grammars/gsm8k.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    check_walks_source(
        GrammarSource::JsonSchema(schema),
        &[
            "{\"thoughts\": [{\"step\": \"Add\", \"calculation\": \"3 + 4 = 7\", \"result\": 7}], \"answer\": 7}",
            "{\n  \"thoughts\": [\n    {\n      \"step\": \"Halve\",\n      \"calculation\": \"8 / 2\",\n      \"result\": 4.0\n    }\n  ],\n  \"answer\": 4\n}",
        ],
        4,
        60,
    );
}

#[test]
fn c_masks_equal_the_oracle_over_all_smollm2_tokens() {
    let path = common::workspace_root().join("grammars/c.gbnf");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    check_walks(
        &text,
        &[
            "#include <stdio.h>\n\nint main() {\n    int a = 5;\n    printf(\"%d\\n\", a + 1);\n    return 0;\n}\n",
        ],
        4,
        50,
    );
}

/// A JSONSchemaBench schema with a large full scanner (more than 200,000 states while the
/// "none of these keys" terminal repeated the string automaton after every key prefix;
/// about 13,000 since it is factored): the lazy scanner builds only what tokens reach, and
/// the masks still equal the oracle's.
#[test]
fn lazily_built_scanner_masks_equal_the_oracle_on_a_large_bench_schema() {
    let path = common::shared("data/jsonschemabench/Snowplow.jsonl");
    let line = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .find(|l| l.contains("\"sp_160_Normalized\""))
        .expect("sp_160 in the Snowplow subset")
        .to_string();
    let item: serde_json::Value = serde_json::from_str(&line).unwrap();
    let schema = item["schema"].clone();
    let g = GrammarSource::JsonSchema(schema.clone())
        .compile(&Default::default())
        .unwrap();
    let full = domino_engine::lexer::Scanner::new(&g).unwrap();
    let (n, _complete) = full.explore(200_000);
    assert!(n > 10_000, "the full scanner should be large (got {n})");
    let grammar = check_walks_source(GrammarSource::JsonSchema(schema), &[], 3, 30);
    let built = grammar.scanner_states();
    assert!(
        built < n / 2,
        "walks built {built} of {n} scanner states: the scanner is not lazy"
    );
}

/// Gemma 3's 262k SentencePiece vocabulary: tokens are whole-character runs, most of them
/// non-ASCII, with byte-fallback tokens for lone bytes. Tree builds take such subtrees at once
/// (`char_steps`: every character steps the state alike, in open and counted string bodies,
/// keys minus named ones). On walks through strings with `maxLength` / `minLength`, keys
/// outside the named properties and non-ASCII text, masks equal the oracle's over every token.
#[test]
fn counted_and_non_ascii_string_masks_equal_the_oracle_over_all_gemma_tokens() {
    let gemma = gemma();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "city": {"type": "string", "minLength": 3, "maxLength": 40},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}}
        },
        "additionalProperties": {"type": "string"}
    });
    check_walks_vocab(
        gemma,
        GrammarSource::JsonSchema(schema),
        &[
            "{\"name\": \"Zoë Ångström\", \"city\": \"Zürich – Genève, 東京\", \"tags\": [\"ü\", \"日本語\"], \"naïve\": \"😀 ok\"}",
            "{\"city\": \"São Paulo\", \"nam\": \"x\\\"y\"}",
        ],
        2,
        30,
    );
}

/// Searched `pattern`s (unanchored, as JSON Schema means them): inside such a string a hex
/// digit advances a partial match and another character restarts it, so whole subtrees step
/// the DFA to a *set* of states (`char_steps`: chains of several states). On walks through
/// such strings, masks equal the oracle's over every SmolLM2 and every Gemma 3 token.
#[test]
fn searched_pattern_masks_equal_the_oracle_over_all_tokens() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "pattern": "[a-f0-9]{8}-[a-f0-9]{4}"},
            "code": {"type": "string", "pattern": "ab|c[0-9]d"},
            "ref": {"type": "string", "pattern": "[0-9]{3}", "maxLength": 24}
        },
        "required": ["id"]
    });
    let docs = [
        "{\"id\": \"see 0f3a9c21-77be and more\", \"code\": \"xxc7d yy\", \"ref\": \"no 123 here\"}",
        "{\"ref\": \"#4821\", \"id\": \"deadbeef-cafe\", \"code\": \"grab\"}",
    ];
    check_schema_walks_both(&schema, &docs, 3, 40);
}

/// Inside a searched `pattern` every token moves the partial match to a new state, so every
/// mask builds a tree over nearly the whole vocabulary; the walks below a character that
/// breaks the partial match start from the few states of no progress, and later builds take
/// them from the ones that walked them first (`tree::BuildMemo`'s remembered subtrees). Along
/// documents through such strings (and a counted one, whose walks are never taken again),
/// then on random walks, masks equal the oracle's over every Gemma 3 token, and remembered
/// subtrees were taken.
#[test]
fn remembered_subtree_walks_keep_masks_equal_to_the_oracle() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "img": {"type": "string", "pattern": "data:image/png;base64,"},
            "id": {"type": "string", "pattern": "[a-fA-F0-9]{8}-[a-fA-F0-9]{4}"},
            "key": {"type": "string", "pattern": "^[0-9A-Za-z]{6}-[0-9A-Za-z]{4}$"}
        },
        "required": ["img", "id"]
    });
    let docs = [
        "{\"img\": \"see the data: image data:image/png;base64,iVBOR\", \"id\": \"x 5Dfbde4A-fFC8 y\", \"key\": \"A0L8w4-H7L8\"}",
        "{\"id\": \"été dead-beef, feed a cafe: 0123abcd-ABCD\", \"img\": \"data:imag data:image/png;base64,\\n\"}",
    ];
    let vocab = gemma();
    let trie = VocabTrie::new(&vocab);
    let source = GrammarSource::JsonSchema(schema);
    let grammar = CompiledGrammar::new(source.compile(&Default::default()).unwrap()).unwrap();
    let r = ReferenceRecognizer::new(grammar.grammar()).unwrap();
    let mut mask = TokenSet::new(vocab.len());
    // Each document token by token, as a model writing it would.
    for doc in docs {
        let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
        let mut state = r.start();
        for t in vocab.tokenize(doc).unwrap() {
            c.compute_mask(&mut mask);
            let want = oracle_mask(&r, &state, &vocab, &trie);
            assert!(
                mask == want,
                "masks differ before {:?} in {doc}",
                String::from_utf8_lossy(vocab.bytes(t))
            );
            c.commit(t).unwrap();
            for &b in vocab.bytes(t) {
                state = r.feed(&state, b).unwrap();
            }
        }
    }
    let stats = grammar
        .tree_cache(&vocab, Options::default().mask_cache_bytes)
        .stats();
    assert!(
        stats.remembered_subtree_hits > 0 && stats.remembered_subtrees > 0,
        "no remembered subtree was taken: {stats:?}"
    );
    // Random walks too (on a grammar of their own).
    check_walks_vocab(vocab, source, &docs, 2, 36);
}

/// Patterns whose `.` refuses line terminators (ECMAScript: `\n`, `\r`, U+2028, U+2029) or
/// that exclude a few non-ASCII characters: the characters of one lead byte (`0xE2`, `0xC3`)
/// no longer all step alike, so tree builds take the subtrees without that lead byte at once
/// and walk the others byte by byte (`char_steps`, `VocabTrie::subtree_leads`). On walks
/// through text with characters of those lead bytes (dashes, quotes, the excluded ones'
/// neighbours), masks equal the oracle's over every SmolLM2 and every Gemma 3 token.
#[test]
fn patterns_that_tell_some_characters_apart_equal_the_oracle_over_all_tokens() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "version": {"type": "string", "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$"},
            "note": {"type": "string", "pattern": "^[^é€]*$"},
            "line": {"type": "string", "pattern": "^x.+$"}
        },
        "required": ["version"]
    });
    let docs = [
        "{\"note\": \"naïve – ok ü ß ÿ™\", \"version\": \"1.2.3 – “beta” 東京\"}",
        "{\"version\": \"10.0.1-rc\\u2027 ü…\", \"line\": \"x — ‘a’ Zürich\"}",
    ];
    check_schema_walks_both(&schema, &docs, 4, 40);
}

/// Short `maxLength`s: near the bound, the longer tokens of a trie subtree die at the bound's
/// character while the shorter ones stay inside the string, and the tree build takes such a
/// subtree at once without its longer tokens (a character chain cut where every character
/// dies). On walks through strings at every count up to their bound, masks equal the oracle's
/// over every SmolLM2 and every Gemma 3 token.
#[test]
fn bounded_string_masks_equal_the_oracle_near_the_bound() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 1},
            "b": {"type": "string", "maxLength": 5},
            "c": {"type": "string", "minLength": 4, "maxLength": 9},
            "d": {"type": "string", "maxLength": 3, "pattern": "^[a-z]*$"},
            "e": {"type": "array", "items": {"type": "string", "maxLength": 2}}
        },
        "additionalProperties": false
    });
    let docs = [
        "{\"a\": \"x\", \"b\": \"hello\", \"c\": \"ab cd ég\", \"d\": \"abc\", \"e\": [\"ok\", \"\"]}",
        "{\"c\": \"tüür\", \"b\": \"\\\"q\\u0041\", \"a\": \"\", \"e\": [\"é\", \"x\"]}",
        "{\"b\": \"Zürich\", \"c\": \"abcdefghi\", \"d\": \"\"}",
    ];
    check_schema_walks_both(&schema, &docs, 6, 40);
}

/// Strings longer than one block (`json_schema::STRING_BLOCK` characters) are lexed as an
/// opening block, more blocks and a closing part: masks across the block boundaries, at the
/// bounds and at the closing quote equal the oracle's.
#[test]
fn long_string_masks_equal_the_oracle_across_blocks() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "a": {"type": "string", "maxLength": 260},
            "b": {"type": "string", "minLength": 250, "maxLength": 520}
        },
        "additionalProperties": false
    });
    let words = "The quick brown fox jumps over the lazy dog; ünïcödé and \\\"escapes\\\" too. ";
    let a = words.repeat(4);
    let b = words.repeat(7);
    let docs = [
        format!("{{\"a\": \"{a}\", \"b\": \"{b}\"}}"),
        format!("{{\"b\": \"{}\"}}", &b[..300]),
    ];
    let docs: Vec<&str> = docs.iter().map(String::as_str).collect();
    check_walks_vocab(smollm2(), GrammarSource::JsonSchema(schema), &docs, 3, 100);
}
