//! Gold answers (Appendix D JSON) of every training and test sample validate against the
//! task schemas, and GSM8K gold answers carry the dataset's final answer. Needs
//! ../shared/data (fails loudly without it).

use domino::eval::Task;
use domino::eval::data::{Dataset, Split, default_path};
use domino::eval::gold::{conll_gold, gsm8k_gold};
use domino::eval::prompt::{JsonStyle, render_json};
use domino::eval::score::{Gold, Scorer};

fn load(task: Task, split: Split) -> Dataset {
    let path = default_path(task, split);
    Dataset::load(task, &path)
        .unwrap_or_else(|e| panic!("evaluation data is required for this test: {e:#}"))
}

#[test]
fn gsm8k_gold_validates_over_both_splits() {
    let scorer = Scorer::for_task(Task::Gsm8k).unwrap();
    for split in [Split::Train, Split::Test] {
        let Dataset::Gsm8k(samples) = load(Task::Gsm8k, split) else {
            unreachable!()
        };
        assert!(samples.len() > 1000);
        for s in &samples {
            let gold = gsm8k_gold(s);
            if let Err(e) = scorer.validate(&gold) {
                panic!("sample {} ({split:?}): {e}\n{gold}", s.id);
            }
            // Scoring the pretty-printed gold as a model output: well-formed and correct.
            let score = scorer.score(
                &render_json(&gold, JsonStyle::Pretty),
                &Gold::Number(s.final_answer),
            );
            assert!(
                score.well_formed && score.correct,
                "sample {}: {score:?}",
                s.id
            );
            for t in gold["thoughts"].as_array().unwrap() {
                assert!(
                    !t["calculation"].as_str().unwrap().is_empty(),
                    "sample {}: empty calculation",
                    s.id
                );
            }
        }
    }
}

#[test]
fn conll_gold_validates_over_both_splits() {
    let scorer = Scorer::for_task(Task::Conll).unwrap();
    for split in [Split::Train, Split::Test] {
        let Dataset::Conll(samples) = load(Task::Conll, split) else {
            unreachable!()
        };
        assert!(samples.len() > 3000);
        for s in &samples {
            let gold = conll_gold(s);
            if let Err(e) = scorer.validate(&gold) {
                panic!("sentence {} ({split:?}): {e}\n{gold}", s.id);
            }
            let score = scorer.score(&gold.to_string(), &Gold::Tags(s.tags.clone()));
            assert!(
                score.well_formed && score.correct,
                "sentence {}: {score:?}",
                s.id
            );
            let e = score.entities.unwrap();
            assert_eq!((e.true_positive, e.predicted), (e.gold, e.gold));
        }
    }
}

#[test]
fn missing_data_is_a_clear_error() {
    let err = Dataset::load(
        Task::Gsm8k,
        std::path::Path::new("/nonexistent/gsm8k/test.jsonl"),
    )
    .unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("/nonexistent/gsm8k/test.jsonl") && msg.contains("README"),
        "{msg}"
    );
}

#[test]
fn malformed_data_names_the_line() {
    let dir = std::env::temp_dir().join(format!("domino-eval-gold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.jsonl");
    std::fs::write(
        &path,
        "{\"tokens\": [\"a\"], \"tags\": [\"O\"]}\n{\"tokens\": [\"a\"], \"tags\": []}\n",
    )
    .unwrap();
    let msg = format!("{:#}", Dataset::load(Task::Conll, &path).unwrap_err());
    assert!(msg.contains("bad.jsonl:2"), "{msg}");
    std::fs::write(&path, "{\"tokens\": [\"a\"], \"tags\": [\"X-Y\"]}\n").unwrap();
    assert!(
        format!("{:#}", Dataset::load(Task::Conll, &path).unwrap_err()).contains("unknown tag")
    );
    std::fs::write(&path, "not json\n").unwrap();
    assert!(
        format!("{:#}", Dataset::load(Task::Gsm8k, &path).unwrap_err()).contains("bad.jsonl:1:")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
