//! The keyword vocabulary: which JSON Schema keywords constrain nothing (annotations), which
//! are compiled, and which constrain instances but are never compiled (always `Unsupported`,
//! or ignored with a warning when lenient); and the JSON types as a bit set.
//!
//! Unknown keywords are annotations (the specification says to ignore them), so "is this a
//! keyword" means "is it in one of the compiled or unsupported lists".

use serde_json::Value;

/// Keywords that constrain nothing.
pub(super) const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "id",
    "$comment",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "$defs",
    "definitions",
];

/// Keywords compiled here.
const HANDLED: &[&str] = &[
    "type",
    "enum",
    "const",
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "dependencies",
    "dependentRequired",
];

/// Keywords that constrain instances and are not compiled: always `Unsupported` (or a warning).
/// (`then`/`else` without `if`, and `min/maxContains` without `contains`, do nothing.)
pub(super) const UNSUPPORTED: &[&str] = &[
    "not",
    "if",
    "dependentSchemas",
    "propertyNames",
    "contains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
];

/// The JSON types, as a bit set.
pub(crate) mod ty {
    pub const NULL: u8 = 1;
    pub const BOOL: u8 = 2;
    pub const INT: u8 = 4;
    /// Numbers that are not integers.
    pub const FRAC: u8 = 8;
    pub const STRING: u8 = 16;
    pub const ARRAY: u8 = 32;
    pub const OBJECT: u8 = 64;
    pub const NUMBER: u8 = INT | FRAC;
    pub const ALL: u8 = 127;

    pub fn from_name(name: &str) -> Option<u8> {
        Some(match name {
            "null" => NULL,
            "boolean" => BOOL,
            "integer" => INT,
            "number" => NUMBER,
            "string" => STRING,
            "array" => ARRAY,
            "object" => OBJECT,
            _ => return None,
        })
    }

    pub fn of_value(v: &serde_json::Value) -> u8 {
        use serde_json::Value;
        match v {
            Value::Null => NULL,
            Value::Bool(_) => BOOL,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                    INT
                } else {
                    FRAC
                }
            }
            Value::String(_) => STRING,
            Value::Array(_) => ARRAY,
            Value::Object(_) => OBJECT,
        }
    }
}

pub(super) fn is_trivially_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m
            .keys()
            .all(|k| ANNOTATIONS.contains(&k.as_str()) || !is_keyword(k)),
        _ => false,
    }
}

pub(super) fn is_keyword(k: &str) -> bool {
    HANDLED.contains(&k) || UNSUPPORTED.contains(&k)
}
