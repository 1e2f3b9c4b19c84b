//! Subschemas used in several places are compiled once: the grammar of a schema whose
//! definitions each use the next one in several places grows linearly with the number of
//! definitions, not exponentially. Two shapes from real schemas (JSONSchemaBench
//! `Github_ultra/o70036`, `WashingtonPost/*`): a typed `anyOf` over references to typed
//! definitions, whose sibling `type` once made every branch a merged copy of its target; and
//! a property whose schema is also its `patternProperties` schema, whose conjunction with
//! itself once multiplied the `oneOf` out with itself.

use super::*;

/// Rules of the compiled (not lowered) grammar.
fn rules(schema: &Value) -> usize {
    json_schema::compile(schema, &CompileOptions::default())
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .rules
        .len()
}

/// `n` definitions, each of which uses the next one through `link(next)` in two members.
fn chain(n: usize, link: impl Fn(&str) -> Value, extra: impl Fn(&str) -> Value) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let next = if i + 1 < n {
            format!("#/definitions/d{}", i + 1)
        } else {
            "#/definitions/leaf".to_string()
        };
        let mut d = json!({
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "one": link(&next),
                "many": {"type": "array", "items": link(&next)}
            }
        });
        if let (Value::Object(d), Value::Object(e)) = (&mut d, extra(&next)) {
            d.extend(e);
        }
        defs.insert(format!("d{i}"), d);
    }
    defs.insert(
        "leaf".into(),
        json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
    );
    json!({"$ref": "#/definitions/d0", "definitions": defs})
}

/// Rules added by definitions 2–4 and 2–8 of a chain: linear growth adds about twice as many
/// for seven as for three definitions; a copy per use multiplies them.
fn growth(
    link: impl Fn(&str) -> Value + Copy,
    extra: impl Fn(&str) -> Value + Copy,
) -> (usize, usize) {
    let base = rules(&chain(1, link, extra));
    let four = rules(&chain(4, link, extra)) - base;
    let eight = rules(&chain(8, link, extra)) - base;
    (four, eight)
}

#[test]
fn typed_any_of_over_typed_references_is_shared() {
    let link = |next: &str| json!({"type": "object", "anyOf": [{"$ref": next}, {"$ref": "#/definitions/leaf"}]});
    let (four, eight) = growth(link, |_| json!({}));
    assert!(
        3 * eight <= 7 * four + 8,
        "definitions 2-4: {four} rules, 2-8: {eight}"
    );
}

#[test]
fn a_property_schema_repeated_by_a_pattern_is_merged_once() {
    let link = |next: &str| json!({"oneOf": [{"type": "integer"}, {"$ref": next}]});
    let extra = |next: &str| json!({"patternProperties": {"^one$": {"oneOf": [{"type": "integer"}, {"$ref": next}]}}});
    let (four, eight) = growth(link, extra);
    assert!(
        3 * eight <= 7 * four + 8,
        "definitions 2-4: {four} rules, 2-8: {eight}"
    );
}

#[test]
fn content_equal_copies_are_compiled_once() {
    // One structured subschema written out in full under every property (no `$ref`), as
    // generated and bundled schemas do. (More than 8 properties: members in schema order,
    // so the object's own rules grow linearly; only the copies could grow faster.)
    let copy = json!({"type": "object", "properties": {
        "a": {"type": "string", "maxLength": 3},
        "b": {"type": "array", "items": {"type": "integer"}},
        "c": {"enum": [1, 2, 3]},
        "d": {"type": "boolean"}
    }});
    let object = |n: usize| {
        let props: serde_json::Map<String, Value> =
            (0..n).map(|i| (format!("p{i}"), copy.clone())).collect();
        json!({"type": "object", "properties": props, "additionalProperties": false})
    };
    let one_copy = rules(&json!({"type": "array", "items": copy.clone()}));
    let (ten, twenty) = (rules(&object(10)), rules(&object(20)));
    // Ten more copies add their members, not ten more compilations of the copy.
    assert!(
        twenty - ten < 10 * (one_copy / 2),
        "one copy alone: {one_copy} rules; 10 copies: {ten}, 20: {twenty}"
    );
}
