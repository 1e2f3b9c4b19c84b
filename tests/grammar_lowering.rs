//! Lowering does not change the language: for each grammar, the promoted lowering (few, long
//! terminals) and the unpromoted one (literals and classes only) agree on EVERY string up to
//! a length over the grammar's alphabet, and so do the reference recognizer's viability
//! answers. Also checks the IR invariants on the result.

use domino::grammar::expr::GrammarDef;
use domino::grammar::ir::{Grammar, Symbol};
use domino::grammar::lower::{LowerOptions, lower_with};
use domino::grammar::reference::ReferenceRecognizer;
use domino::grammar::{gbnf, lark};

fn check_invariants(g: &Grammar) {
    for t in &g.terminals {
        let p = t.hir.properties();
        assert!(p.minimum_len().is_some() && p.maximum_len() != Some(0), "terminal {} has no non-empty string", t.name);
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
        assert!(g.productions.iter().any(|p| p.lhs.0 as usize == i), "nonterminal {} has no production", g.nonterminals[i]);
    }
}

/// Compare both lowerings on all strings over `alphabet` up to `max_len` bytes; returns the
/// number of accepted strings and of non-viable extensions met.
fn same_language(def: &GrammarDef, alphabet: &[u8], max_len: usize) -> (usize, usize) {
    let promoted = lower_with(def, &LowerOptions { promote: true }).unwrap();
    let plain = lower_with(def, &LowerOptions { promote: false }).unwrap();
    check_invariants(&promoted);
    check_invariants(&plain);
    assert!(promoted.terminals.len() <= plain.terminals.len() + 1);
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
            assert_eq!(acc, b.is_accepting(&sb), "acceptance differs on {:?}", String::from_utf8_lossy(&s));
            accepted += acc as usize;
            if s.len() == max_len {
                continue;
            }
            for &c in alphabet {
                let na = a.feed(&sa, c);
                let nb = b.feed(&sb, c);
                assert_eq!(na.is_some(), nb.is_some(), "viability differs on {:?}+{:?}", String::from_utf8_lossy(&s), c as char);
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
        ("root ::= \"{\" ws (str ws \":\" ws num)? \"}\"\nstr ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"n])* \"\\\"\"\nnum ::= \"-\"? [0-9]+\nws ::= [ ]*", b"{}\" :-1\\n", 7),
        ("root ::= x (\",\" x)*\nx ::= [ab]+ | \"(\" root \")\" | \"\"", b"ab,()", 7),
        ("root ::= ws \"ab\" ws\nws ::= ([ ] ws)?", b"ab ", 6),
        ("root ::= (\"a\"*)* (\"b\"? \"c\"?){2}", b"abc", 6),
        ("root ::= d d? \"x\"{1,2}\nd ::= [0-9] d | [0-9]", b"0x1", 6),
        ("root ::= e\ne ::= e \"+\" t | t\nt ::= [0-9]+ | \"(\" e \")\"", b"1+()", 7),
    ];
    for (text, alphabet, n) in grammars {
        let def = gbnf::parse(text, "root").unwrap();
        let (accepted, pruned) = same_language(&def, alphabet, *n);
        assert!(accepted > 0 && pruned > 0, "{text}: degenerate test ({accepted} accepted, {pruned} dead ends)");
    }
}

#[test]
fn promotion_preserves_the_language_lark_with_ignore() {
    let def = lark::parse("start: \"a\"+ (B | \"c\" \"d\")\nB: /b+/\n%ignore \" \"", "start").unwrap();
    let (accepted, _) = same_language(&def, b"abcd ", 6);
    assert!(accepted > 0);
    // Ignored text may sit between any two terminals, also between repeated literals.
    let g = domino::grammar::lower::lower(&def).unwrap();
    let r = ReferenceRecognizer::new(&g).unwrap();
    assert!(r.accepts(b" a a  a bb "));
    assert!(r.accepts(b"a c d"));
    assert!(!r.accepts(b"a b b"));
}
