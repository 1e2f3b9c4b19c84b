//! Scoring one output: well-formedness, correctness, and entity counts for F1.
//!
//! Definitions (the same for every method):
//! - **Well-formed**: the first JSON document of the output ([`super::extract`]) parses and
//!   validates against the task schema (`grammars/<task>.schema.json`, checked with the
//!   `jsonschema` crate).
//! - **GSM8K correct**: the document's `answer` is a JSON number equal to the gold integer
//!   (numeric comparison, so `40`, `40.0` and `4e1` all match 40; tolerance 1e-9 relative for
//!   floats). Correctness does not require well-formedness: a document with the right `answer`
//!   but, say, a missing `calculation` is correct and not well-formed; the two are separate
//!   columns. A string `"40"` is not a number and not correct.
//! - **CoNLL correct (exact sequence accuracy)**: the document's `tokens` is an array with
//!   exactly as many entries as the gold sentence has tokens, and entry i's `tag` equals gold
//!   tag i for every i. Only tags are compared, by position; the `token` strings the model
//!   copies are not scored (a model that re-spells a token but tags it right is not penalised,
//!   and one that merges tokens misaligns the sequence and fails).
//! - **CoNLL entity-level micro F1**: entities are chunked from IOB2 tags the way seqeval's
//!   default mode (conlleval) does: `B-X` starts an entity, `I-X` continues one of the same
//!   type and otherwise starts a new one. The predicted sequence is aligned to the gold one by
//!   position: cut to the gold length, padded with `O`; entries without a valid tag count as
//!   `O`; an output without a parsable document predicts no entity. A predicted entity is a true
//!   positive when type, start and end all match. Counts are summed over samples (micro F1).

use super::Task;
use super::data::CONLL_TAGS;
use super::extract::{ExtractError, first_json_document};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// The gold answer of one test sample.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Gold {
    /// GSM8K's final answer.
    Number(i64),
    /// CoNLL's IOB2 tags.
    Tags(Vec<String>),
}

/// Entity counts of one sample (or summed over many), for micro F1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityCounts {
    pub true_positive: u64,
    pub predicted: u64,
    pub gold: u64,
}

impl EntityCounts {
    pub fn add(&mut self, other: EntityCounts) {
        self.true_positive += other.true_positive;
        self.predicted += other.predicted;
        self.gold += other.gold;
    }

    pub fn precision(&self) -> f64 {
        ratio(self.true_positive, self.predicted)
    }

    pub fn recall(&self) -> f64 {
        ratio(self.true_positive, self.gold)
    }

    /// F1 (0 when nothing was predicted or nothing is gold, as seqeval reports).
    pub fn f1(&self) -> f64 {
        let (p, r) = (self.precision(), self.recall());
        if p + r == 0.0 {
            0.0
        } else {
            2.0 * p * r / (p + r)
        }
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// One entity: type, first token index, one past the last token index.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Entity {
    pub kind: String,
    pub start: usize,
    pub end: usize,
}

/// Chunk IOB2 tags into entities (seqeval default mode; see the module docs). Tags that are
/// neither `O` nor `B-X`/`I-X` are treated as `O`.
pub fn entities(tags: &[impl AsRef<str>]) -> Vec<Entity> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize)> = None;
    for (i, tag) in tags.iter().enumerate() {
        let (prefix, kind) = match tag.as_ref().split_once('-') {
            Some((p @ ("B" | "I"), k)) if !k.is_empty() => (p, k),
            _ => ("O", ""),
        };
        let continues = prefix == "I" && open.as_ref().is_some_and(|(k, _)| k == kind);
        if !continues {
            if let Some((k, start)) = open.take() {
                out.push(Entity {
                    kind: k,
                    start,
                    end: i,
                });
            }
            if prefix != "O" {
                open = Some((kind.to_string(), i));
            }
        }
    }
    if let Some((kind, start)) = open {
        out.push(Entity {
            kind,
            start,
            end: tags.len(),
        });
    }
    out
}

/// Entity counts of a predicted tag sequence against gold (prediction aligned by position).
pub fn entity_counts(predicted: Option<&[String]>, gold: &[String]) -> EntityCounts {
    let gold_entities = entities(gold);
    let aligned: Vec<&str> = match predicted {
        Some(p) => (0..gold.len())
            .map(|i| p.get(i).map(String::as_str).unwrap_or("O"))
            .collect(),
        None => vec!["O"; gold.len()],
    };
    let predicted_entities = entities(&aligned);
    let true_positive = predicted_entities
        .iter()
        .filter(|e| gold_entities.contains(e))
        .count();
    EntityCounts {
        true_positive: true_positive as u64,
        predicted: predicted_entities.len() as u64,
        gold: gold_entities.len() as u64,
    }
}

/// The result of scoring one output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Score {
    pub well_formed: bool,
    pub correct: bool,
    /// GSM8K: the `answer` value; CoNLL: the predicted tags (invalid entries as `null`);
    /// `null` when no document was found or it lacks the field.
    pub parsed_answer: Value,
    /// Why no document was taken from the output, if so.
    pub extract_error: Option<ExtractError>,
    /// The first schema violation (JSON pointer and message), if the document was invalid.
    pub schema_error: Option<String>,
    /// CoNLL only.
    pub entities: Option<EntityCounts>,
}

/// Scores outputs of one task: holds the compiled task schema.
pub struct Scorer {
    task: Task,
    validator: jsonschema::Validator,
}

impl Scorer {
    /// Compile the task's schema from `schema_path`.
    pub fn new(task: Task, schema_path: &Path) -> anyhow::Result<Scorer> {
        let text = std::fs::read_to_string(schema_path)
            .with_context(|| format!("cannot read schema {}", schema_path.display()))?;
        let schema: Value = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: schema is not valid JSON: {e}",
                schema_path.display(),
                e.line(),
                e.column()
            )
        })?;
        let validator = jsonschema::validator_for(&schema).map_err(|e| {
            anyhow::anyhow!(
                "{}: invalid JSON Schema at {}: {e}",
                schema_path.display(),
                e.schema_path()
            )
        })?;
        Ok(Scorer { task, validator })
    }

    /// The scorer with the schema shipped in `grammars/`.
    pub fn for_task(task: Task) -> anyhow::Result<Scorer> {
        Scorer::new(task, &super::resolve(task.schema_path()))
    }

    /// Whether `value` validates against the task schema; the first error otherwise.
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        match self.validator.iter_errors(value).next() {
            None => Ok(()),
            Some(e) => Err(format!("at `{}`: {e}", e.instance_path())),
        }
    }

    /// Score one output against its gold answer.
    pub fn score(&self, output: &str, gold: &Gold) -> Score {
        let document = first_json_document(output);
        let (value, extract_error) = match document {
            Ok(d) => (Some(d.value), None),
            Err(e) => (None, Some(e)),
        };
        let schema_error = value.as_ref().and_then(|v| self.validate(v).err());
        let well_formed = value.is_some() && schema_error.is_none();
        let (parsed_answer, correct, entities) = match (self.task, gold) {
            (Task::Gsm8k, Gold::Number(g)) => {
                let answer = value
                    .as_ref()
                    .and_then(|v| v.get("answer"))
                    .cloned()
                    .unwrap_or(Value::Null);
                let correct = answer.as_f64().is_some_and(|x| numbers_equal(x, *g as f64));
                (answer, correct, None)
            }
            (Task::Conll, Gold::Tags(gold_tags)) => {
                let predicted: Option<Vec<Option<String>>> = value
                    .as_ref()
                    .and_then(|v| v.get("tokens"))
                    .and_then(Value::as_array)
                    .map(|items| {
                        items
                            .iter()
                            .map(|item| {
                                item.get("tag")
                                    .and_then(Value::as_str)
                                    .filter(|t| CONLL_TAGS.contains(t))
                                    .map(str::to_string)
                            })
                            .collect()
                    });
                let correct = predicted.as_ref().is_some_and(|p| {
                    p.len() == gold_tags.len()
                        && p.iter()
                            .zip(gold_tags)
                            .all(|(a, b)| a.as_deref() == Some(b.as_str()))
                });
                let as_o: Option<Vec<String>> = predicted.as_ref().map(|p| {
                    p.iter()
                        .map(|t| t.clone().unwrap_or_else(|| "O".into()))
                        .collect()
                });
                let counts = entity_counts(as_o.as_deref(), gold_tags);
                let answer = match predicted {
                    Some(p) => Value::Array(
                        p.into_iter()
                            .map(|t| t.map(Value::String).unwrap_or(Value::Null))
                            .collect(),
                    ),
                    None => Value::Null,
                };
                (answer, correct, Some(counts))
            }
            // A gold of the other task's kind: nothing can be correct.
            _ => (Value::Null, false, None),
        };
        Score {
            well_formed,
            correct,
            parsed_answer,
            extract_error,
            schema_error,
            entities,
        }
    }
}

/// Numeric equality with a relative tolerance of 1e-9 (absolute for values below 1).
pub fn numbers_equal(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn chunking_follows_seqeval() {
        let e = entities(&tags("B-PER I-PER O I-LOC I-LOC B-ORG B-ORG I-MISC"));
        let got: Vec<(&str, usize, usize)> = e
            .iter()
            .map(|e| (e.kind.as_str(), e.start, e.end))
            .collect();
        assert_eq!(
            got,
            vec![
                ("PER", 0, 2),
                ("LOC", 3, 5),
                ("ORG", 5, 6),
                ("ORG", 6, 7),
                ("MISC", 7, 8)
            ]
        );
        assert!(entities(&tags("O O X-PER")).is_empty());
    }

    #[test]
    fn counts_align_by_position() {
        let gold = tags("B-PER I-PER O B-LOC");
        let c = entity_counts(Some(&tags("B-PER I-PER O")), &gold);
        assert_eq!(
            c,
            EntityCounts {
                true_positive: 1,
                predicted: 1,
                gold: 2
            }
        );
        let c = entity_counts(None, &gold);
        assert_eq!(
            c,
            EntityCounts {
                true_positive: 0,
                predicted: 0,
                gold: 2
            }
        );
        assert!(
            (EntityCounts {
                true_positive: 1,
                predicted: 2,
                gold: 2
            }
            .f1()
                - 0.5)
                .abs()
                < 1e-12
        );
    }
}
