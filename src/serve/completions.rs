//! Text completion: OpenAI's `POST /v1/completions` and llama-server's `POST /completion`.
//!
//! Both take a raw prompt (tokenized with BOS and with special-token text parsed, as
//! llama-server does; `/completion` also takes token ids) and the same constraint fields as
//! chat (`grammar` GBNF, `json_schema`, `response_format`, the `domino` object). They differ
//! in names and shapes: OpenAI's `max_tokens` (default 16), `logprobs`, `text_completion`
//! objects and a stream ending in `[DONE]`; llama-server's `n_predict` (default -1: until
//! the context ends), `n_probs`, `content`/`stop`/`stop_type`/`timings` and a stream whose
//! last event has `"stop": true`.

use super::chat::{openai_finish, rand_suffix, response_format, usage};
use super::error::ApiError;
use super::request::{self, DominoOptions, NamedConstraint, Plan};
use super::sse::{StreamFormat, sse_response};
use super::worker::{Finish, Outcome};
use super::{AppState, unix_time};
use crate::grammar::GrammarSource;
use crate::runtime::Model;
use crate::vocab::TokenId;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// The fields both endpoints accept.
#[derive(Debug, Deserialize)]
pub struct CompletionRequest {
    #[serde(default)]
    pub prompt: Value,
    /// OpenAI.
    pub max_tokens: Option<usize>,
    /// llama-server (-1 = unlimited).
    pub n_predict: Option<i64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    pub min_p: Option<f32>,
    pub seed: Option<i64>,
    pub stop: Option<Value>,
    /// OpenAI: per-token log-probabilities when > 0 (alternatives are not listed).
    pub logprobs: Option<u32>,
    /// llama-server: per-token log-probabilities when > 0.
    pub n_probs: Option<u32>,
    pub n: Option<u32>,
    pub echo: Option<bool>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<super::chat::StreamOptions>,
    pub grammar: Option<String>,
    pub json_schema: Option<Value>,
    pub response_format: Option<Value>,
    #[serde(default)]
    pub domino: DominoOptions,
}

fn prompt_tokens(model: &Model, prompt: &Value, allow_ids: bool) -> Result<Vec<TokenId>, ApiError> {
    let bad = || {
        ApiError::bad_request(if allow_ids {
            "`prompt` must be a string or an array of token ids"
        } else {
            "`prompt` must be a string (or an array of one string)"
        })
        .with_param("prompt")
    };
    match prompt {
        Value::String(s) => Ok(model.tokenize(s, true, true)),
        Value::Array(items) if items.len() == 1 && items[0].is_string() => {
            Ok(model.tokenize(items[0].as_str().unwrap_or_default(), true, true))
        }
        Value::Array(items) if allow_ids => {
            let n_vocab = model.n_vocab() as u64;
            items
                .iter()
                .map(|v| {
                    v.as_u64()
                        .filter(|&t| t < n_vocab)
                        .map(|t| TokenId(t as u32))
                        .ok_or_else(bad)
                })
                .collect()
        }
        _ => Err(bad()),
    }
}

fn plan(state: &AppState, r: &CompletionRequest, llama: bool) -> Result<Plan, ApiError> {
    if r.n.is_some_and(|n| n != 1) {
        return Err(ApiError::bad_request("only n = 1 is supported").with_param("n"));
    }
    if r.echo == Some(true) {
        return Err(ApiError::bad_request("echo is not supported").with_param("echo"));
    }
    let constraint = request::one_constraint(vec![
        response_format(&r.response_format)?,
        r.grammar.clone().map(|g| NamedConstraint {
            source: GrammarSource::Gbnf(g),
            param: "grammar",
        }),
        r.json_schema.clone().map(|s| NamedConstraint {
            source: GrammarSource::JsonSchema(s),
            param: "json_schema",
        }),
        r.domino.constraint()?,
    ])?;
    let max_tokens = if llama {
        match r.n_predict {
            None => None,
            Some(n) if n < 0 => None,
            Some(n) => Some(n as usize),
        }
    } else {
        Some(r.max_tokens.unwrap_or(16))
    };
    let wants_logprobs = if llama { r.n_probs } else { r.logprobs };
    let (limit, param) = if llama {
        (100, "n_probs")
    } else {
        (20, "logprobs")
    };
    if let Some(n) = wants_logprobs.filter(|&n| n > limit) {
        return Err(ApiError::bad_request(format!(
            "{param} is {n}: at most {limit} alternatives per token"
        ))
        .with_param(param));
    }
    Ok(Plan {
        prompt: prompt_tokens(&state.model, &r.prompt, llama)?,
        max_tokens,
        sampling: request::sampling(r.temperature, r.top_p, r.top_k, r.min_p, r.seed)?,
        logprobs: wants_logprobs.is_some_and(|n| n > 0),
        top_logprobs: wants_logprobs.unwrap_or(0) as usize,
        stop: request::stop_strings(&r.stop)?,
        constraint,
        regions: None,
        token_healing: r.domino.token_healing.unwrap_or(true),
        domino: r.domino.clone(),
    })
}

fn token_text(model: &Model, t: TokenId) -> String {
    String::from_utf8_lossy(model.vocabulary().bytes(t)).into_owned()
}

/// OpenAI's completion `logprobs` object: tokens, their log-probabilities, per position the
/// most likely tokens (text → log-probability) and each token's offset in the text.
fn completion_logprobs(model: &Model, outcome: &Outcome) -> Value {
    let tokens: Vec<String> = outcome
        .tokens
        .iter()
        .map(|&t| token_text(model, t))
        .collect();
    let mut offsets = Vec::with_capacity(tokens.len());
    let mut at = 0;
    for t in &tokens {
        offsets.push(at);
        at += t.len();
    }
    let top: Vec<Value> = outcome
        .top_logprobs
        .iter()
        .map(|alts| {
            let mut m = serde_json::Map::new();
            for &(a, lp) in alts {
                m.entry(token_text(model, a)).or_insert(json!(lp));
            }
            Value::Object(m)
        })
        .collect();
    json!({"tokens": tokens, "token_logprobs": outcome.logprobs, "top_logprobs": top, "text_offset": offsets})
}

/// `POST /v1/completions`.
pub async fn openai(state: Arc<AppState>, body: axum::body::Bytes) -> Result<Response, ApiError> {
    let r: CompletionRequest = request::parse_body(&body)?;
    let plan = plan(&state, &r, false)?;
    let logprobs = plan.logprobs;
    let started = request::start(&state, plan).await?;
    let prompt_tokens = started.prompt_tokens;
    let id = format!("cmpl-{:x}{:06x}", unix_time(), rand_suffix());
    let created = unix_time();
    if r.stream {
        let format = OpenAiStream {
            id,
            created,
            model: state.model_id.clone(),
            logprobs: logprobs.then(|| state.model.clone()),
            include_usage: r.stream_options.as_ref().is_some_and(|o| o.include_usage),
            prompt_tokens,
        };
        return Ok(sse_response(started, format));
    }
    let outcome = request::finish(started).await?;
    let logprobs = if logprobs && !outcome.logprobs.is_empty() {
        completion_logprobs(&state.model, &outcome)
    } else {
        Value::Null
    };
    let mut body = json!({
        "id": id, "object": "text_completion", "created": created, "model": state.model_id,
        "choices": [{"index": 0, "text": outcome.text, "logprobs": logprobs, "finish_reason": openai_finish(&outcome.finish)}],
        "usage": usage(prompt_tokens, &outcome),
    });
    if outcome.finish == Finish::Timeout {
        body["timed_out"] = Value::Bool(true);
    }
    Ok(axum::Json(body).into_response())
}

/// `text_completion` chunks. Log-probabilities, when asked for, come with the final chunk:
/// a token forced by the grammar gets its log-probability only from the next forward pass,
/// so they are all known only at the end (concatenated, the chunks' text and `logprobs` are
/// the non-streamed answer's).
struct OpenAiStream {
    id: String,
    created: u64,
    model: String,
    logprobs: Option<Arc<Model>>,
    include_usage: bool,
    prompt_tokens: usize,
}

impl OpenAiStream {
    fn chunk(&self, text: &str, finish: Option<&str>) -> Value {
        json!({
            "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
        })
    }
}

impl StreamFormat for OpenAiStream {
    fn delta(&mut self, text: String) -> Vec<Value> {
        vec![self.chunk(&text, None)]
    }
    fn done(&mut self, outcome: Outcome) -> Vec<Value> {
        let mut last = self.chunk("", Some(openai_finish(&outcome.finish)));
        if let Some(model) = &self.logprobs
            && !outcome.logprobs.is_empty()
        {
            last["choices"][0]["logprobs"] = completion_logprobs(model, &outcome);
        }
        if outcome.finish == Finish::Timeout {
            last["timed_out"] = Value::Bool(true);
        }
        let mut frames = vec![last];
        if self.include_usage {
            frames.push(json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "choices": [], "usage": usage(self.prompt_tokens, &outcome),
            }));
        }
        frames
    }
    fn done_marker(&self) -> bool {
        true
    }
}

/// llama-server's `stop_type`.
fn stop_type(finish: &Finish) -> &'static str {
    match finish {
        Finish::Eos | Finish::GrammarEnd => "eos",
        Finish::Length | Finish::Timeout => "limit",
        Finish::Stop(_) => "word",
        Finish::Cancelled => "none",
    }
}

/// The final `/completion` object (`content` given separately: all of it, or "" when streamed).
fn llama_final(
    state: &AppState,
    outcome: &Outcome,
    prompt_tokens: usize,
    content: &str,
    probs: bool,
) -> Value {
    let s = &outcome.stats;
    let mut body = json!({
        "content": content,
        "tokens": outcome.tokens.iter().map(|t| t.0).collect::<Vec<_>>(),
        "stop": true,
        "model": state.model_id,
        "tokens_predicted": outcome.tokens.len(),
        "tokens_evaluated": prompt_tokens,
        "stop_type": stop_type(&outcome.finish),
        "stopping_word": match &outcome.finish { Finish::Stop(w) => w.as_str(), _ => "" },
        "truncated": false,
        "timings": {
            "prompt_n": prompt_tokens, "prompt_ms": s.prompt_ms,
            "predicted_n": outcome.tokens.len(), "predicted_ms": s.decode_ms,
            "predicted_per_second": s.tokens_per_s,
        },
        "domino": {
            "masks": s.masks_computed, "mask_us": s.mask_us_total, "interventions": s.interventions,
            "draft_proposed": s.draft_proposed, "draft_accepted": s.draft_accepted,
        },
    });
    if outcome.finish == Finish::Timeout {
        body["timed_out"] = Value::Bool(true);
    }
    if probs && !outcome.logprobs.is_empty() {
        let vocab = state.model.vocabulary();
        let entry = |t: TokenId, lp: f32| {
            let bytes = vocab.bytes(t);
            json!({"id": t.0, "token": String::from_utf8_lossy(bytes), "bytes": bytes, "logprob": lp})
        };
        body["completion_probabilities"] = outcome
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
    }
    body
}

/// `POST /completion` (llama-server).
pub async fn llama(state: Arc<AppState>, body: axum::body::Bytes) -> Result<Response, ApiError> {
    let r: CompletionRequest = request::parse_body(&body)?;
    let plan = plan(&state, &r, true)?;
    let probs = plan.logprobs;
    let started = request::start(&state, plan).await?;
    let prompt_tokens = started.prompt_tokens;
    if r.stream {
        let format = LlamaStream {
            state: state.clone(),
            prompt_tokens,
            probs,
        };
        return Ok(sse_response(started, format));
    }
    let outcome = request::finish(started).await?;
    Ok(axum::Json(llama_final(
        &state,
        &outcome,
        prompt_tokens,
        &outcome.text,
        probs,
    ))
    .into_response())
}

struct LlamaStream {
    state: Arc<AppState>,
    prompt_tokens: usize,
    probs: bool,
}

impl StreamFormat for LlamaStream {
    fn delta(&mut self, text: String) -> Vec<Value> {
        vec![json!({"content": text, "stop": false})]
    }
    fn done(&mut self, outcome: Outcome) -> Vec<Value> {
        vec![llama_final(
            &self.state,
            &outcome,
            self.prompt_tokens,
            "",
            self.probs,
        )]
    }
    fn done_marker(&self) -> bool {
        false
    }
}
