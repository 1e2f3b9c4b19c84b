//! Answer extraction and scoring on hand-written model outputs: valid, invalid, truncated,
//! with text before and after, in code fences; GSM8K numeric comparison; CoNLL exact sequence
//! accuracy and entity F1.

use domino::eval::Task;
use domino::eval::extract::{ExtractError, first_json_document};
use domino::eval::score::{EntityCounts, Gold, Scorer};

fn gsm() -> Scorer {
    Scorer::for_task(Task::Gsm8k).expect("grammars/gsm8k.schema.json compiles")
}

fn conll() -> Scorer {
    Scorer::for_task(Task::Conll).expect("grammars/conll.schema.json compiles")
}

const GSM_VALID: &str = r#"{
    "thoughts": [
        {"step": "Find the distance", "calculation": "60 - 20 - 15", "result": 25},
        {"step": "Add the rest", "calculation": "25 + 15", "result": 40}
    ],
    "answer": 40
}"#;

#[test]
fn gsm8k_valid_output_is_well_formed_and_correct() {
    let s = gsm().score(GSM_VALID, &Gold::Number(40));
    assert!(s.well_formed, "{s:?}");
    assert!(s.correct);
    assert_eq!(s.parsed_answer, serde_json::json!(40));
    assert!(s.extract_error.is_none() && s.schema_error.is_none());
}

#[test]
fn gsm8k_wrong_answer_is_well_formed_but_not_correct() {
    let s = gsm().score(GSM_VALID, &Gold::Number(41));
    assert!(s.well_formed);
    assert!(!s.correct);
}

#[test]
fn gsm8k_numeric_comparison() {
    let scorer = gsm();
    for answer in ["40.0", "4e1", "40.00000000001"] {
        let out = format!(
            r#"{{"thoughts": [{{"step": "s", "calculation": "c", "result": 1}}], "answer": {answer}}}"#
        );
        assert!(
            scorer.score(&out, &Gold::Number(40)).correct,
            "{answer} should equal 40"
        );
    }
    for answer in ["40.5", "-40", "\"40\"", "null"] {
        let out = format!(
            r#"{{"thoughts": [{{"step": "s", "calculation": "c", "result": 1}}], "answer": {answer}}}"#
        );
        assert!(
            !scorer.score(&out, &Gold::Number(40)).correct,
            "{answer} should not equal 40"
        );
    }
}

#[test]
fn gsm8k_text_around_and_code_fences() {
    let out = format!(
        "Sure, here is the answer:\n```json\n{GSM_VALID}\n```\n\nQ: Next question?\nA: {{\"answer\": 3}}"
    );
    let s = gsm().score(&out, &Gold::Number(40));
    assert!(s.well_formed && s.correct, "{s:?}");
}

#[test]
fn gsm8k_truncated_output_has_no_answer() {
    let cut = &GSM_VALID[..GSM_VALID.find("\"answer\"").unwrap()];
    let s = gsm().score(cut, &Gold::Number(40));
    assert!(!s.well_formed && !s.correct);
    assert_eq!(s.extract_error, Some(ExtractError::Truncated { offset: 0 }));
    assert_eq!(s.parsed_answer, serde_json::Value::Null);
}

#[test]
fn gsm8k_invalid_json_and_schema_violations() {
    let s = gsm().score("{\"thoughts\": [], answer: 40}", &Gold::Number(40));
    assert!(matches!(
        s.extract_error,
        Some(ExtractError::Invalid { .. })
    ));
    assert!(!s.well_formed && !s.correct);

    // Parses, right answer, but violates the schema (empty thoughts, extra key): correct, not well-formed.
    let s = gsm().score(
        r#"{"thoughts": [], "answer": 40, "note": "x"}"#,
        &Gold::Number(40),
    );
    assert!(s.correct);
    assert!(!s.well_formed);
    assert!(s.schema_error.is_some());

    let s = gsm().score("The answer is 40.", &Gold::Number(40));
    assert_eq!(s.extract_error, Some(ExtractError::NoJson));
    assert!(!s.correct);
}

fn tags(s: &str) -> Gold {
    Gold::Tags(s.split_whitespace().map(str::to_string).collect())
}

#[test]
fn conll_exact_sequence_and_entities() {
    let out = r#" {
    "tokens": [
        {"token": "Nadim", "tag": "B-PER"},
        {"token": "Ladki", "tag": "I-PER"},
        {"token": "won", "tag": "O"}
    ]
}
Q: ..."#;
    let s = conll().score(out, &tags("B-PER I-PER O"));
    assert!(s.well_formed && s.correct, "{s:?}");
    assert_eq!(
        s.entities,
        Some(EntityCounts {
            true_positive: 1,
            predicted: 1,
            gold: 1
        })
    );
    assert_eq!(s.parsed_answer, serde_json::json!(["B-PER", "I-PER", "O"]));

    // One wrong tag: not correct; the entity boundary differs, so no true positive.
    let s = conll().score(out, &tags("B-PER O O"));
    assert!(s.well_formed && !s.correct);
    assert_eq!(
        s.entities,
        Some(EntityCounts {
            true_positive: 0,
            predicted: 1,
            gold: 1
        })
    );
}

#[test]
fn conll_length_mismatch_and_bad_tags() {
    let short =
        r#"{"tokens": [{"token": "Nadim", "tag": "B-PER"}, {"token": "Ladki", "tag": "I-PER"}]}"#;
    let s = conll().score(short, &tags("B-PER I-PER O"));
    assert!(
        s.well_formed && !s.correct,
        "missing token must fail exact sequence accuracy"
    );
    assert_eq!(
        s.entities.unwrap().true_positive,
        1,
        "aligned by position, padded with O"
    );

    let bad =
        r#"{"tokens": [{"token": "Nadim", "tag": "PERSON"}, {"token": "Ladki", "tag": "I-PER"}]}"#;
    let s = conll().score(bad, &tags("B-PER I-PER"));
    assert!(!s.well_formed && !s.correct);
    assert_eq!(s.parsed_answer, serde_json::json!([null, "I-PER"]));
    // `PERSON` counts as O, so `I-PER` starts its own (wrong) entity.
    assert_eq!(
        s.entities,
        Some(EntityCounts {
            true_positive: 0,
            predicted: 1,
            gold: 1
        })
    );

    let s = conll().score(
        r#"{"tokens": [{"token": "Nadim", "tag": "B-PER"}"#,
        &tags("B-PER"),
    );
    assert!(matches!(
        s.extract_error,
        Some(ExtractError::Truncated { .. })
    ));
    assert_eq!(
        s.entities,
        Some(EntityCounts {
            true_positive: 0,
            predicted: 0,
            gold: 1
        })
    );
}

#[test]
fn extraction_positions() {
    let text = "prefix {\"a\": 1} suffix {\"b\": 2}";
    let e = first_json_document(text).unwrap();
    assert_eq!(&text[e.start..e.end], "{\"a\": 1}");
}
