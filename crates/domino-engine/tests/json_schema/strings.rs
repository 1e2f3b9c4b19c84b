//! String terminals: format regexes are sound, long length bounds are exact.

use super::*;

/// Every string the format regexes produce is valid for the `jsonschema` crate's format check.
#[test]
fn format_regexes_are_sound() {
    use domino_engine::grammar::json_schema::lexical::{format_pattern, hir};
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
    // One block and a rest, two blocks and a rest, whole blocks only, no maximum.
    for (min, max) in [
        (2, Some(600)),
        (0, Some(257)),
        (1, Some(512)),
        (0, Some(768)),
        (3, None),
    ] {
        let mut schema = json!({"type": "string", "minLength": min});
        if let Some(max) = max {
            schema["maxLength"] = json!(max);
        }
        let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
        let mut m = Matcher::new(&def);
        for n in [
            0usize, 1, 2, 3, 255, 256, 257, 258, 511, 512, 513, 599, 600, 601, 767, 768, 769, 800,
        ] {
            let doc = format!("\"{}\"", "é".repeat(n));
            let want = n >= min && max.is_none_or(|max| n <= max);
            assert_eq!(m.accepts(doc.as_bytes()), want, "{schema}: length {n}");
        }
    }
    let schema = json!({"type": "string", "maxLength": 300, "pattern": "^[a-z]+$"});
    let def = json_schema::compile(&schema, &opts(WhitespacePolicy::Compact)).unwrap();
    let mut m = Matcher::new(&def);
    assert!(m.accepts(format!("\"{}\"", "a".repeat(300)).as_bytes()));
    assert!(!m.accepts(format!("\"{}\"", "a".repeat(301)).as_bytes()));
}
