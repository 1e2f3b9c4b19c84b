//! Gold JSON answers in the shape of the paper's Appendix D (Listings 8 and 9).
//!
//! GSM8K: `{"thoughts": [{"step", "calculation", "result"}], "answer"}` built from the solution:
//! - Every non-empty line before `#### N` is a step. Its `<<expr=result>>` annotation gives
//!   `calculation` (`expr`) and `result` (`result` as a number; a fraction like `3/4` becomes
//!   0.75). `step` is the line with the annotation removed (the visible `= 24` stays in it).
//!   In GSM8K no line carries more than one annotation; if one did, the last one is used.
//! - A line without a (usable) annotation is a reasoning sentence with nothing to compute: it is
//!   prepended to the next annotated line's `step` text (joined with a space), or appended to the
//!   previous one's when no annotated line follows. So every thought has a real calculation.
//! - A solution with no annotation at all (113 of 8792) becomes one thought whose `step` is the
//!   whole solution text, `calculation` is the final answer and `result` the final answer.
//! - `answer` is the `#### N` number (the dataset's `final` field).
//!
//! CoNLL: `{"tokens": [{"token", "tag"}]}`, one object per input token, in order.
//!
//! Integral numbers are written as JSON integers (`24`, not `24.0`), as in Listing 8.

use super::data::{ConllSample, GsmSample};
use serde_json::{Map, Number, Value, json};

/// A JSON number for `x`: an integer when `x` is integral and fits, else a float.
pub fn json_number(x: f64) -> Value {
    if x.is_finite() && x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::Number(Number::from(x as i64))
    } else {
        Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// Parse an annotation result: a decimal number (commas, `$` and `%` ignored) or `a/b`.
pub fn parse_result(text: &str) -> Option<f64> {
    let cleaned: String = text
        .trim()
        .chars()
        .filter(|c| !matches!(c, ',' | '$' | '%' | ' '))
        .collect();
    if let Ok(x) = cleaned.parse::<f64>() {
        return x.is_finite().then_some(x);
    }
    let (num, den) = cleaned.split_once('/')?;
    let (num, den) = (num.parse::<f64>().ok()?, den.parse::<f64>().ok()?);
    (den != 0.0).then(|| num / den).filter(|x| x.is_finite())
}

/// One `<<expr=result>>` annotation found in a solution line.
struct Annotation {
    expr: String,
    result: f64,
}

/// Split a solution line into its visible text (annotations removed) and its last usable
/// annotation.
fn split_line(line: &str) -> (String, Option<Annotation>) {
    let mut visible = String::new();
    let mut last = None;
    let mut rest = line;
    while let Some(open) = rest.find("<<") {
        visible.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find(">>") else {
            // An unclosed `<<`: keep it as text.
            visible.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        if let Some((expr, result)) = inner.rsplit_once('=')
            && let Some(result) = parse_result(result)
        {
            last = Some(Annotation {
                expr: expr.trim().to_string(),
                result,
            });
        }
        rest = &after[close + 2..];
    }
    visible.push_str(rest);
    let visible = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    (visible, last)
}

/// The Appendix D JSON for a GSM8K training sample (see the module docs for the rules).
pub fn gsm8k_gold(sample: &GsmSample) -> Value {
    let mut thoughts: Vec<(String, String, f64)> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for line in sample.answer.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed.starts_with("####") {
            break;
        }
        let (text, annotation) = split_line(trimmed);
        match annotation {
            Some(a) => {
                pending.push(text);
                let step = pending
                    .drain(..)
                    .filter(|s| !s.is_empty())
                    .collect::<Vec<_>>()
                    .join(" ");
                thoughts.push((step, a.expr, a.result));
            }
            None => pending.push(text),
        }
    }
    let leftover = pending
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let final_answer = sample.final_answer as f64;
    if let Some(last) = thoughts.last_mut() {
        if !leftover.is_empty() {
            last.0 = format!("{} {leftover}", last.0).trim().to_string();
        }
    } else {
        thoughts.push((leftover, sample.final_answer.to_string(), final_answer));
    }
    let thoughts: Vec<Value> = thoughts
        .into_iter()
        .map(|(step, calculation, result)| {
            let mut m = Map::new();
            m.insert("step".into(), Value::String(step));
            m.insert("calculation".into(), Value::String(calculation));
            m.insert("result".into(), json_number(result));
            Value::Object(m)
        })
        .collect();
    let mut root = Map::new();
    root.insert("thoughts".into(), Value::Array(thoughts));
    root.insert("answer".into(), json_number(final_answer));
    Value::Object(root)
}

/// The Appendix D JSON for a CoNLL sentence.
pub fn conll_gold(sample: &ConllSample) -> Value {
    let tokens: Vec<Value> = sample
        .tokens
        .iter()
        .zip(&sample.tags)
        .map(|(token, tag)| json!({"token": token, "tag": tag}))
        .collect();
    json!({ "tokens": tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(answer: &str, final_answer: i64) -> GsmSample {
        GsmSample {
            id: 0,
            question: "q".into(),
            answer: answer.into(),
            final_answer,
        }
    }

    #[test]
    fn annotated_lines_become_thoughts() {
        let s = sample(
            "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nShe sold 48+24 = <<48+24=72>>72 clips.\n#### 72",
            72,
        );
        let gold = gsm8k_gold(&s);
        assert_eq!(
            gold.to_string(),
            r#"{"thoughts":[{"step":"Natalia sold 48/2 = 24 clips in May.","calculation":"48/2","result":24},{"step":"She sold 48+24 = 72 clips.","calculation":"48+24","result":72}],"answer":72}"#
        );
    }

    #[test]
    fn plain_lines_merge_and_fractions_parse() {
        let s = sample(
            "First, think.\nHalf is <<3/4=3/4>>3/4.\nSo that is it.\n#### 1",
            1,
        );
        let gold = gsm8k_gold(&s);
        let t = &gold["thoughts"][0];
        assert_eq!(t["step"], "First, think. Half is 3/4. So that is it.");
        assert_eq!(t["result"], 0.75);
        assert_eq!(gold["thoughts"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn no_annotation_gives_one_thought_with_the_answer() {
        let s = sample("He has 5 apples.\n#### 5", 5);
        let gold = gsm8k_gold(&s);
        assert_eq!(
            gold.to_string(),
            r#"{"thoughts":[{"step":"He has 5 apples.","calculation":"5","result":5}],"answer":5}"#
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_result("1,000"), Some(1000.0));
        assert_eq!(parse_result("$0.2"), Some(0.2));
        assert_eq!(parse_result("1/0"), None);
        assert_eq!(parse_result("abc"), None);
        assert_eq!(json_number(40.0).to_string(), "40");
        assert_eq!(json_number(0.5).to_string(), "0.5");
    }
}
