//! Conditional keywords compiled by exact rewriting into `anyOf`/`allOf`/`type`/presence forms
//! the compiler already handles: general `if`/`then`/`else`, `dependentSchemas`, `not` of
//! the forms the dispatcher does not compile itself, all through the negation of a schema
//! ([`negate`]: keyword by keyword, `¬(K1 ∧ K2) = ¬K1 ∨ ¬K2`; a type-family keyword's
//! negation is "another type, or this type violating it").
//!
//! - `if: I, then: T, else: E` ≡ `(I ∧ T) ∨ (¬I ∧ E)`; without `else`, `T ∨ ¬I`; without
//!   `then`, `I ∨ E` (no negation needed); `if` alone constrains nothing.
//! - `dependentSchemas: {a: S}` (and draft-7 `dependencies: {a: S}` for schemas other than
//!   `{required}`/`{properties, required}`, which module `objects` compiles) ≡ `¬required[a] ∨ (object with a ∧ S)`, where
//!   `¬required[a]` = another type, or an object without `a` (a presence constraint).
//! - `not: N` (other than `{}`, `false`, `{type}`, `{required}`, `{enum|const: strings}`,
//!   which the dispatcher compiles) ≡ `negate(N)`.
//!
//! Each is exact when [`negate`] is (it returns `None` rather than an approximation), so a
//! conditional whose test cannot be negated stays `Unsupported`, named with its pointer.

use serde_json::{Map, Value, json};

use super::combinators::excluded_strings;
use super::is_keyword;
use super::keywords::{is_trivially_true, ty};
use super::merge::type_value;
use super::presence::PRESENCE_KEY;
use super::presence::required_only;

/// Types whose instances every keyword of one type family passes vacuously.
fn family_type(k: &str) -> Option<&'static str> {
    Some(match k {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => "number",
        "minLength" | "maxLength" => "string",
        "minItems" | "maxItems" => "array",
        "minProperties" | "maxProperties" | "required" | "properties" => "object",
        _ => return None,
    })
}

/// The `type` value for every type but those of `v` (a `type` keyword's value), or `None`
/// when that is not a `type` (integers excluded but not all numbers) or names no type.
fn other_types(v: &Value) -> Option<Value> {
    let names: Vec<&str> = match v {
        Value::String(t) => vec![t.as_str()],
        Value::Array(a) => a.iter().map(Value::as_str).collect::<Option<_>>()?,
        _ => return None,
    };
    let mut set = 0u8;
    for n in names {
        set |= ty::from_name(n)?;
    }
    let rest = ty::ALL & !set;
    // Non-integral numbers alone are not a `type`.
    if rest & ty::NUMBER == ty::FRAC {
        return None;
    }
    Some(if rest == 0 {
        Value::Bool(false)
    } else {
        type_value(rest)
    })
}

/// `(every other type) ∨ (family ∧ kv)`: the negation of a keyword of one type family.
fn other_type_or(family: &str, kv: (String, Value)) -> Value {
    let mut body = Map::new();
    body.insert(kv.0, kv.1);
    body.insert("type".into(), Value::String(family.into()));
    let others = other_types(&Value::String(family.into())).expect("a family's complement");
    json!({"anyOf": [{"type": others}, Value::Object(body)]})
}

/// A schema whose instances are exactly those `s` rejects, written with keywords the
/// compiler handles (no `not` but `not: {enum|const: strings}`, so rewriting terminates), or
/// `None` when this module cannot say it exactly (`pattern`, `format`, `multipleOf`, `$ref`,
/// `oneOf`, non-string `enum`, array `items`, ...).
pub(super) fn negate(s: &Value) -> Option<Value> {
    let m = match s {
        Value::Bool(b) => return Some(Value::Bool(!b)),
        Value::Object(m) => m,
        _ => return None,
    };
    let keys: Vec<&String> = m.keys().filter(|k| is_keyword(k)).collect();
    if keys.is_empty() {
        return Some(Value::Bool(false));
    }
    // ¬(K1 ∧ K2 ∧ …) = ¬K1 ∨ ¬K2 ∨ …, keyword by keyword (each keyword alone is a schema:
    // none of the forms below reads a sibling).
    let mut alts = Vec::with_capacity(keys.len());
    for k in keys {
        let v = &m[k.as_str()];
        let num = |x: &Value| x.is_number().then(|| x.clone());
        let count = |x: &Value| x.as_u64();
        let one = match k.as_str() {
            "type" => match other_types(v)? {
                Value::Bool(b) => Value::Bool(b),
                t => json!({ "type": t }),
            },
            "required" => {
                let names = v.as_array()?;
                if names.is_empty() {
                    Value::Bool(false)
                } else {
                    // Objects without the whole set (a presence constraint, module
                    // `presence`), or any other type.
                    let others = other_types(&json!("object")).expect("complement");
                    json!({"anyOf": [
                        {"type": others},
                        {"type": "object", PRESENCE_KEY: [{"kind": "notAll", "sets": [names]}]}
                    ]})
                }
            }
            "enum" | "const" => {
                let all_strings = match v {
                    Value::Array(a) if k == "enum" => a.iter().all(Value::is_string),
                    other => other.is_string(),
                };
                if !all_strings {
                    return None;
                }
                json!({"not": {k.as_str(): v}})
            }
            "minimum" => other_type_or("number", ("exclusiveMaximum".into(), num(v)?)),
            "maximum" => other_type_or("number", ("exclusiveMinimum".into(), num(v)?)),
            "exclusiveMinimum" => other_type_or("number", ("maximum".into(), num(v)?)),
            "exclusiveMaximum" => other_type_or("number", ("minimum".into(), num(v)?)),
            "minLength" | "minItems" | "minProperties" => match count(v)? {
                0 => Value::Bool(false),
                n => {
                    let max = k.replacen("min", "max", 1);
                    other_type_or(family_type(k)?, (max, json!(n - 1)))
                }
            },
            "maxLength" | "maxItems" | "maxProperties" => {
                let min = k.replacen("max", "min", 1);
                other_type_or(family_type(k)?, (min, json!(count(v)? + 1)))
            }
            "properties" => {
                // Some listed property present whose value fails its schema.
                let mut branches = Vec::new();
                for (p, sub) in v.as_object()? {
                    if is_trivially_true(sub) {
                        continue;
                    }
                    branches.push(json!({
                        "type": "object",
                        "required": [p],
                        "properties": {p.as_str(): negate(sub)?}
                    }));
                }
                if branches.is_empty() {
                    Value::Bool(false)
                } else {
                    json!({ "anyOf": branches })
                }
            }
            "allOf" => {
                let negs: Vec<Value> = v.as_array()?.iter().map(negate).collect::<Option<_>>()?;
                json!({ "anyOf": negs })
            }
            "anyOf" => {
                let negs: Vec<Value> = v.as_array()?.iter().map(negate).collect::<Option<_>>()?;
                json!({ "allOf": negs })
            }
            "not" => v.clone(),
            _ => return None,
        };
        alts.push(one);
    }
    Some(if alts.len() == 1 {
        alts.pop().unwrap()
    } else {
        json!({ "anyOf": alts })
    })
}

/// Add the condition `c` to the schema `rest`: as its `anyOf` when it has none, else as one
/// more `allOf` member.
fn conjoin(rest: &mut Map<String, Value>, c: Value) {
    match c {
        Value::Object(cm)
            if cm.len() == 1 && cm.contains_key("anyOf") && !rest.contains_key("anyOf") =>
        {
            rest.insert("anyOf".into(), cm["anyOf"].clone());
        }
        c => match rest.get_mut("allOf") {
            Some(Value::Array(list)) => list.push(c),
            _ => {
                rest.insert("allOf".into(), Value::Array(vec![c]));
            }
        },
    }
}

/// `if`/`then`/`else` (and stray `then`/`else`, which do nothing) and `dependentSchemas`
/// rewritten exactly; `None` when nothing was rewritten. An `if` whose test cannot be
/// negated stays (with its `then`/`else`) and is reported unsupported by the caller; the
/// result never has a keyword this function would rewrite again.
pub(super) fn rewrite_conditionals(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    let has_if = obj.contains_key("if");
    let stray = !has_if && (obj.contains_key("then") || obj.contains_key("else"));
    let deps = obj.get("dependentSchemas").and_then(Value::as_object);
    // Draft-7 schema-valued `dependencies` of the shapes module `objects` does not compile
    // (it takes property lists, `{required}` and `{properties, required}`): as
    // `dependentSchemas`.
    let legacy: Vec<(String, Value)> = obj
        .get("dependencies")
        .and_then(Value::as_object)
        .map(|d| {
            d.iter()
                .filter(|(_, v)| {
                    !v.is_array()
                        && !is_trivially_true(v)
                        && required_only(v).is_none()
                        && !v.as_object().is_some_and(|m| {
                            m.keys()
                                .all(|k| !is_keyword(k) || k == "properties" || k == "required")
                        })
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    if !has_if && !stray && deps.is_none() && legacy.is_empty() && !obj.contains_key("not") {
        return None;
    }
    let mut rest = obj.clone();
    let mut changed = false;
    if stray {
        rest.remove("then");
        rest.remove("else");
        changed = true;
    } else if has_if {
        let i = obj["if"].clone();
        let (t, e) = (obj.get("then").cloned(), obj.get("else").cloned());
        let cond = match (t, e) {
            (None, None) => Some(None),
            (Some(t), None) => negate(&i).map(|n| Some(json!({"anyOf": [t, n]}))),
            (None, Some(e)) => Some(Some(json!({"anyOf": [i, e]}))),
            (Some(t), Some(e)) => negate(&i).map(|n| {
                Some(json!({"anyOf": [
                    {"allOf": [i.clone(), t]},
                    {"allOf": [n, e]}
                ]}))
            }),
        };
        // `None`: the test cannot be negated; `if` stays and is reported unsupported.
        if let Some(cond) = cond {
            for k in ["if", "then", "else"] {
                rest.remove(k);
            }
            if let Some(c) = cond {
                conjoin(&mut rest, c);
            }
            changed = true;
        }
    }
    if let Some(n) = obj.get("not") {
        // Forms the dispatcher compiles itself stay; others are negated here when exact.
        let type_only = n
            .as_object()
            .is_some_and(|m| m.keys().all(|k| !is_keyword(k) || k == "type"));
        let native = is_trivially_true(n)
            || *n == Value::Bool(false)
            || type_only
            || excluded_strings(n).is_some()
            || required_only(n).is_some();
        if !native {
            if let Some(neg) = negate(n) {
                rest.remove("not");
                conjoin(&mut rest, neg);
                changed = true;
            }
        }
    }
    let mut schema_deps: Vec<(String, Value)> = Vec::new();
    if !legacy.is_empty() {
        if let Some(Value::Object(d)) = rest.get_mut("dependencies") {
            for (a, _) in &legacy {
                d.remove(a);
            }
            if d.is_empty() {
                rest.remove("dependencies");
            }
        }
        schema_deps.extend(legacy);
    }
    if let Some(deps) = deps {
        rest.remove("dependentSchemas");
        schema_deps.extend(deps.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    if !schema_deps.is_empty() {
        for (a, s) in &schema_deps {
            if is_trivially_true(s) {
                continue;
            }
            let absent = negate(&json!({ "required": [a] }))?;
            conjoin(
                &mut rest,
                json!({"anyOf": [absent, {"type": "object", "required": [a], "allOf": [s]}]}),
            );
        }
        changed = true;
    }
    changed.then_some(rest)
}
