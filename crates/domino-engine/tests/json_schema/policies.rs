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
