//! `type: object`: `properties`, `required`, `additionalProperties` and `patternProperties`
//! (extra members, keys from module `keys`), `propertyNames` (named properties whose name
//! fails it are never present; extra keys are the strings it allows minus the named keys), schema- and list-valued
//! `dependencies`/`dependentRequired`, presence constraints (module `presence`) and
//! `minProperties`/`maxProperties`. The members are a chain of states explored up to
//! [`MAX_COUNT_STATES`], keeping the states from which the object can still be closed.
//!
//! # Member order ([`PropertyOrder`])
//! - `Any` (the default): the named members (`properties`, then `required` names not listed
//!   there) in every order, each at most once, every required one present, extra members
//!   anywhere among them. A state is (the set of named members written, whether an extra member
//!   was written — kept only when `minProperties` counts it —, members counted for
//!   `maxProperties`/`minProperties`, presence bits — the last two are functions of the first
//!   ones, or bounded by `maxProperties`). So an object with N named members costs at most
//!   `2^(N+1)·(maxProperties+1)` rules and N alternatives each: N = 8, no `maxProperties`:
//!   ≤ 1,024 rules. Each alternative is two references (an inline member rule — the member
//!   with the lead or separator before it, one per member and position — and the next
//!   state), so the states share their members' expressions instead of copying them (lowering
//!   splices the member's symbols in: `RuleKind::Inline`). Exact, and bounded by
//!   [`MAX_ANY_ORDER_PROPERTIES`]: larger objects (a CFG for all permutations of N items
//!   needs size exponential in N, whatever the construction) fall back to schema order with a
//!   warning naming the object's JSON pointer.
//! - `Schema`: members in schema order, optional ones may be left out (the order of the rest
//!   kept), extra members after the named ones. State (member index, members written,
//!   presence bits, members counted).
//!
//! Either way extra keys are never one of the named keys, so no member can be written twice
//! under a named key, and a named member's value always meets its own schema.
use std::borrow::Cow;

use regex_syntax::hir::Hir;
use serde_json::{Map, Value};

use super::keys::{KeyMatcher, match_all_kind, prefixes_disjoint, search_matches_everything};
use super::presence::{PRESENCE_KEY, Presence, PresenceMask, presence_ok, required_only};
use super::strings::quoted;
use super::{
    Compiler, MAX_ANY_ORDER_PROPERTIES, MAX_CONSTRAINED_STATES, MAX_COUNT_STATES, as_u64, ir,
    is_keyword, is_trivially_true, join_ptr, lexical,
};
use crate::grammar::expr::{Expr, RuleId, RuleKind};
use crate::grammar::{ErrorKind, GrammarError, PropertyOrder};

fn without(obj: &Map<String, Value>, k: &str) -> Map<String, Value> {
    let mut m = obj.clone();
    m.remove(k);
    m
}

fn merge_schemas(a: Value, b: Value) -> Value {
    if is_trivially_true(&a) {
        return b;
    }
    if is_trivially_true(&b) {
        return a;
    }
    Value::Object(
        [("allOf".to_string(), Value::Array(vec![a, b]))]
            .into_iter()
            .collect(),
    )
}

impl Compiler<'_> {
    pub(super) fn object(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let empty_map = Map::new();
        let props = match obj.get("properties") {
            None => &empty_map,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "properties"),
                    "`properties` must be an object",
                ));
            }
        };
        // Schema dependencies of the form {properties, required}: the property schemas are
        // applied whether or not the trigger is present (a subset), `required` becomes a
        // presence implication below.
        let mut props_owned: Option<Map<String, Value>> = None;
        if let Some(Value::Object(deps)) = obj.get("dependencies") {
            for (a, v) in deps {
                let Some(dm) = v.as_object() else { continue };
                if dm
                    .keys()
                    .any(|k| is_keyword(k) && k != "properties" && k != "required")
                {
                    continue;
                }
                let Some(Value::Object(dp)) = dm.get("properties") else {
                    continue;
                };
                let target = props_owned.get_or_insert_with(|| props.clone());
                for (k, s) in dp {
                    let merged = match target.get(k) {
                        Some(base) => merge_schemas(base.clone(), s.clone()),
                        None => match obj.get("additionalProperties") {
                            Some(Value::Bool(false)) => continue,
                            Some(add) => merge_schemas(add.clone(), s.clone()),
                            None => s.clone(),
                        },
                    };
                    target.insert(k.clone(), merged);
                }
                self.warnings.push(format!(
                    "at {}: the property schemas of the dependency on `{a}` apply whether or not `{a}` is present (a subset)",
                    join_ptr(ptr, "dependencies")
                ));
            }
        }
        let props = props_owned.as_ref().unwrap_or(props);
        let required: Vec<String> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            // Draft-3 style `required: true` on a property: not a draft-4+ keyword form.
            Some(_) => Vec::new(),
        };
        let additional: Option<Value> = match obj.get("additionalProperties") {
            None => Some(Value::Bool(true)),
            Some(Value::Bool(false)) => None,
            Some(v) => Some(v.clone()),
        };
        let patterns: Vec<(String, Value)> = match obj.get("patternProperties") {
            None => Vec::new(),
            Some(Value::Object(pp)) => pp.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "patternProperties"),
                    "`patternProperties` must be an object",
                ));
            }
        };
        let pp_ptr = join_ptr(ptr, "patternProperties");
        let mut matchers = Vec::with_capacity(patterns.len());
        for (p, _) in &patterns {
            let re = lexical::name_matcher;
            let m = match lexical::split_leading_negative_lookahead(p) {
                Some((neg, pos)) => re(&pos).zip(re(&neg)).map(|(pos, neg)| KeyMatcher {
                    pos,
                    neg: Some(neg),
                }),
                None => re(p).map(|pos| KeyMatcher { pos, neg: None }),
            };
            match m {
                Some(m) => matchers.push(m),
                None => {
                    return Err(GrammarError::unsupported(
                        join_ptr(&pp_ptr, p),
                        "patternProperties",
                        format!("pattern `{p}` is not supported"),
                    ));
                }
            }
        }
        // Named members: `properties` in order, then required names not listed there.
        // A member's schema is borrowed unless patterns add to it: a copy is the whole
        // subtree, so copying at every level was quadratic in the nesting.
        let mut named: Vec<(String, Cow<'_, Value>, bool, String)> = Vec::new();
        for (k, s) in props {
            let extra: Vec<Value> = patterns
                .iter()
                .enumerate()
                .filter(|(i, (_, ps))| {
                    // (A pattern schema equal to the member's own adds nothing.)
                    matchers[*i].is_match(k) && !is_trivially_true(ps) && ps != s
                })
                .map(|(_, (_, ps))| ps.clone())
                .collect();
            let s = if extra.is_empty() {
                Cow::Borrowed(s)
            } else {
                let mut schemas = vec![s.clone()];
                schemas.extend(extra);
                Cow::Owned(Value::Object(
                    [("allOf".to_string(), Value::Array(schemas))]
                        .into_iter()
                        .collect(),
                ))
            };
            named.push((
                k.clone(),
                s,
                required.contains(k),
                join_ptr(&join_ptr(ptr, "properties"), k),
            ));
        }
        for r in &required {
            if props.contains_key(r) || named.iter().any(|(k, ..)| k == r) {
                continue;
            }
            let matching: Vec<Value> = patterns
                .iter()
                .enumerate()
                .filter(|(i, _)| matchers[*i].is_match(r))
                .map(|(_, (_, s))| s.clone())
                .collect();
            let s = if !matching.is_empty() {
                if matching.len() == 1 {
                    matching[0].clone()
                } else {
                    Value::Object(
                        [("allOf".to_string(), Value::Array(matching))]
                            .into_iter()
                            .collect(),
                    )
                }
            } else if let Some(a) = &additional {
                a.clone()
            } else {
                // Legal JSON Schema that no object satisfies (e.g. one branch of a
                // discriminated union): this subschema matches nothing.
                self.warnings.push(format!(
                    "at {}: required property `{r}` is not allowed by `properties`/`additionalProperties: false`; no object satisfies this schema",
                    join_ptr(ptr, "required")
                ));
                return Ok(Self::never());
            };
            named.push((r.clone(), Cow::Owned(s), true, join_ptr(ptr, "required")));
        }
        // Presence constraints: anyOf/oneOf of required sets, dependencies, not-required.
        let mut presence: Vec<Presence> = Vec::new();
        if let Some(Value::Array(list)) = obj.get(PRESENCE_KEY) {
            for e in list {
                let sets: Vec<Vec<String>> = e["sets"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| {
                                s.as_array()
                                    .map(|x| {
                                        x.iter()
                                            .filter_map(|n| n.as_str().map(str::to_string))
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                presence.push(if e["kind"] == "oneOf" {
                    Presence::OneOf(sets)
                } else if e["kind"] == "notAll" {
                    // From `conditionals::negate`: not every property of the one set present.
                    Presence::NotAll(sets.into_iter().flatten().collect())
                } else {
                    Presence::AnyOf(sets)
                });
            }
        }
        for kw in ["dependencies", "dependentRequired"] {
            let Some(deps) = obj.get(kw) else { continue };
            let Some(deps) = deps.as_object() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, kw),
                    format!("`{kw}` must be an object"),
                ));
            };
            for (a, v) in deps {
                let set = match v {
                    Value::Array(names) => names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect(),
                    v if is_trivially_true(v) => continue,
                    v => {
                        match required_only(v) {
                            Some(set) => set,
                            None if v.as_object().is_some_and(|m| {
                                m.keys()
                                    .all(|k| !is_keyword(k) || k == "properties" || k == "required")
                            }) =>
                            {
                                // {properties, required}: properties merged above.
                                v.get("required")
                                    .and_then(Value::as_array)
                                    .map(|r| {
                                        r.iter()
                                            .filter_map(|n| n.as_str().map(str::to_string))
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            }
                            None => {
                                self.unsupported(
                                    ptr,
                                    kw,
                                    format!("schema dependency of `{a}` (only property lists are compiled)"),
                                )?;
                                continue;
                            }
                        }
                    }
                };
                presence.push(Presence::Implies(a.clone(), set));
            }
        }
        if let Some(set) = obj.get("not").and_then(required_only) {
            presence.push(Presence::NotAll(set));
        }
        let mut tracked: Vec<String> = Vec::new();
        {
            let mut note = |n: &String| {
                if !tracked.contains(n) {
                    tracked.push(n.clone());
                }
            };
            for c in &presence {
                match c {
                    Presence::OneOf(sets) | Presence::AnyOf(sets) => {
                        sets.iter().flatten().for_each(&mut note)
                    }
                    Presence::Implies(a, set) => {
                        note(a);
                        set.iter().for_each(&mut note);
                    }
                    Presence::NotAll(set) => set.iter().for_each(&mut note),
                }
            }
        }
        if tracked.len() > 12 {
            let kw = if obj.contains_key("dependencies") {
                "dependencies"
            } else {
                "oneOf"
            };
            self.unsupported(ptr, kw, "presence constraints over more than 12 properties")?;
            presence.clear();
            tracked.clear();
        }
        // Tracked names that are not named yet become optional members (when allowed at all).
        for t in &tracked {
            if named.iter().any(|(k, ..)| k == t) {
                continue;
            }
            let matching: Vec<Value> = patterns
                .iter()
                .enumerate()
                .filter(|(i, _)| matchers[*i].is_match(t))
                .map(|(_, (_, s))| s.clone())
                .collect();
            let s = if !matching.is_empty() {
                if matching.len() == 1 {
                    matching[0].clone()
                } else {
                    Value::Object(
                        [("allOf".to_string(), Value::Array(matching))]
                            .into_iter()
                            .collect(),
                    )
                }
            } else if let Some(a) = &additional {
                a.clone()
            } else {
                continue; // never present
            };
            named.push((t.clone(), Cow::Owned(s), false, join_ptr(ptr, "properties")));
        }
        // `propertyNames`: a named property whose name fails it can never be present.
        let property_names = obj
            .get("propertyNames")
            .filter(|p| !is_trivially_true(p))
            .cloned();
        if let Some(p) = &property_names {
            let v = jsonschema::options()
                .should_validate_formats(true)
                .build(p)
                .ok();
            let Some(v) = v else {
                self.unsupported(
                    ptr,
                    "propertyNames",
                    "its schema cannot be checked on its own (a `$ref` out of it?)",
                )?;
                return self.object(&without(obj, "propertyNames"), ptr, d);
            };
            if let Some((k, ..)) = named
                .iter()
                .find(|(k, _, req, _)| *req && !v.is_valid(&Value::String(k.clone())))
            {
                self.warnings.push(format!(
                    "at {}: required property `{k}` fails `propertyNames`; no object satisfies this schema",
                    join_ptr(ptr, "propertyNames")
                ));
                return Ok(Self::never());
            }
            named.retain(|(k, ..)| v.is_valid(&Value::String(k.clone())));
        }
        tracked.retain(|t| named.iter().any(|(k, ..)| k == t));
        let mask = |set: &[String]| -> Option<u32> {
            let mut m = 0u32;
            for n in set {
                m |= 1 << tracked.iter().position(|t| t == n)?;
            }
            Some(m)
        };
        let constraints: Vec<PresenceMask> = presence
            .iter()
            .map(|c| match c {
                Presence::OneOf(sets) => {
                    PresenceMask::OneOf(sets.iter().map(|s| mask(s)).collect())
                }
                Presence::AnyOf(sets) => {
                    PresenceMask::AnyOf(sets.iter().map(|s| mask(s)).collect())
                }
                Presence::Implies(a, set) => {
                    PresenceMask::Implies(mask(std::slice::from_ref(a)), mask(set))
                }
                Presence::NotAll(set) => PresenceMask::NotAll(mask(set)),
            })
            .collect();

        let min_p = obj
            .get("minProperties")
            .map(|v| as_u64(v, ptr, "minProperties"))
            .transpose()?
            .unwrap_or(0);
        let max_p = obj
            .get("maxProperties")
            .map(|v| as_u64(v, ptr, "maxProperties"))
            .transpose()?;
        // Extra members: (key expression, value schema, pointer).
        let names: Vec<&str> = named.iter().map(|x| x.0.as_str()).collect();
        let mut extras: Vec<(Expr, Value, String)> = Vec::new();
        if patterns.is_empty() {
            if let Some(a) = &additional {
                if *a != Value::Bool(false) {
                    // Under `propertyNames: P`, the strings P allows minus the named keys
                    // (every spelling of them: `not: {enum}`), else any other key.
                    let key = match &property_names {
                        Some(p) => {
                            let mut parts = vec![p.clone(), serde_json::json!({"type": "string"})];
                            if !names.is_empty() {
                                parts.push(serde_json::json!({"not": {"enum": names}}));
                            }
                            let at = join_ptr(ptr, "propertyNames");
                            self.value(&serde_json::json!({ "allOf": parts }), &at, d)?
                        }
                        None => self.key_except(&names, false, ptr)?,
                    };
                    extras.push((key, a.clone(), join_ptr(ptr, "additionalProperties")));
                }
            }
        } else {
            if property_names.is_some() {
                self.unsupported(
                    ptr,
                    "propertyNames",
                    "with `patternProperties` (compiled with `properties` and `additionalProperties` only)",
                )?;
            }
            let mut covers_all = false;
            for (i, (p, s)) in patterns.iter().enumerate() {
                let at = join_ptr(&pp_ptr, p);
                let kind =
                    match_all_kind(p).or_else(|| search_matches_everything(p).then_some(false));
                if patterns.len() > 1
                    && !prefixes_disjoint(
                        &patterns.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
                    )
                {
                    self.unsupported(
                        ptr,
                        "patternProperties",
                        "several patterns that may overlap",
                    )?;
                    break;
                }
                let key = match kind {
                    Some(non_empty) => {
                        covers_all |= !non_empty;
                        self.key_except(&names, non_empty, ptr)?
                    }
                    None => {
                        // Keys the pattern shares with named properties are those properties
                        // (whose schemas already include this pattern's): excluded here.
                        let shared: Vec<&str> = names
                            .iter()
                            .copied()
                            .filter(|k| matchers[i].is_match(k))
                            .collect();
                        // `^(?!X)REST`: REST minus the strings starting with a match of X.
                        let (pos, neg) = match lexical::split_leading_negative_lookahead(p) {
                            Some((neg, pos)) => (pos, Some(neg)),
                            None => (p.clone(), None),
                        };
                        let search_hir = |p: &str| -> Option<Hir> {
                            let translated = lexical::translate_ecma(p).ok()?;
                            let h = regex_syntax::ParserBuilder::new()
                                .nest_limit(100)
                                .build()
                                .parse(&translated)
                                .ok()?;
                            let h = lexical::anchor_search(&h, &lexical::hir("(?s:.)*"));
                            (!lexical::has_look(&h)).then_some(h)
                        };
                        let (Some(h), Some(neg)) = (
                            search_hir(&pos),
                            neg.as_deref().map(search_hir).unwrap_or(Some(Hir::fail())),
                        ) else {
                            self.unsupported(
                                ptr,
                                "patternProperties",
                                format!("pattern `{p}` is not supported"),
                            )?;
                            continue;
                        };
                        let full = quoted(lexical::encode_for_json_string(&h));
                        let mut and_not = Vec::new();
                        if !crate::grammar::lower::is_fail(&neg) {
                            and_not.push(quoted(lexical::encode_for_json_string(&neg)));
                        }
                        if shared.is_empty() && and_not.is_empty() {
                            self.lex_hir("pattern-key", format!("key:{p}"), full)?
                        } else {
                            let literals = Hir::alternation(
                                shared
                                    .iter()
                                    .map(|k| Hir::literal(k.as_bytes().to_vec()))
                                    .collect(),
                            );
                            if !shared.is_empty() {
                                and_not.push(quoted(lexical::encode_for_json_string(&literals)));
                            }
                            let key = format!("key:{p}:except:{}", shared.join("\u{0}"));
                            match self.constrained(
                                "pattern-key",
                                key,
                                full,
                                ir::Constraints {
                                    and: Vec::new(),
                                    and_not,
                                },
                            )? {
                                Some(e) => e,
                                None => {
                                    self.unsupported(
                                        ptr,
                                        "patternProperties",
                                        format!("pattern `{p}` minus the named properties it matches has more than {MAX_CONSTRAINED_STATES} automaton states"),
                                    )?;
                                    continue;
                                }
                            }
                        }
                    }
                };
                extras.push((key, s.clone(), at));
            }
            if !covers_all {
                if let Some(a) = &additional {
                    if *a != Value::Bool(false) {
                        self.warnings.push(format!(
                            "at {}: keys matching no `patternProperties` pattern are not generated (additionalProperties would allow them)",
                            if ptr.is_empty() { "/" } else { ptr }
                        ));
                    }
                }
            }
        }

        // Named members count towards minProperties, and so does the *first* extra member: its
        // key is none of the named keys, so it is a distinct property. Later extra members may
        // repeat a key (which a JSON parser keeps once), so they never count.
        let countable = named.len() as u64 + u64::from(!extras.is_empty());
        let min_p = if min_p > countable {
            self.unsupported(
                ptr,
                "minProperties",
                format!("minProperties {min_p} needs several extra members, whose keys a grammar cannot keep distinct"),
            )?;
            0
        } else {
            min_p
        };
        let n_required = named.iter().filter(|x| x.2).count() as u64;
        if max_p.is_some_and(|m| min_p > m || n_required > m) {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "maxProperties"),
                "maxProperties is below minProperties or the number of required properties",
            ));
        }

        let cd = self.child(d);
        let colon = self.colon(d);
        let after = self.after_value(d);
        let mut member_exprs = Vec::with_capacity(named.len());
        // Members whose value derives nothing (`"type": {"enum": []}` after merging, a `$ref`
        // to an impossible definition) are never written: the state exploration below then
        // builds no rule that needs one (such rules derived nothing and were only removed by
        // lowering, thousands per schema for 8 properties in any order).
        let mut writable = Vec::with_capacity(named.len());
        for (k, s, _, at) in &named {
            let v = self.value(s, at, cd)?;
            writable.push(!self.derives_nothing(&v));
            let v = self.shared(k, v)?;
            let key = Expr::Bytes(Value::String(k.clone()).to_string().into_bytes());
            member_exprs.push(Expr::Seq(vec![key, colon.clone(), v, after.clone()]));
        }
        let mut extra_alts = Vec::new();
        for (key, s, at) in &extras {
            let v = self.value(s, at, cd)?;
            let v = self.shared("extra-value", v)?;
            extra_alts.push(Expr::Seq(vec![
                key.clone(),
                colon.clone(),
                v,
                after.clone(),
            ]));
        }
        let extra = if extra_alts.is_empty() {
            None
        } else {
            let e = if extra_alts.len() == 1 {
                extra_alts.pop().unwrap()
            } else {
                Expr::Alt(extra_alts)
            };
            let id = self.add_rule("extra-member", e, RuleKind::Syntactic)?;
            Some(Expr::Ref(id))
        };

        // Member chain: state (k, c, b) = "members k.. still to decide, c written so far
        // (saturating unless maxProperties), b = which tracked properties are present".
        let n = named.len();
        let cap = max_p.unwrap_or(1) as usize;
        let saturating = max_p.is_none();
        let next = |c: usize| if saturating { (c + 1).min(cap) } else { c + 1 };
        let allowed = |c: usize| max_p.is_none_or(|m| (c as u64) < m);
        let bit_of: Vec<u32> = named
            .iter()
            .map(|x| {
                tracked
                    .iter()
                    .position(|t| *t == x.0)
                    .map_or(0, |i| 1u32 << i)
            })
            .collect();
        // Any order (the default): one state per subset of the named members written. Exact,
        // and bounded: at most 2^(N+1)·(cap+1) states for N ≤ MAX_ANY_ORDER_PROPERTIES named
        // members; beyond that (or past MAX_COUNT_STATES), schema order with a warning.
        let any_states = 1usize
            .checked_shl(n as u32 + 1)
            .unwrap_or(usize::MAX)
            .saturating_mul(cap + 1);
        let any_order = self.opts.property_order == PropertyOrder::Any
            && (n > 1 || (n == 1 && extra.is_some()))
            && if n <= MAX_ANY_ORDER_PROPERTIES && any_states <= MAX_COUNT_STATES {
                true
            } else {
                self.warnings.push(format!(
                    "at {}: {n} named properties (more than {MAX_ANY_ORDER_PROPERTIES}, or too many maxProperties states): members follow schema order (`properties`, then `required`), extra members after them",
                    if ptr.is_empty() { "/" } else { ptr }
                ));
                false
            };
        if !any_order
            && (n + 2)
                .saturating_mul(cap + 1)
                .saturating_mul(1 << tracked.len())
                .saturating_mul(min_p as usize + 1)
                > MAX_COUNT_STATES
        {
            return Err(GrammarError::at_pointer(
                ptr,
                "too many properties × minProperties/maxProperties/presence states",
            )
            .with_kind(ErrorKind::Limit));
        }
        // The fourth component counts members towards minProperties (capped there): every named
        // member, and the first extra member only (k = n + 1 marks "an extra member was
        // written"); later extra members may repeat a key, so they never count.
        //
        // Schema order: (k, c, b, m) = "members k.. still to decide, c written, presence bits
        // b, m counted". Any order: (S, c, b, m) with S the set of named members written (bit
        // i = member i) plus `EXTRA_WRITTEN` once an extra member was written; each named
        // member is written at most once, End needs every required one in S.
        type State = (usize, usize, u32, usize);
        const EXTRA_WRITTEN: usize = 1 << 31;
        // Explore: transitions (label: Some(member index) / None = extra member / end), to
        // states numbered densely in the order they are found (the start is 0), so that the
        // analyses below index vectors instead of hashing a state per transition (an
        // any-order object has `N·2^(N-1)` transitions).
        #[derive(Clone, Copy)]
        enum Step {
            Member(usize, u32),
            Skip(u32),
            Extra(u32),
            End,
        }
        impl Step {
            fn target(self) -> Option<usize> {
                match self {
                    Step::Member(_, t) | Step::Skip(t) | Step::Extra(t) => Some(t as usize),
                    Step::End => None,
                }
            }
        }
        let required_set: usize = named
            .iter()
            .enumerate()
            .filter(|(_, x)| x.2)
            .map(|(i, _)| 1usize << i)
            .sum();
        let min_named = min_p as usize;
        let mut states: Vec<State> = vec![(0, 0, 0, 0)];
        // States are found by a dense index when their components' ranges multiply to a small
        // table (an object of 8 named members in any order, no counts: 1,024 slots), else by
        // hashing: a hash lookup per transition was 3 % of compiling the slowest schemas.
        // Ranges: k < 2^(n+1) in any order (EXTRA_WRITTEN as bit n) or ≤ n + 1 in schema order,
        // c ≤ cap, b < 2^tracked, m ≤ min_named.
        let k_range = if any_order { 1usize << (n + 1) } else { n + 2 };
        let (c_range, b_range, m_range) = (
            cap.saturating_add(1),
            1usize << tracked.len(),
            min_named.saturating_add(1),
        );
        let dense_len = [c_range, b_range, m_range]
            .iter()
            .try_fold(k_range, |a, &x| a.checked_mul(x))
            .filter(|&len| len <= 1 << 16);
        let dense_key = move |(k, c, b, m): State| -> usize {
            let k = if any_order {
                (k & !EXTRA_WRITTEN) | (usize::from(k & EXTRA_WRITTEN != 0) << n)
            } else {
                k
            };
            ((k * c_range + c) * b_range + b as usize) * m_range + m
        };
        let mut dense: Vec<u32> = vec![u32::MAX; dense_len.unwrap_or(0)];
        let mut index: crate::hash::WordHashMap<State, u32> = Default::default();
        if dense_len.is_some() {
            dense[dense_key((0, 0, 0, 0))] = 0;
        } else {
            index.insert((0, 0, 0, 0), 0);
        }
        let mut intern = |st: State, states: &mut Vec<State>| -> u32 {
            let slot = if dense_len.is_some() {
                debug_assert!(st.1 < c_range && (st.2 as usize) < b_range && st.3 < m_range);
                &mut dense[dense_key(st)]
            } else {
                index.entry(st).or_insert(u32::MAX)
            };
            if *slot == u32::MAX {
                states.push(st);
                *slot = (states.len() - 1) as u32;
            }
            *slot
        };
        // Each state's steps: `steps[ranges[i]..ranges[i + 1]]`.
        let mut steps: Vec<Step> = Vec::new();
        let mut ranges: Vec<usize> = vec![0];
        let mut i = 0;
        while i < states.len() {
            let (k, c, b, m) = states[i];
            if any_order {
                let set = k;
                if allowed(c) {
                    for (j, bit) in bit_of.iter().enumerate() {
                        if set & (1 << j) == 0 && writable[j] {
                            let t = (set | 1 << j, next(c), b | bit, (m + 1).min(min_named));
                            steps.push(Step::Member(j, intern(t, &mut states)));
                        }
                    }
                }
                if set & required_set == required_set
                    && m >= min_named
                    && presence_ok(&constraints, b)
                {
                    steps.push(Step::End);
                }
                if extra.is_some() && allowed(c) {
                    // The "an extra member was written" bit only matters for counting
                    // towards minProperties; without one it would double the states (and
                    // the rules) for nothing.
                    let (written, counted) = if min_named == 0 {
                        (set, m)
                    } else if set & EXTRA_WRITTEN == 0 {
                        (set | EXTRA_WRITTEN, (m + 1).min(min_named))
                    } else {
                        (set, m)
                    };
                    let t = (written, next(c), b, counted);
                    steps.push(Step::Extra(intern(t, &mut states)));
                }
            } else if k < n {
                if allowed(c) && writable[k] {
                    let t = (k + 1, next(c), b | bit_of[k], (m + 1).min(min_named));
                    steps.push(Step::Member(k, intern(t, &mut states)));
                }
                if !named[k].2 {
                    steps.push(Step::Skip(intern((k + 1, c, b, m), &mut states)));
                }
            } else {
                if m >= min_named && presence_ok(&constraints, b) {
                    steps.push(Step::End);
                }
                if extra.is_some() && allowed(c) {
                    let counted = if k == n { (m + 1).min(min_named) } else { m };
                    let t = (n + 1, next(c), b, counted);
                    steps.push(Step::Extra(intern(t, &mut states)));
                }
            }
            ranges.push(steps.len());
            i += 1;
        }
        let steps_of = |i: usize| &steps[ranges[i]..ranges[i + 1]];
        // Productive states (some path to End): backwards from the states that can end,
        // along reversed steps (a worklist over predecessor lists in one flat array, so a
        // long schema-order chain is one pass).
        let ns = states.len();
        let preds = crate::grammar::fixpoint::Csr::new(
            ns,
            (0..ns).flat_map(|from| {
                steps_of(from)
                    .iter()
                    .filter_map(move |s| s.target().map(|t| (t, from as u32)))
            }),
        );
        let mut productive = vec![false; ns];
        let mut stack: Vec<usize> = (0..ns)
            .filter(|&i| steps_of(i).iter().any(|x| matches!(x, Step::End)))
            .collect();
        while let Some(st) = stack.pop() {
            if !std::mem::replace(&mut productive[st], true) {
                stack.extend(preds.row(st).iter().map(|&p| p as usize));
            }
        }
        if !productive[0] {
            self.warnings.push(format!(
                "at {}: no object satisfies the property constraints",
                if ptr.is_empty() { "/" } else { ptr }
            ));
            return Ok(Self::never());
        }
        // Rules in the order of their states (as tuples), one per productive state.
        let mut order: Vec<usize> = (0..ns).filter(|&i| productive[i]).collect();
        order.sort_unstable_by_key(|&i| states[i]);
        let mut ids: Vec<RuleId> = vec![RuleId(u32::MAX); ns];
        for &st in &order {
            ids[st] = self.add_rule("members", Expr::Empty, RuleKind::Syntactic)?;
        }
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        // A member with what comes before it (the first member's lead or a separator) is one
        // rule, referenced by every state that writes it: the states are many (2^N for N
        // members in any order), the members few, so no state copies a member's expression
        // (lowering splices the rule's symbols in, see `RuleKind::Inline`). Indexed by
        // `2·member + first`, the extra member last.
        let mut written: Vec<Option<Expr>> = vec![None; 2 * (n + 1)];
        let mut member_rule = |this: &mut Self, k: Option<usize>, first: bool| {
            let slot = 2 * k.unwrap_or(n) + usize::from(first);
            if let Some(e) = &written[slot] {
                return Ok::<Expr, GrammarError>(e.clone());
            }
            let pre = if first { lead.clone() } else { sep.clone() };
            let member = match k {
                Some(k) => member_exprs[k].clone(),
                None => extra.clone().expect("an extra step has an extra member"),
            };
            let body = Expr::Seq(vec![pre, member]);
            // Inline: spliced into each state's alternative by lowering, so the parser
            // sees the member's symbols there as before, not a nonterminal per member.
            let e = Expr::Ref(this.add_rule("member", body, RuleKind::Inline)?);
            written[slot] = Some(e.clone());
            Ok(e)
        };
        for &st in &order {
            let (_, c, _, _) = states[st];
            // The named members' alternatives first (the steps list them first), as one
            // `RefPairs`: `member next` each, no allocation per alternative.
            let steps = steps_of(st);
            let named = steps
                .iter()
                .filter(|x| matches!(x, Step::Member(..)))
                .count();
            let mut pairs: Vec<[RuleId; 2]> = Vec::with_capacity(named);
            let mut alts = Vec::with_capacity(steps.len() - named + 1);
            for &step in steps {
                let live = |t: u32| productive[t as usize];
                match step {
                    Step::Member(k, t) if live(t) => {
                        debug_assert!(alts.is_empty(), "member steps come first");
                        let Expr::Ref(m) = member_rule(self, Some(k), c == 0)? else {
                            unreachable!("a member rule is a reference")
                        };
                        pairs.push([m, ids[t as usize]]);
                    }
                    Step::Skip(t) if live(t) => alts.push(Expr::Ref(ids[t as usize])),
                    Step::Extra(t) if live(t) => alts.push(Expr::Seq(vec![
                        member_rule(self, None, c == 0)?,
                        Expr::Ref(ids[t as usize]),
                    ])),
                    Step::End => alts.push(if c == 0 { empty.clone() } else { trail.clone() }),
                    _ => {}
                }
            }
            if !pairs.is_empty() {
                alts.insert(0, Expr::RefPairs(pairs.into()));
            }
            self.rules[ids[st].0 as usize].expr = if alts.len() == 1 {
                alts.pop().unwrap()
            } else {
                Expr::Alt(alts)
            };
        }
        let start = ids[0];
        Ok(Expr::Seq(vec![
            Expr::Bytes(b"{".to_vec()),
            Expr::Ref(start),
            Expr::Bytes(b"}".to_vec()),
        ]))
    }
}
