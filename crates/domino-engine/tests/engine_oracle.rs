//! Oracle property tests: on small grammars and a synthetic vocabulary (single bytes,
//! multi-byte tokens, bridge tokens, tokens splitting UTF-8 characters), the k = ∞ mask
//! equals the brute-force set `{t : prefix · bytes(t) is a viable prefix}` computed with the
//! reference recognizer, on thousands of random walks; EOS is allowed iff the prefix is a
//! sentence. Also: soundness of sampling, `allows` == mask membership, rollback
//! reproduces masks, k = 0 blocks bridge tokens that k = ∞ allows.

mod common;
use common::rng::Rng;

use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::{RefState, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;

fn compile(gbnf: &str) -> Arc<CompiledGrammar> {
    let g = GrammarSource::Gbnf(gbnf.into())
        .compile(&Default::default())
        .unwrap();
    CompiledGrammar::new(g).unwrap()
}

/// A synthetic vocabulary: every printable ASCII byte, `\n`, `\t`, the two bytes of `é` and
/// of `€` separately and whole, and many multi-byte / bridge tokens. The last token is EOG;
/// one special token is never allowed.
fn synthetic_vocab() -> Arc<Vocabulary> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    for b in 0x20..0x7fu8 {
        words.push(vec![b]);
    }
    words.push(b"\n".to_vec());
    words.push(b"\t".to_vec());
    let e = "é".as_bytes();
    let euro = "€".as_bytes();
    words.push(vec![e[0]]);
    words.push(vec![e[1]]);
    words.push(e.to_vec());
    words.push(vec![euro[0]]);
    words.push(euro[1..].to_vec());
    words.push(euro.to_vec());
    words.push([b"a".as_slice(), &e[..1]].concat()); // "a" + half of é
    for w in [
        "\" ", "\",", "\", ", "\"}", "}\n", "{\"", "\": ", "\":", ", \"", "[\"", "\"]", " {", " [",
        "},", "}]", "],", "ab", "abc", "true", "tr", "ue", "null", "12", "1.", ".5", "e+", "-1",
        "  ", "   ", "\n ", " \"", "=1", "(a", "a)", "+a", "*(", "))", "if", "if ", "ifx", " x",
        "x;", "; ", "é\"", "\"é", "a+b", "1)*", "(1+", "==", "aa", "aaa", ",\n",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    words.push(b"<special>".to_vec());
    let special = words.len() - 1;
    common::vocab_with_eog(words, &[special])
}

/// Grammars with bridges, ambiguity, left recursion, nullable rules and UTF-8.
const GRAMMARS: &[(&str, &str)] = &[
    (
        "json",
        r#"
root   ::= ws value ws
value  ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ws ( member ( ws "," ws member )* ws )? "}"
member ::= string ws ":" ws value
array  ::= "[" ws ( value ( ws "," ws value )* ws )? "]"
string ::= "\"" [^"\\]* "\""
number ::= "-"? [0-9]+ ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws     ::= [ \t\n]{0,3}
"#,
    ),
    (
        "arith-left-recursive",
        r#"
root ::= expr
expr ::= expr "+" term | expr "-" term | term
term ::= term "*" atom | atom
atom ::= [0-9]+ | "(" expr ")" | [a-z]+
"#,
    ),
    (
        "keywords-vs-identifiers",
        r#"
root  ::= stmt+
stmt  ::= "if" " "+ ident ";" " "? | ident "=" [0-9]+ ";" " "?
ident ::= [a-z]+
"#,
    ),
    (
        "ambiguous-nullable",
        r#"
root ::= a b a
a    ::= "a"* | "ab"
b    ::= ("b" | "é")* "x"?
"#,
    ),
    (
        // Alternatives where a shorter one matches first (`[0-9]` before `[1-9][0-9]*`):
        // every match counts, not only the preferred alternative's.
        "alternation-all-matches",
        r#"
root ::= "[" ( item ( "," " "? item )* )? "]"
item ::= "-"? ( [0-9] | [1-9] [0-9]* ) ( "." [0-9]+ )? | "a" | "ab" | "a" "b"+
"#,
    ),
    (
        "utf8-strings",
        r#"root ::= "\"" [^"]{0,6} "\"" ( "," " "? "\"" [é€a-c]* "\"" )*"#,
    ),
];

/// Brute force: the tokens whose bytes keep the reference viable, plus EOG iff accepting.
fn oracle_mask(r: &ReferenceRecognizer, state: &RefState, vocab: &Vocabulary) -> TokenSet {
    let mut m = TokenSet::new(vocab.len());
    for (id, bytes) in vocab.text_tokens() {
        let mut s = state.clone();
        let mut ok = true;
        for &b in bytes {
            match r.feed(&s, b) {
                Some(n) => s = n,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok && r.is_viable(&s) {
            m.insert(id);
        }
    }
    if r.is_accepting(state) {
        for &e in vocab.eog_tokens() {
            m.insert(e);
        }
    }
    m
}

fn feed_all(r: &ReferenceRecognizer, s: &RefState, bytes: &[u8]) -> RefState {
    bytes.iter().fold(s.clone(), |s, &b| {
        r.feed(&s, b).expect("committed bytes are viable")
    })
}

fn diff(a: &TokenSet, b: &TokenSet, v: &Vocabulary) -> String {
    let only = |x: &TokenSet, y: &TokenSet| -> Vec<String> {
        x.iter()
            .filter(|t| !y.contains(*t))
            .map(|t| format!("{:?}", String::from_utf8_lossy(v.bytes(t))))
            .collect()
    };
    format!("engine-only {:?}, oracle-only {:?}", only(a, b), only(b, a))
}

#[test]
fn k_infinity_masks_equal_the_oracle_on_random_walks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(0x9E3779B97F4A7C15);
    let mut checked = 0;
    for (name, text) in GRAMMARS {
        checked += random_walks_match_the_oracle(name, &compile(text), &vocab, &mut rng, 120);
    }
    assert!(checked > 2000, "only {checked} masks checked");
}

/// Terminals with constraints (JSON Schema `pattern` ∧ length bounds, `format` ∧ `pattern`,
/// pattern keys minus the named properties, `not: {enum}`, `multipleOf`): the lexer's
/// product automaton against the reference recognizer's own product.
#[test]
fn constrained_terminal_masks_equal_the_oracle_on_random_walks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(0xD1B54A32D192ED03);
    let schemas = [
        (
            "pattern-maxLength",
            serde_json::json!({"type": "array", "items": {"type": "string", "pattern": "^(?:[a-z]+ ){0,2}[a-z]+$", "maxLength": 7}}),
        ),
        (
            "format-pattern",
            serde_json::json!({"type": "string", "format": "date", "pattern": "^20(?:19|2)"}),
        ),
        (
            "keys-minus-named",
            serde_json::json!({"type": "object", "properties": {"ab": {"type": "integer"}}, "patternProperties": {"^(?!x)[a-z]{1,3}$": {"type": "boolean"}}, "additionalProperties": false}),
        ),
        (
            "not-enum",
            serde_json::json!({"type": "array", "items": {"type": "string", "not": {"enum": ["a", "ab", "é"]}, "maxLength": 3}}),
        ),
        (
            "multipleOf",
            serde_json::json!({"type": "array", "items": {"anyOf": [{"type": "integer", "multipleOf": 3, "minimum": -40, "maximum": 400}, {"type": "number", "multipleOf": 0.25}]}}),
        ),
    ];
    let mut checked = 0;
    for (name, schema) in schemas {
        let g = compact(schema);
        assert!(
            g.terminals.iter().any(|t| !t.constraints.is_empty()),
            "{name}: expected a constrained terminal"
        );
        checked += random_walks_match_the_oracle(
            name,
            &CompiledGrammar::new(g).unwrap(),
            &vocab,
            &mut rng,
            60,
        );
    }
    assert!(checked > 1000, "only {checked} masks checked");
}

/// JSON Schema objects whose named properties come in any order (the default
/// `PropertyOrder::Any`: one member state per subset written), with extra members among them
/// and presence / count constraints: masks equal the oracle's on random walks.
#[test]
fn any_order_object_masks_equal_the_oracle_on_random_walks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(0x51ED_270B_1F0C_A3D5);
    let schemas = [
        serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "boolean"}, "b": {"enum": ["x", "y"]}}, "required": ["a", "b"], "additionalProperties": false}),
        serde_json::json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "null"}}, "additionalProperties": {"type": "boolean"}, "maxProperties": 3}),
        serde_json::json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}, "dependentRequired": {"a": ["c"]}, "minProperties": 2, "additionalProperties": false}),
    ];
    let mut checked = 0;
    for schema in schemas {
        let name = schema.to_string();
        let g = compact(schema);
        checked += random_walks_match_the_oracle(
            &name,
            &CompiledGrammar::new(g).unwrap(),
            &vocab,
            &mut rng,
            60,
        );
    }
    assert!(checked > 1000, "only {checked} masks checked");
}

/// Many literal terminals that share prefixes and follow one another (a large enum or
/// keyword list kept as separate terminals): tree builds decide "may a terminal start after
/// `t` with byte `b`" lazily, per pair they reach, so masks must still equal the oracle's on
/// random walks — with boundaries inside tokens between any two literals, and a separator
/// terminal that may or may not come between.
#[test]
fn many_literal_terminals_masks_equal_the_oracle_on_random_walks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
    let mut words: Vec<String> = Vec::new();
    for a in ["a", "b", "c", "e", "ab"] {
        for b in ["", "a", "b", "bc", "ca", " "] {
            words.push(format!("{a}{b}"));
        }
    }
    words.sort();
    words.dedup();
    let alts: Vec<String> = words.iter().map(|w| format!("\"{w}\" sep? root")).collect();
    let gbnf = format!(
        "root ::= \"x\" | {}\nsep ::= \",\" | \" \"\n",
        alts.join(" | ")
    );
    let grammar = compile(&gbnf);
    assert!(
        grammar.grammar().terminals.len() >= 20,
        "the literals were merged into {} terminals",
        grammar.grammar().terminals.len()
    );
    let checked = random_walks_match_the_oracle("many-literals", &grammar, &vocab, &mut rng, 200);
    assert!(checked > 1000, "only {checked} masks checked");
}

/// A JSON Schema compiled with compact whitespace (walks then spend their steps on values).
fn compact(schema: serde_json::Value) -> domino_engine::grammar::ir::Grammar {
    let opts = domino_engine::grammar::CompileOptions {
        whitespace: domino_engine::grammar::WhitespacePolicy::Compact,
        ..Default::default()
    };
    GrammarSource::JsonSchema(schema).compile(&opts).unwrap()
}

/// Random walks (each step a random allowed token) comparing every mask with the oracle's.
/// Returns the number of masks compared.
fn random_walks_match_the_oracle(
    name: &str,
    grammar: &Arc<CompiledGrammar>,
    vocab: &Arc<Vocabulary>,
    rng: &mut Rng,
    walks: usize,
) -> usize {
    let mut checked = 0;
    let r = ReferenceRecognizer::new(grammar.grammar()).unwrap();
    for walk in 0..walks {
        let mut c = Constraint::new(grammar, vocab, Options::default()).unwrap();
        let mut state = r.start();
        let mut text: Vec<u8> = Vec::new();
        let mut mask = TokenSet::new(vocab.len());
        for _step in 0..25 {
            c.compute_mask(&mut mask);
            let want = oracle_mask(&r, &state, vocab);
            assert!(
                mask == want,
                "{name} walk {walk} after {:?}: {}",
                String::from_utf8_lossy(&text),
                diff(&mask, &want, vocab)
            );
            checked += 1;
            assert_eq!(
                c.is_accepting(),
                r.is_accepting(&state),
                "{name}: accepting after {text:?}"
            );
            // allows(t) agrees with the mask on a sample of tokens.
            for _ in 0..20 {
                let t = TokenId(rng.below(vocab.len()) as u32);
                assert_eq!(
                    c.allows(t),
                    mask.contains(t),
                    "{name}: allows({t:?}) after {text:?}"
                );
            }
            let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eog(*t)).collect();
            if allowed.is_empty() {
                assert!(c.is_finished());
                break;
            }
            assert!(!c.is_finished());
            let t = allowed[rng.below(allowed.len())];
            c.commit(t).unwrap();
            text.extend_from_slice(vocab.bytes(t));
            state = feed_all(&r, &state, vocab.bytes(t));
        }
    }
    checked
}

#[test]
fn sampling_from_masks_is_sound_and_eos_only_when_accepting() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(42);
    for (name, text) in GRAMMARS {
        let grammar = compile(text);
        let r = ReferenceRecognizer::new(grammar.grammar()).unwrap();
        let mut ended = 0;
        for _ in 0..150 {
            let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
            let mut out = Vec::new();
            let mut mask = TokenSet::new(vocab.len());
            for _ in 0..40 {
                c.compute_mask(&mut mask);
                let allowed: Vec<TokenId> = mask.iter().collect();
                assert!(!allowed.is_empty(), "{name}: empty mask after {out:?}");
                // Prefer stopping when allowed, so many samples end.
                let eos = allowed.iter().copied().find(|t| vocab.is_eog(*t));
                let t = match eos {
                    Some(e) if rng.below(3) == 0 => e,
                    _ => allowed[rng.below(allowed.len())],
                };
                if vocab.is_eog(t) {
                    assert!(
                        r.accepts(&out),
                        "{name}: EOS allowed after non-sentence {:?}",
                        String::from_utf8_lossy(&out)
                    );
                    c.commit(t).unwrap();
                    assert!(c.is_finished());
                    ended += 1;
                    break;
                }
                c.commit(t).unwrap();
                out.extend_from_slice(vocab.bytes(t));
                assert!(
                    r.is_viable_prefix(&out),
                    "{name}: unsound prefix {:?}",
                    String::from_utf8_lossy(&out)
                );
            }
        }
        assert!(ended > 10, "{name}: only {ended} samples reached EOS");
    }
}

#[test]
fn rollback_then_recommit_reproduces_masks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(7);
    for (_, text) in GRAMMARS {
        let grammar = compile(text);
        for _ in 0..30 {
            let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
            let mut masks = vec![];
            let mut toks = vec![];
            let mut mask = TokenSet::new(vocab.len());
            for _ in 0..15 {
                c.compute_mask_uncached(&mut mask);
                masks.push(mask.clone());
                let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eog(*t)).collect();
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len())];
                c.commit(t).unwrap();
                toks.push(t);
            }
            c.compute_mask_uncached(&mut mask);
            if masks.len() == toks.len() {
                masks.push(mask.clone());
            }
            let n = rng.below(toks.len() + 1);
            c.rollback(n);
            assert_eq!(c.num_committed(), toks.len() - n);
            c.compute_mask_uncached(&mut mask);
            assert_eq!(mask, masks[toks.len() - n]);
            for (i, &t) in toks[toks.len() - n..].iter().enumerate() {
                c.commit(t).unwrap();
                c.compute_mask_uncached(&mut mask);
                assert_eq!(mask, masks[toks.len() - n + i + 1]);
            }
        }
    }
}

#[test]
fn k0_blocks_bridge_tokens_that_k_infinity_allows() {
    let vocab = synthetic_vocab();
    let grammar = compile(GRAMMARS[0].1);
    let id = |w: &str| {
        TokenId(
            vocab
                .text_tokens()
                .find(|(_, b)| *b == w.as_bytes())
                .unwrap()
                .0
                .0,
        )
    };
    let mut inf = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
    let mut k0 = Constraint::new(
        &grammar,
        &vocab,
        Options {
            lookahead: Some(0),
            ..Default::default()
        },
    )
    .unwrap();
    let mut k1 = Constraint::new(
        &grammar,
        &vocab,
        Options {
            lookahead: Some(1),
            ..Default::default()
        },
    )
    .unwrap();
    for c in [&mut inf, &mut k0, &mut k1] {
        c.commit_bytes(b"{\"a\": \"x").unwrap();
    }
    let (mut m_inf, mut m0, mut m1) = (
        TokenSet::new(vocab.len()),
        TokenSet::new(vocab.len()),
        TokenSet::new(vocab.len()),
    );
    inf.compute_mask(&mut m_inf);
    k0.compute_mask(&mut m0);
    k1.compute_mask(&mut m1);
    // `",` ends the string and starts `,` inside the token: one inside boundary.
    assert!(m_inf.contains(id("\",")) && m1.contains(id("\",")) && !m0.contains(id("\",")));
    // `", "` = string end, `,`, whitespace, `"`: three inside boundaries.
    assert!(!m1.contains(id("\", ")) && m_inf.contains(id("\", ")));
    // `"` alone finishes the terminal at the token's end: allowed for every k.
    assert!(m0.contains(id("\"")));
    assert!(m0.iter().all(|t| m1.contains(t)) && m1.iter().all(|t| m_inf.contains(t)));
    assert!(m0.count() < m_inf.count());
    // k = 0 still rejects what k = ∞ rejects, and commit follows the same rule.
    assert!(k0.commit(id("\",")).is_err());
    assert!(inf.commit(id("\",")).is_ok());
}

#[test]
fn forced_bytes_and_commit_errors() {
    let vocab = synthetic_vocab();
    let grammar = compile(r#"root ::= "{\"name\": \"" [a-z]+ "\", \"ok\": true}""#);
    let mut c = Constraint::new(&grammar, &vocab, Options::default()).unwrap();
    assert_eq!(c.forced_bytes(), b"{\"name\": \"");
    c.commit_bytes(b"{\"name\": \"bo").unwrap();
    assert_eq!(c.forced_bytes(), b"");
    c.commit_bytes(b"b\"").unwrap();
    assert_eq!(c.forced_bytes(), b", \"ok\": true}");
    let err = c.commit_bytes(b", \"no").unwrap_err();
    assert!(
        matches!(
            err,
            domino_engine::engine::EngineError::BytesNotAllowed { offset: 3, .. }
        ),
        "{err:?}"
    );
    let eog = vocab.eog_tokens()[0];
    assert!(c.commit(eog).is_err());
    c.commit_bytes(b", \"ok\": true}").unwrap();
    assert!(c.is_accepting() && c.is_finished());
    c.commit(eog).unwrap();
    let special = TokenId(vocab.len() as u32 - 2);
    assert!(!c.allows(special));
}

#[test]
fn finite_lookahead_masks_are_nested_sound_and_consistent() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(99);
    for (name, text) in GRAMMARS {
        let grammar = compile(text);
        for _ in 0..40 {
            let mut cs: Vec<Constraint> = [Some(0), Some(1), Some(2), None]
                .into_iter()
                .map(|k| {
                    Constraint::new(
                        &grammar,
                        &vocab,
                        Options {
                            lookahead: k,
                            ..Default::default()
                        },
                    )
                    .unwrap()
                })
                .collect();
            for _ in 0..20 {
                let masks: Vec<TokenSet> = cs
                    .iter_mut()
                    .map(|c| {
                        let mut m = TokenSet::new(vocab.len());
                        c.compute_mask(&mut m);
                        m
                    })
                    .collect();
                for w in masks.windows(2) {
                    assert!(
                        w[0].iter().all(|t| w[1].contains(t)),
                        "{name}: k masks not nested"
                    );
                }
                for (c, m) in cs.iter_mut().zip(&masks) {
                    for _ in 0..10 {
                        let t = TokenId(rng.below(vocab.len()) as u32);
                        assert_eq!(
                            c.allows(t),
                            m.contains(t),
                            "{name}: allows vs mask with k = {:?}",
                            c.options().lookahead
                        );
                    }
                }
                // Step all four with a token allowed at k = 0 (so every k can follow).
                let allowed: Vec<TokenId> = masks[0].iter().filter(|t| !vocab.is_eog(*t)).collect();
                if allowed.is_empty() {
                    break;
                }
                let t = allowed[rng.below(allowed.len())];
                for c in &mut cs {
                    c.commit(t).unwrap();
                }
            }
        }
    }
}

/// A vocabulary of whole-character runs (the shape of SentencePiece vocabularies such as
/// Gemma's): multi-character tokens of ASCII, 2-, 3- and 4-byte characters, long tokens,
/// lone lead and continuation bytes (byte fallback), DEL, and tokens mixing text with quotes,
/// backslashes and newlines. Tree builds take whole subtrees of such tokens at once when
/// every character steps the scanner alike (`char_steps`); this is where that must be exact.
fn char_run_vocab() -> Arc<Vocabulary> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    for b in 0x20..0x7fu8 {
        words.push(vec![b]);
    }
    for w in [
        "\n",
        "\t",
        "\x7f",
        "a\x7f",
        "é",
        "€",
        "😀",
        "éé",
        "aé",
        "é€b",
        "😀😀",
        "€a€",
        "abc",
        "abcd",
        "abcdef",
        "abcdefghij",
        "abcdefghijklmnop",
        "ééééé",
        "a€b€c€",
        "\"a",
        "a\"",
        "a\",",
        "é\"",
        "ab\\",
        "\\n",
        "\\\"",
        " \"",
        "\":",
        "\": \"",
        "\",\"",
        "{\"",
        "\"}",
        "a\n",
        "  ",
        "    ",
        "name",
        "\"name",
        "\"nam",
        "nametag",
        "nam€",
        "x1",
        "12",
        "1234",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    for b in [0xC3u8, 0xE2, 0xF0, 0x82, 0xA9] {
        words.push(vec![b]); // byte fallback
    }
    words.push([b"ab".as_slice(), &"é".as_bytes()[..1]].concat()); // ends inside é
    common::vocab_with_eog(words, &[])
}

/// Open and counted string bodies, split bodies (the body its own terminal, accepting at
/// every length above its minimum), a body without DEL, a body that tells one non-ASCII
/// character apart, and JSON Schema keys minus named ones: masks equal the oracle's on
/// random walks over [`char_run_vocab`].
#[test]
fn whole_character_runs_masks_equal_the_oracle_on_random_walks() {
    let vocab = char_run_vocab();
    let mut rng = Rng::new(0x8CB9_2BA7_2F3D_8DD7);
    let grammars = [
        ("open", r#"root ::= ( "\"" [^"\\]* "\"" ":"? )+"#),
        (
            "counted",
            r#"root ::= "\"" [^"\\]{0,5} "\"" ( "," "\"" [^"]{2,4} "\"" )*"#,
        ),
        (
            "split-body",
            "root ::= \"\\\"\" body \"\\\"\" ( \",\" root )?\nbody ::= [^\"\\\\\\x7F\\x00-\\x1F]{3,9}",
        ),
        ("no-del", r#"root ::= "\"" [^"\x7F]* "\"" [ \n]*"#),
        (
            "tells-euro-apart",
            r#"root ::= "\"" ( [^"€] | "€" "b" )* "\"""#,
        ),
        (
            "counted-ascii-and-digits",
            r#"root ::= [a-c]{0,6} [0-9]{1,3} ( " " root )?"#,
        ),
    ];
    let mut checked = 0;
    for (name, text) in grammars {
        checked += random_walks_match_the_oracle(name, &compile(text), &vocab, &mut rng, 80);
    }
    let schemas = [
        serde_json::json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 4}, "nametag": {"type": "integer"}}, "additionalProperties": {"type": "string", "minLength": 2}}),
        serde_json::json!({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 12}}),
    ];
    for schema in schemas {
        let name = schema.to_string();
        let g = compact(schema);
        checked += random_walks_match_the_oracle(
            &name,
            &CompiledGrammar::new(g).unwrap(),
            &vocab,
            &mut rng,
            80,
        );
    }
    assert!(checked > 2000, "only {checked} masks checked");
}
