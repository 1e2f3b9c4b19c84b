//! Lowering does not change the language: for each grammar, the promoted lowering (few, long
//! terminals) and the unpromoted one (literals and classes only) agree on EVERY string up to
//! a length over the grammar's alphabet, and so do the reference recognizer's viability
//! answers. Also checks the IR invariants on the result.

mod common;
use common::rng::Rng;

use domino_engine::grammar::expr::GrammarDef;
use domino_engine::grammar::ir::{Grammar, Symbol};
use domino_engine::grammar::lower::{LowerOptions, lower_with};
use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::grammar::regex_hir::RegexHir;
use domino_engine::grammar::{gbnf, lark};

fn check_invariants(g: &Grammar) {
    for t in &g.terminals {
        let p = t.hir.properties();
        assert!(
            p.minimum_len().is_some() && p.maximum_len() != Some(0),
            "terminal {} has no non-empty string",
            t.name
        );
    }
    for p in &g.productions {
        assert!((p.lhs.0 as usize) < g.nonterminals.len());
        for s in &p.rhs {
            match s {
                Symbol::Terminal(t) => assert!((t.0 as usize) < g.terminals.len()),
                Symbol::Nonterminal(n) => assert!((n.0 as usize) < g.nonterminals.len()),
            }
        }
    }
    for (i, _) in g.nonterminals.iter().enumerate() {
        assert!(
            g.productions.iter().any(|p| p.lhs.0 as usize == i),
            "nonterminal {} has no production",
            g.nonterminals[i]
        );
    }
}

/// Compare both lowerings on all strings over `alphabet` up to `max_len` bytes; returns the
/// number of accepted strings and of non-viable extensions met.
fn same_language(def: &GrammarDef, alphabet: &[u8], max_len: usize) -> (usize, usize) {
    let promoted = lower_with(def, &LowerOptions { promote: true }).unwrap();
    let plain = lower_with(def, &LowerOptions { promote: false }).unwrap();
    check_invariants(&promoted);
    check_invariants(&plain);
    let a = ReferenceRecognizer::new(&promoted).unwrap();
    let b = ReferenceRecognizer::new(&plain).unwrap();
    let mut accepted = 0;
    let mut pruned = 0;
    // Breadth-first over strings, pruning where neither side is viable (they must agree).
    let mut frontier = vec![(Vec::<u8>::new(), a.start(), b.start())];
    for _ in 0..=max_len {
        let mut next = Vec::new();
        for (s, sa, sb) in frontier {
            let acc = a.is_accepting(&sa);
            assert_eq!(
                acc,
                b.is_accepting(&sb),
                "acceptance differs on {:?}",
                String::from_utf8_lossy(&s)
            );
            accepted += acc as usize;
            if s.len() == max_len {
                continue;
            }
            for &c in alphabet {
                let na = a.feed(&sa, c);
                let nb = b.feed(&sb, c);
                assert_eq!(
                    na.is_some(),
                    nb.is_some(),
                    "viability differs on {:?}+{:?}",
                    String::from_utf8_lossy(&s),
                    c as char
                );
                pruned += na.is_none() as usize;
                if let (Some(na), Some(nb)) = (na, nb) {
                    let mut t = s.clone();
                    t.push(c);
                    next.push((t, na, nb));
                }
            }
        }
        frontier = next;
    }
    (accepted, pruned)
}

#[test]
fn promotion_preserves_the_language_gbnf() {
    let grammars: &[(&str, &[u8], usize)] = &[
        (
            "root ::= \"{\" ws (str ws \":\" ws num)? \"}\"\nstr ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"n])* \"\\\"\"\nnum ::= \"-\"? [0-9]+\nws ::= [ ]*",
            b"{}\" :-1\\n",
            7,
        ),
        (
            "root ::= x (\",\" x)*\nx ::= [ab]+ | \"(\" root \")\" | \"\"",
            b"ab,()",
            7,
        ),
        ("root ::= ws \"ab\" ws\nws ::= ([ ] ws)?", b"ab ", 6),
        ("root ::= (\"a\"*)* (\"b\"? \"c\"?){2}", b"abc", 6),
        ("root ::= d d? \"x\"{1,2}\nd ::= [0-9] d | [0-9]", b"0x1", 6),
        (
            "root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]+ | \"(\" e \")\"",
            b"1+()",
            7,
        ),
    ];
    for (text, alphabet, n) in grammars {
        let def = gbnf::parse(text, "root").unwrap();
        let (accepted, pruned) = same_language(&def, alphabet, *n);
        assert!(
            accepted > 0 && pruned > 0,
            "{text}: degenerate test ({accepted} accepted, {pruned} dead ends)"
        );
    }
}

#[test]
fn promotion_preserves_the_language_lark_with_ignore() {
    let def = lark::parse(
        "start: \"a\"+ (B | \"c\" \"d\")\nB: /b+/\n%ignore \" \"",
        "start",
    )
    .unwrap();
    let (accepted, _) = same_language(&def, b"abcd ", 6);
    assert!(accepted > 0);
    // Ignored text may sit between any two terminals, also between repeated literals.
    let g = domino_engine::grammar::lower::lower(&def).unwrap();
    let r = ReferenceRecognizer::new(&g).unwrap();
    assert!(r.accepts(b" a a  a bb "));
    assert!(r.accepts(b"a c d"));
    assert!(!r.accepts(b"a b b"));
}

fn random_expr(rng: &mut Rng, depth: u32, rules: usize) -> String {
    let leaf = depth == 0 || rng.below(3) == 0;
    if leaf {
        return match rng.below(6) {
            0 => "\"a\"".into(),
            1 => "\"bc\"".into(),
            2 => "[ab]".into(),
            3 => "[^a]".into(),
            4 => "\"\"".into(),
            _ => format!("r{}", rng.below(rules)),
        };
    }
    let sub = |rng: &mut Rng| random_expr(rng, depth - 1, rules);
    match rng.below(5) {
        0 => format!("{} {}", sub(rng), sub(rng)),
        1 => format!("({} | {})", sub(rng), sub(rng)),
        2 => format!("({}){}", sub(rng), ["*", "+", "?"][rng.below(3)]),
        3 => {
            let lo = rng.below(3);
            let hi = lo + rng.below(3);
            format!("({}){{{lo},{hi}}}", sub(rng))
        }
        _ => format!("{} r{}", sub(rng), rng.below(rules)),
    }
}

fn random_grammar(rng: &mut Rng) -> String {
    let rules = 1 + rng.below(3);
    let mut text = format!("root ::= {}\n", random_expr(rng, 3, rules));
    for i in 0..rules {
        text.push_str(&format!(
            "r{i} ::= {} | {}\n",
            random_expr(rng, 2, rules),
            random_expr(rng, 1, rules)
        ));
    }
    text
}

/// Random small grammars (deterministic): both lowerings must agree on everything.
#[test]
fn promotion_preserves_the_language_on_random_grammars() {
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    let (mut compared, mut nonempty) = (0, 0);
    for _ in 0..120 {
        let text = random_grammar(&mut rng);
        let def = gbnf::parse(&text, "root").unwrap_or_else(|e| panic!("{text}: {e}"));
        let a = lower_with(&def, &LowerOptions { promote: true });
        let b = lower_with(&def, &LowerOptions { promote: false });
        assert_eq!(a.is_ok(), b.is_ok(), "{text}");
        if a.is_err() {
            continue;
        }
        let (accepted, _) = same_language(&def, b"abc", 5);
        compared += 1;
        nonempty += (accepted > 0) as usize;
    }
    assert!(
        compared > 80 && nonempty > 60,
        "compared {compared}, non-empty {nonempty}"
    );
}

/// An independent oracle straight from the `GrammarDef` (a least fixpoint of "rule r derives
/// text[i..j]", no lowering, no Earley): the reference recognizer over the lowered grammar
/// must agree with it on every string over `abc` up to length 5.
#[test]
fn reference_over_lowered_grammar_matches_a_direct_oracle() {
    use domino_engine::grammar::expr::Expr;
    use regex_syntax::hir::{Class, HirKind};

    fn spans(e: &Expr, i: usize, text: &[u8], table: &[Vec<u64>]) -> u64 {
        let n = text.len();
        match e {
            Expr::Empty => 1 << i,
            Expr::Bytes(b) => {
                if text[i..].starts_with(b) {
                    1 << (i + b.len())
                } else {
                    0
                }
            }
            Expr::Regex(h) => match h.kind() {
                HirKind::Class(Class::Unicode(c)) => {
                    let ch = std::str::from_utf8(&text[i..])
                        .ok()
                        .and_then(|s| s.chars().next());
                    match ch {
                        Some(ch) if c.ranges().iter().any(|r| r.start() <= ch && ch <= r.end()) => {
                            1 << (i + ch.len_utf8())
                        }
                        _ => 0,
                    }
                }
                HirKind::Literal(l) => {
                    if text[i..].starts_with(&l.0) {
                        1 << (i + l.0.len())
                    } else {
                        0
                    }
                }
                other => panic!("oracle does not handle {other:?}"),
            },
            Expr::Constrained { .. } => panic!(
                "oracle does not handle constrained terminals (GBNF/Lark never produce them)"
            ),
            Expr::Ref(r) => table[r.0 as usize][i],
            Expr::Seq(v) => v
                .iter()
                .fold(1u64 << i, |cur, x| step(x, cur, n, text, table)),
            Expr::Alt(v) => v.iter().fold(0, |acc, x| acc | spans(x, i, text, table)),
            Expr::RefPairs(pairs) => spans(&Expr::ref_pairs_expanded(pairs), i, text, table),
            Expr::Repeat { expr, min, max } => {
                let mut cur = 1u64 << i;
                let mut result = if *min == 0 { cur } else { 0 };
                let mut count = 0u32;
                loop {
                    if max.is_some_and(|m| count >= m) {
                        break;
                    }
                    cur = step(expr, cur, n, text, table);
                    count += 1;
                    let before = result;
                    if count >= *min {
                        result |= cur;
                        if result == before && count > *min + n as u32 + 1 {
                            break;
                        }
                    }
                    if cur == 0 || (count >= *min && result == before && max.is_none()) {
                        break;
                    }
                }
                result
            }
        }
    }
    fn step(e: &Expr, from: u64, n: usize, text: &[u8], table: &[Vec<u64>]) -> u64 {
        (0..=n)
            .filter(|k| from & (1 << k) != 0)
            .fold(0, |acc, k| acc | spans(e, k, text, table))
    }
    fn oracle(def: &GrammarDef, text: &[u8]) -> bool {
        let n = text.len();
        let mut table = vec![vec![0u64; n + 1]; def.rules.len()];
        loop {
            let mut changed = false;
            for r in 0..def.rules.len() {
                for i in 0..=n {
                    let m = spans(&def.rules[r].expr, i, text, &table);
                    if m & !table[r][i] != 0 {
                        table[r][i] |= m;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        table[def.start.0 as usize][0] & (1 << n) != 0
    }

    let mut strings: Vec<Vec<u8>> = vec![vec![]];
    let mut layer: Vec<Vec<u8>> = vec![vec![]];
    for _ in 0..5 {
        layer = layer
            .iter()
            .flat_map(|s| b"abc".iter().map(move |&c| [s.clone(), vec![c]].concat()))
            .collect();
        strings.extend(layer.iter().cloned());
    }
    let mut rng = Rng::new(0x0bad_cafe_dead_beef);
    let (mut compared, mut agreements_accepting) = (0, 0);
    for _ in 0..80 {
        let text = random_grammar(&mut rng);
        let def = gbnf::parse(&text, "root").unwrap();
        let Ok(g) = lower_with(&def, &LowerOptions::default()) else {
            // Lowering says the language is empty: the oracle must agree on every string.
            assert!(strings.iter().all(|s| !oracle(&def, s)), "{text}");
            continue;
        };
        let r = ReferenceRecognizer::new(&g).unwrap();
        for s in &strings {
            let expected = oracle(&def, s);
            assert_eq!(
                r.accepts(s),
                expected,
                "{text}on {:?}",
                String::from_utf8_lossy(s)
            );
            agreements_accepting += expected as usize;
        }
        compared += 1;
    }
    assert!(
        compared > 50 && agreements_accepting > 100,
        "compared {compared}, accepting {agreements_accepting}"
    );
}

/// Whether some terminal of `g` matches a whole extra member (a key that is not named, its
/// value): one that inlined the key set.
fn a_terminal_spans_a_member(g: &Grammar) -> bool {
    g.terminals.iter().any(|t| {
        [&b"\"zz\":\"v\""[..], b",\"zz\":\"v\""]
            .iter()
            .any(|text| common::full_match(&t.hir, text))
    })
}

/// A key set kept as its names (`Rule::is_standalone`: its DFA is the names' trie) stays a
/// terminal of its own: the members of a map of strings are not promoted into one terminal
/// around it, as they are when the same language is given as a built HIR. The language is
/// the same either way.
#[test]
fn standalone_key_sets_stay_terminals_of_their_own() {
    use domino_engine::grammar::expr::Expr;
    use domino_engine::grammar::{CompileOptions, json_schema};
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        "additionalProperties": {"type": "string"}
    });
    let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
    let key = def
        .rules
        .iter()
        .position(|r| r.is_standalone())
        .expect("the key set is standalone");
    // The terminals that are the key rule's own language, alone.
    let lower = |def: &GrammarDef| {
        let Expr::Regex(key_hir) = &def.rules[key].expr else {
            panic!("a key set is a regex");
        };
        let g = domino_engine::grammar::lower::lower(def).unwrap();
        check_invariants(&g);
        let alone = g
            .terminals
            .iter()
            .filter(|t| RegexHir::ptr_eq(&t.hir, key_hir))
            .count();
        (g, alone)
    };
    let (standalone, alone) = lower(&def);
    assert_eq!(alone, 1, "the key set is a terminal");
    assert!(!a_terminal_spans_a_member(&standalone));
    let mut inlined_def = def.clone();
    let Expr::Regex(key_hir) = &def.rules[key].expr else {
        panic!("a key set is a regex");
    };
    inlined_def.rules[key].expr = Expr::Regex(RegexHir::new(key_hir.hir().clone()));
    assert!(!inlined_def.rules[key].is_standalone());
    let (inlined, alone) = lower(&inlined_def);
    assert_eq!(alone, 0, "as a built HIR the key set is inlined");
    assert!(
        a_terminal_spans_a_member(&inlined),
        "as a built HIR, a bigger terminal holds the key set (else this test checks nothing)"
    );
    let a = ReferenceRecognizer::new(&standalone).unwrap();
    let b = ReferenceRecognizer::new(&inlined).unwrap();
    for doc in [
        r#"{"id":1,"name":"n","x":"y"}"#,
        r#"{"x":"y","id":2}"#,
        r#"{"name":"n","nam":"m","namex":"z"}"#,
        r#"{"id":"s"}"#,
        r#"{"name":1}"#,
        r#"{"x":1}"#,
        r#"{"id":1,"id":2}"#,
    ] {
        assert_eq!(
            a.accepts(doc.as_bytes()),
            b.accepts(doc.as_bytes()),
            "{doc}"
        );
    }
    assert!(a.accepts(br#"{"id":1,"name":"n","x":"y"}"#));
    assert!(!a.accepts(br#"{"x":1}"#));
}
