//! Soundness families from the specification (draft 2020-12 and draft 7), keyword by
//! keyword: for each schema, hand-written documents (valid and invalid, including the
//! spellings that used to slip through) are run through the lowered grammar's
//! `ReferenceRecognizer`; the grammar must never accept a document `jsonschema` rejects, and
//! must accept the listed valid ones.

use super::*;
use domino_engine::grammar::lower::lower;
use domino_engine::grammar::reference::ReferenceRecognizer;

/// `accept`: documents the grammar must accept (each valid); `probe`: documents it may
/// accept only if valid (most are invalid spellings meant to slip through).
fn check(name: &str, schema: &Value, accept: &[&str], probe: &[&str]) {
    let v = validator(schema);
    let def = json_schema::compile(schema, &opts(WhitespacePolicy::Flexible))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let ir = lower(&def).unwrap_or_else(|e| panic!("{name}: {e}"));
    let rec = ReferenceRecognizer::new(&ir).unwrap();
    for doc in accept.iter().chain(probe) {
        let parsed: Value = serde_json::from_str(doc).unwrap_or_else(|e| panic!("{doc}: {e}"));
        let valid = v.is_valid(&parsed);
        let accepted = rec.accepts(doc.as_bytes());
        assert!(
            !accepted || valid,
            "{name}: the grammar accepts the invalid document {doc}"
        );
    }
    for doc in accept {
        let parsed: Value = serde_json::from_str(doc).unwrap();
        assert!(v.is_valid(&parsed), "{name}: test bug, {doc} is invalid");
        assert!(
            rec.accepts(doc.as_bytes()),
            "{name}: the grammar rejects the valid document {doc}"
        );
    }
}

/// Object keys are compared by their decoded value (RFC 8259 section 7; JSON Schema
/// `properties`): a key written with escapes that spells a named property is that property.
#[test]
fn escaped_keys_are_their_decoded_value() {
    let schema = json!({
        "type": "object",
        "properties": {
            "A": {"type": "integer"},
            "x\n": {"type": "integer"},
            "x\"": {"type": "integer"},
            "x\\": {"type": "integer"},
            "p/q": {"type": "integer"},
            "tab\t": {"type": "integer"}
        },
        "additionalProperties": {"type": "string"}
    });
    check(
        "escaped-keys",
        &schema,
        &[
            r#"{"A": 1}"#,
            r#"{"x\n": 1}"#,
            r#"{"x\"": 1}"#,
            r#"{"x\\": 1}"#,
            r#"{"B": "s"}"#,
            r#"{"x\"y": "s"}"#,
            r#"{"x\u000b": "s"}"#,
            r#"{"x": "s"}"#,
            r#"{"tab\n": "s"}"#,
        ],
        &[
            r#"{"\u0041": "s"}"#,
            r#"{"x\u000a": "s"}"#,
            r#"{"x\u000A": "s"}"#,
            r#"{"x\u0022": "s"}"#,
            r#"{"x\u005c": "s"}"#,
            r#"{"x\u005C": "s"}"#,
            r#"{"p\/q": "s"}"#,
            r#"{"p\u002fq": "s"}"#,
            r#"{"tab\u0009": "s"}"#,
            r#"{"ta\u0062\t": "s"}"#,
            r#"{"x\n": "s"}"#,
            r#"{"x\"": "s"}"#,
        ],
    );
    // Closed objects: an escaped spelling of a named key is that key, never an extra one.
    let closed = json!({
        "type": "object",
        "properties": {"x\"": {"const": 1}},
        "patternProperties": {"^[a-w]": {"type": "string"}},
        "additionalProperties": false
    });
    check(
        "escaped-keys-pattern",
        &closed,
        &[r#"{"x\"": 1}"#, r#"{"ab": "s"}"#],
        &[r#"{"x\u0022": "s"}"#, r#"{"x\"": "s"}"#],
    );
}

/// `allOf` (draft 2020-12 section 10.2.1.1) applies every branch to the same instance:
/// `prefixItems` of one branch and `items` of another (or of the parent) both constrain
/// position 0; draft-7 array-form `items` + `additionalItems` likewise.
#[test]
fn all_of_keeps_array_positions() {
    check(
        "prefix-vs-items",
        &json!({"allOf": [{"prefixItems": [{"type": "integer"}]}, {"items": {"type": "string"}}]}),
        &["[]"],
        &[r#"[1, "a"]"#, "[1]", r#"["a"]"#, r#"["a", "b"]"#],
    );
    check(
        "parent-items-vs-branch-prefix",
        &json!({"items": {"type": "integer"}, "allOf": [{"prefixItems": [{"minimum": 5}]}]}),
        &["[]", "[5]", "[7, 1, 2]"],
        &["[1]", r#"[5, "a"]"#, "[4, 9]"],
    );
    check(
        "prefix-both-sides",
        &json!({"prefixItems": [{"type": "integer"}],
                "allOf": [{"prefixItems": [{"minimum": 0}, {"type": "boolean"}], "items": false}]}),
        &["[1, true]", "[0]", "[]"],
        &[r#"[1, "a"]"#, "[1, 2]", "[1, true, 3]", "[-1]"],
    );
    check(
        "draft7-array-items",
        &json!({"$schema": "http://json-schema.org/draft-07/schema#",
                "allOf": [{"items": [{"type": "integer"}], "additionalItems": {"type": "boolean"}},
                          {"items": {"minimum": 2}}]}),
        &["[2]", "[3, true]", "[]"],
        &["[1]", "[2, 1]", r#"[2, "a"]"#],
    );
}

/// `$anchor` and `$id` (draft 2020-12 sections 8.2.1–8.2.2, 9.2): a reference resolves
/// against the base URI of the schema that holds it; an anchor belongs to the resource it is
/// defined in, so two anchors with one name in two resources are different targets.
#[test]
fn anchors_and_ids_resolve_by_nearest_base_uri() {
    let schema = json!({
        "$id": "http://example.com/root.json",
        "type": "object",
        "properties": {
            "a": {"$ref": "#foo"},
            "b": {"$ref": "child.json#foo"},
            "c": {"$ref": "child.json"},
            "d": {"$ref": "http://example.com/child.json#/$defs/n"},
            "e": {"$ref": "nested/other.json"}
        },
        "$defs": {
            "A": {"$anchor": "foo", "type": "integer"},
            "B": {
                "$id": "child.json",
                "type": "object",
                "$defs": {
                    "s": {"$anchor": "foo", "type": "string"},
                    "n": {"type": "null"}
                },
                "properties": {"x": {"$ref": "#foo"}, "y": {"$ref": "#/$defs/n"}}
            },
            "C": {"$id": "nested/other.json", "$ref": "../root.json#foo"}
        }
    });
    check(
        "anchors",
        &schema,
        &[
            r#"{"a": 1}"#,
            r#"{"b": "s"}"#,
            r#"{"c": {"x": "s", "y": null}}"#,
            r#"{"d": null}"#,
        ],
        &[
            r#"{"a": "s"}"#,
            r#"{"b": 1}"#,
            r#"{"c": {"x": 1}}"#,
            r#"{"c": {"y": 1}}"#,
            r#"{"d": 1}"#,
            r#"{"e": "s"}"#,
        ],
    );
    // The last anchor defined is not the one that wins: with the anchor in the root resource
    // first and another resource's same-named anchor after it.
    let schema = json!({
        "$defs": {
            "first": {"$anchor": "t", "type": "boolean"},
            "other": {"$id": "http://other.example/s", "$defs": {"t": {"$anchor": "t", "type": "string"}}}
        },
        "$ref": "#t"
    });
    check("anchor-order", &schema, &["true"], &[r#""s""#]);
}

/// Numbers are compared by value (draft 2020-12 section 4.2.2; `const` 6.1.3, `enum` 6.1.2):
/// `-2.0` and `-2` are one number, `0` and `0.0` too; and an integer is any number with a
/// zero fractional part (section 4.2.1, draft 6 and later), so `type: integer` admits `1.0`.
#[test]
fn numbers_are_equal_by_value() {
    check(
        "const-enum-by-value",
        &json!({"type": "object", "properties": {
            "a": {"const": -2.0},
            "b": {"enum": [0, 1.5, "x"]},
            "c": {"const": 7}
        }}),
        &[
            r#"{"a": -2}"#,
            r#"{"a": -2.0}"#,
            r#"{"a": -2.00}"#,
            r#"{"b": 0}"#,
            r#"{"b": 0.0}"#,
            r#"{"b": 1.5}"#,
            r#"{"b": 1.50}"#,
            r#"{"c": 7.0}"#,
        ],
        &[
            r#"{"a": -2.1}"#,
            r#"{"a": -20}"#,
            r#"{"b": 1.05}"#,
            r#"{"b": 15}"#,
            r#"{"c": 7.01}"#,
            r#"{"c": 70}"#,
        ],
    );
    check(
        "integer-zero-fraction",
        &json!({"type": "object", "properties": {
            "i": {"type": "integer"},
            "r": {"type": "integer", "minimum": 1, "maximum": 5},
            "m": {"type": "integer", "multipleOf": 100}
        }}),
        &[
            r#"{"i": 1.0}"#,
            r#"{"i": -3.00}"#,
            r#"{"r": 5.0}"#,
            r#"{"m": 300.0}"#,
        ],
        &[
            r#"{"i": 1.5}"#,
            r#"{"r": 6.0}"#,
            r#"{"r": 0.0}"#,
            r#"{"m": 310.0}"#,
        ],
    );
    // Draft 4: `1.0` is not an integer there.
    let draft4 = json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"});
    let def = json_schema::compile(&draft4, &opts(WhitespacePolicy::Compact)).unwrap();
    let rec = ReferenceRecognizer::new(&lower(&def).unwrap()).unwrap();
    assert!(rec.accepts(b"1"));
    assert!(!rec.accepts(b"1.0"));
    // ... nor is an integral `enum` value spelt with a fraction (JSONSchemaBench o41591).
    check(
        "draft4-integer-enum",
        &json!({"$schema": "http://json-schema.org/draft-04/schema#",
                "type": "integer", "enum": [42]}),
        &["42"],
        &["42.0", "42.000"],
    );
}

/// `format` per its RFC (draft 2020-12 section 7.3): `date` (RFC 3339 `full-date`, 29
/// February in leap years only), `time` / `date-time` (`t`/`z` in either case, leap second
/// `:60` at 23:59 UTC), `hostname` (RFC 1123 labels up to 63 characters with inner hyphens,
/// 253 in all), `email` (RFC 5321 quoted local parts).
#[test]
fn formats_follow_their_rfcs() {
    let s = |f: &str| json!({"type": "string", "format": f});
    check(
        "date",
        &s("date"),
        &[
            r#""2024-02-29""#,
            r#""2000-02-29""#,
            r#""2400-02-29""#,
            r#""2023-02-28""#,
        ],
        &[
            r#""2023-02-29""#,
            r#""1900-02-29""#,
            r#""2100-02-29""#,
            r#""2024-02-30""#,
            r#""2024-04-31""#,
        ],
    );
    check(
        "time",
        &s("time"),
        &[
            r#""23:59:60Z""#,
            r#""12:00:00z""#,
            r#""23:59:60.5z""#,
            r#""08:30:06+05:30""#,
        ],
        &[
            r#""22:59:60Z""#,
            r#""12:00:60Z""#,
            r#""24:00:00Z""#,
            r#""12:00:00""#,
        ],
    );
    check(
        "date-time",
        &s("date-time"),
        &[
            r#""2024-01-01t12:00:00z""#,
            r#""2016-12-31T23:59:60Z""#,
            r#""2024-02-29T00:00:00Z""#,
        ],
        &[r#""2023-02-29T00:00:00Z""#, r#""2024-01-01 12:00:00Z""#],
    );
    let l63 = "a".repeat(63);
    let l64 = "a".repeat(64);
    let l27 = "b".repeat(27);
    let long9 = [l27.as_str(); 9].join(".");
    let too_long = [l63.as_str(); 4].join(".");
    let ok63 = format!("\"{l63}.com\"");
    let ok_many = format!("\"{long9}\"");
    let bad64 = format!("\"{l64}.com\"");
    let bad_total = format!("\"{too_long}\"");
    check(
        "hostname",
        &s("hostname"),
        &[
            &ok63,
            &ok_many,
            r#""a-b-c-d-e-f.com""#,
            r#""a""#,
            r#""a-b.c--d.e""#,
        ],
        &[
            &bad64,
            &bad_total,
            r#""ab--cd.com""#,
            r#""abc-.com""#,
            r#""-a.com""#,
            r#""xn--abc.com""#,
        ],
    );
    check(
        "email",
        &s("email"),
        &[
            r#""\"joe bloggs\"@example.com""#,
            r#""\"a\\\\b\"@example.com""#,
            r#""\"a\\\"b\"@example.com""#,
            r#""a.b@example.com""#,
        ],
        &[r#""a@b""#, r#""\"a@example.com""#, r#""a..b@example.com""#],
    );
}

/// An `$id` inside an unknown keyword (or any non-schema position) is data, not an
/// identifier (draft 2020-12 section 9.4.2; JSON-Schema-Test-Suite `optional/unknownKeyword`):
/// a `$ref` to that URI resolves to the one real schema resource.
#[test]
fn ids_in_unknown_keywords_are_not_identifiers() {
    let id = "https://localhost:1234/draft2020-12/unknownKeyword/my_identifier.json";
    let schema = json!({
        "$defs": {
            "id_in_unknown0": {"not": {"array_of_schemas": [{"$id": id, "type": "null"}]}},
            "real_id_in_schema": {"$id": id, "type": "string"},
            "id_in_unknown1": {"not": {"object_of_schemas": {"foo": {"$id": id, "type": "integer"}}}}
        },
        "anyOf": [
            {"$ref": "#/$defs/id_in_unknown0"},
            {"$ref": "#/$defs/id_in_unknown1"},
            {"$ref": id}
        ]
    });
    check(
        "id-in-unknown-keyword",
        &schema,
        &[r#""a string""#],
        &["null", "1"],
    );
}

/// Property names up to the 256 characters the front end supports compile, beside other
/// properties (their key set is a terminal of its own, whatever its HIR's depth): a 120-
/// character name used to fail with "terminal rule `key-0` is too large".
#[test]
fn long_property_names_compile() {
    let long = format!("{}{}", "a".repeat(60), "b".repeat(60));
    let longest = "c".repeat(256);
    let schema = json!({
        "type": "object",
        "properties": {
            long.clone(): {"type": "integer"},
            longest.clone(): {"type": "boolean"},
            "x": {"type": "string"}
        },
        "additionalProperties": {"type": "string"}
    });
    let near = format!("{}{}", "a".repeat(60), "b".repeat(59));
    let docs = [
        format!(r#"{{"{long}": 1, "x": "y"}}"#),
        format!(r#"{{"{longest}": true}}"#),
        format!(r#"{{"{near}": "additional"}}"#),
        format!(r#"{{"{near}b{near}": "additional"}}"#),
    ];
    let probes = [
        format!(r#"{{"{long}": "not an integer"}}"#),
        format!(r#"{{"{longest}": 1}}"#),
        format!(r#"{{"{near}": 1}}"#),
    ];
    let accept: Vec<&str> = docs.iter().map(String::as_str).collect();
    let probe: Vec<&str> = probes.iter().map(String::as_str).collect();
    check("long-names", &schema, &accept, &probe);
}
