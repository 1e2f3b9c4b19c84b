//! Tool calls in a generic JSON syntax: the output is constrained by a JSON Schema built from
//! the request's functions, and parsed back into OpenAI `tool_calls`.
//!
//! A call is the object `{"name": NAME, "arguments": ARGS}`, with `name` fixed (`const`) and
//! `arguments` that function's `parameters` schema; several functions are an `anyOf`.
//! `tool_choice`: `"none"` offers no tools; `"required"` forces one of them; a named
//! function forces that one; `"auto"` (the default) allows a call or the reply
//! `{"content": TEXT}`. The functions and the syntax are described to the model in a
//! system message. Template-specific tool syntaxes (each model family's own markup) are not
//! used: every model gets this one, and the grammar makes it exact.

use super::error::ApiError;
use serde::Deserialize;
use serde_json::{Value, json};

/// One entry of `tools`.
#[derive(Clone, Debug, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: Function,
}

/// A function the model may call.
#[derive(Clone, Debug, Deserialize)]
pub struct Function {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON Schema for the arguments (absent = any object).
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// What the model is allowed to answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolMode {
    /// Tools are not offered.
    None,
    /// A call or a plain reply.
    Auto,
    /// A call to one of the tools.
    Required,
    /// A call to this function.
    Named(String),
}

/// `tool_choice` as the request writes it.
pub fn tool_mode(choice: &Option<Value>, tools: &[Tool]) -> Result<ToolMode, ApiError> {
    let bad = |m: String| ApiError::bad_request(m).with_param("tool_choice");
    let mode = match choice {
        None | Some(Value::Null) => ToolMode::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolMode::None,
            "auto" => ToolMode::Auto,
            "required" => ToolMode::Required,
            other => return Err(bad(format!("unknown tool_choice `{other}`: none, auto, required or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"))),
        },
        Some(v) => match v.pointer("/function/name").and_then(Value::as_str) {
            Some(name) => ToolMode::Named(name.to_string()),
            None => return Err(bad("tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}".into())),
        },
    };
    if tools.is_empty() {
        return match mode {
            ToolMode::Required | ToolMode::Named(_) => Err(bad(
                "tool_choice asks for a tool call, but `tools` is empty".into(),
            )),
            _ => Ok(ToolMode::None),
        };
    }
    if let Some(t) = tools.iter().find(|t| t.kind != "function") {
        return Err(ApiError::bad_request(format!(
            "tools of type `{}` are not supported (only `function`)",
            t.kind
        ))
        .with_param("tools"));
    }
    if let ToolMode::Named(name) = &mode {
        if !tools.iter().any(|t| &t.function.name == name) {
            return Err(bad(format!(
                "tool_choice names `{name}`, which is not in `tools`"
            )));
        }
    }
    Ok(mode)
}

fn call_schema(function: &Function) -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"const": function.name},
            "arguments": function.parameters.clone().unwrap_or_else(|| json!({"type": "object"})),
        },
        "required": ["name", "arguments"],
        "additionalProperties": false,
    })
}

/// The JSON Schema the output must satisfy under `mode` (`None` for [`ToolMode::None`]).
pub fn output_schema(tools: &[Tool], mode: &ToolMode) -> Option<Value> {
    let mut options: Vec<Value> = match mode {
        ToolMode::None => return None,
        ToolMode::Named(name) => tools
            .iter()
            .filter(|t| &t.function.name == name)
            .map(|t| call_schema(&t.function))
            .collect(),
        ToolMode::Auto | ToolMode::Required => {
            tools.iter().map(|t| call_schema(&t.function)).collect()
        }
    };
    if *mode == ToolMode::Auto {
        options.push(json!({
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
            "additionalProperties": false,
        }));
    }
    Some(if options.len() == 1 {
        options.pop().expect("one option")
    } else {
        json!({"anyOf": options})
    })
}

/// The system-message text that tells the model about the tools and the syntax.
pub fn instructions(tools: &[Tool], mode: &ToolMode) -> String {
    let listed: Vec<Value> = tools
        .iter()
        .filter(|t| match mode {
            ToolMode::Named(n) => &t.function.name == n,
            _ => true,
        })
        .map(|t| {
            json!({
                "name": t.function.name,
                "description": t.function.description,
                "parameters": t.function.parameters,
            })
        })
        .collect();
    let mut text = format!(
        "You can call these functions:\n{}\nTo call one, reply with a JSON object {{\"name\": <function name>, \"arguments\": <arguments object>}}.",
        serde_json::to_string(&listed).unwrap_or_default()
    );
    if *mode == ToolMode::Auto {
        text.push_str(" To answer without a call, reply with {\"content\": <your answer>}.");
    }
    text
}

/// A parsed answer under tool mode.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolAnswer {
    /// `(name, arguments as a JSON string)`.
    Call(String, String),
    /// A plain reply (`{"content": ...}`).
    Content(String),
}

/// Read the generated JSON back (`None` if it is not a complete call or reply, e.g. cut off
/// by the token limit).
pub fn parse_answer(text: &str) -> Option<ToolAnswer> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    if let (Some(name), Some(args)) = (
        value.get("name").and_then(Value::as_str),
        value.get("arguments"),
    ) {
        return Some(ToolAnswer::Call(name.to_string(), args.to_string()));
    }
    value
        .get("content")
        .and_then(Value::as_str)
        .map(|c| ToolAnswer::Content(c.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Tool> {
        serde_json::from_value(json!([
            {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}},
            {"type": "function", "function": {"name": "now"}}
        ]))
        .unwrap()
    }

    #[test]
    fn modes_follow_tool_choice() {
        let t = tools();
        assert_eq!(tool_mode(&None, &t).unwrap(), ToolMode::Auto);
        assert_eq!(
            tool_mode(&Some(json!("required")), &t).unwrap(),
            ToolMode::Required
        );
        assert_eq!(
            tool_mode(
                &Some(json!({"type": "function", "function": {"name": "now"}})),
                &t
            )
            .unwrap(),
            ToolMode::Named("now".into())
        );
        assert!(
            tool_mode(
                &Some(json!({"type": "function", "function": {"name": "nope"}})),
                &t
            )
            .is_err()
        );
        assert!(tool_mode(&Some(json!("required")), &[]).is_err());
        assert_eq!(tool_mode(&None, &[]).unwrap(), ToolMode::None);
    }

    #[test]
    fn schemas_fix_the_name_and_allow_a_reply_only_in_auto() {
        let t = tools();
        let named = output_schema(&t, &ToolMode::Named("add".into())).unwrap();
        assert_eq!(named["properties"]["name"]["const"], "add");
        let required = output_schema(&t, &ToolMode::Required).unwrap();
        assert_eq!(required["anyOf"].as_array().unwrap().len(), 2);
        let auto = output_schema(&t, &ToolMode::Auto).unwrap();
        assert_eq!(auto["anyOf"].as_array().unwrap().len(), 3);
        assert!(output_schema(&t, &ToolMode::None).is_none());
    }

    #[test]
    fn answers_parse_back() {
        assert_eq!(
            parse_answer(r#" {"name": "add", "arguments": {"a": 1}} "#),
            Some(ToolAnswer::Call("add".into(), r#"{"a":1}"#.into()))
        );
        assert_eq!(
            parse_answer(r#"{"content": "hi"}"#),
            Some(ToolAnswer::Content("hi".into()))
        );
        assert_eq!(parse_answer(r#"{"name": "add", "argu"#), None);
    }
}
