//! Combinators compiled by rewriting the schema: `oneOf` branches that only list values,
//! `oneOf` with an `enum` branch whose values other branches also accept, `if`/`then`/`else`
//! on a discriminator property (as an exact `anyOf`), the strings a `not: {enum|const}`
//! excludes, and `enum`/`const` themselves (the listed values that satisfy the sibling
//! keywords, written out). `anyOf`/`oneOf`/`allOf`/`not` dispatch is in the parent module;
//! `allOf` merging and `oneOf` disjointness proofs are in `merge`.

use serde_json::{Map, Value};

use super::keywords::{bare_ref, ty};
use super::{Compiler, MAX_ENUM_VALUES, MAX_SCALAR_ENUM_VALUES, is_keyword, join_ptr, merge};
use crate::grammar::expr::{Expr, RuleKind};
use crate::grammar::{ErrorKind, GrammarError};

impl Compiler<'_> {
    /// `oneOf` branches that are all `enum`/`const` (possibly behind a `$ref`): the values
    /// listed by exactly one branch. `None` for other shapes.
    pub(super) fn exclusive_values(&self, branches: &[Value], ptr: &str) -> Option<Vec<Value>> {
        let mut lists = Vec::new();
        for b in branches {
            let mut b = b;
            if let Some(r) = b.get("$ref").and_then(Value::as_str) {
                if b.as_object()?.keys().any(|k| k != "$ref" && is_keyword(k)) {
                    return None;
                }
                b = self.resolve_chain(r, ptr).ok()?.1;
            }
            let m = b.as_object()?;
            if m.keys()
                .any(|k| is_keyword(k) && !matches!(k.as_str(), "enum" | "const"))
            {
                return None;
            }
            let list: Vec<Value> = match (m.get("const"), m.get("enum")) {
                (Some(c), None) => vec![c.clone()],
                (None, Some(Value::Array(e))) => e.clone(),
                _ => return None,
            };
            lists.push(list);
        }
        let mut out = Vec::new();
        for (i, l) in lists.iter().enumerate() {
            for v in l {
                let elsewhere = lists
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.contains(v));
                if !elsewhere && !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        Some(out)
    }

    /// `oneOf` of one `enum`/`const` branch of strings `E` and other branches that are
    /// pairwise disjoint but may share values with `E` (`[{"enum": ["linux"]}, {"type":
    /// "string"}]`): exactly one branch holds for the values of `E` no other branch accepts
    /// (checked with the `jsonschema` crate) and for the other branches' values outside `E`.
    /// Rewritten as that `anyOf`; `None` for other shapes or when the other branches may
    /// overlap among themselves.
    pub(super) fn one_of_with_overlapping_values(
        &mut self,
        branches: &[Value],
        ptr: &str,
    ) -> Result<Option<Value>, GrammarError> {
        let resolved = |b: &Value| -> Option<Value> {
            match bare_ref(b) {
                Some(r) => Some(self.resolve_chain(r, ptr).ok()?.1.clone()),
                None => Some(b.clone()),
            }
        };
        let mut enum_branch = None;
        for (i, b) in branches.iter().enumerate() {
            let Some(t) = resolved(b) else {
                return Ok(None);
            };
            let Some(tm) = t.as_object() else {
                return Ok(None);
            };
            if tm.keys().any(|k| is_keyword(k))
                && tm
                    .keys()
                    .all(|k| !is_keyword(k) || k == "enum" || k == "const")
            {
                if enum_branch.is_some() {
                    return Ok(None);
                }
                let values: Vec<Value> = match (tm.get("const"), tm.get("enum")) {
                    (Some(c), None) => vec![c.clone()],
                    (None, Some(Value::Array(list))) => list.clone(),
                    _ => return Ok(None),
                };
                if !values.iter().all(Value::is_string) {
                    return Ok(None);
                }
                enum_branch = Some((i, values));
            }
        }
        let Some((e, values)) = enum_branch else {
            return Ok(None);
        };
        let others: Vec<Value> = branches
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != e)
            .map(|(_, b)| b.clone())
            .collect();
        if others.len() > 1 && merge::provably_disjoint(self, &others, ptr).is_err() {
            return Ok(None);
        }
        // Which values another branch also accepts (with the document's definitions, so
        // local references resolve).
        let mut kept = Vec::new();
        for v in &values {
            let mut shared = false;
            for b in &others {
                let mut schema = match b {
                    Value::Object(m) => m.clone(),
                    _ => return Ok(None),
                };
                for defs in ["definitions", "$defs"] {
                    if let Some(d) = self.root.get(defs) {
                        schema.entry(defs).or_insert(d.clone());
                    }
                }
                let Ok(validator) = jsonschema::options()
                    .should_validate_formats(true)
                    .build(&Value::Object(schema))
                else {
                    return Ok(None);
                };
                shared |= validator.is_valid(v);
            }
            if !shared && !kept.contains(v) {
                kept.push(v.clone());
            }
        }
        let mut alts = Vec::new();
        if !kept.is_empty() {
            alts.push(serde_json::json!({"enum": kept}));
        }
        for b in others {
            alts.push(serde_json::json!({"allOf": [b, {"not": {"enum": values}}]}));
        }
        Ok(Some(serde_json::json!({"anyOf": alts})))
    }

    /// `enum` / `const`: the listed values that also satisfy the schema's other keywords.
    pub(super) fn enum_values(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let mut values: Vec<Value> = Vec::new();
        if let Some(c) = obj.get("const") {
            values.push(c.clone());
        }
        if let Some(e) = obj.get("enum") {
            let Some(list) = e.as_array() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "enum"),
                    "`enum` must be an array",
                ));
            };
            let scalar = |v: &Value| !matches!(v, Value::Array(_) | Value::Object(_));
            if list.len() > MAX_SCALAR_ENUM_VALUES
                || (list.len() > MAX_ENUM_VALUES && !list.iter().all(scalar))
            {
                let limit = if list.iter().all(scalar) {
                    format!("more than {MAX_SCALAR_ENUM_VALUES} values")
                } else {
                    format!("more than {MAX_ENUM_VALUES} values, not all of them scalars")
                };
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "enum"),
                    format!("`enum` has {limit}"),
                )
                .with_kind(ErrorKind::Limit));
            }
            if obj.contains_key("const") {
                values.retain(|c| list.contains(c));
            } else {
                values.extend(list.iter().cloned());
            }
        }
        // Other constraints: check each value with the jsonschema crate against the sibling
        // keywords (with the document's definitions, so local references resolve).
        let mut siblings = obj.clone();
        siblings.remove("enum");
        siblings.remove("const");
        let keywords: Vec<&String> = siblings.keys().filter(|k| is_keyword(k)).collect();
        let type_only = match (keywords.as_slice(), siblings.get("type")) {
            ([k], Some(t)) if k.as_str() == "type" => type_set(t),
            _ => None,
        };
        if let Some(types) = type_only {
            // The common case (`{"type": "string", "enum": [...]}`) without building a
            // validator: JSON Schema's type test, as the jsonschema crate applies it.
            values.retain(|v| ty::of_value(v) & types != 0);
        } else if !keywords.is_empty() {
            // The document's definitions only when a reference could need them: building
            // a validator compiles what it is given, and Kubernetes-sized `definitions`
            // cost milliseconds per `enum`.
            let refers = refers(&siblings);
            if let Some(defs) = self.root.get("definitions").filter(|_| refers) {
                siblings.entry("definitions").or_insert(defs.clone());
            }
            if let Some(defs) = self.root.get("$defs").filter(|_| refers) {
                siblings.entry("$defs").or_insert(defs.clone());
            }
            let schema = Value::Object(siblings);
            match jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
            {
                Ok(validator) => values.retain(|v| validator.is_valid(v)),
                Err(e) => {
                    return Err(GrammarError::at_pointer(
                        ptr,
                        format!("cannot check `enum` values against the sibling keywords: {e}"),
                    ));
                }
            }
        }
        if values.is_empty() {
            // Satisfiable schemas can have unsatisfiable parts (an optional property, a
            // branch); the empty alternative drops them, and lowering reports an empty whole.
            self.warnings.push(format!(
                "at {}: no `enum`/`const` value satisfies the schema",
                if ptr.is_empty() { "/" } else { ptr }
            ));
            return Ok(Self::never());
        }
        let alts: Vec<Expr> = values.iter().map(|v| self.literal(v, d)).collect();
        Ok(if alts.len() == 1 {
            alts.into_iter().next().unwrap()
        } else if alts.len() >= crate::grammar::lower::LITERAL_SET_MIN
            && alts
                .iter()
                .all(|a| matches!(a, Expr::Bytes(b) if !b.is_empty()))
        {
            // A rule of its own, so lowering sees a body of literal alternatives and builds
            // one trie terminal (not one terminal per value).
            Expr::Ref(self.add_rule("enum", Expr::Alt(alts), RuleKind::Syntactic)?)
        } else {
            Expr::Alt(alts)
        })
    }
}

/// `if`/`then`/`else` whose `if` only tests the value of one property `D`
/// (`{"properties": {"D": {"const": v}}}` or `{"enum": [...]}`), on the schema
/// itself and/or as members of its `allOf` (the usual "discriminated union" idiom), as an
/// equivalent `anyOf` with one branch per tested value (that value for `D`, plus every `then`
/// whose test it passes and every `else` whose test it fails) and one branch for the other
/// values of `D` (every `else`), and, unless `D` is required, one for objects without `D`
/// (every `then`: each test passes vacuously). `None` when the schema has no such
/// conditionals, is not `type: object`, or has conditionals of another shape (they stay
/// unsupported). Exact: each test is decided by `D`'s value (or absence) alone, and the
/// branches partition the objects by it.
pub(super) fn rewrite_discriminated_conditionals(obj: &Map<String, Value>) -> Option<Value> {
    struct Cond<'v> {
        values: Vec<Value>,
        then: Option<&'v Value>,
        otherwise: Option<&'v Value>,
    }
    let pure_conditional = |m: &Map<String, Value>| {
        m.contains_key("if")
            && m.keys()
                .all(|k| !is_keyword(k) || matches!(k.as_str(), "if" | "then" | "else"))
    };
    let mut members: Vec<&Map<String, Value>> = Vec::new();
    if obj.contains_key("if") {
        members.push(obj);
    }
    let all_of = obj.get("allOf").and_then(Value::as_array);
    for m in all_of.into_iter().flatten().filter_map(Value::as_object) {
        if pure_conditional(m) {
            members.push(m);
        }
    }
    if members.is_empty() {
        return None;
    }
    let mut discriminator: Option<&str> = None;
    let mut conds = Vec::new();
    for m in &members {
        let test = m.get("if")?.as_object()?;
        if test
            .keys()
            .any(|k| is_keyword(k) && k != "properties" && k != "required")
        {
            return None;
        }
        let props = test.get("properties")?.as_object()?;
        if props.len() != 1 {
            return None;
        }
        let (name, sub) = props.iter().next()?;
        if let Some(r) = test.get("required") {
            if r.as_array()?
                .iter()
                .any(|x| x.as_str() != Some(name.as_str()))
            {
                return None;
            }
        }
        let sub = sub.as_object()?;
        if sub
            .keys()
            .any(|k| is_keyword(k) && !matches!(k.as_str(), "const" | "enum" | "type"))
        {
            return None;
        }
        let values: Vec<Value> = match (sub.get("const"), sub.get("enum")) {
            (Some(c), None) => vec![c.clone()],
            (None, Some(Value::Array(list))) => list.clone(),
            _ => return None,
        };
        // A `type` beside the values must hold for all of them (else the test is not just
        // "D is one of these").
        if let Some(t) = sub.get("type") {
            let probe = serde_json::json!({"type": t});
            let v = jsonschema::validator_for(&probe).ok()?;
            if !values.iter().all(|x| v.is_valid(x)) {
                return None;
            }
        }
        if discriminator.is_some_and(|d| d != name) {
            return None;
        }
        discriminator = Some(name);
        conds.push(Cond {
            values,
            then: m.get("then"),
            otherwise: m.get("else"),
        });
    }
    let name = discriminator?;
    // Non-objects pass every `properties` test (so every `then` would apply to them): only
    // object schemas are rewritten.
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let required = obj
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(name)));
    let mut tested: Vec<Value> = Vec::new();
    for c in &conds {
        for v in &c.values {
            if !tested.contains(v) {
                tested.push(v.clone());
            }
        }
    }
    let words: Option<Vec<&str>> = tested.iter().map(Value::as_str).collect();
    let words = words?; // "any other value" is compiled for strings only
    // (Each value branch requires `D`: an object without it belongs to the "absent" branch.)
    let prop = |schema: Value| -> Value {
        serde_json::json!({"properties": {name: schema}, "required": [name]})
    };
    // Each branch starts with the schema's own `properties`, so that merging keeps their order
    // (member order in the grammar follows the first `properties` merged).
    let order: Vec<Value> = obj
        .get("properties")
        .map(|p| serde_json::json!({"properties": p}))
        .into_iter()
        .collect();
    let mut branches = Vec::new();
    for v in &tested {
        let mut all = order.clone();
        all.push(prop(serde_json::json!({"const": v})));
        for c in &conds {
            let part = if c.values.contains(v) {
                c.then
            } else {
                c.otherwise
            };
            all.extend(part.cloned());
        }
        branches.push(serde_json::json!({"allOf": all}));
    }
    let mut others = order.clone();
    others.push(prop(serde_json::json!({"not": {"enum": words}})));
    others.extend(conds.iter().filter_map(|c| c.otherwise.cloned()));
    branches.push(serde_json::json!({"allOf": others}));
    if !required {
        // `D` absent: every test passes vacuously, so every `then` applies.
        let mut absent = order.clone();
        absent.push(serde_json::json!({"not": {"required": [name]}}));
        absent.extend(conds.iter().filter_map(|c| c.then.cloned()));
        branches.push(serde_json::json!({"allOf": absent}));
    }

    let mut out = obj.clone();
    out.remove("if");
    out.remove("then");
    out.remove("else");
    let mut kept: Vec<Value> = all_of
        .into_iter()
        .flatten()
        .filter(|m| !m.as_object().is_some_and(pure_conditional))
        .cloned()
        .collect();
    kept.push(serde_json::json!({"anyOf": branches}));
    out.insert("allOf".into(), Value::Array(kept));
    Some(Value::Object(out))
}

/// The strings of `not: {enum: [...]}` / `not: {const: ...}` when that is all the `not`
/// says and every excluded value is a string.
pub(super) fn excluded_strings(n: &Value) -> Option<Vec<String>> {
    let m = n.as_object()?;
    if m.keys()
        .any(|k| is_keyword(k) && k != "enum" && k != "const" && k != "type")
    {
        return None;
    }
    if m.get("type").is_some_and(|t| t != "string") {
        return None;
    }
    let values: Vec<&Value> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(list)), None) => list.iter().collect(),
        (None, Some(c)) => vec![c],
        _ => return None,
    };
    values
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// The type set of a `type` keyword's value (a name or a list of names), or `None` when it
/// is malformed or names an unknown type (the validator then reports it).
fn type_set(t: &Value) -> Option<u8> {
    match t {
        Value::String(s) => ty::from_name(s),
        Value::Array(list) => list
            .iter()
            .try_fold(0, |set, x| Some(set | ty::from_name(x.as_str()?)?)),
        _ => None,
    }
}

/// Whether a schema object holds a reference keyword anywhere (`$ref`, `$dynamicRef`,
/// `$recursiveRef`).
fn refers(m: &Map<String, Value>) -> bool {
    fn within(v: &Value) -> bool {
        match v {
            Value::Object(m) => refers(m),
            Value::Array(list) => list.iter().any(within),
            _ => false,
        }
    }
    m.iter()
        .any(|(k, x)| matches!(k.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") || within(x))
}
