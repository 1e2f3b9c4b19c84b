//! The schemas the JSON Schema tests share, covering the supported keywords.

use super::*;

/// Schemas covering the supported keywords.
pub(crate) fn corpus() -> Vec<(&'static str, Value)> {
    let shipped = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    vec![
        (
            "gsm8k",
            shipped(include_str!("../../../../grammars/gsm8k.schema.json")),
        ),
        (
            "conll",
            shipped(include_str!("../../../../grammars/conll.schema.json")),
        ),
        (
            "person",
            shipped(include_str!("../../../../grammars/person.schema.json")),
        ),
        (
            "tool_call",
            shipped(include_str!("../../../../grammars/tool_call.schema.json")),
        ),
        ("any", json!({})),
        ("scalars", json!({"type": ["string", "null", "boolean"]})),
        (
            "person-inline",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 130},
                    "email": {"type": "string", "format": "email"},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
                    "score": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 99.25}
                },
                "required": ["name", "age"],
                "additionalProperties": false
            }),
        ),
        (
            "open-object",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["b"]
            }),
        ),
        (
            "extras-typed",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "format": "uuid"}},
                "additionalProperties": {"type": "number", "multipleOf": 0.01, "maximum": 99999999999.99, "minimum": 0}
            }),
        ),
        (
            "pattern-props",
            json!({
                "type": "object",
                "patternProperties": {"^[a-z_]+$": {"type": "integer", "exclusiveMinimum": 5}},
                "additionalProperties": false,
                "maxProperties": 3
            }),
        ),
        (
            "match-all-pattern-props",
            json!({
                "type": "object",
                "properties": {"fixed": {"type": "boolean"}},
                "patternProperties": {".*": {"type": ["boolean", "string"]}}
            }),
        ),
        (
            "tuple",
            json!({
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"enum": ["x", "y", 3, null]}],
                "items": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
                "minItems": 1,
                "maxItems": 4
            }),
        ),
        (
            "draft4-tuple",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "array",
                "items": [{"type": "boolean"}, {"type": "string", "format": "date"}],
                "additionalItems": false
            }),
        ),
        (
            "refs-recursive",
            json!({
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                        "required": ["value"],
                        "additionalProperties": false
                    }
                },
                "$ref": "#/$defs/node"
            }),
        ),
        (
            "any-of-one-of",
            json!({
                "anyOf": [
                    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}, "required": ["kind", "r"], "additionalProperties": false},
                    {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1}}, "required": ["kind", "side"], "additionalProperties": false}
                ],
                "oneOf": [{"type": "object"}, {"type": "null"}]
            }),
        ),
        (
            "all-of",
            json!({
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer", "maximum": 5}, "a": {"maxLength": 4}}, "required": ["b"], "additionalProperties": false}
                ]
            }),
        ),
        (
            "formats",
            json!({
                "type": "object",
                "properties": {
                    "d": {"type": "string", "format": "date"},
                    "t": {"type": "string", "format": "time"},
                    "dt": {"type": "string", "format": "date-time"},
                    "ip4": {"type": "string", "format": "ipv4"},
                    "ip6": {"type": "string", "format": "ipv6"},
                    "u": {"type": "string", "format": "uri"},
                    "id": {"type": "string", "format": "uuid"}
                },
                "required": ["d", "t", "dt", "ip4", "ip6", "u", "id"],
                "additionalProperties": false
            }),
        ),
        (
            "patterns",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "ab+c"},
                    {"type": "string", "pattern": "^\\w+@\\d{2}$", "maxLength": 8},
                    {"type": "string", "pattern": "^(foo|bar)\"\\\\$"}
                ]}
            }),
        ),
        (
            "long-strings",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 600, "minLength": 2}, "note": {"type": "string", "maxLength": 10}},
                "required": ["text"]
            }),
        ),
        (
            "one-of-required",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 4}, "c": {"type": "boolean"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                "additionalProperties": false
            }),
        ),
        (
            "any-of-shapes",
            json!({
                "type": "object",
                "properties": {"dims": {
                    "type": "object",
                    "oneOf": [
                        {"properties": {"radius": {"type": "number"}}, "required": ["radius"]},
                        {"properties": {"length": {"type": "number"}, "width": {"type": "integer"}}, "required": ["length", "width"]}
                    ]
                }},
                "required": ["dims"]
            }),
        ),
        (
            "dependencies-and-not",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "cash": {"type": "boolean"}},
                "dependencies": {"card": ["billing"]},
                "not": {"required": ["card", "cash"]},
                "additionalProperties": false
            }),
        ),
        (
            "pattern-lengths",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "^([a-z0-9-]+):([a-z0-9.-]+)$", "maxLength": 12},
                    {"type": "string", "pattern": "^$|^[A-Z][a-z]*$", "minLength": 1, "maxLength": 5}
                ]}
            }),
        ),
        // Intersections: a pattern with length bounds it does not imply, a format with a
        // pattern, `not: {enum}` of strings (every escape form excluded).
        (
            "pattern-and-lengths-exact",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "^(?:[a-z]+ ){0,2}[a-z]+$", "minLength": 3, "maxLength": 7},
                    {"type": "string", "format": "date", "pattern": "^20(?:19|2)"},
                    {"type": "string", "not": {"enum": ["ab", "a/b", "q\"", "é"]}, "maxLength": 3},
                    {"type": "string", "format": "uri", "minLength": 1, "maxLength": 65536}
                ]},
                "maxItems": 4
            }),
        ),
        // Pattern keys minus the named properties they match, a leading negative look-ahead,
        // and minProperties met by the first extra member.
        (
            "pattern-keys-minus-named",
            json!({
                "type": "object",
                "properties": {"ab": {"type": "integer"}},
                "patternProperties": {"^(?!x)[a-z]{1,3}$": {"type": ["boolean", "integer"]}},
                "additionalProperties": false,
                "minProperties": 1,
                "maxProperties": 3
            }),
        ),
        (
            "min-properties-extra",
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}, "minProperties": 1, "maxProperties": 2}),
        ),
        // if/then/else on a discriminator, required and not.
        (
            "discriminated-conditionals",
            json!({
                "type": "object",
                "properties": {"kind": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "string"}},
                "required": ["kind"],
                "additionalProperties": false,
                "allOf": [
                    {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}},
                    {"if": {"properties": {"kind": {"const": "b"}}}, "then": {"required": ["y"]}, "else": {"properties": {"y": {"maxLength": 1}}}}
                ]
            }),
        ),
        (
            "optional-discriminator",
            json!({
                "type": "object",
                "properties": {"kind": {"type": "string"}, "x": {"type": "integer"}},
                "if": {"properties": {"kind": {"const": "big"}}},
                "then": {"properties": {"x": {"minimum": 100}}},
                "else": {"properties": {"x": {"maximum": 9}}}
            }),
        ),
        (
            "multiples",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "integer", "multipleOf": 3, "minimum": -20, "maximum": 50},
                    {"type": "number", "multipleOf": 0.25},
                    {"type": "integer", "multipleOf": 20},
                    {"type": "integer", "multipleOf": 6, "minimum": 0, "maximum": 9999}
                ]},
                "maxItems": 3
            }),
        ),
        // oneOf proved disjoint by members: A requires `t` as a string, B allows `t` only
        // as an integer; refs to untyped object branches are restricted to objects.
        (
            "one-of-by-members",
            json!({
                "$defs": {"b": {"properties": {"t": {"type": "integer"}, "u": {"type": "boolean"}}}},
                "type": "object",
                "oneOf": [
                    {"properties": {"t": {"type": "string", "pattern": "^a"}}, "required": ["t"]},
                    {"$ref": "#/$defs/b"}
                ]
            }),
        ),
        // oneOf where an enum branch shares values with another branch: those values match
        // two branches and are invalid; the rest of the enum and of the other branches stay.
        (
            "one-of-overlapping-values",
            json!({
                "type": "array",
                "items": {"oneOf": [
                    {"enum": ["linux", "x", "yy"]},
                    {"type": "string", "maxLength": 2},
                    {"type": "integer"}
                ]},
                "maxItems": 4
            }),
        ),
        // A typed `anyOf` of references to typed definitions (the sibling `type` is
        // implied, each branch is its definition's shared rule), recursive through arrays.
        (
            "typed-any-of-refs",
            json!({
                "type": "object",
                "anyOf": [{"$ref": "#/definitions/box"}, {"$ref": "#/definitions/tag"}],
                "definitions": {
                    "box": {
                        "type": "object",
                        "required": ["kind"],
                        "properties": {
                            "kind": {"enum": ["box"]},
                            "inner": {"type": "array", "maxItems": 2, "items": {
                                "type": "object",
                                "anyOf": [{"$ref": "#/definitions/box"}, {"$ref": "#/definitions/tag"}]
                            }}
                        },
                        "additionalProperties": false
                    },
                    "tag": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string", "maxLength": 3}},
                        "additionalProperties": false
                    }
                }
            }),
        ),
        // Siblings a reference does NOT imply: an untyped target stays restricted to the
        // sibling type, and a sibling bound the target lacks stays.
        (
            "untyped-ref-with-type",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "object", "$ref": "#/$defs/props"},
                    {"type": "string", "maxLength": 2, "$ref": "#/$defs/short"}
                ]},
                "maxItems": 3,
                "$defs": {
                    "props": {"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    "short": {"minLength": 1}
                }
            }),
        ),
        // A schema that refers to its own root, compiled once as the reference's rule.
        (
            "root-reference",
            json!({
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "next": {"$ref": "#"}
                },
                "required": ["v"],
                "additionalProperties": false
            }),
        ),
        // A property whose schema is also its `patternProperties` schema (the conjunction of
        // a `oneOf` with itself), and presence branches sharing a structured property.
        (
            "pattern-equal-to-property",
            json!({
                "type": "object",
                "properties": {"basic": {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/pair"}]}},
                "patternProperties": {"^b": {"oneOf": [{"type": "integer"}, {"$ref": "#/$defs/pair"}]}},
                "additionalProperties": false,
                "$defs": {
                    "pair": {
                        "type": "object",
                        "anyOf": [{"$ref": "#/$defs/left"}, {"$ref": "#/$defs/right"}]
                    },
                    "left": {
                        "type": "object",
                        "required": ["l"],
                        "properties": {
                            "l": {"type": "boolean"},
                            "list": {"type": "array", "maxItems": 2, "items": {"type": "integer", "maximum": 9}}
                        }
                    },
                    "right": {
                        "type": "object",
                        "required": ["r"],
                        "properties": {
                            "r": {"type": "null"},
                            "list": {"type": "array", "maxItems": 2, "items": {"type": "integer", "maximum": 9}}
                        }
                    }
                }
            }),
        ),
        (
            "nullable-integers",
            json!({
                "type": "array",
                "items": {"type": ["integer", "null"], "minimum": -20, "maximum": 2000, "multipleOf": 1}
            }),
        ),
    ]
}
