//! Tool calls: from OpenAI `tools` JSON and the model's chat template, the constraint that
//! lets the model write calls in its own syntax with arguments that validate, the system
//! message that describes the tools, and the parser that reads the calls back out.
//!
//! # Syntaxes ([`Syntax::detect`], by the chat template's text)
//! - **Hermes / Qwen** (the template mentions `<tool_call>`): each call is
//!   `<tool_call>\n{"name": NAME, "arguments": ARGS}\n</tool_call>`. The name is inside the
//!   JSON, so there is one region, triggered by `<tool_call>`, whose grammar is the `anyOf`
//!   of the offered functions' call objects.
//! - **Llama 3.x** (the template mentions `<|python_tag|>` or `"parameters"` with `ipython`):
//!   a call is the JSON `{"name": NAME, "parameters": ARGS}`. One region per tool, triggered
//!   by `{"name": "NAME"` (the opening and the name), grammar `, "parameters": ARGS}`.
//! - **Mistral** (the template mentions `[TOOL_CALLS]`): `[TOOL_CALLS]` then a JSON array of
//!   call objects `[{"name": NAME, "arguments": ARGS}, …]`; one region, triggered by
//!   `[TOOL_CALLS]`.
//! - **Generic** (every other template, SmolLM2's included, which has no tool syntax):
//!   the Hermes syntax, described to the model in the system message.
//!
//! DeepSeek's syntax (`<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME…`) puts special
//! tokens inside a call, which a region grammar cannot contain: DeepSeek templates get the
//! generic syntax.
//!
//! # `tool_choice` and `parallel_tool_calls`
//! `none`: no tools, no constraint. `auto`: free text with call regions anywhere (none
//! needed). `required` / a named function: the output is constrained from its first token to
//! calls (of that function), then the end — a model that would otherwise talk first cannot
//! leave the call out. `parallel_tool_calls` (OpenAI's request field, default true) decides
//! how many: true allows several (`auto`: any number of call regions; forced: one or more
//! calls, each on its own line; Mistral: an array of any length), false at most one (`auto`:
//! `max_regions` 1, after which free text cannot open another call; forced: exactly one;
//! Mistral: `maxItems` 1).
//!
//! The tools are described in a system message ([`instructions`]): llama.cpp's legacy
//! template engine does not render a `tools` field. Parsing ([`parse_calls`]) finds every
//! call in the output by the same syntax and validates its arguments with the `jsonschema`
//! crate against the function's `parameters`.

use super::regions::{After, TagPlan, TagRegion};
use crate::grammar::GrammarSource;
use serde::Deserialize;
use serde_json::{Value, json};

/// One entry of `tools` (`{"type": "function", "function": {...}}`).
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

impl Function {
    /// The arguments' schema (`{"type": "object"}` when none is given).
    pub fn parameters_schema(&self) -> Value {
        self.parameters
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}))
    }
}

/// Parse a `tools` list: an array of `{"type": "function", "function": {...}}` (OpenAI), or of
/// bare function objects `{"name", "description", "parameters"}`.
pub fn parse_tools(value: &Value) -> Result<Vec<Tool>, String> {
    let Some(items) = value.as_array() else {
        return Err("`tools` must be a JSON array".into());
    };
    let mut tools = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let tool = if item.get("function").is_some() {
            serde_json::from_value::<Tool>(item.clone())
        } else {
            serde_json::from_value::<Function>(item.clone()).map(|function| Tool {
                kind: "function".into(),
                function,
            })
        }
        .map_err(|e| format!("tools[{i}]: {e}"))?;
        if tool.kind != "function" {
            return Err(format!(
                "tools[{i}]: tools of type `{}` are not supported (only `function`)",
                tool.kind
            ));
        }
        if tool.function.name.is_empty() {
            return Err(format!("tools[{i}]: the function name is empty"));
        }
        if let Some(p) = &tool.function.parameters
            && let Err(e) = jsonschema::validator_for(p)
        {
            return Err(format!(
                "tools[{i}] ({}): `parameters` is not a valid JSON Schema: {e}",
                tool.function.name
            ));
        }
        if tools
            .iter()
            .any(|t: &Tool| t.function.name == tool.function.name)
        {
            return Err(format!(
                "tools[{i}]: a second function named `{}`",
                tool.function.name
            ));
        }
        tools.push(tool);
    }
    Ok(tools)
}

/// What the model may answer (`tool_choice`).
#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    /// Tools are not offered.
    None,
    /// Free text, with calls where the model writes them.
    Auto,
    /// At least one call.
    Required,
    /// Calls to this function.
    Named(String),
}

impl ToolChoice {
    /// `none`, `auto`, `required` or a function name.
    pub fn parse(s: &str) -> ToolChoice {
        match s {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            name => ToolChoice::Named(name.to_string()),
        }
    }

    /// The choice checked against `tools`: a named function must exist; `required` or a
    /// name with no tools is an error; no tools means `none`.
    pub fn checked(self, tools: &[Tool]) -> Result<ToolChoice, String> {
        if tools.is_empty() {
            return match self {
                ToolChoice::Required | ToolChoice::Named(_) => {
                    Err("tool_choice asks for a tool call, but there are no tools".into())
                }
                _ => Ok(ToolChoice::None),
            };
        }
        if let ToolChoice::Named(name) = &self
            && !tools.iter().any(|t| &t.function.name == name)
        {
            return Err(format!(
                "tool_choice names `{name}`, which is not among the tools ({})",
                tools
                    .iter()
                    .map(|t| t.function.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(self)
    }
}

/// A tool-call syntax (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Hermes,
    Llama3,
    Mistral,
    Generic,
}

impl Syntax {
    /// The syntax a chat template's text uses (`None`: no template → generic).
    pub fn detect(template: Option<&str>) -> Syntax {
        let Some(t) = template else {
            return Syntax::Generic;
        };
        if t.contains("<tool_call>") {
            Syntax::Hermes
        } else if t.contains("[TOOL_CALLS]") {
            Syntax::Mistral
        } else if t.contains("<|python_tag|>")
            || (t.contains("ipython") && t.contains("\"parameters\""))
        {
            Syntax::Llama3
        } else {
            Syntax::Generic
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Syntax::Hermes => "hermes",
            Syntax::Llama3 => "llama3",
            Syntax::Mistral => "mistral",
            Syntax::Generic => "generic",
        }
    }

    /// The key the arguments go under.
    fn arguments_key(self) -> &'static str {
        match self {
            Syntax::Llama3 => "parameters",
            _ => "arguments",
        }
    }
}

/// One function's call object schema: `{"name": const NAME, ARGS_KEY: parameters}`.
fn call_schema(function: &Function, args_key: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"const": function.name},
            args_key: function.parameters_schema(),
        },
        "required": ["name", args_key],
        "additionalProperties": false,
    })
}

/// The tools `choice` offers.
fn offered<'t>(tools: &'t [Tool], choice: &ToolChoice) -> Vec<&'t Tool> {
    tools
        .iter()
        .filter(|t| match choice {
            ToolChoice::Named(n) => &t.function.name == n,
            ToolChoice::None => false,
            _ => true,
        })
        .collect()
}

/// The regions for `syntax` and `choice` (`None` for [`ToolChoice::None`]); see the module
/// doc. `required` and a named function make the plan start in a region
/// ([`TagPlan::from_start`]); `parallel` (`parallel_tool_calls`) allows more than one call.
pub fn tag_plan(
    tools: &[Tool],
    choice: &ToolChoice,
    syntax: Syntax,
    parallel: bool,
) -> Option<TagPlan> {
    let offered = offered(tools, choice);
    if offered.is_empty() {
        return None;
    }
    let key = syntax.arguments_key();
    let any_call = || {
        let options: Vec<Value> = offered
            .iter()
            .map(|t| call_schema(&t.function, key))
            .collect();
        if options.len() == 1 {
            options[0].clone()
        } else {
            json!({"anyOf": options})
        }
    };
    let regions = match syntax {
        Syntax::Hermes | Syntax::Generic => vec![TagRegion {
            name: "tool_call".into(),
            begin: "<tool_call>".into(),
            prefix: "\n".into(),
            source: GrammarSource::JsonSchema(any_call()),
            end: "\n</tool_call>".into(),
        }],
        Syntax::Mistral => vec![TagRegion {
            name: "tool_calls".into(),
            begin: "[TOOL_CALLS]".into(),
            prefix: String::new(),
            source: GrammarSource::JsonSchema(if parallel {
                json!({"type": "array", "items": any_call(), "minItems": 1})
            } else {
                json!({"type": "array", "items": any_call(), "minItems": 1, "maxItems": 1})
            }),
            end: String::new(),
        }],
        Syntax::Llama3 => offered
            .iter()
            .map(|t| TagRegion {
                name: t.function.name.clone(),
                begin: format!(
                    "{{\"name\": {}",
                    serde_json::to_string(&t.function.name).unwrap_or_default()
                ),
                prefix: ", \"parameters\": ".into(),
                source: GrammarSource::JsonSchema(t.function.parameters_schema()),
                end: "}".into(),
            })
            .collect(),
    };
    let forced = matches!(choice, ToolChoice::Required | ToolChoice::Named(_));
    Some(TagPlan {
        regions,
        // Forced: calls from the first token, one per line when parallel (`After::Free` repeats
        // the region), else exactly one and then the end.
        after: if !forced || parallel {
            After::Free
        } else {
            After::End
        },
        min_regions: usize::from(forced),
        max_regions: (!parallel).then_some(1),
        from_start: forced,
    })
}

/// The system-message text that describes the tools and the syntax to the model.
pub fn instructions(tools: &[Tool], choice: &ToolChoice, syntax: Syntax) -> String {
    let listed: Vec<Value> = offered(tools, choice)
        .iter()
        .map(|t| {
            json!({
                "name": t.function.name,
                "description": t.function.description,
                "parameters": t.function.parameters_schema(),
            })
        })
        .collect();
    let list = serde_json::to_string(&listed).unwrap_or_default();
    let how = match syntax {
        Syntax::Hermes | Syntax::Generic => {
            "To call a function, write <tool_call>\n{\"name\": <function name>, \"arguments\": <arguments object>}\n</tool_call>"
        }
        Syntax::Mistral => {
            "To call functions, write [TOOL_CALLS] followed by a JSON array [{\"name\": <function name>, \"arguments\": <arguments object>}]"
        }
        Syntax::Llama3 => {
            "To call a function, reply with the JSON {\"name\": <function name>, \"parameters\": <arguments object>}"
        }
    };
    let when = match choice {
        ToolChoice::Auto => " when it helps; otherwise answer in plain text.",
        _ => ".",
    };
    format!("You can call these functions:\n{list}\n{how}{when}")
}

/// A call read back from the output.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub name: String,
    /// The arguments object.
    pub arguments: Value,
}

/// What the output says: the text outside calls, and the calls.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ParsedOutput {
    /// The free text with the calls cut out (trimmed).
    pub content: String,
    pub calls: Vec<ToolCall>,
}

/// Find the calls in `text` by `syntax`, checking each one's name and validating its
/// arguments against the function's `parameters`. An incomplete last call (cut by the token
/// limit) stays in the content; a complete call whose name or arguments are wrong is an error.
pub fn parse_calls(text: &str, tools: &[Tool], syntax: Syntax) -> Result<ParsedOutput, String> {
    let mut out = ParsedOutput::default();
    let mut content = String::new();
    let mut rest = text;
    let key = syntax.arguments_key();
    loop {
        let (open, close) = match syntax {
            Syntax::Hermes | Syntax::Generic => ("<tool_call>", Some("</tool_call>")),
            Syntax::Mistral => ("[TOOL_CALLS]", None),
            Syntax::Llama3 => ("{\"name\"", None),
        };
        let Some(at) = rest.find(open) else {
            content.push_str(rest);
            break;
        };
        content.push_str(&rest[..at]);
        let body_start = if syntax == Syntax::Llama3 {
            at
        } else {
            at + open.len()
        };
        let body = &rest[body_start..];
        // The JSON value at the start of the body (after whitespace).
        let trimmed = body.trim_start();
        let skipped = body.len() - trimmed.len();
        let mut stream = serde_json::Deserializer::from_str(trimmed).into_iter::<Value>();
        let (value, used) = match stream.next() {
            Some(Ok(v)) => (v, stream.byte_offset()),
            _ => {
                // Not a complete call: leave it in the content.
                content.push_str(&rest[at..]);
                break;
            }
        };
        let mut end = body_start + skipped + used;
        if let Some(close) = close {
            let after = &rest[end..];
            let t = after.trim_start();
            if let Some(stripped) = t.strip_prefix(close) {
                end = rest.len() - stripped.len();
            } else {
                content.push_str(&rest[at..]);
                break;
            }
        }
        let items = match (syntax, value) {
            (Syntax::Mistral, Value::Array(items)) => items,
            (_, v) => vec![v],
        };
        for item in items {
            out.calls.push(check_call(&item, key, tools)?);
        }
        rest = &rest[end..];
    }
    out.content = content.trim().to_string();
    Ok(out)
}

/// One call object checked against the tools.
fn check_call(item: &Value, key: &str, tools: &[Tool]) -> Result<ToolCall, String> {
    let name = item
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("a tool call without a name: {item}"))?;
    let tool = tools
        .iter()
        .find(|t| t.function.name == name)
        .ok_or_else(|| format!("a call to `{name}`, which is not among the tools"))?;
    let arguments = item
        .get(key)
        .cloned()
        .ok_or_else(|| format!("the call to `{name}` has no `{key}`"))?;
    let schema = tool.function.parameters_schema();
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("`{name}`: `parameters` is not a valid JSON Schema: {e}"))?;
    if let Some(e) = validator.iter_errors(&arguments).next() {
        return Err(format!(
            "the arguments of `{name}` do not validate: {e} (at {})",
            e.instance_path()
        ));
    }
    Ok(ToolCall {
        name: name.to_string(),
        arguments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<Tool> {
        parse_tools(&json!([
            {"type": "function", "function": {"name": "add", "description": "a + b", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
            {"name": "now"}
        ]))
        .unwrap()
    }

    #[test]
    fn templates_pick_their_syntax() {
        assert_eq!(
            Syntax::detect(Some("{% if tools %}<tool_call>{% endif %}")),
            Syntax::Hermes
        );
        assert_eq!(Syntax::detect(Some("[TOOL_CALLS] {{x}}")), Syntax::Mistral);
        assert_eq!(
            Syntax::detect(Some("<|start_header_id|>ipython ... <|python_tag|>")),
            Syntax::Llama3
        );
        assert_eq!(Syntax::detect(Some("<|im_start|>user")), Syntax::Generic);
        assert_eq!(Syntax::detect(None), Syntax::Generic);
    }

    #[test]
    fn bad_tools_and_choices_are_errors() {
        assert!(parse_tools(&json!({"name": "x"})).is_err());
        assert!(parse_tools(&json!([{"type": "retrieval", "function": {"name": "x"}}])).is_err());
        assert!(parse_tools(&json!([{"name": "x"}, {"name": "x"}])).is_err());
        assert!(parse_tools(&json!([{"name": "x", "parameters": {"type": 7}}])).is_err());
        let t = tools();
        assert!(ToolChoice::parse("nope").checked(&t).is_err());
        assert_eq!(
            ToolChoice::parse("add").checked(&t),
            Ok(ToolChoice::Named("add".into()))
        );
        assert!(ToolChoice::Required.checked(&[]).is_err());
        assert_eq!(ToolChoice::Auto.checked(&[]), Ok(ToolChoice::None));
    }

    #[test]
    fn plans_follow_the_choice() {
        let t = tools();
        assert!(tag_plan(&t, &ToolChoice::None, Syntax::Hermes, true).is_none());
        let auto = tag_plan(&t, &ToolChoice::Auto, Syntax::Hermes, true).unwrap();
        assert_eq!((auto.min_regions, auto.from_start), (0, false));
        let req = tag_plan(&t, &ToolChoice::Required, Syntax::Generic, true).unwrap();
        assert_eq!((req.min_regions, req.from_start), (1, true));
        let llama = tag_plan(&t, &ToolChoice::Named("now".into()), Syntax::Llama3, true).unwrap();
        assert_eq!(llama.regions.len(), 1);
        assert_eq!(llama.regions[0].begin, "{\"name\": \"now\"");
        let all = tag_plan(&t, &ToolChoice::Auto, Syntax::Llama3, true).unwrap();
        assert_eq!(all.regions.len(), 2);
        // parallel_tool_calls: false caps the calls at one.
        let auto = tag_plan(&t, &ToolChoice::Auto, Syntax::Hermes, false).unwrap();
        assert_eq!((auto.after, auto.max_regions), (After::Free, Some(1)));
        let auto = tag_plan(&t, &ToolChoice::Auto, Syntax::Hermes, true).unwrap();
        assert_eq!((auto.after, auto.max_regions), (After::Free, None));
    }

    /// The language of a forced (`required`) plan: one call, or several on their own lines
    /// when `parallel` — checked with the reference recognizer on the compiled grammar.
    #[test]
    fn parallel_tool_calls_decide_how_many_forced_calls_the_grammar_accepts() {
        use crate::grammar::reference::ReferenceRecognizer;
        let t = tools();
        let accepts = |parallel: bool, syntax: Syntax, text: &str| {
            let plan = tag_plan(&t, &ToolChoice::Required, syntax, parallel).unwrap();
            let ir = crate::grammar::lower::lower(
                &plan
                    .whole_def(&crate::grammar::CompileOptions::default())
                    .unwrap(),
            )
            .unwrap();
            let r = ReferenceRecognizer::new(&ir).unwrap();
            let mut s = r.start();
            for &b in text.as_bytes() {
                match r.feed(&s, b) {
                    Some(n) => s = n,
                    None => return false,
                }
            }
            r.is_accepting(&s)
        };
        let one = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
        let two = format!(
            "{one}\n<tool_call>\n{{\"name\": \"add\", \"arguments\": {{\"a\": 1, \"b\": 2}}}}\n</tool_call>"
        );
        for parallel in [true, false] {
            assert!(accepts(parallel, Syntax::Generic, one), "{parallel}");
            assert_eq!(accepts(parallel, Syntax::Generic, &two), parallel);
        }
        let m1 = "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]";
        let m2 = "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"now\", \"arguments\": {}}]";
        for parallel in [true, false] {
            assert!(accepts(parallel, Syntax::Mistral, m1), "{parallel}");
            assert_eq!(accepts(parallel, Syntax::Mistral, m2), parallel);
        }
    }

    #[test]
    fn calls_parse_back_and_validate() {
        let t = tools();
        let p = parse_calls(
            "Sure.<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call> done",
            &t,
            Syntax::Hermes,
        )
        .unwrap();
        assert_eq!(p.content, "Sure. done");
        assert_eq!(
            p.calls,
            vec![ToolCall {
                name: "add".into(),
                arguments: json!({"a": 1, "b": 2})
            }]
        );
        let m = parse_calls(
            "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}]",
            &t,
            Syntax::Mistral,
        )
        .unwrap();
        assert_eq!(m.calls.len(), 2);
        let l = parse_calls(
            "{\"name\": \"add\", \"parameters\": {\"a\": 3, \"b\": 4}}",
            &t,
            Syntax::Llama3,
        )
        .unwrap();
        assert_eq!(l.calls[0].arguments, json!({"a": 3, "b": 4}));
        // Arguments that do not validate, or an unknown function, are errors.
        assert!(
            parse_calls(
                "<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": \"x\"}}</tool_call>",
                &t,
                Syntax::Hermes
            )
            .is_err()
        );
        assert!(
            parse_calls(
                "<tool_call>{\"name\": \"sub\", \"arguments\": {}}</tool_call>",
                &t,
                Syntax::Hermes
            )
            .is_err()
        );
        // A call cut short stays text.
        let cut = parse_calls("<tool_call>{\"name\": \"ad", &t, Syntax::Hermes).unwrap();
        assert!(cut.calls.is_empty());
        assert_eq!(cut.content, "<tool_call>{\"name\": \"ad");
    }
}
