//! `allOf` merging and `oneOf` disjointness proofs, on schema values.
//!
//! [`merge_all`] folds a list of schemas into one schema with the same valid instances (or
//! reports `Unsupported` naming `allOf` where it cannot): top-level `$ref`s are resolved
//! (one level; nested references stay references), keywords combine by their meaning
//! (`type` intersects, `required` unites, bounds tighten, `properties` merge key by key with
//! each side's `additionalProperties` standing in for keys it does not name, `anyOf` lists
//! multiply out). [`provably_disjoint`] proves that no instance is valid for two `oneOf`
//! branches (different types, different constants, a required discriminator property with
//! different constants, or a required property the other branch forbids), so `oneOf` can be
//! compiled as `anyOf`.

use serde_json::{Map, Value};

use super::keywords::{ANNOTATIONS, bare_ref, is_keyword, is_trivially_true, ty};
use super::presence::PRESENCE_KEY;
use super::{Compiler, join_ptr};
use crate::grammar::GrammarError;

fn all_of(a: Value, b: Value) -> Value {
    if is_trivially_true(&a) {
        return b;
    }
    if is_trivially_true(&b) {
        return a;
    }
    if a == Value::Bool(false) || b == Value::Bool(false) {
        return Value::Bool(false);
    }
    if a == b {
        return a;
    }
    Value::Object(
        [("allOf".to_string(), Value::Array(vec![a, b]))]
            .into_iter()
            .collect(),
    )
}

/// The keywords that say which schema applies to which array position.
const POSITIONAL: [&str; 3] = ["prefixItems", "items", "additionalItems"];

/// Remove a schema's positional keywords and return them as (schemas of the first
/// positions, schema of every later position): `prefixItems` + `items` (2020-12), array-form
/// `items` + `additionalItems` (drafts 4 to 2019-09), or `items` alone (every position).
/// `additionalItems` without array-form `items` constrains nothing.
fn positions(m: &mut Map<String, Value>) -> (Vec<Value>, Value) {
    let prefix = m.remove("prefixItems");
    let items = m.remove("items");
    let additional = m.remove("additionalItems");
    match (prefix, items) {
        (Some(Value::Array(p)), items) => (p, items.unwrap_or(Value::Bool(true))),
        (_, Some(Value::Array(p))) => (p, additional.unwrap_or(Value::Bool(true))),
        (_, Some(items)) => (Vec::new(), items),
        (_, None) => (Vec::new(), Value::Bool(true)),
    }
}

/// Merge `schemas` (conjunction) into one schema value.
pub(super) fn merge_all(
    c: &mut Compiler<'_>,
    schemas: Vec<Value>,
    ptr: &str,
) -> Result<Value, GrammarError> {
    let mut flat: Vec<Value> = Vec::new();
    let mut stack: Vec<Value> = schemas.into_iter().rev().collect();
    while let Some(s) = stack.pop() {
        c.merge_step(ptr)?;
        match s {
            Value::Object(mut m) => {
                // `then`/`else` without an `if` in the same schema do nothing: dropped, so
                // that they never meet another branch's `if`.
                if !m.contains_key("if") {
                    m.remove("then");
                    m.remove("else");
                }
                // `unevaluated*` are about this schema object's own subschemas: rewritten
                // here, whole, or refused (merged, they would see other branches' members).
                if let Some(r) = super::unevaluated::rewrite_unevaluated(&m) {
                    stack.push(Value::Object(r));
                    continue;
                }
                for kw in ["unevaluatedProperties", "unevaluatedItems"] {
                    if m.contains_key(kw) {
                        return Err(GrammarError::unsupported(
                            join_ptr(ptr, kw),
                            kw,
                            format!(
                                "unsupported `{kw}` in an `allOf` member or `$ref` target: what it sees evaluated is not static"
                            ),
                        ));
                    }
                }
                if let Some(r) = m.get("$ref").and_then(Value::as_str).map(str::to_string) {
                    m.remove("$ref");
                    let (_, target) = c.resolve_chain(&r, ptr)?;
                    stack.push(Value::Object(m));
                    stack.push(target.clone());
                    continue;
                }
                if let Some(Value::Array(list)) = m.remove("allOf") {
                    stack.push(Value::Object(m));
                    for x in list.into_iter().rev() {
                        stack.push(x);
                    }
                    continue;
                }
                let m = Value::Object(m);
                // Conjunction is idempotent: a part said twice (a property's schema and a
                // `patternProperties` schema that is the same `oneOf`) is merged once, not
                // multiplied out with itself.
                if !flat.contains(&m) {
                    flat.push(m);
                }
            }
            other => {
                if !flat.contains(&other) {
                    flat.push(other);
                }
            }
        }
    }
    let mut acc = Value::Bool(true);
    for s in flat {
        acc = merge2(c, acc, s, ptr)?;
    }
    Ok(acc)
}

fn unsupported(ptr: &str, msg: impl Into<String>) -> GrammarError {
    GrammarError::unsupported(
        join_ptr(ptr, "allOf"),
        "allOf",
        format!("cannot merge `allOf`: {}", msg.into()),
    )
}

fn types_of(m: &Map<String, Value>) -> Option<u8> {
    match m.get("type") {
        Some(Value::String(t)) => ty::from_name(t),
        Some(Value::Array(ts)) => Some(
            ts.iter()
                .filter_map(|t| t.as_str().and_then(ty::from_name))
                .fold(0, |a, b| a | b),
        ),
        _ => None,
    }
}

pub(super) fn type_value(set: u8) -> Value {
    let mut names = Vec::new();
    for (bit, name) in [
        (ty::NULL, "null"),
        (ty::BOOL, "boolean"),
        (ty::OBJECT, "object"),
        (ty::ARRAY, "array"),
        (ty::STRING, "string"),
    ] {
        if set & bit != 0 {
            names.push(Value::String(name.into()));
        }
    }
    if set & ty::NUMBER == ty::NUMBER {
        names.push(Value::String("number".into()));
    } else if set & ty::INT != 0 {
        names.push(Value::String("integer".into()));
    }
    if names.len() == 1 {
        names.pop().unwrap()
    } else {
        Value::Array(names)
    }
}

/// Schema for key `k` on a side that does not name it: its matching patternProperties, else
/// its additionalProperties (true when absent).
fn extra_schema(m: &Map<String, Value>, k: &str) -> Value {
    if let Some(Value::Object(pp)) = m.get("patternProperties") {
        let mut matching = Vec::new();
        for (p, s) in pp {
            let re = super::lexical::name_matcher(p);
            match re {
                Some(re) if re.is_match(k) => matching.push(s.clone()),
                Some(_) => {}
                None => return Value::Bool(false),
            }
        }
        if !matching.is_empty() {
            return matching.into_iter().fold(Value::Bool(true), all_of);
        }
    }
    m.get("additionalProperties")
        .cloned()
        .unwrap_or(Value::Bool(true))
}

fn merge2(c: &mut Compiler<'_>, a: Value, b: Value, ptr: &str) -> Result<Value, GrammarError> {
    let (mut a, mut b) = match (a, b) {
        (Value::Bool(true), x) | (x, Value::Bool(true)) => return Ok(x),
        (Value::Bool(false), _) | (_, Value::Bool(false)) => return Ok(Value::Bool(false)),
        (Value::Object(a), Value::Object(b)) => (a, b),
        _ => {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "allOf"),
                "an `allOf` branch is not a schema",
            ));
        }
    };
    // anyOf / oneOf on both sides: multiply out (anyOf) or refuse (oneOf).
    if a.contains_key("oneOf") && b.contains_key("oneOf") {
        // One of them provably disjoint is an anyOf, which multiplies out below.
        let disjoint = |c: &Compiler<'_>, m: &Map<String, Value>| {
            m.get("oneOf")
                .and_then(Value::as_array)
                .is_some_and(|bs| provably_disjoint(c, bs, ptr).is_ok())
        };
        let side = if disjoint(c, &b) && !b.contains_key("anyOf") {
            &mut b
        } else if disjoint(c, &a) && !a.contains_key("anyOf") {
            &mut a
        } else {
            return Err(unsupported(ptr, "both sides have `oneOf`"));
        };
        let list = side.remove("oneOf").expect("checked above");
        side.insert("anyOf".into(), list);
    }
    let a_any = a.remove("anyOf");
    let b_any = b.remove("anyOf");
    let any = match (a_any, b_any) {
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            if x.len() * y.len() > 64 {
                return Err(unsupported(
                    ptr,
                    "two `anyOf` lists too large to multiply out",
                ));
            }
            let mut prod = Vec::new();
            for p in &x {
                for q in &y {
                    prod.push(all_of(p.clone(), q.clone()));
                }
            }
            Some(Value::Array(prod))
        }
        (Some(x), None) | (None, Some(x)) => Some(x),
        (None, None) => None,
        _ => {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "anyOf"),
                "`anyOf` must be an array",
            ));
        }
    };
    // `contains` with its counts, handled together: stray counts (no `contains` beside them)
    // do nothing; two different `contains` are not merged.
    for m in [&mut a, &mut b] {
        if !m.contains_key("contains") {
            m.remove("minContains");
            m.remove("maxContains");
        }
    }
    if a.contains_key("contains") && b.contains_key("contains") {
        let triple = |m: &Map<String, Value>| {
            ["contains", "minContains", "maxContains"].map(|k| m.get(k).cloned())
        };
        if triple(&a) != triple(&b) {
            return Err(unsupported(ptr, "`contains` on both sides"));
        }
    }
    // Object member keywords, handled together.
    let a_obj = a.contains_key("properties")
        || a.contains_key("additionalProperties")
        || a.contains_key("patternProperties");
    let b_obj = b.contains_key("properties")
        || b.contains_key("additionalProperties")
        || b.contains_key("patternProperties");
    if a_obj && b_obj {
        let a_pp = a.contains_key("patternProperties");
        let b_pp = b.contains_key("patternProperties");
        // The same patterns on both sides (their schemas may differ): one pattern list whose
        // schemas meet, and every key is "extra" on both sides alike.
        let pattern_keys = |m: &Map<String, Value>| {
            m.get("patternProperties")
                .and_then(Value::as_object)
                .map(|pp| pp.keys().cloned().collect::<Vec<_>>())
        };
        let same_patterns = a_pp && b_pp && pattern_keys(&a) == pattern_keys(&b);
        if a_pp && b_pp && !same_patterns {
            return Err(unsupported(ptr, "`patternProperties` on both sides"));
        }
        let restrictive = |m: &Map<String, Value>| {
            m.get("additionalProperties")
                .is_some_and(|v| !is_trivially_true(v))
        };
        if !same_patterns && ((a_pp && restrictive(&b)) || (b_pp && restrictive(&a))) {
            return Err(unsupported(
                ptr,
                "`patternProperties` with `additionalProperties` on the other side",
            ));
        }
        let empty = Map::new();
        let ap = a
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone();
        let bp = b
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty)
            .clone();
        let mut merged = Map::new();
        for (k, sa) in &ap {
            let sb = bp.get(k).cloned().unwrap_or_else(|| extra_schema(&b, k));
            merged.insert(k.clone(), all_of(sa.clone(), sb));
        }
        for (k, sb) in &bp {
            if !ap.contains_key(k) {
                merged.insert(k.clone(), all_of(extra_schema(&a, k), sb.clone()));
            }
        }
        let add = all_of(
            a.get("additionalProperties")
                .cloned()
                .unwrap_or(Value::Bool(true)),
            b.get("additionalProperties")
                .cloned()
                .unwrap_or(Value::Bool(true)),
        );
        a.insert("properties".into(), Value::Object(merged));
        if is_trivially_true(&add) {
            a.remove("additionalProperties");
        } else {
            a.insert("additionalProperties".into(), add);
        }
        if b_pp && !a_pp {
            a.insert("patternProperties".into(), b["patternProperties"].clone());
        } else if same_patterns {
            let bp = b["patternProperties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            if let Some(Value::Object(app)) = a.get_mut("patternProperties") {
                for (p, sa) in app.iter_mut() {
                    if let Some(sb) = bp.get(p) {
                        *sa = all_of(sa.clone(), sb.clone());
                    }
                }
            }
        }
        for k in ["properties", "additionalProperties", "patternProperties"] {
            b.remove(k);
        }
    }
    // Array positions, handled together: each side says what item `i` must satisfy
    // (`prefixItems[i]` / array-form `items[i]`, else `items` / `additionalItems`); the merge
    // says, position by position, both. Merging the keywords one by one would let one side's
    // `items` (every position) be read as the rest after the other side's `prefixItems`.
    if POSITIONAL
        .iter()
        .any(|k| a.contains_key(*k) || b.contains_key(*k))
    {
        let (pa, ra) = positions(&mut a);
        let (pb, rb) = positions(&mut b);
        let n = pa.len().max(pb.len());
        let at = |p: &[Value], r: &Value, i: usize| p.get(i).cloned().unwrap_or_else(|| r.clone());
        let prefix: Vec<Value> = (0..n)
            .map(|i| all_of(at(&pa, &ra, i), at(&pb, &rb, i)))
            .collect();
        let rest = all_of(ra, rb);
        if !prefix.is_empty() {
            a.insert("prefixItems".into(), Value::Array(prefix));
        }
        if !is_trivially_true(&rest) {
            a.insert("items".into(), rest);
        }
    }
    for (k, vb) in b {
        let Some(va) = a.get(&k).cloned() else {
            a.insert(k, vb);
            continue;
        };
        if k == PRESENCE_KEY {
            let mut list = va.as_array().cloned().unwrap_or_default();
            list.extend(vb.as_array().cloned().unwrap_or_default());
            a.insert(k, Value::Array(list));
            continue;
        }
        // Both sides have the same `if` (else `if` is refused below): `then`s (`else`s) meet.
        let branch = k == "then" || k == "else";
        if va == vb || ANNOTATIONS.contains(&k.as_str()) || (!is_keyword(&k) && !branch) {
            continue;
        }
        let merged = match k.as_str() {
            "then" | "else" => all_of(va, vb),
            // Two `not: {enum|const: strings}`: none of either list.
            "not"
                if super::combinators::excluded_strings(&va).is_some()
                    && super::combinators::excluded_strings(&vb).is_some() =>
            {
                let mut list = super::combinators::excluded_strings(&va).unwrap_or_default();
                list.extend(super::combinators::excluded_strings(&vb).unwrap_or_default());
                serde_json::json!({ "enum": list })
            }
            "type" => {
                let (Some(x), Some(y)) = (
                    types_of(&a),
                    types_of(&Map::from_iter([(k.clone(), vb.clone())])),
                ) else {
                    return Err(GrammarError::at_pointer(
                        join_ptr(ptr, "type"),
                        "bad `type`",
                    ));
                };
                let both = x & y;
                if both == 0 {
                    return Ok(Value::Bool(false));
                }
                type_value(both)
            }
            "required" => {
                let mut list = va.as_array().cloned().unwrap_or_default();
                for r in vb.as_array().cloned().unwrap_or_default() {
                    if !list.contains(&r) {
                        list.push(r);
                    }
                }
                Value::Array(list)
            }
            "enum" => {
                let y = vb.as_array().cloned().unwrap_or_default();
                Value::Array(
                    va.as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|v| y.contains(v))
                        .collect(),
                )
            }
            "const" => return Ok(Value::Bool(false)),
            "minimum" | "exclusiveMinimum" | "minLength" | "minItems" | "minProperties"
                if va.is_number() && vb.is_number() =>
            {
                if va.as_f64() >= vb.as_f64() {
                    va
                } else {
                    vb
                }
            }
            "maximum" | "exclusiveMaximum" | "maxLength" | "maxItems" | "maxProperties"
                if va.is_number() && vb.is_number() =>
            {
                if va.as_f64() <= vb.as_f64() {
                    va
                } else {
                    vb
                }
            }
            "items" if va.is_object() || va.is_boolean() => all_of(va, vb),
            "additionalItems" => all_of(va, vb),
            "uniqueItems" => {
                Value::Bool(va.as_bool().unwrap_or(false) || vb.as_bool().unwrap_or(false))
            }
            "multipleOf" => {
                let (x, y) = (va.as_f64().unwrap_or(0.0), vb.as_f64().unwrap_or(0.0));
                if x > 0.0 && y > 0.0 && (x / y).fract() == 0.0 {
                    va
                } else if x > 0.0 && y > 0.0 && (y / x).fract() == 0.0 {
                    vb
                } else {
                    return Err(unsupported(ptr, format!("`multipleOf` {x} and {y}")));
                }
            }
            other => {
                return Err(unsupported(
                    ptr,
                    format!("`{other}` on both sides with different values"),
                ));
            }
        };
        a.insert(k, merged);
    }
    // `const` with `enum`: keep the enum filtered.
    if let (Some(cst), Some(Value::Array(list))) = (a.get("const").cloned(), a.get("enum").cloned())
    {
        a.remove("const");
        a.insert(
            "enum".into(),
            Value::Array(list.into_iter().filter(|v| *v == cst).collect()),
        );
    }
    if let Some(any) = any {
        a.insert("anyOf".into(), any);
    }
    Ok(Value::Object(a))
}

/// What a schema can say about its instances for disjointness proofs.
#[derive(Clone)]
struct Shape {
    types: u8,
    consts: Option<Vec<Value>>,
    /// Required properties.
    required: Vec<String>,
    /// Required properties with the shape of their value (a few levels deep): two objects
    /// that both require `k` with disjoint value shapes are disjoint (discriminators).
    discriminators: Vec<(String, Shape)>,
    /// `Some(names)` when only these property names are allowed (additionalProperties false).
    closed: Option<Vec<String>>,
    /// For strings: a full-match regex (over the decoded string) every valid string matches.
    string_regex: Option<regex_syntax::hir::Hir>,
    /// What a member named `k` must satisfy if present: `properties`, then the
    /// `patternProperties` whose pattern matches `k`, else `additionalProperties`.
    /// (One entry per `allOf` part that has member keywords; all of them apply.)
    member_rules: Vec<MemberRules>,
    /// Every instance satisfies one of these (the branches of an `anyOf`/`oneOf`); empty
    /// when unknown.
    any_of: Vec<Shape>,
}

/// The per-member part of an object schema, for "if present, `k` must be …" arguments.
#[derive(Clone)]
struct MemberRules {
    properties: Vec<(String, Shape)>,
    patterns: Vec<(regex_automata::meta::Regex, Shape)>,
    additional: Option<Box<Shape>>,
}

impl MemberRules {
    /// The shapes a present member `k` must satisfy (all of them).
    fn constraints_on<'s>(&'s self, k: &str) -> Vec<&'s Shape> {
        let mut out: Vec<&Shape> = self
            .properties
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, s)| s)
            .collect();
        let named = !out.is_empty();
        let by_pattern: Vec<&Shape> = self
            .patterns
            .iter()
            .filter(|(re, _)| re.is_match(k))
            .map(|(_, s)| s)
            .collect();
        let matched = !by_pattern.is_empty();
        out.extend(by_pattern);
        if !named && !matched {
            out.extend(self.additional.as_deref());
        }
        out
    }
}

fn shape(c: &Compiler<'_>, s: &Value, ptr: &str, depth: usize) -> Shape {
    let mut out = Shape {
        types: ty::ALL,
        consts: None,
        required: Vec::new(),
        discriminators: Vec::new(),
        closed: None,
        string_regex: None,
        member_rules: Vec::new(),
        any_of: Vec::new(),
    };
    let m = match s {
        Value::Bool(false) => {
            out.types = 0;
            return out;
        }
        Value::Object(m) => m,
        _ => return out,
    };
    if depth > 16 {
        return out;
    }
    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
        if let Ok((_, t)) = c.resolve_chain(r, ptr) {
            out = shape(c, t, ptr, depth + 1);
        }
    }
    if let Some(Value::Array(all)) = m.get("allOf") {
        for b in all {
            let sb = shape(c, b, ptr, depth + 1);
            out.types &= sb.types;
            out.required.extend(sb.required);
            out.discriminators.extend(sb.discriminators);
            if out.consts.is_none() {
                out.consts = sb.consts;
            }
            if out.closed.is_none() {
                out.closed = sb.closed;
            }
            if out.string_regex.is_none() {
                out.string_regex = sb.string_regex;
            }
            out.member_rules.extend(sb.member_rules);
        }
    }
    for kw in ["anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = m.get(kw) {
            let mut t = 0;
            let mut branches = Vec::with_capacity(list.len());
            for b in list {
                let sb = shape(c, b, ptr, depth + 2);
                t |= sb.types;
                branches.push(sb);
            }
            out.types &= t;
            if out.any_of.is_empty() && depth < 8 && list.len() <= 16 {
                out.any_of = branches;
            }
        }
    }
    if let Some(t) = types_of(m) {
        out.types &= t;
    }
    let mut consts = None;
    if let Some(v) = m.get("const") {
        consts = Some(vec![v.clone()]);
    } else if let Some(Value::Array(list)) = m.get("enum") {
        consts = Some(list.clone());
    }
    if let Some(cs) = consts {
        out.types &= cs.iter().fold(0, |a, v| a | ty::of_value(v));
        out.consts = Some(cs);
    }
    if let Some(Value::Array(req)) = m.get("required") {
        let props = m.get("properties").and_then(Value::as_object);
        for r in req.iter().filter_map(Value::as_str) {
            out.required.push(r.to_string());
            if let Some(ps) = props.and_then(|p| p.get(r)) {
                // Bounded: property shapes nest at most a few levels (recursive schemas).
                if depth < 6 {
                    out.discriminators
                        .push((r.to_string(), shape(c, ps, ptr, depth + 4)));
                }
            }
        }
    }
    if let Some(p) = m.get("pattern").and_then(Value::as_str) {
        let parsed = super::lexical::translate_ecma(p).ok().and_then(|t| {
            regex_syntax::ParserBuilder::new()
                .nest_limit(100)
                .build()
                .parse(&t)
                .ok()
        });
        if let Some(h) = parsed {
            let h = super::lexical::anchor_search(&h, &super::lexical::hir("(?s:.)*"));
            if !super::lexical::has_look(&h) {
                out.string_regex = Some(h);
            }
        }
    } else if let Some(f) = m
        .get("format")
        .and_then(Value::as_str)
        .and_then(super::lexical::format_pattern)
    {
        out.string_regex = Some(super::lexical::hir(&f));
    }
    // Member rules, a few levels deep only (recursive schemas).
    if depth < 6
        && ["properties", "patternProperties", "additionalProperties"]
            .iter()
            .any(|k| m.contains_key(*k))
    {
        let mut rules = MemberRules {
            properties: Vec::new(),
            patterns: Vec::new(),
            additional: None,
        };
        if let Some(props) = m.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                rules
                    .properties
                    .push((k.clone(), shape(c, v, ptr, depth + 4)));
            }
        }
        if let Some(pats) = m.get("patternProperties").and_then(Value::as_object) {
            for (p, v) in pats {
                let re = super::lexical::name_matcher(p);
                match re {
                    Some(re) => rules.patterns.push((re, shape(c, v, ptr, depth + 4))),
                    // A pattern we cannot read: give up on member arguments for this schema.
                    None => rules.additional = None,
                }
            }
        }
        if let Some(a) = m.get("additionalProperties") {
            rules.additional = Some(Box::new(shape(c, a, ptr, depth + 4)));
        }
        let unreadable = m
            .get("patternProperties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.len() != rules.patterns.len());
        if !unreadable {
            out.member_rules.push(rules);
        }
    }
    if m.get("additionalProperties") == Some(&Value::Bool(false))
        && !m.contains_key("patternProperties")
    {
        out.closed = Some(
            m.get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default(),
        );
    }
    out
}

impl Shape {
    /// What all of `shapes` say together (each field from the first shape that says
    /// something, types intersected): weaker than the exact intersection, never stronger.
    fn meet(shapes: &[&Shape]) -> Shape {
        let mut out = shapes[0].clone();
        for s in &shapes[1..] {
            out.types &= s.types;
            if out.consts.is_none() {
                out.consts = s.consts.clone();
            }
            out.required.extend(s.required.iter().cloned());
            out.discriminators.extend(s.discriminators.iter().cloned());
            if out.closed.is_none() {
                out.closed = s.closed.clone();
            }
            if out.string_regex.is_none() {
                out.string_regex = s.string_regex.clone();
            }
            out.member_rules.extend(s.member_rules.iter().cloned());
            if out.any_of.is_empty() {
                out.any_of = s.any_of.clone();
            }
        }
        out
    }

    /// Every shape a present member `k` must satisfy under this schema.
    fn constraints_on<'s>(&'s self, k: &str) -> Vec<&'s Shape> {
        let mut out: Vec<&Shape> = self
            .discriminators
            .iter()
            .filter(|(n, _)| n == k)
            .map(|(_, s)| s)
            .collect();
        for rules in &self.member_rules {
            out.extend(rules.constraints_on(k));
        }
        out
    }
}

fn shapes_disjoint(a: &Shape, b: &Shape) -> bool {
    if a.types & b.types == 0 {
        return true;
    }
    // An instance of `a` is an instance of one of its branches: disjoint when each is.
    for (x, y) in [(a, b), (b, a)] {
        if !x.any_of.is_empty() && x.any_of.iter().all(|xi| shapes_disjoint(xi, y)) {
            return true;
        }
    }
    if let (Some(x), Some(y)) = (&a.consts, &b.consts) {
        if !x.iter().any(|v| y.contains(v)) {
            return true;
        }
    }
    if (a.types & b.types) & !ty::STRING == 0 {
        if let (Some(x), Some(y)) = (&a.string_regex, &b.string_regex) {
            if regexes_disjoint(x, y) == Some(true) {
                return true;
            }
        }
    }
    // Objects are the only overlap left? Then object-level arguments apply.
    if (a.types & b.types) & !ty::OBJECT == 0 {
        for (k, xs) in &a.discriminators {
            for (k2, ys) in &b.discriminators {
                if k == k2 && shapes_disjoint(xs, ys) {
                    return true;
                }
            }
        }
        // `x` requires `k`, and what `x` says about `k`'s value contradicts what `y` says
        // about it (whether `y` requires `k` or only constrains it when present).
        for (x, y) in [(a, b), (b, a)] {
            for k in &x.required {
                let (on_x, on_y) = (x.constraints_on(k), y.constraints_on(k));
                if on_x.is_empty() || on_y.is_empty() {
                    continue;
                }
                if shapes_disjoint(&Shape::meet(&on_x), &Shape::meet(&on_y)) {
                    return true;
                }
            }
        }
        if let Some(closed) = &b.closed {
            if a.required.iter().any(|r| !closed.contains(r)) {
                return true;
            }
        }
        if let Some(closed) = &a.closed {
            if b.required.iter().any(|r| !closed.contains(r)) {
                return true;
            }
        }
    }
    false
}

/// `Ok` when no instance can be valid for two of `branches`; else why not.
pub(super) fn provably_disjoint(
    c: &Compiler<'_>,
    branches: &[Value],
    ptr: &str,
) -> Result<(), String> {
    let shapes: Vec<Shape> = branches.iter().map(|b| shape(c, b, ptr, 0)).collect();
    for i in 0..shapes.len() {
        for j in i + 1..shapes.len() {
            if !shapes_disjoint(&shapes[i], &shapes[j]) {
                return Err(format!("branches {i} and {j} may overlap"));
            }
        }
    }
    Ok(())
}

/// Whether two regexes (full match, over bytes) have no string in common, by a walk over
/// the product of their DFAs. `None` when the DFAs or the product are too large.
fn regexes_disjoint(x: &regex_syntax::hir::Hir, y: &regex_syntax::hir::Hir) -> Option<bool> {
    use regex_automata::dfa::{Automaton, StartKind, dense};
    use regex_automata::util::start;
    use regex_automata::{Anchored, MatchKind, nfa::thompson};
    let build = |h: &regex_syntax::hir::Hir| -> Option<dense::DFA<Vec<u32>>> {
        let nfa =
            crate::grammar::nfa::thompson_nfa(h, None, false, thompson::WhichCaptures::All).ok()?;
        dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .match_kind(MatchKind::All)
                    .dfa_size_limit(Some(8 << 20)),
            )
            .build_from_nfa(&nfa)
            .ok()
    };
    let (dx, dy) = (build(x)?, build(y)?);
    let cfg = start::Config::new().anchored(Anchored::Yes);
    let s0 = (dx.start_state(&cfg).ok()?, dy.start_state(&cfg).ok()?);
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![s0];
    seen.insert(s0);
    while let Some((p, q)) = stack.pop() {
        if dx.is_match_state(dx.next_eoi_state(p)) && dy.is_match_state(dy.next_eoi_state(q)) {
            return Some(false);
        }
        for b in 0..=255u8 {
            let (np, nq) = (dx.next_state(p, b), dy.next_state(q, b));
            if dx.is_dead_state(np) || dy.is_dead_state(nq) {
                continue;
            }
            if seen.insert((np, nq)) {
                if seen.len() > 200_000 {
                    return None;
                }
                stack.push((np, nq));
            }
        }
    }
    Some(true)
}

/// For a `oneOf` branch with no type information at all (no `type`, `enum`, `const`, `$ref`
/// or combinator), the one type family its keywords are about (`properties` → object, ...).
fn implied_type(b: &Value) -> Option<&'static str> {
    let m = b.as_object()?;
    if [
        "type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "if",
    ]
    .iter()
    .any(|k| m.contains_key(*k))
    {
        return None;
    }
    let mut family = None;
    for k in m.keys() {
        let f = match k.as_str() {
            "properties"
            | "required"
            | "additionalProperties"
            | "patternProperties"
            | "minProperties"
            | "maxProperties"
            | "dependencies"
            | "dependentRequired"
            | "propertyNames" => "object",
            "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems"
            | "uniqueItems" | "contains" => "array",
            "pattern" | "format" | "minLength" | "maxLength" => "string",
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => {
                "number"
            }
            _ => continue,
        };
        if family.is_some_and(|x| x != f) {
            return None;
        }
        family = Some(f);
    }
    family
}

/// `oneOf` branches with untyped branches restricted to the type family their keywords are
/// about, when that is exact: every untyped branch is about the same family F and every
/// other branch admits only types in F. Then an instance outside F satisfies every untyped
/// branch vacuously (and no typed one): with two or more untyped branches it was invalid,
/// so removing it changes nothing; with one, it was valid and is lost (a subset). Inside F
/// nothing changes. `None` when no branch is untyped or the condition fails.
pub(super) fn restrict_implied_types(
    c: &Compiler<'_>,
    branches: &[Value],
    ptr: &str,
) -> Option<Vec<Value>> {
    if branches.len() < 2 {
        return None;
    }
    // A branch that is only a `$ref` is about what its target is about.
    let implied_of = |b: &Value| -> Option<&'static str> {
        match bare_ref(b) {
            Some(r) => implied_type(c.resolve_chain(r, ptr).ok()?.1),
            None => implied_type(b),
        }
    };
    let implied: Vec<Option<&'static str>> = branches.iter().map(implied_of).collect();
    let family = implied.iter().flatten().next().copied()?;
    if implied.iter().flatten().any(|f| *f != family) {
        return None;
    }
    let bits = ty::from_name(family)?;
    for (b, imp) in branches.iter().zip(&implied) {
        if imp.is_none() && shape(c, b, ptr, 0).types & !bits != 0 {
            return None;
        }
    }
    let mut out = branches.to_vec();
    for (b, imp) in out.iter_mut().zip(&implied) {
        if let (Some(t), Some(m)) = (imp, b.as_object_mut()) {
            m.insert("type".into(), Value::String((*t).into()));
        }
    }
    Some(out)
}
