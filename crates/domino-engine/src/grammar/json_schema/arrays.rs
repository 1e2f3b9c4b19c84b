//! `type: array`: `prefixItems` (or draft-4 array-form `items`) and the schema for the rest
//! (`items` / `additionalItems`), `minItems`/`maxItems`, and `uniqueItems` (compiled only where
//! at most one item is possible). The grammar is a chain of states "i items written", so the
//! count bounds are exact. (`contains` is an unsupported keyword, see `keywords`.)

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
        let true_schema = Value::Bool(true);
        let (prefix, prefix_ptr, rest, rest_ptr): (Vec<Value>, String, Value, String) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(p)), items) => (
                    p.clone(),
                    join_ptr(ptr, "prefixItems"),
                    items.cloned().unwrap_or(true_schema.clone()),
                    join_ptr(ptr, "items"),
                ),
                (_, Some(Value::Array(p))) => (
                    p.clone(),
                    join_ptr(ptr, "items"),
                    obj.get("additionalItems")
                        .cloned()
                        .unwrap_or(true_schema.clone()),
                    join_ptr(ptr, "additionalItems"),
                ),
                (_, Some(items)) => (
                    Vec::new(),
                    String::new(),
                    items.clone(),
                    join_ptr(ptr, "items"),
                ),
                (_, None) => (
                    Vec::new(),
                    String::new(),
                    true_schema.clone(),
                    join_ptr(ptr, "items"),
                ),
            };
        let m = prefix.len() as u64;
        let rest_allowed = rest != Value::Bool(false);
        if !rest_allowed {
            max = Some(max.map_or(m, |x| x.min(m)));
            if min > m {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "minItems"),
                    format!("minItems {min} but at most {m} items are allowed"),
                ));
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|x| x > 1) {
            self.unsupported(
                ptr,
                "uniqueItems",
                "uniqueItems is compiled only when at most one item is allowed",
            )?;
        }
        if max == Some(0) {
            min = 0;
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
            let v = self.value(&rest, &rest_ptr, cd)?;
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
