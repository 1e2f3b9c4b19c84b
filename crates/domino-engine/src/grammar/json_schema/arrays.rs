//! `type: array`: `prefixItems` (or draft-4 array-form `items`) and the schema for the rest
//! (`items` / `additionalItems`), `minItems`/`maxItems`, and `uniqueItems` (compiled where at most
//! one item is possible, or over finite item domains: module `unique`). The grammar is a chain of states "i items written", so the
//! count bounds are exact. `contains`/`minContains`/`maxContains` (see [`Compiler::contains`]):
//! the chain also counts the items written as witnesses of `contains`.

use serde_json::{Map, Value};

use super::{Compiler, as_u64, join_ptr};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, RuleKind};

impl Compiler<'_> {
    pub(super) fn array(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let mut min = obj
            .get("minItems")
            .map(|v| as_u64(v, ptr, "minItems"))
            .transpose()?
            .unwrap_or(0);
        let mut max = obj
            .get("maxItems")
            .map(|v| as_u64(v, ptr, "maxItems"))
            .transpose()?;
        if max.is_some_and(|m| min > m) {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "minItems"),
                format!("minItems {min} > maxItems {}", max.unwrap()),
            ));
        }
        // Borrowed, not copied: a copy is the whole subtree, at every level of nesting.
        static TRUE_SCHEMA: Value = Value::Bool(true);
        let (prefix, prefix_ptr, rest, rest_ptr): (&[Value], String, &Value, String) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(p)), items) => (
                    p,
                    join_ptr(ptr, "prefixItems"),
                    items.unwrap_or(&TRUE_SCHEMA),
                    join_ptr(ptr, "items"),
                ),
                (_, Some(Value::Array(p))) => (
                    p,
                    join_ptr(ptr, "items"),
                    obj.get("additionalItems").unwrap_or(&TRUE_SCHEMA),
                    join_ptr(ptr, "additionalItems"),
                ),
                (_, Some(items)) => (&[], String::new(), items, join_ptr(ptr, "items")),
                (_, None) => (&[], String::new(), &TRUE_SCHEMA, join_ptr(ptr, "items")),
            };
        let m = prefix.len() as u64;
        let rest_allowed = *rest != Value::Bool(false);
        if !rest_allowed {
            max = Some(max.map_or(m, |x| x.min(m)));
            if min > m {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "minItems"),
                    format!("minItems {min} but at most {m} items are allowed"),
                ));
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true))
            && max.is_none_or(|x| x > 1)
            && !obj.contains_key("contains")
        {
            let rest = (rest_allowed && max.is_none_or(|x| x > m)).then_some(rest);
            if let Some(e) = self.unique_items(ptr, d, prefix, rest, min, max)? {
                return Ok(e);
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|x| x > 1) {
            self.unsupported(
                ptr,
                "uniqueItems",
                "uniqueItems is compiled only when at most one item is allowed, or over finite item domains (enum/const/boolean/null, at most 10 values; not with `contains`)",
            )?;
        }
        if max == Some(0) {
            min = 0;
        }
        if let Some(c) = obj.get("contains") {
            if let Some(e) = self.contains(
                c,
                obj,
                ptr,
                d,
                (prefix, &prefix_ptr),
                (rest_allowed.then_some(rest), &rest_ptr),
                min,
                max,
            )? {
                return Ok(e);
            }
        }
        let cd = self.child(d);
        let after = self.after_value(d);
        let mut prefix_items = Vec::with_capacity(prefix.len());
        for (i, p) in prefix
            .iter()
            .enumerate()
            .take(max.unwrap_or(u64::MAX).min(m) as usize)
        {
            let v = self.value(p, &join_ptr(&prefix_ptr, &i.to_string()), cd)?;
            let v = self.shared("item", v)?;
            prefix_items.push(Expr::Seq(vec![v, after.clone()]));
        }
        let rest_item = if rest_allowed && max.is_none_or(|x| x > m) {
            let v = self.value(rest, &rest_ptr, cd)?;
            let v = self.shared("items", v)?;
            Some(Expr::Seq(vec![v, after.clone()]))
        } else {
            None
        };
        // state(i): i items written so far (i <= number of prefix items compiled).
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        let end = |i: u64| if i == 0 { empty.clone() } else { trail.clone() };
        let pre = |i: u64| if i == 0 { lead.clone() } else { sep.clone() };
        let n = prefix_items.len() as u64;
        // After n prefix items: the rest.
        let mut tail = {
            let mut alts = Vec::new();
            if min <= n {
                alts.push(end(n));
            }
            if let Some(item) = &rest_item {
                let r_min = min.saturating_sub(n).max(1);
                let r_max = max.map(|x| x - n);
                if r_max.is_none_or(|x| x >= 1) {
                    alts.push(Expr::Seq(vec![
                        pre(n),
                        item.clone(),
                        Expr::Repeat {
                            expr: Box::new(Expr::Seq(vec![sep.clone(), item.clone()])),
                            min: (r_min - 1) as u32,
                            max: r_max.map(|x| (x - 1) as u32),
                        },
                        trail.clone(),
                    ]));
                }
            }
            Expr::Alt(alts)
        };
        for i in (0..n).rev() {
            let mut alts = Vec::new();
            if min <= i {
                alts.push(end(i));
            }
            let tail_rule = if prefix_items.len() > 4 {
                let id = self.add_rule("array-tail", tail, RuleKind::Syntactic)?;
                Expr::Ref(id)
            } else {
                tail
            };
            alts.push(Expr::Seq(vec![
                pre(i),
                prefix_items[i as usize].clone(),
                tail_rule,
            ]));
            tail = Expr::Alt(alts);
        }
        Ok(Expr::Seq(vec![
            Expr::Bytes(b"[".to_vec()),
            tail,
            Expr::Bytes(b"]".to_vec()),
        ]))
    }
}

impl Compiler<'_> {
    /// `contains: C` with `minContains: k` (default 1) and `maxContains: M`: a chain of states
    /// (i items written, j of them written as witnesses of `C`). Each position `p` holds its own
    /// item schema `I_p` (`prefixItems[p]`, else the rest), written either as `I_p` or as a
    /// witness `I_p ∧ C`; the array may close once `j ≥ k` (and the item count bounds hold).
    /// Items that are not written as witnesses may still match `C`, which only matters for
    /// `M`: with `maxContains` below the most items possible, non-witness items are written as
    /// `I_p ∧ ¬C` (module `conditionals`' exact negation) so `j` counts every match, and a
    /// `C` that cannot be negated is `Unsupported` naming `maxContains`. `None`: `contains`
    /// constrains nothing here (`minContains: 0` without an effective `maxContains`).
    #[allow(clippy::too_many_arguments)]
    fn contains(
        &mut self,
        c: &Value,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
        (prefix, prefix_ptr): (&[Value], &str),
        (rest, rest_ptr): (Option<&Value>, &str),
        min: u64,
        max: Option<u64>,
    ) -> Result<Option<Expr>, GrammarError> {
        let k = match obj.get("minContains") {
            Some(v) => as_u64(v, ptr, "minContains")?,
            None => 1,
        };
        let most = if rest.is_some() {
            max
        } else {
            Some(max.map_or(prefix.len() as u64, |x| x.min(prefix.len() as u64)))
        };
        let m = match obj.get("maxContains") {
            Some(v) => Some(as_u64(v, ptr, "maxContains")?).filter(|m| most.is_none_or(|x| *m < x)),
            None => None,
        };
        if k == 0 && m.is_none() {
            return Ok(None);
        }
        if m.is_some_and(|m| k > m) || most.is_some_and(|x| k > x) {
            return Ok(Some(Self::never()));
        }
        let not_c = match m {
            None => None,
            Some(_) => match super::conditionals::negate(c) {
                Some(n) => Some(n),
                None => {
                    self.unsupported(
                        ptr,
                        "maxContains",
                        "the items that do not match `contains` cannot be written exactly (its schema has no exact negation here)",
                    )?;
                    return Ok(None);
                }
            },
        };
        // i: items written, saturating at `top` when there is no maxItems; j: witnesses,
        // saturating at k without maxContains, exact up to M with it (never more).
        let n = prefix.len() as u64;
        // (At least 1: state 0 is also "no item yet", which decides the separator.)
        let top = max.unwrap_or(n.max(min).max(1));
        let j_top = m.unwrap_or(k);
        let states = (top + 1).saturating_mul(j_top + 1);
        if states > super::MAX_COUNT_STATES as u64 {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "contains"),
                "too many items × minContains/maxContains states",
            )
            .with_kind(crate::grammar::ErrorKind::Limit));
        }
        let cd = self.child(d);
        let after = self.after_value(d);
        let c_ptr = join_ptr(ptr, "contains");
        // Per position (p < n, then one for the rest): (plain item, witness).
        let mut kinds: Vec<(Expr, Expr)> = Vec::new();
        let schemas: Vec<(Value, String)> = prefix
            .iter()
            .enumerate()
            .map(|(i, p)| (p.clone(), join_ptr(prefix_ptr, &i.to_string())))
            .chain(rest.map(|r| (r.clone(), rest_ptr.to_string())))
            .collect();
        for (s, at) in &schemas {
            let both = |x: &Value| serde_json::json!({"allOf": [s.clone(), x.clone()]});
            let plain = match &not_c {
                None => self.value(s, at, cd)?,
                Some(nc) => self.value(&both(nc), &c_ptr, cd)?,
            };
            let witness = self.value(&both(c), &c_ptr, cd)?;
            let plain = self.shared("item", plain)?;
            let witness = self.shared("contains-item", witness)?;
            kinds.push((
                Expr::Seq(vec![plain, after.clone()]),
                Expr::Seq(vec![witness, after.clone()]),
            ));
        }
        // Transitions of state (i, j): (closes here, successor after a plain item, successor
        // after a witness).
        type St = (u64, u64);
        let step = |(i, j): St| -> (bool, Option<St>, Option<St>) {
            let close = i >= min && j >= k;
            let room = max.is_none_or(|x| i < x) && (i < n || rest.is_some());
            if !room {
                return (close, None, None);
            }
            let ni = if max.is_none() {
                (i + 1).min(top)
            } else {
                i + 1
            };
            let witness = match m {
                Some(m) => (j < m).then_some((ni, j + 1)),
                None => Some((ni, (j + 1).min(k))),
            };
            (close, Some((ni, j)), witness)
        };
        // Productive states (from which the array can close), to a fixed point.
        let all: Vec<St> = (0..=top)
            .flat_map(|i| (0..=j_top).map(move |j| (i, j)))
            .collect();
        let mut productive: std::collections::HashSet<St> = std::collections::HashSet::new();
        loop {
            let before = productive.len();
            for &st in &all {
                let (close, a, b) = step(st);
                if close
                    || [a, b]
                        .into_iter()
                        .flatten()
                        .any(|t| productive.contains(&t))
                {
                    productive.insert(st);
                }
            }
            if productive.len() == before {
                break;
            }
        }
        if !productive.contains(&(0, 0)) {
            return Ok(Some(Self::never()));
        }
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        // Only states reachable from (0, 0) through productive ones get a rule (lowering
        // would warn about the others).
        let mut reachable = vec![(0u64, 0u64)];
        let mut seen: std::collections::HashSet<St> = [(0, 0)].into_iter().collect();
        while let Some(st) = reachable.pop() {
            let (_, a, b) = step(st);
            for t in [a, b].into_iter().flatten() {
                if productive.contains(&t) && seen.insert(t) {
                    reachable.push(t);
                }
            }
        }
        let mut ids = std::collections::HashMap::new();
        for &st in &all {
            if seen.contains(&st) {
                ids.insert(
                    st,
                    self.add_rule("contains-items", Expr::Empty, RuleKind::Syntactic)?,
                );
            }
        }
        for &st in &all {
            let Some(&id) = ids.get(&st) else { continue };
            let (i, _) = st;
            let (close, a, b) = step(st);
            let mut alts = Vec::new();
            if close {
                alts.push(if i == 0 { empty.clone() } else { trail.clone() });
            }
            let pos = (i.min(n) as usize).min(kinds.len().saturating_sub(1));
            let pre = if i == 0 { lead.clone() } else { sep.clone() };
            if let Some((plain, witness)) = kinds.get(pos) {
                for (t, e) in [(a, plain), (b, witness)] {
                    if let Some(t) = t.filter(|t| productive.contains(t)) {
                        alts.push(Expr::Seq(vec![pre.clone(), e.clone(), Expr::Ref(ids[&t])]));
                    }
                }
            }
            self.rules[id.0 as usize].expr = Expr::Alt(alts);
        }
        Ok(Some(Expr::Seq(vec![
            Expr::Bytes(b"[".to_vec()),
            Expr::Ref(ids[&(0, 0)]),
            Expr::Bytes(b"]".to_vec()),
        ])))
    }
}
