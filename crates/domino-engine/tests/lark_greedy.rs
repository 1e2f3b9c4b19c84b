//! Lark's lexer semantics (greedy lexing, `crate::lexer::greedy`): the issue's four-line C
//! declaration grammar, and random walks where the engine's k = ∞ mask must equal the
//! brute-force set computed by the greedy reference ("tokenize greedily, then parse") over a
//! synthetic vocabulary and over all of SmolLM2's tokens. GBNF keeps character-level
//! semantics (checked here on the same grammar written in GBNF).

mod common;
use common::rng::Rng;

use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::{GreedyReference, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary, tokenizer_json};
use std::sync::Arc;

const DECL: &str = r#"start: decl+
decl: type_spec IDENT ";"
type_spec: "int" | "float"
IDENT: /[a-zA-Z_][a-zA-Z0-9_]*/
%ignore /[ \t\r\n]+/
"#;

fn lark(text: &str) -> Arc<CompiledGrammar> {
    let g = GrammarSource::Lark(text.into())
        .compile(&Default::default())
        .unwrap();
    CompiledGrammar::new(g).unwrap()
}

/// Whether the engine accepts `text` as a whole sentence (bytes committed at once).
fn engine_accepts(g: &Arc<CompiledGrammar>, vocab: &Arc<Vocabulary>, text: &str) -> bool {
    let mut c = Constraint::new(g, vocab, Options::default()).unwrap();
    c.commit_bytes(text.as_bytes()).is_ok() && c.is_accepting()
}

/// Byte by byte, one token per byte: the same answer through `commit`.
fn engine_accepts_bytewise(g: &Arc<CompiledGrammar>, text: &str) -> bool {
    let words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).chain([Vec::new()]).collect();
    let vocab = Arc::new(Vocabulary::new(words, vec![false; 257], vec![TokenId(256)]));
    let mut c = Constraint::new(g, &vocab, Options::default()).unwrap();
    let mut mask = TokenSet::new(vocab.len());
    for &b in text.as_bytes() {
        c.compute_mask(&mut mask);
        if !mask.contains(TokenId(b as u32)) {
            assert!(c.commit(TokenId(b as u32)).is_err());
            return false;
        }
        c.commit(TokenId(b as u32)).unwrap();
    }
    c.compute_mask(&mut mask);
    assert_eq!(mask.contains(TokenId(256)), c.is_accepting());
    c.is_accepting()
}

#[test]
fn the_issue_grammar_lexes_greedily() {
    let g = lark(DECL);
    let r = GreedyReference::new(g.grammar()).unwrap();
    let vocab = synthetic_vocab();
    for (text, ok) in [
        ("int x;", true),
        ("intx;", false),
        ("intint;", false),
        ("int int;", false), // the literal "int" wins the tie against IDENT (Lark)
        ("int intx; float y;", true),
        ("int inta;", true),
        ("floaty;", false),
        ("int\tx;int y;", true),
        ("int x ;", true),
        ("int x", false),
        (" int x;", true),
        ("int x; ", true),
    ] {
        assert_eq!(r.accepts(text.as_bytes()), ok, "reference on {text:?}");
        assert_eq!(engine_accepts(&g, &vocab, text), ok, "engine on {text:?}");
        assert_eq!(
            engine_accepts_bytewise(&g, text),
            ok,
            "bytewise on {text:?}"
        );
    }
    // `intx` is a viable prefix? Only as the start of an IDENT — never allowed first.
    assert!(!r.is_viable_prefix(b"intx"));
    assert!(r.is_viable_prefix(b"int"));
    // The same grammar in GBNF keeps character-level semantics: `intx;` is a declaration.
    let gbnf = CompiledGrammar::new(
        GrammarSource::Gbnf(
            "root ::= ws (decl ws)+\ndecl ::= type ws ident ws \";\"\ntype ::= \"int\" | \"float\"\nident ::= [a-zA-Z_] [a-zA-Z0-9_]*\nws ::= [ \\t\\r\\n]*".into(),
        )
        .compile(&Default::default())
        .unwrap(),
    )
    .unwrap();
    assert!(engine_accepts(&gbnf, &vocab, "intx;"));
    assert!(
        ReferenceRecognizer::new(gbnf.grammar())
            .unwrap()
            .accepts(b"intint;")
    );
}

#[test]
fn a_token_ending_inside_a_growing_lexeme_keeps_both_readings() {
    // After `int` the lexeme may still grow: the next byte decides. ` ` ends it (the
    // keyword), `x` would make the IDENT `intx` (no type: refused). After `int in`, `t` keeps
    // the lexeme open: `int` is then the keyword (refused after a type) unless it grows
    // further, so `t` must be allowed (`intx` is an identifier) and `t;` not.
    let g = lark(DECL);
    let vocab = synthetic_vocab();
    let id = |w: &str| {
        TokenId(
            (0..vocab.len() as u32)
                .find(|&i| vocab.bytes(TokenId(i)) == w.as_bytes() && !vocab.is_eog(TokenId(i)))
                .unwrap_or_else(|| panic!("no token {w:?}")),
        )
    };
    let mut c = Constraint::new(&g, &vocab, Options::default()).unwrap();
    c.commit(id("int")).unwrap();
    let mut mask = TokenSet::new(vocab.len());
    c.compute_mask(&mut mask);
    assert!(mask.contains(id(" ")));
    assert!(mask.contains(id(" x")));
    assert!(!mask.contains(id("x")));
    assert!(!mask.contains(id("x;")));
    c.commit(id(" ")).unwrap();
    c.commit(id("in")).unwrap();
    c.compute_mask(&mut mask);
    assert!(mask.contains(id("t"))); // `int…` may still grow into an identifier
    assert!(mask.contains(id(";"))); // the identifier `in`
    assert!(!mask.contains(id("t "))); // `int ` would be the keyword after a type
    c.commit(id("t")).unwrap();
    c.compute_mask(&mut mask);
    assert!(mask.contains(id("x")) && !mask.contains(id(";")));
}

/// Lark grammars with keywords vs identifiers, literal/regex overlaps, comments vs
/// operators, contextual terminals and `%ignore`.
const GRAMMARS: &[(&str, &str)] = &[
    ("decl", DECL),
    (
        "expr-keywords",
        r#"start: stmt+
stmt: "if" expr "then" expr ";" | NAME "=" expr ";"
expr: expr "+" term | expr "/" term | term
term: NAME | NUMBER | "(" expr ")"
NAME: /[a-z]+/
NUMBER: /[0-9]+(\.[0-9]+)?/
COMMENT: /\/\/[^\n]*/
%ignore COMMENT
%ignore " "
%ignore "\n"
"#,
    ),
    (
        "overlaps-no-ignore",
        r#"start: item+
item: A | B | "ab" | "a" | "b" C
A: /a+/
B: /b+c?/
C: /c[0-9]*/
"#,
    ),
    (
        "contextual-let",
        r#"start: ("let" NAME "=" value ";")+
value: NAME | ESCAPED_STRING | "true"
NAME: /[a-z]+/
%import common.ESCAPED_STRING
%import common.WS
%ignore WS
"#,
    ),
];

/// Tokens for the grammars above: single bytes, keyword pieces, bridges.
fn synthetic_vocab() -> Arc<Vocabulary> {
    let mut words: Vec<Vec<u8>> = Vec::new();
    for b in 0x20..0x7fu8 {
        words.push(vec![b]);
    }
    words.push(b"\n".to_vec());
    words.push(b"\t".to_vec());
    for w in [
        "int", "in", "t ", "intx", "x;", " x", "float", "fl", "oat", "int ", " int", "if", "if ",
        "ifx", "then", "the", "n ", "en", "//", "/", " //", "/ ", "a/", "\n", "let", "le", "t=",
        "=", " = ", "tr", "ue", "true", "true;", "ab", "abc", "aab", "bc", "c1", "bc1", "ba",
        "\"a", "a\"", "\" ", "\";", " \"", "x = 1", "1.", ".5", "1;", "12", ";\n", "; ",
    ] {
        words.push(w.as_bytes().to_vec());
    }
    common::vocab_with_eog(words, &[])
}

fn oracle_mask(r: &GreedyReference, prefix: &[u8], vocab: &Vocabulary) -> TokenSet {
    let mut m = TokenSet::new(vocab.len());
    for (id, bytes) in vocab.text_tokens() {
        if r.is_viable_prefix(&[prefix, bytes].concat()) {
            m.insert(id);
        }
    }
    if r.accepts(prefix) {
        for &e in vocab.eog_tokens() {
            m.insert(e);
        }
    }
    m
}

fn diff(a: &TokenSet, b: &TokenSet, v: &Vocabulary) -> String {
    let show = |x: &TokenSet, y: &TokenSet| -> Vec<String> {
        x.iter()
            .filter(|t| !y.contains(*t))
            .take(12)
            .map(|t| format!("{:?}", String::from_utf8_lossy(v.bytes(t))))
            .collect()
    };
    format!(
        "engine only: {:?}; oracle only: {:?}",
        show(a, b),
        show(b, a)
    )
}

/// Random walks comparing every mask (and `allows`, `is_accepting`) with the oracle's.
fn walks(
    name: &str,
    g: &Arc<CompiledGrammar>,
    vocab: &Arc<Vocabulary>,
    rng: &mut Rng,
    n: usize,
    steps: usize,
    sample_allows: bool,
) -> usize {
    let r = GreedyReference::new(g.grammar()).unwrap();
    let mut checked = 0;
    for walk in 0..n {
        let mut c = Constraint::new(g, vocab, Options::default()).unwrap();
        let mut text: Vec<u8> = Vec::new();
        let mut mask = TokenSet::new(vocab.len());
        for _ in 0..steps {
            c.compute_mask(&mut mask);
            let want = oracle_mask(&r, &text, vocab);
            assert!(
                mask == want,
                "{name} walk {walk} after {:?}: {}",
                String::from_utf8_lossy(&text),
                diff(&mask, &want, vocab)
            );
            checked += 1;
            assert_eq!(c.is_accepting(), r.accepts(&text), "{name} after {text:?}");
            if sample_allows {
                for _ in 0..20 {
                    let t = TokenId(rng.below(vocab.len()) as u32);
                    assert_eq!(c.allows(t), mask.contains(t), "{name}: allows({t:?})");
                }
            }
            let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eog(*t)).collect();
            if allowed.is_empty() {
                break;
            }
            let t = allowed[rng.below(allowed.len())];
            c.commit(t).unwrap();
            text.extend_from_slice(vocab.bytes(t));
        }
    }
    checked
}

#[test]
fn greedy_masks_equal_the_greedy_oracle_on_random_walks() {
    let vocab = synthetic_vocab();
    let mut rng = Rng::new(18);
    let mut checked = 0;
    for (name, text) in GRAMMARS {
        let g = lark(text);
        checked += walks(name, &g, &vocab, &mut rng, 12, 20, true);
    }
    assert!(checked > 500, "only {checked} masks checked");
}

#[test]
fn greedy_masks_equal_the_greedy_oracle_over_all_smollm2_tokens() {
    let vocab = Arc::new(
        tokenizer_json::load(&common::shared(
            "tokenizers/SmolLM2-135M-Instruct.tokenizer.json",
        ))
        .unwrap(),
    );
    let mut rng = Rng::new(1818);
    let mut checked = 0;
    for (name, text) in &GRAMMARS[..2] {
        let g = lark(text);
        checked += walks(name, &g, &vocab, &mut rng, 2, 8, false);
    }
    assert!(checked >= 8, "only {checked} masks checked");
}

#[test]
fn llguidance_dialect_is_supported_exactly_or_refused_by_name() {
    // `{m,n}` on rules and terminals: exactly the bounded repetition.
    let g = lark("start: item{2,3} \";\"\nitem: \"a\" | \"b\"\n");
    let r = GreedyReference::new(g.grammar()).unwrap();
    for (s, ok) in [
        ("ab;", true),
        ("aba;", true),
        ("a;", false),
        ("abab;", false),
    ] {
        assert_eq!(r.accepts(s.as_bytes()), ok, "{s}");
    }
    let g = lark("start: D{2} | X{,1} \"!\" | Y{3,}\nD: /[0-9]/\nX: \"x\"\nY: \"y\"\n");
    let r = GreedyReference::new(g.grammar()).unwrap();
    for (s, ok) in [
        ("12", true),
        ("1", false),
        ("!", true),
        ("x!", true),
        ("yyy", true),
        ("yy", false),
        ("yyyyy", true),
    ] {
        assert_eq!(r.accepts(s.as_bytes()), ok, "{s}");
    }
    // `~ n` stays Lark's repetition.
    assert!(
        GrammarSource::Lark("start: \"a\" ~ 2\n".into())
            .compile(&Default::default())
            .is_ok()
    );
    // Refusals name the construct and its position.
    for (text, needle, line, column) in [
        ("start: %json { \"type\": \"integer\" }\n", "%json", 1, 8),
        ("start: \"a\"\n%llguidance {}\n", "%llguidance", 2, 1),
        (
            "start: A\nA: %regex { \"substring_words\": \"a b\" }\n",
            "%regex",
            2,
            4,
        ),
        ("start: <|end|> \"a\"\n", "special tokens", 1, 8),
        ("start: \"a\" <[128000]>\n", "special tokens", 1, 12),
        ("start: A\nA: /[a-z]+/ & /..../\n", "intersection", 2, 13),
        ("start: A\nA: ~/ab/\n", "negation", 2, 4),
        ("start: A\nA.2: \"a\"\n", "priority", 2, 2),
        ("start: \"a\"{3,1}\n", "maximum below", 1, 8),
    ] {
        let e = GrammarSource::Lark(text.into())
            .compile(&Default::default())
            .unwrap_err();
        assert!(e.message.contains(needle), "{text:?}: {e}");
        assert_eq!(
            e.location,
            domino_engine::grammar::Location::LineColumn { line, column },
            "{text:?}: {e}"
        );
    }
}

#[test]
fn ignore_terminals_are_lexed_one_at_a_time() {
    // With `%ignore` whitespace and `//` comments, the space before `/` ends (a merged
    // `(WS|COMMENT)+` terminal would read ` /` as the start of a comment and reject this).
    let g = lark(GRAMMARS[1].1);
    let r = GreedyReference::new(g.grammar()).unwrap();
    let vocab = synthetic_vocab();
    for (text, ok) in [
        ("x = a / b;", true),
        ("x = a // b\n;", true),
        ("x = a /b; // done", true),
        ("if a then b;", true),
        ("ifa then b;", false),
    ] {
        assert_eq!(r.accepts(text.as_bytes()), ok, "reference on {text:?}");
        assert_eq!(engine_accepts(&g, &vocab, text), ok, "engine on {text:?}");
    }
}

#[test]
fn split_blow_up_is_a_clear_error_not_a_hang() {
    // GBNF (character-level): tokens of many `a`s split into "a" / "aa" / "aaa" pieces in
    // exponentially many ways. The tree build stops at its work limit and the next commit
    // reports the grammar part instead of hanging.
    let g = CompiledGrammar::new(
        GrammarSource::Gbnf(
            "root ::= \"(\" root \")\" | root x | \"\"\nx ::= \"a\" | \"aa\" | \"aaa\"".into(),
        )
        .compile(&Default::default())
        .unwrap(),
    )
    .unwrap();
    let mut words: Vec<Vec<u8>> = (1..=40).map(|n| vec![b'a'; n]).collect();
    words.push(b"(".to_vec());
    words.push(Vec::new());
    let n = words.len();
    let vocab = Arc::new(Vocabulary::new(
        words,
        vec![false; n],
        vec![TokenId(n as u32 - 1)],
    ));
    let mut c = Constraint::new(&g, &vocab, Options::default()).unwrap();
    c.tree_cache().set_work_limit(200_000);
    let t0 = std::time::Instant::now();
    let mut mask = TokenSet::new(vocab.len());
    c.compute_mask(&mut mask);
    assert!(t0.elapsed().as_secs_f64() < 5.0);
    let e = c.commit(TokenId(0)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("took more than 200000 steps") && msg.contains("\"a\""),
        "{msg}"
    );
    // With the default limit a small vocabulary is fine (the same grammar, short tokens).
    let small = Arc::new(Vocabulary::new(
        vec![b"a".to_vec(), b"aa".to_vec(), b"(".to_vec(), Vec::new()],
        vec![false; 4],
        vec![TokenId(3)],
    ));
    let mut c = Constraint::new(&g, &small, Options::default()).unwrap();
    c.compute_mask(&mut mask);
    c.commit(TokenId(1)).unwrap();
}
