//! `tools` and `tool_choice` of a chat request, in OpenAI's shapes, on top of
//! [`crate::decode::tools`] (the syntaxes, the constraint, the parser): the calls are written
//! in the chat template's own tool syntax (Hermes/Qwen `<tool_call>`, Llama 3.x JSON,
//! Mistral `[TOOL_CALLS]`; the generic `<tool_call>` syntax otherwise), and their arguments
//! validate against each function's `parameters`.

use super::error::ApiError;
pub use crate::decode::tools::{Tool, ToolChoice};
use serde_json::Value;

/// `tool_choice` as the request writes it, checked against `tools`.
pub fn tool_choice(choice: &Option<Value>, tools: &[Tool]) -> Result<ToolChoice, ApiError> {
    let bad = |m: String| ApiError::bad_request(m).with_param("tool_choice");
    let choice = match choice {
        None | Some(Value::Null) => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            other => return Err(bad(format!("unknown tool_choice `{other}`: none, auto, required or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"))),
        },
        Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Named(name.to_string()),
            None => return Err(bad("tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}".into())),
        },
    };
    for (i, t) in tools.iter().enumerate() {
        if t.kind != "function" {
            return Err(ApiError::bad_request(format!(
                "tools of type `{}` are not supported (only `function`)",
                t.kind
            ))
            .with_param("tools"));
        }
        if let Some(p) = &t.function.parameters
            && let Err(e) = jsonschema::validator_for(p)
        {
            return Err(ApiError::bad_request(format!(
                "tools[{i}] ({}): `parameters` is not a valid JSON Schema: {e}",
                t.function.name
            ))
            .with_param(format!("tools[{i}].function.parameters")));
        }
    }
    choice.checked(tools).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Tool> {
        serde_json::from_value(json!([
            {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}},
            {"type": "function", "function": {"name": "now"}}
        ]))
        .unwrap()
    }

    #[test]
    fn choices_follow_tool_choice() {
        let t = tools();
        assert_eq!(tool_choice(&None, &t).unwrap(), ToolChoice::Auto);
        assert_eq!(
            tool_choice(&Some(json!("required")), &t).unwrap(),
            ToolChoice::Required
        );
        assert_eq!(
            tool_choice(
                &Some(json!({"type": "function", "function": {"name": "now"}})),
                &t
            )
            .unwrap(),
            ToolChoice::Named("now".into())
        );
        assert!(
            tool_choice(
                &Some(json!({"type": "function", "function": {"name": "nope"}})),
                &t
            )
            .is_err()
        );
        assert!(tool_choice(&Some(json!("required")), &[]).is_err());
        assert_eq!(tool_choice(&None, &[]).unwrap(), ToolChoice::None);
        assert!(tool_choice(&Some(json!("sometimes")), &t).is_err());
    }
}
