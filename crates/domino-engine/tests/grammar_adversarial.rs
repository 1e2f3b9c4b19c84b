//! Adversarial grammars: limits are positioned errors (never stack overflows or hangs),
//! large bounds and nullable loops work, and bad input names what is wrong and where.

use domino_engine::grammar::reference::ReferenceRecognizer;
use domino_engine::grammar::{ErrorKind, GrammarSource, Location, gbnf, lark, lower, regex};

fn recognizer(text: &str) -> ReferenceRecognizer {
    ReferenceRecognizer::new(&lower::lower(&gbnf::parse(text, "root").unwrap()).unwrap()).unwrap()
}

#[test]
fn sixty_thousand_nested_parens_are_a_limit_error_in_every_front_end() {
    let open = "(".repeat(60_000);
    let close = ")".repeat(60_000);
    let e = gbnf::parse(&format!("root ::= {open}\"a\"{close}"), "root").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    assert!(matches!(e.location, Location::LineColumn { line: 1, .. }));
    let e = lark::parse(&format!("start: {open}\"a\"{close}"), "start").unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    let e = lark::parse(
        &format!("start: {}\"a\"{}", "[".repeat(60_000), "]".repeat(60_000)),
        "start",
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    let e = regex::parse(&format!("{open}a{close}")).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
    // Unbalanced deep input is also an error, not a crash.
    assert!(gbnf::parse(&format!("root ::= {open}"), "root").is_err());
}

#[test]
fn nesting_within_the_limit_works() {
    let text = format!("root ::= {}\"a\"{}", "(".repeat(200), ")".repeat(200));
    assert!(recognizer(&text).accepts(b"a"));
}

#[test]
fn bound_of_5000_works_for_regular_and_recursive_bodies() {
    let r = recognizer("root ::= \"a\"{0,5000}");
    assert!(r.accepts(&vec![b'a'; 5000]));
    assert!(!r.accepts(&vec![b'a'; 5001]));
    let r = recognizer("root ::= x{0,5000} \"!\"\nx ::= \"a\" | \"(\" root \")\"");
    let at_5000 = r
        .run(&vec![b'a'; 5000])
        .expect("5000 items are a viable prefix");
    assert!(r.is_accepting(&r.feed(&at_5000, b'!').unwrap()));
    assert!(
        r.feed(&at_5000, b'a').is_none(),
        "a 5001st item must be rejected"
    );
    assert!(r.accepts(b"a(a!)!"));
    let r = recognizer("root ::= [0-9]{5000}");
    assert!(r.accepts(&vec![b'7'; 5000]));
    assert!(!r.accepts(&vec![b'7'; 4999]));
}

#[test]
fn nullable_loops_terminate_and_mean_what_they_say() {
    let r = recognizer("root ::= (\"a\"*)*");
    assert!(r.accepts(b"") && r.accepts(b"aaaa") && !r.accepts(b"b"));
    let r = recognizer("root ::= (x?)* \"b\"\nx ::= \"a\" | \"(\" root \")\"");
    assert!(r.accepts(b"b") && r.accepts(b"a(b)ab") && !r.accepts(b"a"));
    let r = recognizer("root ::= ((x*)*)* \"b\"\nx ::= \"\" | \"a\" root");
    assert!(r.accepts(b"abb") && r.accepts(b"b") && !r.accepts(b"ab"));
    let r = recognizer("root ::= (\"\"){0,5000} \"z\"");
    assert!(r.accepts(b"z"));
}

#[test]
fn undefined_rule_is_named_with_line_and_column() {
    let e = gbnf::parse(
        "root ::= greeting \" \" name\ngreeting ::= \"hi\"\n",
        "root",
    )
    .unwrap_err();
    assert_eq!(
        e.location,
        Location::LineColumn {
            line: 1,
            column: 23
        }
    );
    assert!(e.message.contains("`name`"), "{e}");
    assert_eq!(e.to_string(), "1:23: undefined rule `name`");
    let e = lark::parse("start: a\na: B", "start").unwrap_err();
    assert!(
        e.message.contains("`B`") && e.location == Location::LineColumn { line: 2, column: 4 },
        "{e}"
    );
}

#[test]
fn empty_language_is_an_error() {
    for text in [
        "root ::= root",
        "root ::= \"a\" root",
        "root ::= x\nx ::= \"(\" x \")\"",
        "root ::= [^\\x00-\\U0010FFFF]",
    ] {
        let def = gbnf::parse(text, "root").unwrap();
        let e = lower::lower(&def).unwrap_err();
        assert!(e.message.contains("empty"), "{text}: {e}");
    }
    // The error names the rules that never terminate, with their position.
    let text = "root ::= \"a\" b\nb ::= \"(\" c \")\"\nc ::= \"x\" c\n";
    let e = lower::lower(&gbnf::parse(text, "root").unwrap()).unwrap_err();
    assert!(
        e.message.contains("`b` (2:1)")
            && e.message.contains("`c` (3:1)")
            && e.message.contains("never terminate"),
        "{e}"
    );
    // An unproductive alternative is removed with a warning; the rest still works.
    let g =
        lower::lower(&gbnf::parse("root ::= \"a\" | x\nx ::= \"b\" x", "root").unwrap()).unwrap();
    assert!(
        g.warnings.iter().any(|w| w.contains("`x`")),
        "{:?}",
        g.warnings
    );
}

#[test]
fn bad_inputs_give_positioned_errors() {
    let cases: &[(&str, &str, u32, u32)] = &[
        ("root ::= \"a\\q\"", "bad escape", 1, 12),
        ("root ::= \"abc", "unterminated", 1, 10),
        ("root ::= [a-", "unterminated", 1, 10),
        ("root ::= \"a\"{3,1}", "maximum below minimum", 1, 10),
        ("root ::= \"a\"\n  x ::= )", "expected a rule name", 2, 9),
        ("root = \"a\"", "::=", 1, 6),
        ("root ::= [z-a]", "end before start", 1, 11),
        ("root ::= \"\\uD800\"", "not a Unicode scalar", 1, 11),
    ];
    for (text, needle, line, column) in cases {
        let e = gbnf::parse(text, "root").unwrap_err();
        assert!(e.message.contains(needle), "{text:?}: {e}");
        assert_eq!(
            e.location,
            Location::LineColumn {
                line: *line,
                column: *column
            },
            "{text:?}: {e}"
        );
    }
    assert_eq!(
        gbnf::parse("root ::= \"a\"{0,1000000000}", "root")
            .unwrap_err()
            .kind,
        ErrorKind::Limit
    );
    assert!(regex::parse(r"a\b").is_err());
    assert!(regex::parse(r"(?m)a$b").is_err());
}

#[test]
fn exponential_inlining_is_bounded() {
    // Each rule doubles the previous one: inlining everything would be 2^40 nodes.
    let mut text = String::from("root ::= r0\n");
    for i in 0..40 {
        text.push_str(&format!("r{i} ::= r{} r{}\n", i + 1, i + 1));
    }
    text.push_str("r40 ::= [a-c]\n");
    let g = lower::lower(&gbnf::parse(&text, "root").unwrap()).unwrap();
    assert!(g.terminals.len() < 100);
    // And a lexical rule that would be that big is a Limit error.
    let mut lark_text = String::from("start: R0\n");
    for i in 0..40 {
        lark_text.push_str(&format!("R{i}: R{} R{}\n", i + 1, i + 1));
    }
    lark_text.push_str("R40: \"a\"\n");
    let e = lower::lower(&lark::parse(&lark_text, "start").unwrap()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit, "{e}");
}

#[test]
fn unknown_extension_is_an_error() {
    let dir = std::env::temp_dir().join(format!("domino-grammar-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("g.txt");
    std::fs::write(&p, "root ::= \"a\"").unwrap();
    assert!(GrammarSource::from_path(&p).is_err());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn long_chains_of_regular_rules_do_not_overflow_the_stack() {
    // Each rule nests the next one inside an alternation: inlining everything would make a
    // HIR thousands of levels deep (recursive HIR walks, NFA compilation, cloning).
    for n in [3000usize, 20_000] {
        let mut text = String::from("root ::= r0\n");
        for i in 0..n {
            text.push_str(&format!("r{i} ::= \"a\" | r{} \"b\"\n", i + 1));
        }
        text.push_str(&format!("r{n} ::= \"c\"\n"));
        let g = lower::lower(&gbnf::parse(&text, "root").unwrap()).unwrap();
        let r = ReferenceRecognizer::new(&g).unwrap();
        assert!(r.accepts(b"ab") && r.accepts(b"a") && !r.accepts(b"b"));
        let _ = domino_engine::grammar::print::ir_to_gbnf(&g);
    }
}
