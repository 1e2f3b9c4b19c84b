//! Content-equal copies of a subschema, compiled once.
//!
//! Generated and bundled schemas repeat whole subschemas verbatim instead of referencing one
//! definition (JSONSchemaBench `Github_ultra/o81125`: two thirds of its text are repeats;
//! `datahub_ingestion_schema` a quarter). Each copy compiled to its own rules, and lowering,
//! the parser tables and the scanner paid for every copy again.
//!
//! [`CopyIndex::build`] hashes every node of the document once (post-order, key order
//! included) and keeps the *structured* subschemas (with `properties`, `items` or a
//! combinator, of at least [`MIN_COPY_NODES`] JSON nodes) whose content occurs at least
//! twice. [`Compiler::value`](super::Compiler) compiles such a node as a rule, remembered
//! by its hash and nesting depth, and a later node with equal content (compared in full,
//! key order included: member order can matter) is that rule.
//!
//! Equal content compiles to the same grammar only if its references mean the same
//! wherever it is written: the index is built only for documents without embedded `$id`
//! resources, where every `#/pointer` names the same schema everywhere. Warnings are given
//! once, at the first copy compiled.

use std::collections::HashMap;

use serde_json::Value;

use super::keywords::STRUCTURE;
use crate::hash::Fnv1a;

/// Smallest subschema (in JSON nodes: objects, arrays, scalars) worth a rule of its own
/// when copied: smaller copies cost less compiled again than an extra rule.
pub(super) const MIN_COPY_NODES: usize = 16;

/// The repeated structured subschemas of a document, by address: their content hash.
#[derive(Default)]
pub(super) struct CopyIndex {
    repeated: HashMap<*const Value, u64>,
}

impl CopyIndex {
    /// Index `root` (see the module documentation); empty when nothing repeats. Bounded:
    /// documents of more than a million nodes are not indexed.
    pub(super) fn build(root: &Value) -> CopyIndex {
        // Post-order without recursion: (node, children pushed?).
        let mut stack: Vec<(&Value, bool)> = vec![(root, false)];
        let mut done: Vec<(u64, usize)> = Vec::new();
        let mut candidates: Vec<(*const Value, u64)> = Vec::new();
        let mut count: HashMap<u64, u32> = HashMap::new();
        let mut visited = 0usize;
        while let Some((v, expanded)) = stack.pop() {
            visited += 1;
            if visited > 2_000_000 {
                return CopyIndex::default();
            }
            match v {
                Value::Object(m) if !expanded => {
                    stack.push((v, true));
                    // Children pushed in reverse so that they finish in order.
                    stack.extend(m.values().rev().map(|c| (c, false)));
                }
                Value::Array(a) if !expanded => {
                    stack.push((v, true));
                    stack.extend(a.iter().rev().map(|c| (c, false)));
                }
                Value::Object(m) => {
                    let kids = done.split_off(done.len() - m.len());
                    let mut h = Fnv1a::new();
                    h.write(b"{");
                    let mut nodes = 1;
                    for ((k, _), (ch, n)) in m.iter().zip(&kids) {
                        h.write_words(k.as_bytes()).write_word(*ch);
                        nodes += n;
                    }
                    let h = h.finish();
                    if nodes >= MIN_COPY_NODES && STRUCTURE.iter().any(|k| m.contains_key(*k)) {
                        *count.entry(h).or_default() += 1;
                        candidates.push((v as *const Value, h));
                    }
                    done.push((h, nodes));
                }
                Value::Array(a) => {
                    let kids = done.split_off(done.len() - a.len());
                    let mut h = Fnv1a::new();
                    h.write(b"[");
                    let mut nodes = 1;
                    for (ch, n) in &kids {
                        h.write_word(*ch);
                        nodes += n;
                    }
                    done.push((h.finish(), nodes));
                }
                // Scalars hashed as they are (serializing each one, descriptions included,
                // and hashing its text a byte at a time was most of indexing a big schema).
                // Equal values hash alike: a number by its kind and bits.
                scalar => {
                    let mut h = Fnv1a::new();
                    match scalar {
                        Value::Null => h.write_u8(0),
                        Value::Bool(b) => h.write_u8(1).write_u8(u8::from(*b)),
                        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                            (Some(u), _) => h.write_u8(2).write_word(u),
                            (None, Some(i)) => h.write_u8(3).write_word(i as u64),
                            _ => h
                                .write_u8(4)
                                .write_word(n.as_f64().unwrap_or(0.0).to_bits()),
                        },
                        Value::String(s) => h.write_u8(5).write_words(s.as_bytes()),
                        // (Containers are the arms above.)
                        Value::Array(_) | Value::Object(_) => h.write_u8(6),
                    };
                    done.push((h.finish(), 1));
                }
            }
        }
        CopyIndex {
            repeated: candidates
                .into_iter()
                .filter(|(_, h)| count[h] >= 2)
                .collect(),
        }
    }

    /// The content hash of `v` when it is a repeated structured subschema of the document.
    pub(super) fn hash_of(&self, v: &Value) -> Option<u64> {
        if self.repeated.is_empty() {
            return None;
        }
        self.repeated.get(&(v as *const Value)).copied()
    }
}

/// Equal JSON, object members compared in order (`serde_json`'s own equality ignores the
/// order, which schema-ordered members depend on).
pub(super) fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((k1, v1), (k2, v2))| k1 == k2 && same(v1, v2))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn repeats_are_found_by_content_and_order() {
        let sub = json!({"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "array", "items": {"type": "integer"}},
            "c": {"enum": [1, 2, 3]},
            "d": {"type": "boolean"}
        }});
        let reordered = json!({"type": "object", "properties": {
            "b": {"type": "array", "items": {"type": "integer"}},
            "a": {"type": "string", "maxLength": 3},
            "c": {"enum": [1, 2, 3]},
            "d": {"type": "boolean"}
        }});
        let root = json!({"x": sub, "y": sub, "z": reordered, "w": {"type": "string"}});
        let ix = CopyIndex::build(&root);
        let (x, y, z, w) = (&root["x"], &root["y"], &root["z"], &root["w"]);
        assert!(ix.hash_of(x).is_some());
        assert_eq!(ix.hash_of(x), ix.hash_of(y));
        assert!(same(x, y));
        // The same members in another order: another schema as far as this index goes.
        assert!(!same(x, z));
        assert_eq!(ix.hash_of(z), None);
        assert_eq!(ix.hash_of(w), None, "small and unstructured: not indexed");
        assert_eq!(
            ix.hash_of(&json!({"type": "string"})),
            None,
            "not in the document"
        );
    }
}
