//! Object members in any order (JSON Schema: an object's members are unordered, RFC 8259
//! section 4; `properties` constrains values by name, never by position), each named key at
//! most once. Checked exhaustively: every sequence of members up to a length over a pool of
//! keys (named ones, extra ones, repeats) is run through the lowered grammar's
//! `ReferenceRecognizer` and compared with the oracle "no named key repeated and `jsonschema`
//! accepts the object (with each occurrence of a repeated extra key)".

use super::*;
use domino_engine::grammar::PropertyOrder;
use domino_engine::grammar::json_schema::MAX_ANY_ORDER_PROPERTIES;
use domino_engine::grammar::lower::lower;
use domino_engine::grammar::reference::ReferenceRecognizer;

fn recognizer(schema: &Value, order: PropertyOrder) -> (ReferenceRecognizer, Vec<String>) {
    let o = CompileOptions {
        whitespace: WhitespacePolicy::Compact,
        property_order: order,
        ..CompileOptions::default()
    };
    let def = json_schema::compile(schema, &o).unwrap_or_else(|e| panic!("{schema}: {e}"));
    let warnings = def.warnings.clone();
    let ir = lower(&def).unwrap();
    (ReferenceRecognizer::new(&ir).unwrap(), warnings)
}

/// Every sequence of up to `max_len` members drawn from `pool` (key, value text).
fn sequences(pool: &[(&str, &str)], max_len: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    let mut frontier = vec![Vec::new()];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for s in &frontier {
            for i in 0..pool.len() {
                let mut t: Vec<usize> = s.clone();
                t.push(i);
                next.push(t);
            }
        }
        out.extend(next.iter().cloned());
        frontier = next;
    }
    out
}

/// Compare the grammar with the oracle on every member sequence; returns how many documents
/// were accepted.
fn exhaustive(name: &str, schema: &Value, pool: &[(&str, &str)], max_len: usize) -> usize {
    let v = validator(schema);
    let named: Vec<&str> = schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let (rec, _) = recognizer(schema, PropertyOrder::Any);
    let mut accepted_count = 0;
    for seq in sequences(pool, max_len) {
        let body: Vec<String> = seq
            .iter()
            .map(|&i| format!("{}:{}", Value::String(pool[i].0.into()), pool[i].1))
            .collect();
        let doc = format!("{{{}}}", body.join(","));
        // Named keys at most once; an extra key may repeat (a JSON parser keeps one of the
        // members, so each of its values must be valid: the object is checked once with each
        // occurrence kept).
        let keys: Vec<&str> = seq.iter().map(|&i| pool[i].0).collect();
        let named_once = keys
            .iter()
            .enumerate()
            .all(|(i, k)| !named.contains(k) || !keys[..i].contains(k));
        // A documented subset: `maxProperties` counts every member written, repeats included.
        let max_ok = schema["maxProperties"]
            .as_u64()
            .is_none_or(|m| seq.len() as u64 <= m);
        let expected = named_once
            && max_ok
            && (0..seq.len()).all(|keep| {
                let mut m = serde_json::Map::new();
                for (j, &i) in seq.iter().enumerate() {
                    let value: Value = serde_json::from_str(pool[i].1).unwrap();
                    if keys[j] != keys[keep] || j == keep {
                        m.insert(keys[j].to_string(), value);
                    }
                }
                v.is_valid(&Value::Object(m))
            })
            && (!seq.is_empty() || v.is_valid(&json!({})));
        let accepted = rec.accepts(doc.as_bytes());
        assert_eq!(
            accepted, expected,
            "{name}: {doc}: grammar {accepted}, oracle {expected}"
        );
        accepted_count += usize::from(accepted);
    }
    accepted_count
}

#[test]
fn named_properties_in_every_order() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tag": {"enum": [true]}
        },
        "required": ["name", "age"],
        "additionalProperties": false
    });
    let pool = [
        ("name", r#""x""#),
        ("age", "1"),
        ("tag", "true"),
        ("age", r#""old""#),
        ("other", "1"),
    ];
    // 2 orders without `tag`, 6 with it.
    assert_eq!(exhaustive("required+optional", &schema, &pool, 4), 8);
    // Schema order is still available, and admits only the schema's order.
    let (rec, _) = recognizer(&schema, PropertyOrder::Schema);
    assert!(rec.accepts(br#"{"name":"x","age":1}"#));
    assert!(!rec.accepts(br#"{"age":1,"name":"x"}"#));
}

#[test]
fn extra_members_anywhere_named_ones_once() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}},
        "required": ["b"],
        "additionalProperties": {"type": "string"}
    });
    let pool = [
        ("a", "1"),
        ("b", "true"),
        ("x", r#""s""#),
        ("y", r#""t""#),
        ("a", r#""s""#),
        ("x", "1"),
    ];
    exhaustive("extras", &schema, &pool, 4);
}

#[test]
fn counts_and_presence_constraints_in_any_order() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {}, "b": {}, "c": {}},
        "dependentRequired": {"a": ["c"]},
        "minProperties": 2,
        "maxProperties": 3,
        "additionalProperties": {"type": "null"}
    });
    let pool = [("a", "1"), ("b", "2"), ("c", "3"), ("x", "null")];
    exhaustive("min/max/dependentRequired", &schema, &pool, 4);
    let schema = json!({
        "type": "object",
        "properties": {"p": {"type": "integer"}, "q": {"type": "integer"}, "r": {}},
        "oneOf": [{"required": ["p"]}, {"required": ["q"]}],
        "additionalProperties": false
    });
    let pool = [("p", "1"), ("q", "2"), ("r", "3")];
    exhaustive("oneOf-required", &schema, &pool, 3);
}

#[test]
fn nested_objects_in_any_order() {
    let schema = json!({
        "type": "object",
        "properties": {
            "inner": {
                "type": "object",
                "properties": {"u": {"type": "integer"}, "v": {"type": "integer"}},
                "required": ["u", "v"],
                "additionalProperties": false
            },
            "k": {"type": "integer"}
        },
        "required": ["inner", "k"],
        "additionalProperties": false
    });
    let pool = [
        ("inner", r#"{"v":1,"u":2}"#),
        ("k", "3"),
        ("inner", r#"{"u":2}"#),
    ];
    assert_eq!(exhaustive("nested", &schema, &pool, 3), 2);
}

/// Past [`MAX_ANY_ORDER_PROPERTIES`] named properties the object falls back to schema order,
/// with a warning naming its JSON pointer; at the limit every order is admitted.
#[test]
fn many_properties_fall_back_to_schema_order_with_a_warning() {
    let object = |n: usize| {
        let props: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        json!({"type": "object", "properties": {"o": {"type": "object", "properties": props}}})
    };
    let n = MAX_ANY_ORDER_PROPERTIES;
    let reversed = |n: usize| {
        let body: Vec<String> = (0..n).rev().map(|i| format!(r#""p{i}":{i}"#)).collect();
        format!(r#"{{"o":{{{}}}}}"#, body.join(","))
    };
    let (rec, warnings) = recognizer(&object(n), PropertyOrder::Any);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(rec.accepts(reversed(n).as_bytes()));
    let (rec, warnings) = recognizer(&object(n + 1), PropertyOrder::Any);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("/properties/o") && w.contains("schema order")),
        "{warnings:?}"
    );
    assert!(!rec.accepts(reversed(n + 1).as_bytes()));
    let forward: Vec<String> = (0..=n).map(|i| format!(r#""p{i}":{i}"#)).collect();
    assert!(rec.accepts(format!(r#"{{"o":{{{}}}}}"#, forward.join(",")).as_bytes()));
}

/// The size bound in `MAX_ANY_ORDER_PROPERTIES`'s documentation: at most `2^(N+1)` member
/// states (no `maxProperties`) for N named properties, whatever the schema.
#[test]
fn any_order_grammar_size_is_bounded() {
    let n = MAX_ANY_ORDER_PROPERTIES;
    let props: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    let schema = json!({"type": "object", "properties": props});
    let o = CompileOptions {
        whitespace: WhitespacePolicy::Compact,
        ..CompileOptions::default()
    };
    let started = std::time::Instant::now();
    let def = json_schema::compile(&schema, &o).unwrap();
    let members = def
        .rules
        .iter()
        .filter(|r| r.name.starts_with("members"))
        .count();
    let ir = lower(&def).unwrap();
    let _ = ReferenceRecognizer::new(&ir).unwrap();
    eprintln!(
        "{n} properties, any order: {members} member rules, {} rules, compile+lower {:?}",
        def.rules.len(),
        started.elapsed()
    );
    assert!(members <= 1 << (n + 1), "{members} member rules");
    let schema_order = CompileOptions {
        property_order: PropertyOrder::Schema,
        ..o
    };
    let def = json_schema::compile(&schema, &schema_order).unwrap();
    let schema_members = def
        .rules
        .iter()
        .filter(|r| r.name.starts_with("members"))
        .count();
    assert!(schema_members <= 2 * (n + 2), "{schema_members}");
}
