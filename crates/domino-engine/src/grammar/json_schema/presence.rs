//! Presence constraints: which properties an object has, its members' values aside.
//! `anyOf`/`oneOf` branches that only list `required` properties become a [`Presence`] entry
//! carried in the schema under [`PRESENCE_KEY`] (so that `allOf` merging keeps them); the
//! object compiler (module `objects`) adds `dependencies`/`dependentRequired` and
//! `not: {required}`, and tracks the properties concerned as bits of its member-chain states.

use serde_json::{Map, Value};

use super::keywords::bare_ref;
use super::{Compiler, is_keyword, is_trivially_true, join_ptr, ty};
use crate::grammar::GrammarError;

/// Internal schema key carrying `anyOf`/`oneOf` presence constraints from
/// [`Compiler::presence_rewrite`] to [`Compiler::object`] (not a JSON Schema keyword; the NUL
/// keeps it from colliding with a user's key).
pub(crate) const PRESENCE_KEY: &str = "\u{0}domino-presence";

/// A constraint on which properties an object has (its members' values aside).
#[derive(Clone, Debug)]
pub(super) enum Presence {
    /// Exactly one of the sets is fully present.
    OneOf(Vec<Vec<String>>),
    /// At least one of the sets is fully present.
    AnyOf(Vec<Vec<String>>),
    /// If the property is present, so is the whole set (`dependencies`, `dependentRequired`).
    Implies(String, Vec<String>),
    /// Not the whole set (`not: {required: [...]}`).
    NotAll(Vec<String>),
}

/// [`Presence`] over bit masks of tracked properties (`None`: a set that can never be fully
/// present, because one of its properties cannot occur).
#[derive(Clone, Debug)]
pub(super) enum PresenceMask {
    OneOf(Vec<Option<u32>>),
    AnyOf(Vec<Option<u32>>),
    Implies(Option<u32>, Option<u32>),
    NotAll(Option<u32>),
}

pub(super) fn presence_ok(constraints: &[PresenceMask], b: u32) -> bool {
    let all = |m: &Option<u32>| m.is_some_and(|m| b & m == m);
    constraints.iter().all(|c| match c {
        PresenceMask::OneOf(sets) => sets.iter().filter(|m| all(m)).count() == 1,
        PresenceMask::AnyOf(sets) => sets.iter().any(all),
        PresenceMask::Implies(a, set) => !all(a) || all(set),
        PresenceMask::NotAll(set) => !all(set),
    })
}

/// One `anyOf`/`oneOf` branch of a presence rewrite.
struct Form {
    /// The names it requires.
    required: Vec<String>,
    /// Its `properties`.
    props: Map<String, Value>,
    /// Whether it says `type: object` (else it is typeless).
    typed_object: bool,
    /// Where its schema is in the document (its structured properties are then referenced,
    /// not copied: see `Compiler::ref_to`).
    at: String,
}

/// `{"required": [...]}` (annotations aside): the names, else `None`.
pub(super) fn required_only(v: &Value) -> Option<Vec<String>> {
    let m = v.as_object()?;
    if m.keys().any(|k| is_keyword(k) && k != "required") {
        return None;
    }
    let names = m.get("required")?.as_array()?;
    names
        .iter()
        .map(|n| n.as_str().map(str::to_string))
        .collect()
}

fn json_entry(kind: &str, sets: Vec<Value>) -> Value {
    Value::Object(
        [
            ("kind".to_string(), Value::String(kind.to_string())),
            ("sets".to_string(), Value::Array(sets)),
        ]
        .into_iter()
        .collect(),
    )
}

impl Compiler<'_> {
    /// `anyOf`/`oneOf` whose branches only say which properties are required (and give
    /// property schemas): compiled as a presence constraint on the object's members, with the
    /// branches' property schemas applied to those properties whenever present (a subset
    /// when branches give different schemas for properties they do not require).
    /// `Ok(None)` when the branches have another shape.
    pub(super) fn presence_rewrite(
        &mut self,
        obj: &Map<String, Value>,
        kw: &str,
        branches: &[Value],
        ptr: &str,
    ) -> Result<Option<Value>, GrammarError> {
        if obj.contains_key("patternProperties") || branches.len() < 2 {
            return Ok(None);
        }
        let mut forms: Vec<Form> = Vec::new();
        for (i, b) in branches.iter().enumerate() {
            let (at, b) = match bare_ref(b) {
                Some(r) => self.resolve_chain(r, ptr)?,
                None => (join_ptr(&join_ptr(ptr, kw), &i.to_string()), b),
            };
            let Some(m) = b.as_object() else {
                return Ok(None);
            };
            if m.keys()
                .any(|k| is_keyword(k) && !matches!(k.as_str(), "required" | "properties" | "type"))
            {
                return Ok(None);
            }
            let typed_object = match m.get("type") {
                None => false,
                Some(Value::String(t)) if t == "object" => true,
                Some(_) => return Ok(None),
            };
            let req = match m.get("required") {
                None => Vec::new(),
                Some(r) => match r.as_array().and_then(|a| {
                    a.iter()
                        .map(|n| n.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                }) {
                    Some(v) => v,
                    None => return Ok(None),
                },
            };
            let props = match m.get("properties") {
                None => Map::new(),
                Some(Value::Object(p)) => p.clone(),
                Some(_) => return Ok(None),
            };
            forms.push(Form {
                required: req,
                props,
                typed_object,
                at,
            });
        }
        // Branches giving different schemas to one property are discriminated by values, not
        // presence: leave them to the disjointness proof.
        for (i, Form { props: p, .. }) in forms.iter().enumerate() {
            for Form { props: q, .. } in &forms[i + 1..] {
                if p.iter().any(|(k, s)| q.get(k).is_some_and(|t| t != s)) {
                    return Ok(None);
                }
            }
        }
        let mut m = obj.clone();
        m.remove(kw);
        let mut props = m
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let outer_add = m
            .get("additionalProperties")
            .cloned()
            .filter(|a| !is_trivially_true(a));
        // (Every branch naming `k` gives it the same schema, checked above: the first one's
        // is taken, as a reference to where it is in the document when it can be.)
        let mut taken = std::collections::HashSet::new();
        for Form { props: bp, at, .. } in &forms {
            for (k, s) in bp {
                if !taken.insert(k.as_str()) {
                    continue;
                }
                let s = &self
                    .ref_to(&join_ptr(&join_ptr(at, "properties"), k), s)
                    .unwrap_or_else(|| s.clone());
                let base = props.get(k).cloned().or_else(|| outer_add.clone());
                let merged = match base {
                    Some(b) if !is_trivially_true(&b) => Value::Object(
                        [("allOf".to_string(), Value::Array(vec![b, s.clone()]))]
                            .into_iter()
                            .collect(),
                    ),
                    _ => s.clone(),
                };
                props.insert(k.clone(), merged);
            }
        }
        m.insert("properties".into(), Value::Object(props));
        let sets: Vec<Value> = forms
            .iter()
            .map(|f| {
                Value::Array(
                    f.required
                        .iter()
                        .map(|n| Value::String(n.clone()))
                        .collect(),
                )
            })
            .collect();
        let entry = json_entry(kw, sets);
        match m.get_mut(PRESENCE_KEY) {
            Some(Value::Array(list)) => list.push(entry),
            _ => {
                m.insert(PRESENCE_KEY.into(), Value::Array(vec![entry]));
            }
        }
        // Non-objects: valid for every typeless branch, invalid for typed ones.
        let typeless = forms.iter().filter(|f| !f.typed_object).count();
        let objects_only = if kw == "oneOf" {
            typeless != 1
        } else {
            typeless == 0
        };
        if objects_only {
            let current = match m.get("type") {
                None => ty::ALL,
                Some(Value::String(t)) => ty::from_name(t).unwrap_or(0),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(|t| t.as_str().and_then(ty::from_name))
                    .fold(0, |a, b| a | b),
                Some(_) => 0,
            };
            if current & ty::OBJECT == 0 {
                return Ok(Some(Value::Bool(false)));
            }
            m.insert("type".into(), Value::String("object".into()));
        }
        Ok(Some(Value::Object(m)))
    }
}
