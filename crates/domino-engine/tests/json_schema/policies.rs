//! Whitespace policies: compact, flexible and pretty layouts.

use super::*;

#[test]
fn whitespace_policies() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let compact = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
    assert!(Matcher::new(&compact).accepts(br#"{"a":[1,2]}"#));
    assert!(!Matcher::new(&compact).accepts(br#"{"a": [1,2]}"#));
    assert!(!Matcher::new(&compact).accepts(br#" {"a":[1,2]}"#));

    let flexible = json_schema::compile(&schema, &opts(WhitespacePolicy::Flexible)).unwrap();
    let spaced = |n: usize| format!("{{\"a\":{}[1 ,\n2]}}", " ".repeat(n));
    assert!(Matcher::new(&flexible).accepts(spaced(20).as_bytes()));
    assert!(
        !Matcher::new(&flexible).accepts(spaced(21).as_bytes()),
        "21 spaces in a row must be rejected"
    );
    assert!(Matcher::new(&flexible).accepts(b" {\n\t\"a\" : [ ] } \n"));

    let pretty = json_schema::compile(&schema, &opts(WhitespacePolicy::Pretty)).unwrap();
    let doc = json!({"a": [1, 2]});
    assert!(Matcher::new(&pretty).accepts(serde_json::to_string_pretty(&doc).unwrap().as_bytes()));
    assert!(Matcher::new(&pretty).accepts(b"{}"));
    assert!(Matcher::new(&pretty).accepts(b"{\n  \"a\": []\n}"));
    assert!(!Matcher::new(&pretty).accepts(br#"{"a":[1,2]}"#));
}

#[test]
fn pretty_nesting_beyond_the_indent_depth_is_compact() {
    let schema = json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"});
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Pretty)).unwrap();
    let mut v = json!([]);
    for _ in 0..json_schema::MAX_PRETTY_DEPTH {
        v = json!([v]);
    }
    assert!(Matcher::new(&def).accepts(serde_json::to_string_pretty(&v).unwrap().as_bytes()));
}

#[test]
fn by_default_the_document_ends_with_its_root_value() {
    let schema = json!({"type": "object"});
    let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
    let mut m = Matcher::new(&def);
    assert!(m.accepts(b"{}"));
    assert!(
        m.accepts(b"\n {\n}"),
        "leading and inner whitespace stay allowed"
    );
    assert!(!m.accepts(b"{} "), "no whitespace after the root value");
    assert!(!m.accepts(b"{}\n\n"));
    let trailing = CompileOptions {
        trailing_whitespace: true,
        ..CompileOptions::default()
    };
    let def = json_schema::compile(&schema, &trailing).unwrap();
    assert!(Matcher::new(&def).accepts(b"{}\n\n"));
}

/// Flexible layout: every place whitespace may go in an object or an array (after `{`/`[`,
/// around each `:` and `,`, before `}`/`]`) takes up to `max_whitespace` bytes of any of the
/// four whitespace characters and no more, in the source grammar and in the lowered one (the
/// separators `,ws` and `ws:ws` are single terminals there, the rest nullable `ws`).
#[test]
fn flexible_whitespace_goes_everywhere_up_to_its_limit() {
    use domino_engine::grammar::lower::lower;
    use domino_engine::grammar::reference::ReferenceRecognizer;
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "integer"}}},
        "required": ["a"],
        "additionalProperties": {"type": "boolean"}
    });
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Flexible)).unwrap();
    let rec = ReferenceRecognizer::new(&lower(&def).unwrap()).unwrap();
    // `~` marks the places; each document is checked with every place filled in turn.
    let docs = [
        r#"{~"a"~:~1~}"#,
        r#"{~"b"~:~[~1~,~2~]~,~"a"~:~1~}"#,
        r#"{~"x"~:~true~,~"a"~:~1~,~"b"~:~[~]~}"#,
    ];
    for doc in docs {
        let places = doc.matches('~').count();
        for at in 0..places {
            for (fill, ok) in [
                ("", true),
                (" \t\n\r", true),
                (&" ".repeat(20) as &str, true),
                (&"\n".repeat(21) as &str, false),
            ] {
                let mut text = String::new();
                for (i, part) in doc.split('~').enumerate() {
                    if i > 0 && i - 1 == at {
                        text.push_str(fill);
                    }
                    text.push_str(part);
                }
                assert_eq!(Matcher::new(&def).accepts(text.as_bytes()), ok, "{text:?}");
                assert_eq!(rec.accepts(text.as_bytes()), ok, "lowered: {text:?}");
            }
        }
    }
    for bad in [
        r#"{"a":1,}"#,
        r#"{,"a":1}"#,
        r#"{"a"::1}"#,
        r#"{"a":1,,"b":[]}"#,
        r#"{"a":[1,]}"#,
    ] {
        assert!(!rec.accepts(bad.as_bytes()), "{bad}");
    }
}
