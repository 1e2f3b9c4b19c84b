//! Unsupported keywords, inconsistent and hostile schemas: errors with their pointer.

use super::*;

fn pointer_of(e: &domino_engine::grammar::GrammarError) -> String {
    match &e.location {
        Location::Pointer(p) => p.clone(),
        other => panic!("expected a pointer, got {other:?}"),
    }
}

#[test]
fn unsupported_keywords_are_named_with_their_pointer() {
    let schema = json!({"type": "object", "properties": {"x": {"type": "string", "not": {"pattern": "^a"}}}});
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
            json!({"if": {"pattern": "^a"}, "then": {"minLength": 2}}),
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

    // Past MAX_ENUM_VALUES only scalar enums are accepted (one trie terminal)...
    let huge: Vec<Value> = (0..json_schema::MAX_ENUM_VALUES + 1)
        .map(|i| json!([i]))
        .collect();
    let e = json_schema::compile(&json!({"enum": huge}), &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Limit);
    assert!(e.message.contains("not all of them scalars"), "{e}");
    let scalars: Vec<Value> = (0..json_schema::MAX_ENUM_VALUES + 1)
        .map(Value::from)
        .collect();
    assert!(json_schema::compile(&json!({"enum": scalars}), &CompileOptions::default()).is_ok());
    // ...up to MAX_SCALAR_ENUM_VALUES.
    let too_many: Vec<Value> = (0..json_schema::MAX_SCALAR_ENUM_VALUES + 1)
        .map(Value::from)
        .collect();
    let e =
        json_schema::compile(&json!({"enum": too_many}), &CompileOptions::default()).unwrap_err();
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

/// A schema whose every value would have to contain itself (a required property that refers
/// back to its object) has no finite document: lowering finds the empty language, and the
/// error names the JSON pointers of the schemas whose rules never terminate.
#[test]
fn a_schema_that_needs_itself_names_its_pointers() {
    let schema = json!({"type": "object", "properties": {"x": {"$ref": "#"}}, "required": ["x"]});
    let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
    let e = domino_engine::grammar::lower::lower(&def).unwrap_err();
    assert!(e.message.contains("language is empty"), "{e}");
    // (The root refers to itself, so it is compiled once, as the rule of that reference.)
    assert!(e.message.contains("(the schema at the root)"), "{e}");
    // Optional, the same recursion is fine.
    let schema = json!({"type": "object", "properties": {"x": {"$ref": "#"}}});
    let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
    assert!(domino_engine::grammar::lower::lower(&def).is_ok());
}

/// Found by the `json_schema` fuzz target: the "none of these keys" terminal nests groups per
/// character of the longest named key, and a 90-character required key went past the regex
/// parser's default nesting limit (a panic). Such keys compile now, up to the longest the
/// front end takes (256 characters): the key set is a terminal of its own whose DFA is the
/// names' trie, so its HIR's depth no longer meets the inlining limit ("too large" before).
#[test]
fn long_property_names_compile() {
    for n in [90, 120, 256] {
        let long: String = "F".repeat(n);
        let schema = json!({"type": "object", "properties": {"token": {"type": "string"}},
                            "required": ["token", long]});
        let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
        if let Err(e) = domino_engine::grammar::lower::lower(&def) {
            panic!("{n}: {e}");
        }
    }
}

/// Unknown keywords are ignored (the specification says so) but never silently: each is a
/// warning with its pointer and the keyword it most likely misspells; `strict` makes the
/// first one an error. Vendor extensions (`x-…`) and annotations are not reported.
#[test]
fn unknown_keywords_are_warnings_or_strict_errors() {
    let schema = json!({
        "type": "object",
        "requird": ["a"],
        "properties": {
            "a": {"type": "string", "maxLenght": 3, "x-vendor": true, "title": "A"},
            "b": {"type": "integer", "minimun": 1, "frobnicate": 2}
        }
    });
    let def = json_schema::compile(&schema, &CompileOptions::default()).unwrap();
    let has = |needle: &str, ptr: &str| {
        def.warnings
            .iter()
            .any(|w| w.contains(needle) && w.contains(ptr))
    };
    assert!(has("`requird`", "/requird"), "{:?}", def.warnings);
    assert!(
        has("did you mean `required`", "/requird"),
        "{:?}",
        def.warnings
    );
    assert!(
        has("did you mean `maxLength`", "/properties/a/maxLenght"),
        "{:?}",
        def.warnings
    );
    assert!(
        has("did you mean `minimum`", "/properties/b/minimun"),
        "{:?}",
        def.warnings
    );
    assert!(
        has("`frobnicate`", "/properties/b/frobnicate"),
        "{:?}",
        def.warnings
    );
    assert!(
        !def.warnings
            .iter()
            .any(|w| w.contains("frobnicate") && w.contains("did you mean")),
        "{:?}",
        def.warnings
    );
    assert!(
        !def.warnings
            .iter()
            .any(|w| w.contains("x-vendor") || w.contains("title")),
        "{:?}",
        def.warnings
    );
    assert_eq!(def.warnings.len(), 4, "{:?}", def.warnings);

    let strict = CompileOptions {
        strict: true,
        ..CompileOptions::default()
    };
    let e = json_schema::compile(&schema, &strict).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid);
    assert!(e.message.contains("unknown keyword"), "{e}");
    // A schema without typos compiles under strict.
    let clean = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}});
    json_schema::compile(&clean, &strict).unwrap();
    // Presence constraints (`oneOf`/`anyOf` of `required`, `not: {required}`, `if`/`then` on
    // presence) are rewritten to an internal key: never reported as the user's unknown
    // keyword, and fine under strict, at the root and nested.
    let object = |extra: serde_json::Value| {
        let mut o = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}});
        o.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        o
    };
    for extra in [
        json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        json!({"not": {"required": ["a", "b"]}}),
        json!({"if": {"required": ["a"]}, "then": {"required": ["b"]}}),
    ] {
        let schema = json!({"type": "array", "items": object(extra.clone())});
        for s in [object(extra.clone()), schema] {
            let def = json_schema::compile(&s, &CompileOptions::default()).unwrap();
            assert!(
                def.warnings.iter().all(|w| !w.contains("unknown keyword")),
                "{s}: {:?}",
                def.warnings
            );
            json_schema::compile(&s, &strict).unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    }
}
