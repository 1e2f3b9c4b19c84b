//! `unevaluatedProperties` / `unevaluatedItems` where they are statically determined: rewritten
//! exactly into `additionalProperties` / `items` (or `additionalItems`).
//!
//! A property (item) is *evaluated* by `properties`, `patternProperties`,
//! `additionalProperties` (`prefixItems`, `items`, array-form `items`, `additionalItems`) of
//! the schema itself or of its `allOf` members, recursively (every `allOf` member holds when
//! the schema does, so their annotations always count). When every other in-place
//! applicator (`anyOf`, `oneOf`, `if`/`then`/`else`, `dependentSchemas`, `not`) evaluates
//! nothing, the evaluated set is static: the listed names and patterns (the first `L`
//! positions), or everything. Then
//! - `unevaluatedProperties: U` ≡ `properties: {name: true, …}`, `patternProperties: {p:
//!   true, …}` for the names and patterns evaluated in `allOf` members, and
//!   `additionalProperties: U` (dropped when everything is evaluated);
//! - `unevaluatedItems: U` ≡ `prefixItems` padded with `true` to `L` and `items: U`
//!   (array-form `items` and `additionalItems` under drafts before 2020-12).
//!
//! Otherwise (a `$ref`, `$dynamicRef` or `contains` beside it or in an `allOf` member, a
//! `anyOf`/`oneOf`/`if` branch that evaluates something) the keyword stays and is reported
//! unsupported by name.

use serde_json::{Map, Value};

/// What a schema evaluates: names, patterns, prefix positions, or everything.
#[derive(Default)]
struct Evaluated {
    names: Vec<String>,
    patterns: Vec<String>,
    prefix: usize,
    all: bool,
}

/// Keywords whose evaluation is not static (applied beside `unevaluated*`, they may or may
/// not annotate depending on the instance, or name another resource).
const DYNAMIC: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// Whether `s` evaluates no property (`items = false`) / no item (`items = true`) at all,
/// on any instance.
fn evaluates_nothing(s: &Value, items: bool) -> bool {
    let Some(m) = s.as_object() else {
        return true;
    };
    let own: &[&str] = if items {
        &[
            "prefixItems",
            "items",
            "additionalItems",
            "contains",
            "unevaluatedItems",
        ]
    } else {
        &[
            "properties",
            "patternProperties",
            "additionalProperties",
            "unevaluatedProperties",
        ]
    };
    for (k, v) in m {
        if own.contains(&k.as_str()) || DYNAMIC.contains(&k.as_str()) {
            return false;
        }
        let nested_ok = match k.as_str() {
            "allOf" | "anyOf" | "oneOf" => v
                .as_array()
                .is_some_and(|a| a.iter().all(|b| evaluates_nothing(b, items))),
            "if" | "then" | "else" => evaluates_nothing(v, items),
            "dependentSchemas" => v
                .as_object()
                .is_some_and(|d| d.values().all(|b| evaluates_nothing(b, items))),
            _ => true,
        };
        if !nested_ok {
            return false;
        }
    }
    true
}

/// The static evaluated set of `m` (itself and its `allOf` members), or `None` when it is
/// not static.
fn evaluated(m: &Map<String, Value>, items: bool, depth: usize) -> Option<Evaluated> {
    if depth > 32 {
        return None;
    }
    let mut e = Evaluated::default();
    for (k, v) in m {
        if DYNAMIC.contains(&k.as_str()) {
            return None;
        }
        match (items, k.as_str()) {
            (false, "properties") => e.names.extend(v.as_object()?.keys().cloned()),
            (false, "patternProperties") => e.patterns.extend(v.as_object()?.keys().cloned()),
            (false, "additionalProperties" | "unevaluatedProperties") => e.all = true,
            (true, "prefixItems") => e.prefix = e.prefix.max(v.as_array()?.len()),
            (true, "items") => match v {
                Value::Array(a) => e.prefix = e.prefix.max(a.len()),
                _ => e.all = true,
            },
            (true, "additionalItems") => {
                if matches!(m.get("items"), Some(Value::Array(_))) {
                    e.all = true;
                }
            }
            (true, "unevaluatedItems") => e.all = true,
            (true, "contains") => return None,
            (_, "allOf") => {
                for b in v.as_array()? {
                    match b {
                        Value::Bool(_) => {}
                        Value::Object(bm) => {
                            let x = evaluated(bm, items, depth + 1)?;
                            e.names.extend(x.names);
                            e.patterns.extend(x.patterns);
                            e.prefix = e.prefix.max(x.prefix);
                            e.all |= x.all;
                        }
                        _ => return None,
                    }
                }
            }
            (_, "anyOf" | "oneOf")
                if !v.as_array()?.iter().all(|b| evaluates_nothing(b, items)) =>
            {
                return None;
            }
            (_, "if" | "then" | "else" | "not") if !evaluates_nothing(v, items) => return None,
            (_, "dependentSchemas")
                if !v.as_object()?.values().all(|b| evaluates_nothing(b, items)) =>
            {
                return None;
            }
            _ => {}
        }
    }
    Some(e)
}

/// `obj` with its `unevaluatedProperties` / `unevaluatedItems` rewritten (see the module
/// docs), or `None` when it has neither or neither could be rewritten.
pub(super) fn rewrite_unevaluated(obj: &Map<String, Value>) -> Option<Map<String, Value>> {
    // Every subschema passes here: without the keywords, no copy (the copy is the whole
    // subtree, so copying at every level was quadratic in the nesting).
    if !obj.contains_key("unevaluatedProperties") && !obj.contains_key("unevaluatedItems") {
        return None;
    }
    let mut out = obj.clone();
    let mut changed = false;
    if let Some(u) = obj.get("unevaluatedProperties") {
        if let Some(e) = evaluated(&without(obj, "unevaluatedProperties"), false, 0) {
            out.remove("unevaluatedProperties");
            if !e.all {
                let props = out
                    .entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(p) = props.as_object_mut() {
                    for n in e.names {
                        p.entry(n).or_insert(Value::Bool(true));
                    }
                }
                if !e.patterns.is_empty() {
                    let pp = out
                        .entry("patternProperties")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(pp) = pp.as_object_mut() {
                        for p in e.patterns {
                            pp.entry(p).or_insert(Value::Bool(true));
                        }
                    }
                }
                out.insert("additionalProperties".into(), u.clone());
            }
            changed = true;
        }
    }
    if let Some(u) = obj.get("unevaluatedItems") {
        if let Some(e) = evaluated(&without(obj, "unevaluatedItems"), true, 0) {
            out.remove("unevaluatedItems");
            if !e.all {
                let legacy = matches!(obj.get("items"), Some(Value::Array(_)));
                let (prefix_kw, rest_kw) = if legacy {
                    ("items", "additionalItems")
                } else {
                    ("prefixItems", "items")
                };
                if e.prefix > 0 {
                    let prefix = out
                        .entry(prefix_kw)
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Some(p) = prefix.as_array_mut() {
                        while p.len() < e.prefix {
                            p.push(Value::Bool(true));
                        }
                    }
                }
                out.insert(rest_kw.into(), u.clone());
            }
            changed = true;
        }
    }
    changed.then_some(out)
}

fn without(obj: &Map<String, Value>, k: &str) -> Map<String, Value> {
    let mut m = obj.clone();
    m.remove(k);
    m
}
