//! Keywords compiled exactly by rewriting (draft 2020-12 and draft 7 semantics): general
//! `if`/`then`/`else`, `dependentSchemas`, `contains`/`minContains`/`maxContains`,
//! `propertyNames`, `unevaluatedProperties`/`unevaluatedItems` where they reduce to
//! `additionalProperties`/`items`, `uniqueItems` over finite item domains. For each schema,
//! every listed document (valid and invalid) gets the same verdict from the lowered grammar's
//! `ReferenceRecognizer` as from the `jsonschema` crate; and the refused forms are refused
//! by name with their JSON pointer.

use super::*;
use domino_engine::grammar::lower::lower;
use domino_engine::grammar::reference::ReferenceRecognizer;

/// The grammar accepts exactly the valid documents among `docs` (compact layout).
fn exact(name: &str, schema: &Value, docs: &[&str]) {
    let v = validator(schema);
    let o = CompileOptions {
        whitespace: WhitespacePolicy::Compact,
        ..CompileOptions::default()
    };
    let def = json_schema::compile(schema, &o).unwrap_or_else(|e| panic!("{name}: {e}"));
    let ir = lower(&def).unwrap_or_else(|e| panic!("{name}: {e}"));
    let rec = ReferenceRecognizer::new(&ir).unwrap();
    let mut valid_count = 0;
    for doc in docs {
        let parsed: Value = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let valid = v.is_valid(&parsed);
        valid_count += usize::from(valid);
        assert_eq!(
            rec.accepts(doc.as_bytes()),
            valid,
            "{name}: {doc}: grammar accepts = {}, jsonschema valid = {valid}",
            !valid
        );
    }
    assert!(
        valid_count > 0 && valid_count < docs.len(),
        "{name}: test bug, the documents are all valid or all invalid"
    );
}

/// The schema is refused as unsupported, naming `keyword` at `pointer`.
fn refused(schema: &Value, keyword: &str, pointer: &str) {
    let e = json_schema::compile(schema, &CompileOptions::default())
        .expect_err("refused as unsupported");
    assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
    assert_eq!(e.feature.as_deref(), Some(keyword), "{e}");
    assert!(format!("{e}").contains(pointer), "{e} names {pointer}");
}

const NUMBERS: &[&str] = &[
    "-3", "0", "4", "5", "9", "10", "11", "2.5", r#""x""#, "null",
];

#[test]
fn if_then_else_in_general() {
    // Numbers: if ≥ 5 then < 10 else > 0 (strings etc. pass `if`, so need `then`).
    let schema =
        json!({"if": {"minimum": 5}, "then": {"maximum": 9}, "else": {"exclusiveMinimum": 0}});
    exact("if-then-else", &schema, NUMBERS);
    let schema = json!({"if": {"minimum": 5}, "then": {"maximum": 9}});
    exact("if-then", &schema, NUMBERS);
    let schema = json!({"if": {"minimum": 5}, "else": {"const": 0}});
    exact("if-else", &schema, NUMBERS);
    let schema = json!({"if": {"type": "string", "maxLength": 2}, "then": {"enum": ["a", "b", 1]}, "else": {"type": ["string", "integer"]}});
    exact(
        "if-type-length",
        &schema,
        &[
            r#""a""#, r#""ab""#, r#""abc""#, "1", "2", "2.5", "null", "true",
        ],
    );
    // Object tests: a property's value, required, counts.
    let schema = json!({
        "type": "object",
        "properties": {"kind": {"type": "string"}, "n": {"type": "integer"}},
        "if": {"properties": {"kind": {"maxLength": 3}}, "required": ["kind"]},
        "then": {"required": ["n"]},
        "else": {"maxProperties": 1}
    });
    exact(
        "if-object",
        &schema,
        &[
            r#"{}"#,
            r#"{"kind":"ab"}"#,
            r#"{"kind":"ab","n":1}"#,
            r#"{"n":1,"kind":"abc"}"#,
            r#"{"kind":"abcd"}"#,
            r#"{"kind":"abcd","n":1}"#,
            r#"{"n":1}"#,
            r#"{"n":1,"x":2}"#,
        ],
    );
    // Draft 7, `if` inside `allOf` beside another branch's `then`: that `then` does nothing.
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "allOf": [{"if": {"maximum": 3}, "then": {"minimum": 0}}, {"else": {"const": 100}}]
    });
    exact(
        "if-allOf-stray-else",
        &schema,
        &["-1", "0", "3", "4", "100"],
    );
    // A test that cannot be negated exactly stays unsupported, by name.
    refused(
        &json!({"properties": {"a": {"if": {"pattern": "^x"}, "then": {"maxLength": 3}}}}),
        "if",
        "/properties/a/if",
    );
}

#[test]
fn dependent_schemas() {
    let schema = json!({
        "dependentSchemas": {
            "bar": {"properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}}},
            "baz": {"required": ["qux"]}
        }
    });
    exact(
        "dependentSchemas",
        &schema,
        &[
            r#"{"foo":1,"bar":2}"#,
            r#"{"foo":"quux"}"#,
            r#"{"foo":"quux","bar":2}"#,
            r#"{"foo":2,"bar":"quux"}"#,
            r#"{"baz":1}"#,
            r#"{"baz":1,"qux":2}"#,
            r#"{"qux":2,"baz":1,"bar":"x"}"#,
            r#"["bar"]"#,
            r#""foobar""#,
            "12",
        ],
    );
    // Draft 7 schema-valued `dependencies` of any shape.
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "dependencies": {"bar": {"properties": {"foo": {"type": "integer"}}, "maxProperties": 2}, "quux": false, "baz": ["bar"]}
    });
    exact(
        "dependencies-draft7",
        &schema,
        &[
            r#"{"foo":"x"}"#,
            r#"{"bar":1,"foo":2}"#,
            r#"{"bar":1,"foo":"x"}"#,
            r#"{"bar":1,"foo":2,"x":3}"#,
            r#"{"quux":1}"#,
            r#"{"baz":1}"#,
            r#"{"baz":1,"bar":2}"#,
            "[1]",
        ],
    );
    let schema = json!({"dependentSchemas": {"foo": false}, "type": "object"});
    exact(
        "dependentSchemas-false",
        &schema,
        &[
            r#"{}"#,
            r#"{"bar":1}"#,
            r#"{"foo":1}"#,
            r#"{"foo":1,"bar":2}"#,
        ],
    );
}

#[test]
fn contains_with_min_and_max_contains() {
    let arrays = &[
        "[]",
        "[1]",
        "[5]",
        "[5,6]",
        "[1,5]",
        "[5,1,6]",
        "[5,6,7]",
        "[1,2,3]",
        "[1,\"x\",5]",
        "[\"x\"]",
        "[5,5,5,5]",
        "{}",
    ];
    let base = |extra: Value| {
        let mut s = json!({"contains": {"minimum": 5}, "items": {"type": "integer"}});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        s
    };
    exact("contains", &base(json!({})), arrays);
    exact("minContains", &base(json!({"minContains": 2})), arrays);
    exact("maxContains", &base(json!({"maxContains": 1})), arrays);
    exact(
        "min-maxContains",
        &base(json!({"minContains": 2, "maxContains": 3})),
        arrays,
    );
    exact(
        "minContains-0",
        &base(json!({"minContains": 0, "maxContains": 1})),
        arrays,
    );
    exact(
        "contains-maxItems",
        &base(json!({"minContains": 2, "maxItems": 3})),
        arrays,
    );
    // With prefixItems: position 0 is a string, the rest numbers; the witness may be anywhere.
    let schema = json!({"prefixItems": [{"type": "string"}], "items": {"type": "number"}, "contains": {"const": "a"}});
    exact(
        "contains-prefix",
        &schema,
        &[
            r#"["a"]"#,
            r#"["b"]"#,
            r#"["a",1]"#,
            r#"["b",1]"#,
            "[1]",
            "[]",
        ],
    );
    // Untyped `contains` (draft 7 too): any item may be the witness.
    let schema = json!({"$schema": "http://json-schema.org/draft-07/schema#", "contains": {"type": "string"}});
    exact(
        "contains-draft7",
        &schema,
        &[
            r#"["a"]"#,
            r#"[1,"a"]"#,
            r#"[1,2]"#,
            r#"[]"#,
            "3",
            r#"[[],{"a":"b"}]"#,
        ],
    );
    // maxContains whose `contains` cannot be negated exactly: refused by name.
    refused(
        &json!({"contains": {"pattern": "^a"}, "maxContains": 1}),
        "maxContains",
        "/maxContains",
    );
}

#[test]
fn unevaluated_properties_and_items_where_static() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "allOf": [{"properties": {"b": {"type": "string"}}}, {"minProperties": 0}],
        "unevaluatedProperties": {"type": "boolean"}
    });
    exact(
        "unevaluatedProperties",
        &schema,
        &[
            r#"{}"#,
            r#"{"a":1}"#,
            r#"{"b":"s","a":1}"#,
            r#"{"b":1}"#,
            r#"{"c":true}"#,
            r#"{"c":1}"#,
            r#"{"a":"s"}"#,
        ],
    );
    let schema = json!({"properties": {"a": {}}, "unevaluatedProperties": false, "anyOf": [{"required": ["a"]}, {"minProperties": 0}]});
    exact(
        "unevaluatedProperties-false",
        &schema,
        &[r#"{}"#, r#"{"a":1}"#, r#"{"b":1}"#, "3"],
    );
    let schema = json!({"prefixItems": [{"type": "integer"}], "allOf": [{"prefixItems": [true, {"type": "string"}]}], "unevaluatedItems": false});
    exact(
        "unevaluatedItems",
        &schema,
        &[
            "[]",
            "[1]",
            r#"[1,"a"]"#,
            r#"[1,"a",2]"#,
            r#"["a"]"#,
            r#"{"a":1}"#,
        ],
    );
    let schema = json!({"items": {"type": "integer"}, "unevaluatedItems": false});
    exact(
        "unevaluatedItems-items",
        &schema,
        &["[]", "[1,2]", r#"["a"]"#],
    );
    // Not static: an `anyOf` branch that evaluates properties, or a `$ref` beside it.
    refused(
        &json!({"anyOf": [{"properties": {"a": {}}}], "unevaluatedProperties": false}),
        "unevaluatedProperties",
        "/unevaluatedProperties",
    );
    refused(
        &json!({"$defs": {"d": {"properties": {"a": {}}}}, "properties": {"o": {"$ref": "#/$defs/d", "unevaluatedProperties": false}}}),
        "unevaluatedProperties",
        "/properties/o/unevaluatedProperties",
    );
}

#[test]
fn property_names() {
    let docs = &[
        r#"{}"#,
        r#"{"a":1}"#,
        r#"{"ab":1,"abc":2}"#,
        r#"{"abcd":1}"#,
        r#"{"b":1}"#,
        r#"{"aaaa":true}"#,
        r#"{"a":"s"}"#,
        r#"{"a\u0062":1}"#,
        "[]",
    ];
    let schema =
        json!({"propertyNames": {"maxLength": 3}, "additionalProperties": {"type": "integer"}});
    exact("propertyNames-maxLength", &schema, docs);
    let schema = json!({"propertyNames": {"pattern": "^a+$"}, "properties": {"a": {"type": "integer"}, "b": {}}});
    exact("propertyNames-pattern", &schema, docs);
    // (`enum`/`const` strings are written in their one canonical spelling: `"a\u0062"` for
    // `"ab"` is not generated, a known completeness gap.)
    let schema =
        json!({"propertyNames": {"enum": ["a", "ab"]}, "properties": {"a": {"type": "integer"}}});
    exact("propertyNames-enum", &schema, &docs[..7]);
    let schema = json!({"propertyNames": false});
    exact("propertyNames-false", &schema, docs);
    let schema = json!({"propertyNames": {"const": "b"}, "required": ["b"], "additionalProperties": false, "properties": {"b": {}}});
    exact("propertyNames-required", &schema, docs);
    refused(
        &json!({"propertyNames": {"maxLength": 2}, "patternProperties": {"^x": {}}}),
        "propertyNames",
        "/propertyNames",
    );
}

#[test]
fn unique_items_over_finite_domains() {
    let schema = json!({"uniqueItems": true, "items": {"enum": [1, "a", null, [1], {"k": 1}]}});
    exact(
        "uniqueItems-enum",
        &schema,
        &[
            "[]",
            "[1]",
            r#"[1,"a",null]"#,
            "[1,1]",
            "[1,1.0]",
            r#"["a",1,"a"]"#,
            "[[1],{\"k\":1},null,1,\"a\"]",
            "[[1],[1]]",
            "[2]",
        ],
    );
    let schema = json!({"uniqueItems": true, "prefixItems": [{"type": "boolean"}, {"type": "boolean"}], "items": false});
    exact(
        "uniqueItems-booleans",
        &schema,
        &[
            "[]",
            "[true]",
            "[true,false]",
            "[false,true]",
            "[true,true]",
            "[false,false,true]",
        ],
    );
    let schema =
        json!({"uniqueItems": true, "items": {"type": ["boolean", "null"]}, "minItems": 2});
    exact(
        "uniqueItems-minItems",
        &schema,
        &[
            "[true]",
            "[true,null]",
            "[null,false,true]",
            "[null,null]",
            "[true,false,null,true]",
        ],
    );
    // An infinite item domain stays refused, by name.
    refused(
        &json!({"uniqueItems": true, "items": {"type": "integer"}}),
        "uniqueItems",
        "/uniqueItems",
    );
}

/// An `if` annotates whether or not `then`/`else` exist, so `unevaluatedProperties` beside an
/// `if` that evaluates properties is not static: refused, never compiled as if the `if` were
/// absent (which would block `{"foo": "a"}`).
#[test]
fn unevaluated_beside_if_is_refused() {
    // (The first of the two keywords left is named: here `if`.)
    refused(
        &json!({"if": {"properties": {"foo": {"const": "a"}}}, "unevaluatedProperties": false}),
        "if",
        "/if",
    );
    refused(
        &json!({"unevaluatedProperties": false, "if": {"properties": {"foo": {"const": "a"}}}}),
        "unevaluatedProperties",
        "/unevaluatedProperties",
    );
}
