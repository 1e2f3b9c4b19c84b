//! Hand-written documents close to valid that the grammar must reject.

use super::*;

/// Hand-written documents the grammar must reject although they are close to valid.
#[test]
fn near_misses_are_rejected() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"type": "integer", "minimum": 3, "maximum": 17}),
            "18",
        ),
        (json!({"type": "integer", "minimum": 3, "maximum": 17}), "2"),
        (json!({"type": "integer"}), "1.5"),
        (json!({"type": "string", "maxLength": 3}), "\"abcd\""),
        (json!({"type": "string", "minLength": 2}), "\"\\u00e9\""),
        (
            json!({"type": "string", "format": "date"}),
            "\"2023-02-29\"",
        ),
        (json!({"type": "string", "format": "uuid"}), "\"123\""),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            "{}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}),
            "{\"b\":1}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"a\":1,\"a\":\"x\"}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"\\u0061\":\"x\"}",
        ),
        (json!({"type": "array", "minItems": 2}), "[1]"),
        (json!({"type": "string"}), "\"\\ud800\""),
        (json!({"type": "number"}), "1e999"),
        (json!({"type": "string", "pattern": "^a+$"}), "\"ab\""),
        (json!({"enum": ["x", 1]}), "\"y\""),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{"a":1,"b":2}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            "3",
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"card":1}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"billing":"abcd","cash":1,"note":0}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"cash":1}"#,
        ),
        (json!({"not": {"required": ["x"]}}), r#"{"x":1}"#),
        (json!({"not": {"required": ["x"]}}), "1"),
        (json!({"not": {}}), "1"),
        (json!({"not": {"type": ["string", "null"]}}), "null"),
        (
            json!({"not": {"type": "string"}, "enum": ["a", 1]}),
            "\"a\"",
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+:[a-z]+$", "maxLength": 5}),
            "\"abc:def\"",
        ),
        (json!({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}), "2"),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "null",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "\"abc\"",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "4",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            "5",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            r#"{"t":"c"}"#,
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"ftp://x\"",
        ),
    ];
    for (schema, doc) in cases {
        // Only documents that really are invalid belong here (or that serde_json refuses).
        if let Ok(v) = serde_json::from_str::<Value>(doc) {
            assert!(
                !validator(&schema).is_valid(&v),
                "{schema}: {doc} is valid; not a near miss"
            );
        }
        let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
        assert!(
            !Matcher::new(&def).accepts(doc.as_bytes()),
            "{schema} accepted {doc}"
        );
    }
    let ok: Vec<(Value, &str)> = vec![
        (json!({"type": "string"}), "\"\\ud83d\\ude00 \\n\\\"\""),
        (json!({"type": "number"}), "-0.5e-7"),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"ab\":\"x\",\"\":null}",
        ),
        (json!({"type": "string", "pattern": "b"}), "\"abc\""),
        (
            json!({"properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{"a":1,"b":2}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            "3",
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"card":1,"billing":2}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"billing":"abc","cash":1,"note":0}"#,
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"billing":2,"x":[]}"#,
        ),
        (json!({"not": {"required": ["x"]}}), r#"{"y":1}"#),
        (json!({"not": false}), "[1]"),
        (json!({"not": {"type": ["string", "null"]}}), "1.5"),
        (json!({"not": {"type": "string"}, "enum": ["a", 1]}), "1"),
        (json!({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}), "3"),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "\"ab\"",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "7",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            r#"{"t":"b","u":1}"#,
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"./a\"",
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"http://a\"",
        ),
    ];
    for (schema, doc) in ok {
        assert!(
            validator(&schema).is_valid(&serde_json::from_str(doc).unwrap()),
            "{schema}: {doc} is invalid"
        );
        let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
        assert!(
            Matcher::new(&def).accepts(doc.as_bytes()),
            "{schema} rejected {doc}"
        );
    }
}
