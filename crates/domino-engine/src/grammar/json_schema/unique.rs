//! `uniqueItems: true` over finite item domains: every position's item schema allows a finite
//! set of values (`enum`, `const`, `type: boolean`/`null`, `false`), at most
//! [`MAX_UNIQUE_VALUES`] distinct values in all. The array is then a sequence of distinct
//! values, each allowed at its position: one grammar state per set of values already used
//! (the position is the set's size), so at most `2^V` states for `V` values. Values are
//! told apart by JSON equality (numbers by value: `1` and `1.0` are one value).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Compiler, MAX_ENUM_VALUES, is_keyword, join_ptr};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, RuleKind};

/// Most distinct values `uniqueItems` is compiled over.
pub const MAX_UNIQUE_VALUES: usize = 10;

/// The values a schema allows, when it is one of the finite forms (else `None`).
fn finite_values(s: &Value) -> Option<Vec<Value>> {
    let m = match s {
        Value::Bool(false) => return Some(Vec::new()),
        Value::Object(m) => m,
        _ => return None,
    };
    let keys: Vec<&str> = m
        .keys()
        .filter(|k| is_keyword(k))
        .map(String::as_str)
        .collect();
    let listed: Option<Vec<Value>> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(e)), None) => Some(e.clone()),
        (None, Some(c)) => Some(vec![c.clone()]),
        (None, None) => None,
        _ => return None,
    };
    if keys
        .iter()
        .any(|k| !matches!(*k, "enum" | "const" | "type"))
    {
        return None;
    }
    let values = match (listed, m.get("type")) {
        (Some(v), None) => v,
        (Some(v), Some(t)) => {
            let check = jsonschema::validator_for(&json!({ "type": t })).ok()?;
            v.into_iter().filter(|x| check.is_valid(x)).collect()
        }
        (None, Some(t)) => {
            let names: Vec<&str> = match t {
                Value::String(x) => vec![x.as_str()],
                Value::Array(a) => a.iter().map(Value::as_str).collect::<Option<_>>()?,
                _ => return None,
            };
            let mut out = Vec::new();
            for n in names {
                match n {
                    "boolean" => out.extend([Value::Bool(false), Value::Bool(true)]),
                    "null" => out.push(Value::Null),
                    _ => return None,
                }
            }
            out
        }
        (None, None) => return None,
    };
    Some(values)
}

/// JSON equality, numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

impl Compiler<'_> {
    /// `uniqueItems: true` over the finite domains of the positions (`prefix`, then `rest`
    /// when more items are allowed), with `min`/`max` items; `None` when a domain is not
    /// finite or has too many values (the caller reports it).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn unique_items(
        &mut self,
        ptr: &str,
        d: u32,
        prefix: &[Value],
        rest: Option<&Value>,
        min: u64,
        max: Option<u64>,
    ) -> Result<Option<Expr>, GrammarError> {
        let mut domains: Vec<Vec<Value>> = Vec::new();
        for p in prefix.iter().chain(rest) {
            let Some(vals) = finite_values(p) else {
                return Ok(None);
            };
            if vals.len() > MAX_ENUM_VALUES {
                return Ok(None);
            }
            domains.push(vals);
        }
        // Distinct values (by value) and, per position, the indices it allows.
        let mut values: Vec<Value> = Vec::new();
        let mut allowed: Vec<Vec<usize>> = Vec::new();
        for dom in &domains {
            let mut idx = Vec::new();
            for v in dom {
                let i = match values.iter().position(|w| same(v, w)) {
                    Some(i) => i,
                    None => {
                        values.push(v.clone());
                        values.len() - 1
                    }
                };
                if !idx.contains(&i) {
                    idx.push(i);
                }
            }
            allowed.push(idx);
        }
        if values.len() > MAX_UNIQUE_VALUES {
            return Ok(None);
        }
        let n = prefix.len();
        let position = |i: usize| -> Option<&Vec<usize>> {
            if i < n {
                allowed.get(i)
            } else if rest.is_some() {
                allowed.get(n)
            } else {
                None
            }
        };
        let room = |i: usize| max.is_none_or(|m| (i as u64) < m);
        // Productive used-sets (from which the array can close), largest first.
        let full = 1usize << values.len();
        let mut productive = vec![false; full];
        for used in (0..full).rev() {
            let i = used.count_ones() as usize;
            let mut ok = i as u64 >= min;
            if room(i) {
                if let Some(pos) = position(i) {
                    ok |= pos
                        .iter()
                        .any(|&v| used & (1 << v) == 0 && productive[used | 1 << v]);
                }
            }
            productive[used] = ok;
        }
        if !productive[0] {
            return Ok(Some(Self::never()));
        }
        let cd = self.child(d);
        let after = self.after_value(d);
        let mut item_exprs = Vec::with_capacity(values.len());
        for v in &values {
            let e = self.value(&json!({ "const": v }), &join_ptr(ptr, "uniqueItems"), cd)?;
            let e = self.shared("unique-item", e)?;
            item_exprs.push(Expr::Seq(vec![e, after.clone()]));
        }
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        // Only used-sets reachable from the empty one through productive ones get a rule.
        let mut reachable = vec![false; full];
        reachable[0] = true;
        for used in 0..full {
            let i = used.count_ones() as usize;
            if !reachable[used] || !room(i) {
                continue;
            }
            for &v in position(i).into_iter().flatten() {
                let next = used | 1 << v;
                if used & (1 << v) == 0 && productive[next] {
                    reachable[next] = true;
                }
            }
        }
        let mut ids: HashMap<usize, crate::grammar::expr::RuleId> = HashMap::new();
        for used in (0..full).filter(|&u| productive[u] && reachable[u]) {
            ids.insert(
                used,
                self.add_rule("unique-items", Expr::Empty, RuleKind::Syntactic)?,
            );
        }
        for used in (0..full).filter(|&u| productive[u] && reachable[u]) {
            let i = used.count_ones() as usize;
            let mut alts = Vec::new();
            if i as u64 >= min {
                alts.push(if i == 0 { empty.clone() } else { trail.clone() });
            }
            if room(i) {
                let pre = if i == 0 { lead.clone() } else { sep.clone() };
                for &v in position(i).into_iter().flatten() {
                    let next = used | 1 << v;
                    if used & (1 << v) == 0 && productive[next] {
                        alts.push(Expr::Seq(vec![
                            pre.clone(),
                            item_exprs[v].clone(),
                            Expr::Ref(ids[&next]),
                        ]));
                    }
                }
            }
            self.rules[ids[&used].0 as usize].expr = Expr::Alt(alts);
        }
        Ok(Some(Expr::Seq(vec![
            Expr::Bytes(b"[".to_vec()),
            Expr::Ref(ids[&0]),
            Expr::Bytes(b"]".to_vec()),
        ])))
    }
}
