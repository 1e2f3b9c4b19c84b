//! JSON Schema front end: generated instances both ways, whitespace policies, errors.
//!
//! Every compiled grammar is checked with an independent, slow matcher over the front end's
//! own output (`GrammarDef`: rules of byte literals, regexes, sequences, alternatives and
//! repetitions), so these tests do not depend on lowering. For each schema:
//! - instances from `instances::Generator` that the `jsonschema` crate accepts must be
//!   accepted by the grammar (laid out by the whitespace policy under test);
//! - mutations of them that `jsonschema` rejects must be rejected by the grammar.
//!
//! `lowered_grammars_agree_with_the_schema` runs the same check through lowering
//! (`grammar::lower`) and the byte-level `ReferenceRecognizer`, the engine's oracle.

mod common;

use std::collections::{BTreeSet, HashMap};

use domino::grammar::expr::{Expr, GrammarDef};
use domino::grammar::json_schema::{self, instances::Generator};
use domino::grammar::{CompileOptions, ErrorKind, Location, WhitespacePolicy};
use regex_automata::Anchored;
use regex_automata::hybrid::dfa::{Cache, DFA};
use regex_automata::util::start;
use serde_json::{Value, json};

/// A memoising "all end positions" matcher over a `GrammarDef` (no left recursion needed:
/// schema grammars have none).
struct Matcher<'g> {
    def: &'g GrammarDef,
    dfas: HashMap<usize, (DFA, Cache)>,
}

impl<'g> Matcher<'g> {
    fn new(def: &'g GrammarDef) -> Self {
        Matcher {
            def,
            dfas: HashMap::new(),
        }
    }

    fn accepts(&mut self, input: &[u8]) -> bool {
        let mut memo = HashMap::new();
        let ends = self.rule(self.def.start.0 as usize, input, 0, &mut memo);
        ends.contains(&input.len())
    }

    fn rule(
        &mut self,
        r: usize,
        input: &[u8],
        pos: usize,
        memo: &mut HashMap<(usize, usize), Option<BTreeSet<usize>>>,
    ) -> BTreeSet<usize> {
        match memo.get(&(r, pos)) {
            Some(Some(s)) => return s.clone(),
            Some(None) => return BTreeSet::new(), // cycle without progress
            None => {}
        }
        memo.insert((r, pos), None);
        let def = self.def;
        let ends = self.expr(&def.rules[r].expr, input, pos, memo);
        memo.insert((r, pos), Some(ends.clone()));
        ends
    }

    fn expr(
        &mut self,
        e: &Expr,
        input: &[u8],
        pos: usize,
        memo: &mut HashMap<(usize, usize), Option<BTreeSet<usize>>>,
    ) -> BTreeSet<usize> {
        match e {
            Expr::Empty => BTreeSet::from([pos]),
            Expr::Bytes(b) => {
                if input[pos..].starts_with(b) {
                    BTreeSet::from([pos + b.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Expr::Regex(h) => {
                let key = e as *const Expr as usize;
                let (dfa, cache) = self.dfas.entry(key).or_insert_with(|| {
                    let nfa = regex_automata::nfa::thompson::Compiler::new()
                        .configure(regex_automata::nfa::thompson::Config::new().utf8(false))
                        .build_from_hir(h)
                        .expect("regex compiles");
                    let dfa = DFA::builder()
                        .configure(
                            DFA::config()
                                .cache_capacity(64 << 20)
                                .match_kind(regex_automata::MatchKind::All),
                        )
                        .build_from_nfa(nfa)
                        .expect("lazy DFA builds");
                    let cache = dfa.create_cache();
                    (dfa, cache)
                });
                let mut out = BTreeSet::new();
                let mut s = dfa
                    .start_state(cache, &start::Config::new().anchored(Anchored::Yes))
                    .unwrap();
                for (i, &b) in input.iter().enumerate().skip(pos) {
                    s = dfa.next_state(cache, s, b).unwrap();
                    if s.is_match() {
                        out.insert(i);
                    }
                    if s.is_dead() {
                        return out;
                    }
                }
                s = dfa.next_eoi_state(cache, s).unwrap();
                if s.is_match() {
                    out.insert(input.len());
                }
                out
            }
            Expr::Constrained { hir, constraints } => (pos + 1..=input.len())
                .filter(|&q| common::constrained_match(hir, constraints, &input[pos..q]))
                .collect(),
            Expr::Ref(r) => self.rule(r.0 as usize, input, pos, memo),
            Expr::Seq(parts) => {
                let mut cur = BTreeSet::from([pos]);
                for p in parts {
                    let mut next = BTreeSet::new();
                    for &q in &cur {
                        next.extend(self.expr(p, input, q, memo));
                    }
                    cur = next;
                    if cur.is_empty() {
                        break;
                    }
                }
                cur
            }
            Expr::Alt(alts) => {
                let mut out = BTreeSet::new();
                for a in alts {
                    out.extend(self.expr(a, input, pos, memo));
                }
                out
            }
            Expr::Repeat { expr, min, max } => {
                let mut out = BTreeSet::new();
                let mut cur = BTreeSet::from([pos]);
                let mut seen = BTreeSet::new();
                if *min == 0 {
                    out.insert(pos);
                }
                let mut count = 0u32;
                while !cur.is_empty() && max.is_none_or(|m| count < m) {
                    count += 1;
                    let mut next = BTreeSet::new();
                    for &q in &cur {
                        next.extend(self.expr(expr, input, q, memo));
                    }
                    if count >= *min {
                        out.extend(next.iter().copied());
                        // Past the minimum, positions already explored add nothing new.
                        next.retain(|p| seen.insert(*p));
                    }
                    cur = next;
                }
                out
            }
        }
    }
}

fn opts(ws: WhitespacePolicy) -> CompileOptions {
    CompileOptions {
        whitespace: ws,
        ..CompileOptions::default()
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .expect("test schema is valid for jsonschema")
}

fn layout(g: &mut Generator, v: &Value, ws: WhitespacePolicy) -> String {
    match ws {
        WhitespacePolicy::Compact => serde_json::to_string(v).unwrap(),
        WhitespacePolicy::Pretty => serde_json::to_string_pretty(v).unwrap(),
        WhitespacePolicy::Flexible => g.layout(v, 20),
    }
}

/// Schemas covering the supported keywords.
fn corpus() -> Vec<(&'static str, Value)> {
    let shipped = |text: &str| -> Value { serde_json::from_str(text).unwrap() };
    vec![
        (
            "gsm8k",
            shipped(include_str!("../grammars/gsm8k.schema.json")),
        ),
        (
            "conll",
            shipped(include_str!("../grammars/conll.schema.json")),
        ),
        (
            "person",
            shipped(include_str!("../grammars/person.schema.json")),
        ),
        (
            "tool_call",
            shipped(include_str!("../grammars/tool_call.schema.json")),
        ),
        ("any", json!({})),
        ("scalars", json!({"type": ["string", "null", "boolean"]})),
        (
            "person-inline",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 12},
                    "age": {"type": "integer", "minimum": 0, "maximum": 130},
                    "email": {"type": "string", "format": "email"},
                    "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
                    "score": {"type": "number", "minimum": -1.5, "exclusiveMaximum": 99.25}
                },
                "required": ["name", "age"],
                "additionalProperties": false
            }),
        ),
        (
            "open-object",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                "required": ["b"]
            }),
        ),
        (
            "extras-typed",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "format": "uuid"}},
                "additionalProperties": {"type": "number", "multipleOf": 0.01, "maximum": 99999999999.99, "minimum": 0}
            }),
        ),
        (
            "pattern-props",
            json!({
                "type": "object",
                "patternProperties": {"^[a-z_]+$": {"type": "integer", "exclusiveMinimum": 5}},
                "additionalProperties": false,
                "maxProperties": 3
            }),
        ),
        (
            "match-all-pattern-props",
            json!({
                "type": "object",
                "properties": {"fixed": {"type": "boolean"}},
                "patternProperties": {".*": {"type": ["boolean", "string"]}}
            }),
        ),
        (
            "tuple",
            json!({
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"enum": ["x", "y", 3, null]}],
                "items": {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
                "minItems": 1,
                "maxItems": 4
            }),
        ),
        (
            "draft4-tuple",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "array",
                "items": [{"type": "boolean"}, {"type": "string", "format": "date"}],
                "additionalItems": false
            }),
        ),
        (
            "refs-recursive",
            json!({
                "$defs": {
                    "node": {
                        "type": "object",
                        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                        "required": ["value"],
                        "additionalProperties": false
                    }
                },
                "$ref": "#/$defs/node"
            }),
        ),
        (
            "any-of-one-of",
            json!({
                "anyOf": [
                    {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}, "required": ["kind", "r"], "additionalProperties": false},
                    {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1}}, "required": ["kind", "side"], "additionalProperties": false}
                ],
                "oneOf": [{"type": "object"}, {"type": "null"}]
            }),
        ),
        (
            "all-of",
            json!({
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer", "maximum": 5}, "a": {"maxLength": 4}}, "required": ["b"], "additionalProperties": false}
                ]
            }),
        ),
        (
            "formats",
            json!({
                "type": "object",
                "properties": {
                    "d": {"type": "string", "format": "date"},
                    "t": {"type": "string", "format": "time"},
                    "dt": {"type": "string", "format": "date-time"},
                    "ip4": {"type": "string", "format": "ipv4"},
                    "ip6": {"type": "string", "format": "ipv6"},
                    "u": {"type": "string", "format": "uri"},
                    "id": {"type": "string", "format": "uuid"}
                },
                "required": ["d", "t", "dt", "ip4", "ip6", "u", "id"],
                "additionalProperties": false
            }),
        ),
        (
            "patterns",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "ab+c"},
                    {"type": "string", "pattern": "^\\w+@\\d{2}$", "maxLength": 8},
                    {"type": "string", "pattern": "^(foo|bar)\"\\\\$"}
                ]}
            }),
        ),
        (
            "long-strings",
            json!({
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 600, "minLength": 2}, "note": {"type": "string", "maxLength": 10}},
                "required": ["text"]
            }),
        ),
        (
            "one-of-required",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 4}, "c": {"type": "boolean"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
                "additionalProperties": false
            }),
        ),
        (
            "any-of-shapes",
            json!({
                "type": "object",
                "properties": {"dims": {
                    "type": "object",
                    "oneOf": [
                        {"properties": {"radius": {"type": "number"}}, "required": ["radius"]},
                        {"properties": {"length": {"type": "number"}, "width": {"type": "integer"}}, "required": ["length", "width"]}
                    ]
                }},
                "required": ["dims"]
            }),
        ),
        (
            "dependencies-and-not",
            json!({
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "cash": {"type": "boolean"}},
                "dependencies": {"card": ["billing"]},
                "not": {"required": ["card", "cash"]},
                "additionalProperties": false
            }),
        ),
        (
            "pattern-lengths",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "^([a-z0-9-]+):([a-z0-9.-]+)$", "maxLength": 12},
                    {"type": "string", "pattern": "^$|^[A-Z][a-z]*$", "minLength": 1, "maxLength": 5}
                ]}
            }),
        ),
        // Intersections: a pattern with length bounds it does not imply, a format with a
        // pattern, `not: {enum}` of strings (every escape form excluded).
        (
            "pattern-and-lengths-exact",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "string", "pattern": "^(?:[a-z]+ ){0,2}[a-z]+$", "minLength": 3, "maxLength": 7},
                    {"type": "string", "format": "date", "pattern": "^20(?:19|2)"},
                    {"type": "string", "not": {"enum": ["ab", "a/b", "q\"", "é"]}, "maxLength": 3},
                    {"type": "string", "format": "uri", "minLength": 1, "maxLength": 65536}
                ]},
                "maxItems": 4
            }),
        ),
        // Pattern keys minus the named properties they match, a leading negative look-ahead,
        // and minProperties met by the first extra member.
        (
            "pattern-keys-minus-named",
            json!({
                "type": "object",
                "properties": {"ab": {"type": "integer"}},
                "patternProperties": {"^(?!x)[a-z]{1,3}$": {"type": ["boolean", "integer"]}},
                "additionalProperties": false,
                "minProperties": 1,
                "maxProperties": 3
            }),
        ),
        (
            "min-properties-extra",
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "boolean"}, "minProperties": 1, "maxProperties": 2}),
        ),
        // if/then/else on a discriminator, required and not.
        (
            "discriminated-conditionals",
            json!({
                "type": "object",
                "properties": {"kind": {"enum": ["a", "b", "c"]}, "x": {"type": "integer"}, "y": {"type": "string"}},
                "required": ["kind"],
                "additionalProperties": false,
                "allOf": [
                    {"if": {"properties": {"kind": {"const": "a"}}}, "then": {"required": ["x"]}},
                    {"if": {"properties": {"kind": {"const": "b"}}}, "then": {"required": ["y"]}, "else": {"properties": {"y": {"maxLength": 1}}}}
                ]
            }),
        ),
        (
            "optional-discriminator",
            json!({
                "type": "object",
                "properties": {"kind": {"type": "string"}, "x": {"type": "integer"}},
                "if": {"properties": {"kind": {"const": "big"}}},
                "then": {"properties": {"x": {"minimum": 100}}},
                "else": {"properties": {"x": {"maximum": 9}}}
            }),
        ),
        (
            "multiples",
            json!({
                "type": "array",
                "items": {"anyOf": [
                    {"type": "integer", "multipleOf": 3, "minimum": -20, "maximum": 50},
                    {"type": "number", "multipleOf": 0.25},
                    {"type": "integer", "multipleOf": 20},
                    {"type": "integer", "multipleOf": 6, "minimum": 0, "maximum": 9999}
                ]},
                "maxItems": 3
            }),
        ),
        // oneOf proved disjoint by members: A requires `t` as a string, B allows `t` only
        // as an integer; refs to untyped object branches are restricted to objects.
        (
            "one-of-by-members",
            json!({
                "$defs": {"b": {"properties": {"t": {"type": "integer"}, "u": {"type": "boolean"}}}},
                "type": "object",
                "oneOf": [
                    {"properties": {"t": {"type": "string", "pattern": "^a"}}, "required": ["t"]},
                    {"$ref": "#/$defs/b"}
                ]
            }),
        ),
        // oneOf where an enum branch shares values with another branch: those values match
        // two branches and are invalid; the rest of the enum and of the other branches stay.
        (
            "one-of-overlapping-values",
            json!({
                "type": "array",
                "items": {"oneOf": [
                    {"enum": ["linux", "x", "yy"]},
                    {"type": "string", "maxLength": 2},
                    {"type": "integer"}
                ]},
                "maxItems": 4
            }),
        ),
        (
            "nullable-integers",
            json!({
                "type": "array",
                "items": {"type": ["integer", "null"], "minimum": -20, "maximum": 2000, "multipleOf": 1}
            }),
        ),
    ]
}

const POLICIES: [WhitespacePolicy; 3] = [
    WhitespacePolicy::Compact,
    WhitespacePolicy::Flexible,
    WhitespacePolicy::Pretty,
];

#[test]
fn generated_instances_are_accepted_and_mutations_rejected() {
    for (name, schema) in corpus() {
        let v = validator(&schema);
        for ws in POLICIES {
            let def =
                json_schema::compile(&schema, &opts(ws)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let mut m = Matcher::new(&def);
            let mut g = Generator::new(&schema, 7 + ws as u64);
            let (mut valid, mut rejected_mutants) = (0, 0);
            for _ in 0..120 {
                let Some(inst) = g.instance(&schema) else {
                    continue;
                };
                if !v.is_valid(&inst) {
                    continue;
                }
                valid += 1;
                let text = layout(&mut g, &inst, ws);
                assert!(
                    m.accepts(text.as_bytes()),
                    "{name} ({ws:?}): valid instance rejected:\n{text}"
                );
                for _ in 0..3 {
                    let bad = g.mutate(&inst);
                    if v.is_valid(&bad) {
                        continue;
                    }
                    let text = layout(&mut g, &bad, ws);
                    assert!(
                        !m.accepts(text.as_bytes()),
                        "{name} ({ws:?}): invalid instance accepted:\n{text}"
                    );
                    rejected_mutants += 1;
                }
            }
            assert!(
                valid >= 15,
                "{name} ({ws:?}): only {valid} valid instances generated"
            );
            if name != "any" {
                assert!(
                    rejected_mutants >= 10,
                    "{name} ({ws:?}): only {rejected_mutants} invalid mutants"
                );
            }
        }
    }
}

/// Hand-written documents the grammar must reject although they are close to valid.
#[test]
fn near_misses_are_rejected() {
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"type": "integer", "minimum": 3, "maximum": 17}),
            "18",
        ),
        (json!({"type": "integer", "minimum": 3, "maximum": 17}), "2"),
        (json!({"type": "integer"}), "1.5"),
        (json!({"type": "string", "maxLength": 3}), "\"abcd\""),
        (json!({"type": "string", "minLength": 2}), "\"\\u00e9\""),
        (
            json!({"type": "string", "format": "date"}),
            "\"2023-02-29\"",
        ),
        (json!({"type": "string", "format": "uuid"}), "\"123\""),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}),
            "{}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false}),
            "{\"b\":1}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"a\":1,\"a\":\"x\"}",
        ),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"\\u0061\":\"x\"}",
        ),
        (json!({"type": "array", "minItems": 2}), "[1]"),
        (json!({"type": "string"}), "\"\\ud800\""),
        (json!({"type": "number"}), "1e999"),
        (json!({"type": "string", "pattern": "^a+$"}), "\"ab\""),
        (json!({"enum": ["x", 1]}), "\"y\""),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{"a":1,"b":2}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            "3",
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"card":1}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"billing":"abcd","cash":1,"note":0}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"cash":1}"#,
        ),
        (json!({"not": {"required": ["x"]}}), r#"{"x":1}"#),
        (json!({"not": {"required": ["x"]}}), "1"),
        (json!({"not": {}}), "1"),
        (json!({"not": {"type": ["string", "null"]}}), "null"),
        (
            json!({"not": {"type": "string"}, "enum": ["a", 1]}),
            "\"a\"",
        ),
        (
            json!({"type": "string", "pattern": "^[a-z]+:[a-z]+$", "maxLength": 5}),
            "\"abc:def\"",
        ),
        (json!({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}), "2"),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "null",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "\"abc\"",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "4",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            "5",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            r#"{"t":"c"}"#,
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"ftp://x\"",
        ),
    ];
    for (schema, doc) in cases {
        // Only documents that really are invalid belong here (or that serde_json refuses).
        if let Ok(v) = serde_json::from_str::<Value>(doc) {
            assert!(
                !validator(&schema).is_valid(&v),
                "{schema}: {doc} is valid; not a near miss"
            );
        }
        let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
        assert!(
            !Matcher::new(&def).accepts(doc.as_bytes()),
            "{schema} accepted {doc}"
        );
    }
    let ok: Vec<(Value, &str)> = vec![
        (json!({"type": "string"}), "\"\\ud83d\\ude00 \\n\\\"\""),
        (json!({"type": "number"}), "-0.5e-7"),
        (
            json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
            "{\"ab\":\"x\",\"\":null}",
        ),
        (json!({"type": "string", "pattern": "b"}), "\"abc\""),
        (
            json!({"properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            r#"{"a":1,"b":2}"#,
        ),
        (
            json!({"properties": {"a": {}, "b": {}}, "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
            "3",
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"card":1,"billing":2}"#,
        ),
        (
            json!({"dependencies": {"cash": {"properties": {"billing": {"maxLength": 3}}, "required": ["note"]}}}),
            r#"{"billing":"abc","cash":1,"note":0}"#,
        ),
        (
            json!({"dependencies": {"card": ["billing"]}}),
            r#"{"billing":2,"x":[]}"#,
        ),
        (json!({"not": {"required": ["x"]}}), r#"{"y":1}"#),
        (json!({"not": false}), "[1]"),
        (json!({"not": {"type": ["string", "null"]}}), "1.5"),
        (json!({"not": {"type": "string"}, "enum": ["a", 1]}), "1"),
        (json!({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}), "3"),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "\"ab\"",
        ),
        (
            json!({"allOf": [{"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 5}]}]}),
            "7",
        ),
        (
            json!({"oneOf": [{"properties": {"t": {"const": "a"}}, "required": ["t"]}, {"properties": {"t": {"const": "b"}}, "required": ["t"]}]}),
            r#"{"t":"b","u":1}"#,
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"./a\"",
        ),
        (
            json!({"type": "string", "oneOf": [{"pattern": "^https?://.+$"}, {"pattern": "^\\./.+$"}]}),
            "\"http://a\"",
        ),
    ];
    for (schema, doc) in ok {
        assert!(
            validator(&schema).is_valid(&serde_json::from_str(doc).unwrap()),
            "{schema}: {doc} is invalid"
        );
        let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
        assert!(
            Matcher::new(&def).accepts(doc.as_bytes()),
            "{schema} rejected {doc}"
        );
    }
}

#[test]
fn whitespace_policies() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let compact = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
    assert!(Matcher::new(&compact).accepts(br#"{"a":[1,2]}"#));
    assert!(!Matcher::new(&compact).accepts(br#"{"a": [1,2]}"#));
    assert!(!Matcher::new(&compact).accepts(br#" {"a":[1,2]}"#));

    let flexible = json_schema::compile(&schema, &opts(WhitespacePolicy::Flexible)).unwrap();
    let spaced = |n: usize| format!("{{\"a\":{}[1 ,\n2]}}", " ".repeat(n));
    assert!(Matcher::new(&flexible).accepts(spaced(20).as_bytes()));
    assert!(
        !Matcher::new(&flexible).accepts(spaced(21).as_bytes()),
        "21 spaces in a row must be rejected"
    );
    assert!(Matcher::new(&flexible).accepts(b" {\n\t\"a\" : [ ] } \n"));

    let pretty = json_schema::compile(&schema, &opts(WhitespacePolicy::Pretty)).unwrap();
    let doc = json!({"a": [1, 2]});
    assert!(Matcher::new(&pretty).accepts(serde_json::to_string_pretty(&doc).unwrap().as_bytes()));
    assert!(Matcher::new(&pretty).accepts(b"{}"));
    assert!(Matcher::new(&pretty).accepts(b"{\n  \"a\": []\n}"));
    assert!(!Matcher::new(&pretty).accepts(br#"{"a":[1,2]}"#));
}

#[test]
fn pretty_nesting_beyond_the_indent_depth_is_compact() {
    let schema = json!({"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$ref": "#/$defs/n"});
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Pretty)).unwrap();
    let mut v = json!([]);
    for _ in 0..json_schema::MAX_PRETTY_DEPTH {
        v = json!([v]);
    }
    assert!(Matcher::new(&def).accepts(serde_json::to_string_pretty(&v).unwrap().as_bytes()));
}

fn pointer_of(e: &domino::grammar::GrammarError) -> String {
    match &e.location {
        Location::Pointer(p) => p.clone(),
        other => panic!("expected a pointer, got {other:?}"),
    }
}

#[test]
fn unsupported_keywords_are_named_with_their_pointer() {
    let schema =
        json!({"type": "object", "properties": {"x": {"type": "string", "not": {"minLength": 3}}}});
    let e = json_schema::compile(&schema, &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Unsupported);
    assert_eq!(e.feature.as_deref(), Some("not"));
    assert_eq!(pointer_of(&e), "/properties/x/not");

    let lenient = CompileOptions {
        lenient: true,
        ..CompileOptions::default()
    };
    let def = json_schema::compile(&schema, &lenient).unwrap();
    assert!(
        def.warnings
            .iter()
            .any(|w| w.contains("`not`") && w.contains("/properties/x/not")),
        "{:?}",
        def.warnings
    );

    for (schema, kw) in [
        (json!({"type": "array", "uniqueItems": true}), "uniqueItems"),
        (
            json!({"if": {"type": "string"}, "then": {"minLength": 2}}),
            "if",
        ),
        (
            json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
            "oneOf",
        ),
        // Vacuous satisfaction across type families: "ab" satisfies both branches.
        (
            json!({"oneOf": [{"maxLength": 2}, {"minimum": 5}]}),
            "oneOf",
        ),
        (
            json!({"type": "string", "format": "idn-hostname"}),
            "format",
        ),
        (json!({"type": "string", "pattern": "(?=a)b"}), "pattern"),
        (json!({"$ref": "https://example.com/other.json"}), "$ref"),
        // Extra members may repeat a key (a parser keeps one), so they cannot count.
        (
            json!({"additionalProperties": {"type": "integer"}, "minProperties": 2}),
            "minProperties",
        ),
    ] {
        let e = json_schema::compile(&schema, &CompileOptions::default()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Unsupported, "{schema}: {e}");
        assert_eq!(e.feature.as_deref(), Some(kw), "{schema}: {e}");
    }
    // Annotations and unknown keywords constrain nothing.
    let schema = json!({"title": "t", "description": "d", "default": 1, "examples": [1], "x-custom": {"not": 1}, "type": "integer"});
    assert!(json_schema::compile(&schema, &CompileOptions::default()).is_ok());
}

#[test]
fn inconsistent_and_hostile_schemas_are_errors() {
    let e = json_schema::compile(
        &json!({"type": "array", "minItems": 3, "maxItems": 2}),
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert_eq!(pointer_of(&e), "/minItems");

    let e = json_schema::compile(
        &json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert!(e.message.contains("cycle"), "{e}");

    let e = json_schema::compile(
        &json!({"type": "integer", "minimum": 5, "maximum": 4}),
        &CompileOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);

    let e =
        json_schema::compile(&json!({"$ref": "#/nope"}), &CompileOptions::default()).unwrap_err();
    assert_eq!(pointer_of(&e), "/$ref");

    // Nesting up to the limit compiles on an ordinary 2 MiB thread stack...
    let mut deep = json!({"type": "integer"});
    for _ in 0..json_schema::MAX_SCHEMA_DEPTH - 2 {
        deep = json!({"type": "array", "items": deep});
    }
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || json_schema::compile(&deep, &CompileOptions::default()).map(|_| ()))
        .unwrap()
        .join()
        .expect("no stack overflow")
        .unwrap();
    // ...and deeper nesting is an error, not a stack overflow.
    let mut deep = json!({"type": "integer"});
    for _ in 0..json_schema::MAX_SCHEMA_DEPTH + 10 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = json_schema::compile(&deep, &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);

    let huge: Vec<Value> = (0..json_schema::MAX_ENUM_VALUES + 1)
        .map(Value::from)
        .collect();
    let e = json_schema::compile(&json!({"enum": huge}), &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);

    // Self-reference through a container is fine (recursion), alone it is a cycle.
    assert!(
        json_schema::compile(
            &json!({"type": "array", "items": {"$ref": "#"}}),
            &CompileOptions::default()
        )
        .is_ok()
    );
    assert!(json_schema::compile(&json!({"$ref": "#"}), &CompileOptions::default()).is_err());

    assert!(json_schema::compile(&json!(3), &CompileOptions::default()).is_err());
}

#[test]
fn every_shipped_schema_is_in_the_test_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("grammars");
    let mut shipped: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .strip_suffix(".schema.json")
                .map(str::to_string)
        })
        .collect();
    shipped.sort();
    let names: Vec<&str> = corpus().iter().map(|(n, _)| *n).collect();
    for s in &shipped {
        assert!(
            names.contains(&s.as_str()),
            "grammars/{s}.schema.json is not in corpus()"
        );
    }
}

#[test]
fn shipped_schemas_compile_and_accept_an_example() {
    let gsm8k: Value = serde_json::from_str(include_str!("../grammars/gsm8k.schema.json")).unwrap();
    let def = json_schema::compile(&gsm8k, &CompileOptions::default()).unwrap();
    let doc = br#"{"thoughts": [{"step": "Add", "calculation": "2+3", "result": 5}], "answer": 5}"#;
    assert!(Matcher::new(&def).accepts(doc));
    let conll: Value = serde_json::from_str(include_str!("../grammars/conll.schema.json")).unwrap();
    let def = json_schema::compile(&conll, &CompileOptions::default()).unwrap();
    assert!(Matcher::new(&def).accepts(br#"{"tokens":[{"token":"EU","tag":"B-ORG"}]}"#));
    assert!(!Matcher::new(&def).accepts(br#"{"tokens":[{"token":"EU","tag":"B-XYZ"}]}"#));
}

#[test]
fn lowered_grammars_agree_with_the_schema() {
    use domino::grammar::lower::lower;
    use domino::grammar::reference::ReferenceRecognizer;
    for (name, schema) in corpus() {
        let v = validator(&schema);
        for ws in [WhitespacePolicy::Compact, WhitespacePolicy::Flexible] {
            let def =
                json_schema::compile(&schema, &opts(ws)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let ir =
                lower(&def).unwrap_or_else(|e| panic!("{name} ({ws:?}): lowering failed: {e}"));
            let rec =
                ReferenceRecognizer::new(&ir).unwrap_or_else(|e| panic!("{name}: recognizer: {e}"));
            let mut g = Generator::new(&schema, 99 + ws as u64);
            let mut checked = 0;
            for _ in 0..80 {
                let Some(inst) = g.instance(&schema) else {
                    continue;
                };
                if !v.is_valid(&inst) {
                    continue;
                }
                let text = layout(&mut g, &inst, ws);
                assert!(
                    rec.accepts(text.as_bytes()),
                    "{name} ({ws:?}): lowered grammar rejects a valid instance:\n{text}"
                );
                let bad = g.mutate(&inst);
                if !v.is_valid(&bad) {
                    let text = layout(&mut g, &bad, ws);
                    assert!(
                        !rec.accepts(text.as_bytes()),
                        "{name} ({ws:?}): lowered grammar accepts an invalid instance:\n{text}"
                    );
                }
                checked += 1;
            }
            assert!(
                checked >= 8,
                "{name} ({ws:?}): only {checked} instances checked"
            );
        }
    }
}

/// Every string the format regexes produce is valid for the `jsonschema` crate's format check.
#[test]
fn format_regexes_are_sound() {
    use domino::grammar::json_schema::lexical::{format_pattern, hir};
    for f in [
        "date",
        "time",
        "date-time",
        "uuid",
        "ipv4",
        "ipv6",
        "email",
        "hostname",
        "uri",
    ] {
        let schema = json!({"type": "string", "format": f});
        let v = validator(&schema);
        let h = hir(&format_pattern(f).unwrap());
        let mut g = Generator::new(&schema, 5);
        for _ in 0..3000 {
            let s = g.sample(&h);
            assert!(
                v.is_valid(&Value::String(s.clone())),
                "format {f}: {s:?} is produced by the grammar but invalid"
            );
        }
    }
}

#[test]
fn long_string_bounds_are_exact() {
    let schema = json!({"type": "string", "minLength": 2, "maxLength": 600});
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
    let mut m = Matcher::new(&def);
    for n in [
        0usize, 1, 2, 255, 256, 257, 511, 512, 513, 599, 600, 601, 800,
    ] {
        let doc = format!("\"{}\"", "é".repeat(n));
        assert_eq!(
            m.accepts(doc.as_bytes()),
            (2..=600).contains(&n),
            "length {n}"
        );
    }
    let schema = json!({"type": "string", "maxLength": 300, "pattern": "^[a-z]+$"});
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
    let mut m = Matcher::new(&def);
    assert!(m.accepts(format!("\"{}\"", "a".repeat(300)).as_bytes()));
    assert!(!m.accepts(format!("\"{}\"", "a".repeat(301)).as_bytes()));
}

/// Random documents drawn from the grammar itself (a random walk over the `GrammarDef`).
fn sample_def(
    def: &GrammarDef,
    g: &mut Generator,
    e: &Expr,
    depth: usize,
    out: &mut String,
) -> bool {
    if depth > 60 {
        return false;
    }
    match e {
        Expr::Empty => true,
        Expr::Bytes(b) => {
            out.push_str(std::str::from_utf8(b).unwrap());
            true
        }
        Expr::Regex(h) => {
            out.push_str(&g.sample(h));
            true
        }
        Expr::Constrained { hir, constraints } => common::sample_constrained(g, hir, constraints)
            .map(|x| out.push_str(&x))
            .is_some(),
        Expr::Ref(r) => sample_def(def, g, &def.rules[r.0 as usize].expr, depth + 1, out),
        Expr::Seq(parts) => parts.iter().all(|p| sample_def(def, g, p, depth + 1, out)),
        Expr::Alt(alts) => {
            if alts.is_empty() {
                return false;
            }
            // Deeper down, prefer the first alternatives (usually the short ones).
            let i = if depth > 30 {
                0
            } else {
                g.range(0, alts.len() as u64 - 1) as usize
            };
            sample_def(def, g, &alts[i], depth + 1, out)
        }
        Expr::Repeat { expr, min, max } => {
            let hi = max.unwrap_or(min + 2).min(min + 2);
            let n = if depth > 30 {
                *min
            } else {
                g.range(*min as u64, hi as u64) as u32
            };
            (0..n).all(|_| sample_def(def, g, expr, depth + 1, out))
        }
    }
}

/// Soundness, directly: every document the grammar generates validates with `jsonschema`.
#[test]
fn documents_sampled_from_the_grammar_validate() {
    let mut extra = vec![
        ("number", json!({"type": "number"})),
        ("integer", json!({"type": "integer"})),
        (
            "number-bounds",
            json!({"type": "number", "minimum": -1.5, "exclusiveMaximum": 99.25}),
        ),
        (
            "money",
            json!({"type": "number", "multipleOf": 0.01, "maximum": 99999999999.99, "exclusiveMinimum": 0}),
        ),
        (
            "int-range",
            json!({"type": "integer", "minimum": -20, "exclusiveMaximum": 2000}),
        ),
        ("pow10", json!({"type": "integer", "multipleOf": 100})),
        (
            "extra-keys",
            json!({"properties": {"a": {"const": 1}, "b": {"const": 2}}, "additionalProperties": {"type": "string"}}),
        ),
    ];
    let mut schemas = corpus();
    schemas.append(&mut extra);
    for (name, schema) in schemas {
        let v = validator(&schema);
        for ws in POLICIES {
            let def = json_schema::compile(&schema, &opts(ws)).unwrap();
            let mut g = Generator::new(&schema, 11 + ws as u64);
            let mut produced = 0;
            for _ in 0..300 {
                let mut out = String::new();
                if !sample_def(
                    &def,
                    &mut g,
                    &def.rules[def.start.0 as usize].expr,
                    0,
                    &mut out,
                ) {
                    continue;
                }
                produced += 1;
                let doc: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
                    panic!("{name} ({ws:?}): grammar produced non-JSON ({e}):\n{out}")
                });
                assert!(
                    v.is_valid(&doc),
                    "{name} ({ws:?}): grammar produced an invalid document:\n{out}"
                );
            }
            assert!(produced >= 50, "{name} ({ws:?}): only {produced} samples");
        }
    }
}
