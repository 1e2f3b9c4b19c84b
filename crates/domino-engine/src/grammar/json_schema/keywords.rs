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
    "contains",
    "propertyNames",
];

/// Keywords that constrain instances and are not compiled: always `Unsupported` (or a warning).
/// (`then`/`else` without `if`, and `min/maxContains` without `contains`, do nothing.)
pub(super) const UNSUPPORTED: &[&str] = &[
    "not",
    "if",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
];

/// Keywords of some draft that constrain nothing on their own here, or are read by a
/// sibling (`then`/`else` by `if`, `minContains`/`maxContains` by `contains`), or belong to
/// a vocabulary this compiler reads elsewhere: never reported as unknown.
const KNOWN_OTHERWISE: &[&str] = &[
    "then",
    "else",
    "minContains",
    "maxContains",
    "$recursiveAnchor",
    "$ref",
    "$dynamicRef",
    "format",
];

/// Whether `k` is a keyword no draft defines: a typo (`maxLenght`) or a vendor extension.
/// Extensions spelled `x-…` are annotations by convention and not reported. The front end's
/// own rewrite key ([`PRESENCE_KEY`](super::presence::PRESENCE_KEY), which `oneOf`/`anyOf`
/// of `required` sets become) is not the user's keyword: reporting it named a key the user
/// never wrote, and `--strict` refused those schemas.
pub(super) fn is_unknown(k: &str) -> bool {
    !(ANNOTATIONS.contains(&k)
        || is_keyword(k)
        || KNOWN_OTHERWISE.contains(&k)
        || k.starts_with("x-")
        || k == super::presence::PRESENCE_KEY)
}

/// The known keyword `k` is most likely a misspelling of (Levenshtein distance at most 2,
/// case-insensitive, and less than about half the keyword), if any.
pub(super) fn suggestion(k: &str) -> Option<&'static str> {
    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.to_lowercase().chars().collect();
        let b: Vec<char> = b.to_lowercase().chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for i in 1..=a.len() {
            let mut cur = vec![i; b.len() + 1];
            for j in 1..=b.len() {
                let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
                cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
            }
            prev = cur;
        }
        prev[b.len()]
    }
    // The distance is at least the difference in length: most keywords are ruled out
    // without computing it (this runs for every unknown keyword of every schema).
    let len = k.to_lowercase().chars().count();
    HANDLED
        .iter()
        .chain(UNSUPPORTED)
        .chain(KNOWN_OTHERWISE)
        .chain(ANNOTATIONS)
        .filter(|c| c.len().abs_diff(len) <= 2)
        .map(|&c| (distance(k, c), c))
        .filter(|&(d, c)| d <= 2 && d < c.len() / 2 + 1)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

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

/// The reference of a schema that is only a `$ref` (annotations aside), else `None`.
pub(super) fn bare_ref(v: &Value) -> Option<&str> {
    let m = v.as_object()?;
    let r = m.get("$ref")?.as_str()?;
    m.keys().all(|k| k == "$ref" || !is_keyword(k)).then_some(r)
}

/// Keywords that give a subschema structure (members, items, branches): what is worth a
/// rule of its own when it would otherwise be copied (`ref_to`, module `copies`).
pub(super) const STRUCTURE: [&str; 8] = [
    "properties",
    "items",
    "prefixItems",
    "additionalProperties",
    "patternProperties",
    "anyOf",
    "oneOf",
    "allOf",
];
