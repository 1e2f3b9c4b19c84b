//! Sibling keywords a branch already implies: `allOf: [S, b]` is `b` itself when every
//! constraint of `S` holds for every instance of `b`, and then `b` — usually a bare `$ref` —
//! compiles as the one shared rule of its target instead of a merged copy.
//!
//! The shape this is for is everywhere in real schemas: `{"type": "object", "anyOf":
//! [{"$ref": "#/definitions/a"}, {"$ref": "#/definitions/b"}]}` over object definitions.
//! Distributing the sibling `type` into each branch and merging resolved each reference
//! and copied its target into the use site, and the copies nest: definitions that use the
//! same pattern were copied into every copy. One 27 KB schema (JSONSchemaBench
//! `Github_ultra/o70036`) lowered to 13,406 rules this way.
//!
//! The test is conservative (a `false` only means "merge as before"):
//! - `type`: the types the branch can admit ([`admitted_types`], an over-approximation)
//!   are among the sibling's types;
//! - a few keywords that assert on their own, independent of other keywords in the same
//!   schema object (`required`, `format`, string/array/object length bounds, `enum`,
//!   `const`, `pattern`): the branch's target says the same thing (equal values);
//! - anything else (`properties`, `additionalProperties`, numeric bounds whose meaning
//!   depends on draft-4 `exclusive*` flags, combinators, ...): not implied.

use serde_json::{Map, Value};

use super::keywords::{bare_ref, is_keyword, ty};
use super::{Compiler, join_ptr};

/// Keywords whose assertion depends on nothing else in their schema object, so that an
/// equal value in the branch's target implies it.
const SELF_CONTAINED: &[&str] = &[
    "required",
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "enum",
    "const",
];

/// The types an instance valid for `s` (written at `ptr`, where its references resolve) can
/// have, as a [`ty`] set; an over-approximation (keywords it does not read admit
/// everything). `$ref` chains are followed a bounded number of levels, each target's own
/// references resolved where the target is.
pub(super) fn admitted_types(c: &Compiler<'_>, s: &Value, ptr: &str, depth: usize) -> u8 {
    let m = match s {
        Value::Bool(false) => return 0,
        Value::Object(m) => m,
        _ => return ty::ALL,
    };
    if depth > 16 {
        return ty::ALL;
    }
    let mut out = ty::ALL;
    if let Some(r) = m.get("$ref").and_then(Value::as_str) {
        if let Ok((at, t)) = c.resolve_chain(r, ptr) {
            out &= admitted_types(c, t, &at, depth + 1);
        }
    }
    let at = |kw: &str, i: usize| join_ptr(&join_ptr(ptr, kw), &i.to_string());
    if let Some(Value::Array(all)) = m.get("allOf") {
        for (i, b) in all.iter().enumerate() {
            out &= admitted_types(c, b, &at("allOf", i), depth + 1);
        }
    }
    for kw in ["anyOf", "oneOf"] {
        if let Some(Value::Array(list)) = m.get(kw) {
            out &= list.iter().enumerate().fold(0, |a, (i, b)| {
                a | admitted_types(c, b, &at(kw, i), depth + 1)
            });
        }
    }
    if let Some(t) = declared_types(m) {
        out &= t;
    }
    if let Some(v) = m.get("const") {
        out &= ty::of_value(v);
    } else if let Some(Value::Array(list)) = m.get("enum") {
        out &= list.iter().fold(0, |a, v| a | ty::of_value(v));
    }
    out
}

/// The `type` keyword of `m` as a set; `None` when absent or not well formed (an unknown
/// name: left to the compiler, which reports it).
fn declared_types(m: &Map<String, Value>) -> Option<u8> {
    match m.get("type")? {
        Value::String(t) => ty::from_name(t),
        Value::Array(ts) => ts
            .iter()
            .try_fold(0, |a, t| Some(a | ty::from_name(t.as_str()?)?)),
        _ => None,
    }
}

/// Whether every constraint among `siblings` holds for every instance of `branch` (see the
/// module documentation): then `allOf: [siblings, branch]` may be compiled as `branch`.
pub(super) fn implies(
    c: &Compiler<'_>,
    branch: &Value,
    siblings: &Map<String, Value>,
    ptr: &str,
) -> bool {
    // What the branch says: its reference's target when it is a bare `$ref` (and where that
    // target is, for its own references).
    let (target, at) = match bare_ref(branch) {
        Some(r) => match c.resolve_chain(r, ptr) {
            Ok((at, t)) => (t, at),
            Err(_) => return false,
        },
        None => (branch, ptr.to_string()),
    };
    for (k, v) in siblings {
        if !is_keyword(k) {
            continue;
        }
        let holds = if k == "type" {
            declared_types(siblings).is_some_and(|t| admitted_types(c, target, &at, 0) & !t == 0)
        } else if SELF_CONTAINED.contains(&k.as_str()) {
            target.get(k) == Some(v)
        } else {
            false
        };
        if !holds {
            return false;
        }
    }
    true
}
