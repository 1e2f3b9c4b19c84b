//! `POST /v1/chat/completions`: OpenAI's chat API over the GGUF chat template.
//!
//! Messages (`system`/`developer`, `user`, `assistant`, `tool`; text content or text parts)
//! are rendered with the model's own template ([`Model::apply_chat_template`]) and the
//! assistant turn opened. The output is constrained by at most one of `response_format`
//! (`json_object`, `json_schema` with `schema` — `strict` or not, the output is held to
//! it), `tools` (see [`super::tools`]), llama-server's `grammar`/`json_schema`, or a
//! grammar in the `domino` object. The answer is OpenAI's `chat.completion`, or with
//! `stream` a series of `chat.completion.chunk` server-sent events ending in `[DONE]`
//! (with `stream_options.include_usage`, a last chunk carries `usage`).

use super::error::ApiError;
use super::request::{self, DominoOptions, NamedConstraint, Plan};
use super::sse::{StreamFormat, sse_response};
use super::tools::{self, Tool, ToolChoice};
use super::worker::{Finish, Outcome};
use super::{AppState, unix_time};
use crate::decode::regions::{DEFAULT_REASONING_END, TagPlan};
use crate::decode::tools::{Syntax, instructions, parse_calls, tag_plan};
use crate::grammar::GrammarSource;
use crate::runtime::{ChatMessage, Model};
use crate::vocab::TokenId;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The request body (fields OpenAI defines that are not listed here are ignored).
#[derive(Debug, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<MessageIn>,
    pub max_tokens: Option<usize>,
    pub max_completion_tokens: Option<usize>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    pub min_p: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<Value>,
    pub logprobs: Option<bool>,
    pub top_logprobs: Option<u32>,
    pub n: Option<u32>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
    pub response_format: Option<Value>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    pub tool_choice: Option<Value>,
    /// OpenAI's `parallel_tool_calls` (default true): several calls in one answer, or at
    /// most one.
    pub parallel_tool_calls: Option<bool>,
    /// llama-server's `reasoning_format`: `none` (default: the constraint applies from the
    /// first token and the text is returned as it is), `deepseek` or `auto` (free text until
    /// the end-of-reasoning marker, `domino.reasoning_end`, default `</think>`; then the
    /// constraint; the text before the marker is returned as `reasoning_content`).
    pub reasoning_format: Option<String>,
    /// llama-server's GBNF grammar field.
    pub grammar: Option<String>,
    /// llama-server's JSON Schema field.
    pub json_schema: Option<Value>,
    #[serde(default)]
    pub domino: DominoOptions,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

/// One message of the conversation.
#[derive(Debug, Deserialize)]
pub struct MessageIn {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
}

fn message_text(m: &MessageIn, index: usize, syntax: Syntax) -> Result<String, ApiError> {
    let param = format!("messages[{index}].content");
    let mut text = match &m.content {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for part in parts {
                match (
                    part.get("type").and_then(Value::as_str),
                    part.get("text").and_then(Value::as_str),
                ) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "content parts of type `{}` are not supported (text only)",
                            kind.unwrap_or("?")
                        ))
                        .with_param(param));
                    }
                }
            }
            out
        }
        _ => {
            return Err(
                ApiError::bad_request("content must be a string or an array of parts")
                    .with_param(param),
            );
        }
    };
    // An assistant's earlier tool calls, in the syntax the model is asked to use.
    for call in m.tool_calls.iter().flatten() {
        let name = call
            .pointer("/function/name")
            .cloned()
            .unwrap_or(Value::Null);
        let arguments = call
            .pointer("/function/arguments")
            .and_then(Value::as_str)
            .and_then(|a| serde_json::from_str::<Value>(a).ok())
            .unwrap_or(Value::Null);
        let key = if syntax == Syntax::Llama3 {
            "parameters"
        } else {
            "arguments"
        };
        let call = json!({"name": name, key: arguments}).to_string();
        text.push_str(&match syntax {
            Syntax::Hermes | Syntax::Generic => format!("<tool_call>\n{call}\n</tool_call>"),
            Syntax::Mistral => format!("[TOOL_CALLS][{call}]"),
            Syntax::Llama3 => call,
        });
    }
    Ok(text)
}

/// The conversation as the model's chat template renders it, tokenized.
fn prompt_tokens(
    model: &Model,
    request: &ChatRequest,
    tool_text: Option<String>,
    syntax: Syntax,
) -> Result<Vec<TokenId>, ApiError> {
    if request.messages.is_empty() {
        return Err(ApiError::bad_request("`messages` is empty").with_param("messages"));
    }
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    for (i, m) in request.messages.iter().enumerate() {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" | "assistant" | "tool" => m.role.as_str(),
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown role `{other}`: system, developer, user, assistant or tool"
                ))
                .with_param(format!("messages[{i}].role")));
            }
        };
        messages.push(ChatMessage {
            role: role.to_string(),
            content: message_text(m, i, syntax)?,
        });
    }
    if let Some(text) = tool_text {
        match messages.first_mut() {
            Some(first) if first.role == "system" => {
                first.content = format!("{}\n\n{text}", first.content);
            }
            _ => messages.insert(0, ChatMessage::system(text)),
        }
    }
    let rendered = model
        .apply_chat_template(&messages, true)
        .map_err(|e| ApiError::bad_request(e.to_string()).with_param("messages"))?;
    let mut tokens = model.tokenize(&rendered, true, true);
    let (bos, _) = model.bos();
    if tokens.len() >= 2 && tokens[0] == bos && tokens[1] == bos {
        tokens.remove(0);
    }
    Ok(tokens)
}

/// `response_format` as a constraint (`text` = none).
pub fn response_format(format: &Option<Value>) -> Result<Option<NamedConstraint>, ApiError> {
    let Some(format) = format else {
        return Ok(None);
    };
    let bad = |m: &str| ApiError::bad_request(m.to_string()).with_param("response_format");
    let named = |source| {
        Some(NamedConstraint {
            source,
            param: "response_format",
        })
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(named(match format.get("schema") {
            Some(schema) => GrammarSource::JsonSchema(schema.clone()),
            None => GrammarSource::Json,
        })),
        Some("json_schema") => {
            let schema = format
                .pointer("/json_schema/schema")
                .or_else(|| format.get("schema"))
                .ok_or_else(|| bad("response_format json_schema needs `json_schema.schema`"))?;
            Ok(named(GrammarSource::JsonSchema(schema.clone())))
        }
        _ => Err(bad(
            "response_format.type must be text, json_object or json_schema",
        )),
    }
}

/// Finish reasons as OpenAI names them.
pub fn openai_finish(finish: &Finish) -> &'static str {
    match finish {
        Finish::Eos | Finish::GrammarEnd | Finish::Stop(_) | Finish::Cancelled => "stop",
        Finish::Length | Finish::Timeout => "length",
    }
}

/// OpenAI's `usage`.
pub fn usage(prompt_tokens: usize, outcome: &Outcome) -> Value {
    let completion = outcome.tokens.len();
    json!({"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion})
}

/// Chat `logprobs.content`: each token with its log-probability and the `top_logprobs` most
/// likely tokens at its position (the unmasked model's: a constraint may have chosen a token
/// that is not among them).
fn logprobs_content(model: &Model, outcome: &Outcome) -> Value {
    let vocab = model.vocabulary();
    let entry = |t: TokenId, lp: f32| {
        let bytes = vocab.bytes(t);
        json!({"token": String::from_utf8_lossy(bytes), "logprob": lp, "bytes": bytes})
    };
    let items: Vec<Value> = outcome
        .tokens
        .iter()
        .zip(&outcome.logprobs)
        .enumerate()
        .map(|(i, (&t, &lp))| {
            let mut item = entry(t, lp);
            let top = outcome.top_logprobs.get(i).map_or(&[][..], Vec::as_slice);
            item["top_logprobs"] = top.iter().map(|&(a, alp)| entry(a, alp)).collect();
            item
        })
        .collect();
    json!({"content": items})
}

fn call_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "call_{:x}{:04x}",
        unix_time(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// How a chat answer is read back: tool calls, reasoning.
#[derive(Clone, Debug)]
struct Reply {
    tools: Vec<Tool>,
    choice: ToolChoice,
    syntax: Syntax,
    /// The end-of-reasoning marker when `reasoning_format` splits the text.
    reasoning_end: Option<String>,
}

impl Reply {
    /// Whether the text is read back at the end (not streamed as it comes).
    fn buffered(&self) -> bool {
        self.choice != ToolChoice::None || self.reasoning_end.is_some()
    }
}

/// The assistant message and finish reason for an outcome.
fn message(outcome: &Outcome, reply: &Reply) -> (Value, &'static str) {
    let finish = openai_finish(&outcome.finish);
    let mut text = outcome.text.as_str();
    let mut reasoning = None;
    if let Some(end) = &reply.reasoning_end
        && let Some(at) = text.find(end.as_str())
    {
        let thought = text[..at].trim();
        reasoning = Some(
            thought
                .strip_prefix("<think>")
                .unwrap_or(thought)
                .trim()
                .to_string(),
        );
        text = &text[at + end.len()..];
    }
    let mut message = json!({"role": "assistant", "content": text});
    if let Some(r) = reasoning {
        message["reasoning_content"] = Value::String(r);
    }
    if reply.choice == ToolChoice::None {
        return (message, finish);
    }
    match parse_calls(text, &reply.tools, reply.syntax) {
        Ok(parsed) if !parsed.calls.is_empty() => {
            let calls: Vec<Value> = parsed
                .calls
                .iter()
                .map(|c| {
                    json!({"id": call_id(), "type": "function", "function": {
                        "name": c.name, "arguments": c.arguments.to_string()}})
                })
                .collect();
            message["content"] = if parsed.content.is_empty() {
                Value::Null
            } else {
                Value::String(parsed.content)
            };
            message["tool_calls"] = Value::Array(calls);
            (message, "tool_calls")
        }
        // No call (or one the grammar could not finish): the text as it is.
        _ => (message, finish),
    }
}

/// The handler.
pub async fn completions(
    state: Arc<AppState>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let request: ChatRequest = request::parse_body(&body)?;
    if request.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("only n = 1 is supported").with_param("n"));
    }
    let choice = tools::tool_choice(&request.tool_choice, &request.tools)?;
    let syntax = Syntax::detect(state.model.chat_template().ok().as_deref());
    let mut constraint = request::one_constraint(vec![
        response_format(&request.response_format)?,
        request.grammar.clone().map(|g| NamedConstraint {
            source: GrammarSource::Gbnf(g),
            param: "grammar",
        }),
        request.json_schema.clone().map(|s| NamedConstraint {
            source: GrammarSource::JsonSchema(s),
            param: "json_schema",
        }),
        request.domino.constraint()?,
    ])?;
    let reasoning_end = match request.reasoning_format.as_deref() {
        None | Some("none") => None,
        Some("deepseek") | Some("auto") => Some(
            request
                .domino
                .reasoning_end
                .clone()
                .unwrap_or_else(|| DEFAULT_REASONING_END.to_string()),
        ),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown reasoning_format `{other}`: none, deepseek or auto"
            ))
            .with_param("reasoning_format"));
        }
    };
    if reasoning_end.as_deref() == Some("") {
        return Err(ApiError::bad_request("domino.reasoning_end is empty")
            .with_param("domino.reasoning_end"));
    }
    let parallel = request.parallel_tool_calls.unwrap_or(true);
    let regions = match (
        tag_plan(&request.tools, &choice, syntax, parallel),
        &reasoning_end,
    ) {
        (Some(plan), _) => Some((plan, "tools")),
        (None, Some(end)) => constraint
            .take()
            .map(|named| (TagPlan::reasoning(end, named.source), named.param)),
        (None, None) => None,
    };
    let tool_text =
        (choice != ToolChoice::None).then(|| instructions(&request.tools, &choice, syntax));
    let prompt = prompt_tokens(&state.model, &request, tool_text, syntax)?;
    let reply = Reply {
        tools: request.tools.clone(),
        choice,
        syntax,
        reasoning_end,
    };
    let logprobs = request.logprobs.unwrap_or(false);
    let top_logprobs = match request.top_logprobs {
        None => 0,
        Some(n) if n > 20 => {
            return Err(ApiError::bad_request(format!(
                "top_logprobs is {n}: at most 20 alternatives per token"
            ))
            .with_param("top_logprobs"));
        }
        Some(n) if n > 0 && !logprobs => {
            return Err(
                ApiError::bad_request("top_logprobs needs \"logprobs\": true")
                    .with_param("top_logprobs"),
            );
        }
        Some(n) => n as usize,
    };
    let plan = Plan {
        prompt,
        max_tokens: request.max_completion_tokens.or(request.max_tokens),
        sampling: request::sampling(
            request.temperature,
            request.top_p,
            request.top_k,
            request.min_p,
            request.seed,
        )?,
        logprobs,
        top_logprobs,
        stop: request::stop_strings(&request.stop)?,
        constraint,
        regions,
        // The prompt ends in the template's assistant header, not in the user's text.
        token_healing: false,
        domino: request.domino.clone(),
    };
    let started = request::start(&state, plan).await?;
    let prompt_tokens = started.prompt_tokens;
    let id = format!("chatcmpl-{:x}{:06x}", unix_time(), rand_suffix());
    let created = unix_time();
    if request.stream {
        let format = ChatStream {
            id,
            created,
            model: state.model_id.clone(),
            logprobs: logprobs.then(|| state.model.clone()),
            reply,
            buffered: String::new(),
            include_usage: request
                .stream_options
                .as_ref()
                .is_some_and(|o| o.include_usage),
            prompt_tokens,
        };
        return Ok(sse_response(started, format));
    }
    let outcome = request::finish(started).await?;
    let (message, finish_reason) = message(&outcome, &reply);
    let logprobs = if logprobs && !outcome.logprobs.is_empty() {
        logprobs_content(&state.model, &outcome)
    } else {
        Value::Null
    };
    let mut body = json!({
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": state.model_id,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason}],
        "usage": usage(prompt_tokens, &outcome),
    });
    if outcome.finish == Finish::Timeout {
        body["timed_out"] = Value::Bool(true);
    }
    Ok(axum::Json(body).into_response())
}

/// A per-process counter mixed into response ids so that two in one second differ.
pub fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `chat.completion.chunk` events. Log-probabilities, when asked for, come with the final
/// chunk: a token forced by the grammar gets its log-probability only from the next forward
/// pass, so they are all known only at the end (concatenated, the chunks' `logprobs.content`
/// is the non-streamed answer's).
struct ChatStream {
    id: String,
    created: u64,
    model: String,
    logprobs: Option<Arc<Model>>,
    reply: Reply,
    /// Under tools or reasoning the text is read back at the end, so it is held until then.
    buffered: String,
    include_usage: bool,
    prompt_tokens: usize,
}

impl ChatStream {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
        })
    }
}

impl StreamFormat for ChatStream {
    fn start(&mut self) -> Vec<Value> {
        vec![self.chunk(json!({"role": "assistant", "content": ""}), None)]
    }

    fn delta(&mut self, text: String) -> Vec<Value> {
        if self.reply.buffered() {
            self.buffered.push_str(&text);
            return Vec::new();
        }
        vec![self.chunk(json!({"content": text}), None)]
    }

    fn done(&mut self, outcome: Outcome) -> Vec<Value> {
        let mut frames = Vec::new();
        let finish = if self.reply.buffered() {
            let (message, finish) = message(&outcome, &self.reply);
            let mut delta = json!({"content": message["content"]});
            if let Some(r) = message.get("reasoning_content") {
                delta["reasoning_content"] = r.clone();
            }
            if let Some(calls) = message.get("tool_calls") {
                let mut calls = calls.clone();
                for (i, c) in calls.as_array_mut().into_iter().flatten().enumerate() {
                    c["index"] = json!(i);
                }
                delta["tool_calls"] = calls;
            }
            frames.push(self.chunk(delta, None));
            finish
        } else {
            openai_finish(&outcome.finish)
        };
        let mut last = self.chunk(json!({}), Some(finish));
        if let Some(model) = &self.logprobs
            && !outcome.logprobs.is_empty()
        {
            last["choices"][0]["logprobs"] = logprobs_content(model, &outcome);
        }
        if outcome.finish == Finish::Timeout {
            last["timed_out"] = Value::Bool(true);
        }
        frames.push(last);
        if self.include_usage {
            frames.push(json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [], "usage": usage(self.prompt_tokens, &outcome),
            }));
        }
        frames
    }

    fn done_marker(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_calls_are_rendered_in_the_templates_syntax() {
        let m: MessageIn = serde_json::from_value(json!({
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function",
                "function": {"name": "add", "arguments": "{\"a\": 1}"}}]
        }))
        .unwrap();
        assert_eq!(
            message_text(&m, 0, Syntax::Generic).unwrap(),
            "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"
        );
        assert_eq!(
            message_text(&m, 0, Syntax::Mistral).unwrap(),
            "[TOOL_CALLS][{\"name\":\"add\",\"arguments\":{\"a\":1}}]"
        );
        assert_eq!(
            message_text(&m, 0, Syntax::Llama3).unwrap(),
            "{\"name\":\"add\",\"parameters\":{\"a\":1}}"
        );
        // What is rendered parses back as the same call.
        let tools: Vec<Tool> = serde_json::from_value(json!([
            {"type": "function", "function": {"name": "add"}}
        ]))
        .unwrap();
        for syntax in [Syntax::Generic, Syntax::Mistral, Syntax::Llama3] {
            let text = message_text(&m, 0, syntax).unwrap();
            let parsed = parse_calls(&text, &tools, syntax).unwrap();
            assert_eq!(parsed.calls.len(), 1, "{syntax:?}");
            assert_eq!(parsed.calls[0].arguments, json!({"a": 1}));
        }
    }
}
