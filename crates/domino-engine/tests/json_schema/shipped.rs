//! The schemas shipped in `grammars/`: all in the corpus, all compile and accept an example.

use super::*;

#[test]
fn every_shipped_schema_is_in_the_test_corpus() {
    let dir = common::workspace_root().join("grammars");
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
    let gsm8k: Value =
        serde_json::from_str(include_str!("../../../../grammars/gsm8k.schema.json")).unwrap();
    let def = json_schema::compile(&gsm8k, &CompileOptions::default()).unwrap();
    let doc = br#"{"thoughts": [{"step": "Add", "calculation": "2+3", "result": 5}], "answer": 5}"#;
    assert!(Matcher::new(&def).accepts(doc));
    let conll: Value =
        serde_json::from_str(include_str!("../../../../grammars/conll.schema.json")).unwrap();
    let def = json_schema::compile(&conll, &CompileOptions::default()).unwrap();
    assert!(Matcher::new(&def).accepts(br#"{"tokens":[{"token":"EU","tag":"B-ORG"}]}"#));
    assert!(!Matcher::new(&def).accepts(br#"{"tokens":[{"token":"EU","tag":"B-XYZ"}]}"#));
}
