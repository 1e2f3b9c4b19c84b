//! `$ref`: resolving local references (JSON pointers, percent-encoded, against the root's
//! `$id`; plain-name fragments as `$anchor` or draft-6 `$id: "#name"`), following chains of
//! bare references (a cycle is an error), and compiling each target once per depth as its own
//! rule, from a work list (so long reference chains use no stack and recursion is rule
//! recursion).

use serde_json::Value;

use super::{Compiler, is_keyword, join_ptr};
use crate::grammar::expr::{Expr, RuleKind};
use crate::grammar::{ErrorKind, GrammarError};

impl<'a> Compiler<'a> {
    /// Resolve a local `$ref` to (canonical pointer, target).
    pub(crate) fn resolve(
        &self,
        reference: &str,
        ptr: &str,
    ) -> Result<(String, &'a Value), GrammarError> {
        let at = join_ptr(ptr, "$ref");
        let mut r = reference;
        if let Some(id) = self
            .root
            .get("$id")
            .or_else(|| self.root.get("id"))
            .and_then(Value::as_str)
        {
            let base = id.trim_end_matches('#');
            if !base.is_empty() {
                if let Some(rest) = r.strip_prefix(base) {
                    r = rest;
                }
            }
        }
        if r.is_empty() {
            r = "#";
        }
        let Some(fragment) = r.strip_prefix('#') else {
            return Err(GrammarError::unsupported(
                at,
                "$ref",
                format!("only local references (`#...`) are supported, not `{reference}`"),
            ));
        };
        let fragment = percent_decode(fragment);
        if fragment.is_empty() || fragment.starts_with('/') {
            return match self.root.pointer(&fragment) {
                Some(v) => Ok((fragment, v)),
                None => Err(GrammarError::at_pointer(
                    at,
                    format!("`$ref` target `{reference}` does not exist"),
                )),
            };
        }
        // A plain-name fragment: an `$anchor` (or draft-6 `$id: "#name"`).
        let mut stack: Vec<(String, &'a Value)> = vec![(String::new(), self.root)];
        let mut visited = 0usize;
        while let Some((p, v)) = stack.pop() {
            visited += 1;
            if visited > 100_000 {
                break;
            }
            match v {
                Value::Object(m) => {
                    let anchor = m.get("$anchor").and_then(Value::as_str);
                    let id = m.get("$id").or_else(|| m.get("id")).and_then(Value::as_str);
                    if anchor == Some(fragment.as_str()) || id == Some(&format!("#{fragment}")) {
                        return Ok((p, v));
                    }
                    for (k, c) in m {
                        if matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                            continue;
                        }
                        stack.push((join_ptr(&p, k), c));
                    }
                }
                Value::Array(a) => {
                    for (i, c) in a.iter().enumerate() {
                        stack.push((join_ptr(&p, &i.to_string()), c));
                    }
                }
                _ => {}
            }
        }
        Err(GrammarError::at_pointer(
            at,
            format!("`$ref` anchor `{reference}` not found"),
        ))
    }

    /// Follow `$ref`s that are the only constraint of their schema; error on a cycle.
    pub(crate) fn resolve_chain(
        &self,
        reference: &str,
        ptr: &str,
    ) -> Result<(String, &'a Value), GrammarError> {
        let (mut p, mut v) = self.resolve(reference, ptr)?;
        let mut seen = vec![p.clone()];
        loop {
            let Some(m) = v.as_object() else {
                return Ok((p, v));
            };
            let Some(next) = m.get("$ref").and_then(Value::as_str) else {
                return Ok((p, v));
            };
            if m.keys().any(|k| k != "$ref" && is_keyword(k)) {
                return Ok((p, v));
            }
            let (np, nv) = self.resolve(next, &p)?;
            if seen.contains(&np) {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "$ref"),
                    format!(
                        "`$ref` cycle through {} never produces a value",
                        seen.join(" -> ")
                    ),
                ));
            }
            if seen.len() > 64 {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "$ref"),
                    "`$ref` chain longer than 64",
                )
                .with_kind(ErrorKind::Limit));
            }
            seen.push(np.clone());
            p = np;
            v = nv;
        }
    }

    pub(super) fn ref_rule(
        &mut self,
        reference: &str,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let (target, _) = self.resolve_chain(reference, ptr)?;
        let key = (target.clone(), d);
        if let Some(&id) = self.refs.get(&key) {
            return Ok(Expr::Ref(id));
        }
        let name = target.rsplit('/').next().unwrap_or("ref").to_string();
        let id = self.add_rule(
            if name.is_empty() { "root-ref" } else { &name },
            Expr::Empty,
            RuleKind::Syntactic,
        )?;
        self.refs.insert(key, id);
        self.pending.push((id, target, d));
        Ok(Expr::Ref(id))
    }

    pub(super) fn drain_refs(&mut self) -> Result<(), GrammarError> {
        while let Some((id, target, d)) = self.pending.pop() {
            let v = self.root.pointer(&target).expect("resolved pointer exists");
            let expr = self.value(v, &target, d)?;
            self.rules[id.0 as usize].expr = expr;
        }
        Ok(())
    }
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
