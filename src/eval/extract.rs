//! Finding the answer in a model's output: the first JSON document in the text.
//!
//! Unconstrained models write what they like around the answer: a sentence before it, a
//! Markdown code fence around it, the next `Q:` after it, or they stop mid-document when the
//! token budget runs out. The rule, the same for every method so the comparison is fair:
//!
//! - Candidates are the positions of `{` (the task answers are objects), left to right.
//! - The first candidate where a complete JSON value parses wins; whatever follows it is
//!   ignored (extra text, a closing fence, the next question).
//! - A `{` inside a failed candidate is skipped (the inner object of a broken or truncated
//!   document is not the answer).
//! - If no candidate parses, the output has no answer; the reason reported is that of the
//!   first candidate: `Truncated` when the text ended inside the document, else `Invalid` with
//!   the parser's message, or `NoJson` when there is no `{` at all.
//!
//! At most [`MAX_CANDIDATES`] starts are tried, which bounds the work on pathological outputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many `{` positions are tried before giving up.
pub const MAX_CANDIDATES: usize = 64;

/// Why no JSON document could be taken from an output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExtractError {
    /// The output contains no `{`.
    NoJson,
    /// The output ended inside the first document (typically: the token limit was reached).
    Truncated { offset: usize },
    /// The first document is not valid JSON.
    Invalid { offset: usize, message: String },
}

impl std::fmt::Display for ExtractError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtractError::NoJson => f.write_str("no JSON object in the output"),
            ExtractError::Truncated { offset } => {
                write!(f, "JSON starting at byte {offset} is truncated")
            }
            ExtractError::Invalid { offset, message } => {
                write!(f, "JSON starting at byte {offset} is invalid: {message}")
            }
        }
    }
}

/// A JSON document found in an output.
#[derive(Clone, Debug, PartialEq)]
pub struct Extracted {
    pub value: Value,
    /// Byte range of the document in the output.
    pub start: usize,
    pub end: usize,
}

/// Parse the JSON value starting at `text[start..]`; returns it and its end offset.
fn parse_at(text: &str, start: usize) -> Result<(Value, usize), serde_json::Error> {
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(value)) => Ok((value, start + stream.byte_offset())),
        Some(Err(e)) => Err(e),
        None => Err(serde::de::Error::custom("empty input")),
    }
}

/// Byte offset in `text` of serde_json's 1-based (line, column) error position.
fn error_offset(text: &str, err: &serde_json::Error) -> usize {
    let line_start: usize = text
        .split_inclusive('\n')
        .take(err.line().saturating_sub(1))
        .map(str::len)
        .sum();
    (line_start + err.column().saturating_sub(1)).min(text.len())
}

/// The first JSON document (object) in `text`; see the module docs for the rule.
///
/// A `{` inside a candidate that failed is not a candidate: the inner object of a truncated or
/// broken document is not the answer. So after a failure the scan resumes where the parser
/// stopped, and after a truncation it ends (everything after lies inside the open document).
pub fn first_json_document(text: &str) -> Result<Extracted, ExtractError> {
    let mut first_error: Option<ExtractError> = None;
    let mut resume_at = 0;
    let mut tried = 0;
    for (start, _) in text.match_indices('{') {
        if start < resume_at {
            continue;
        }
        if tried == MAX_CANDIDATES {
            break;
        }
        tried += 1;
        match parse_at(text, start) {
            Ok((value, end)) => return Ok(Extracted { value, start, end }),
            Err(e) if e.is_eof() => {
                return Err(first_error.unwrap_or(ExtractError::Truncated { offset: start }));
            }
            Err(e) => {
                resume_at = (start + error_offset(&text[start..], &e)).max(start + 1);
                first_error.get_or_insert(ExtractError::Invalid {
                    offset: start,
                    message: e.to_string(),
                });
            }
        }
    }
    Err(first_error.unwrap_or(ExtractError::NoJson))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_document_among_text() {
        let e =
            first_json_document("Sure! ```json\n{\"a\": [1, {\"b\": 2}]}\n```\nQ: next").unwrap();
        assert_eq!(e.value, serde_json::json!({"a": [1, {"b": 2}]}));
        assert_eq!(
            &"Sure! ```json\n{\"a\": [1, {\"b\": 2}]}\n```\nQ: next"[e.start..e.end],
            "{\"a\": [1, {\"b\": 2}]}"
        );
    }

    #[test]
    fn reports_truncation_and_invalid() {
        assert_eq!(
            first_json_document(" {\"a\": [1, 2"),
            Err(ExtractError::Truncated { offset: 1 })
        );
        assert!(matches!(
            first_json_document("{a: 1}"),
            Err(ExtractError::Invalid { offset: 0, .. })
        ));
        assert_eq!(
            first_json_document("no json here"),
            Err(ExtractError::NoJson)
        );
    }

    #[test]
    fn inner_objects_of_a_broken_document_are_not_answers() {
        let truncated = "{\"thoughts\": [{\"step\": \"a\", \"result\": 1}, {\"step\": ";
        assert_eq!(
            first_json_document(truncated),
            Err(ExtractError::Truncated { offset: 0 })
        );
        let broken = "{\"a\": {\"b\": 1}, oops} then {\"c\": 2}";
        assert_eq!(
            first_json_document(broken).unwrap().value,
            serde_json::json!({"c": 2})
        );
    }

    #[test]
    fn non_ascii_text_around_and_inside() {
        let e = first_json_document("Voilà — {\"é\": \"ü\"} ✓").unwrap();
        assert_eq!(e.value, serde_json::json!({"é": "ü"}));
        let e = first_json_document("{ünquoted: 1}\n«{\"ok\": true}»").unwrap();
        assert_eq!(e.value, serde_json::json!({"ok": true}));
    }

    #[test]
    fn skips_a_broken_brace_before_the_answer() {
        let e = first_json_document("I think {this} is it: {\"x\": 1}").unwrap();
        assert_eq!(e.value, serde_json::json!({"x": 1}));
    }
}
