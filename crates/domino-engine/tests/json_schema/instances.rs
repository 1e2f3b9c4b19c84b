//! Generated instances are accepted and their invalid mutations rejected (through the
//! front end's output and through lowering); documents sampled from the grammar validate.

use super::*;

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

#[test]
fn lowered_grammars_agree_with_the_schema() {
    use domino_engine::grammar::lower::lower;
    use domino_engine::grammar::reference::ReferenceRecognizer;
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
            let n = common::alternative_count(alts);
            if n == 0 {
                return false;
            }
            // Deeper down, prefer the first alternatives (usually the short ones).
            let i = if depth > 30 {
                0
            } else {
                g.range(0, n as u64 - 1) as usize
            };
            sample_def(def, g, &common::alternative(alts, i), depth + 1, out)
        }
        Expr::RefPairs(pairs) => {
            let alts = [Expr::RefPairs(pairs.clone())];
            sample_def(def, g, &Expr::Alt(alts.to_vec()), depth, out)
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
