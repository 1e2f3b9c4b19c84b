//! What every generation endpoint shares: domino's own request object, stop strings,
//! sampling fields, the choice of one constraint, and turning all of it into a queued
//! [`Job`].
//!
//! domino's options travel in one extra object, `"domino"` (its fields are
//! [`DominoOptions`]); unknown fields in it are an error so a typo is not silently ignored.
//! A request names at most one constraint — `response_format`, `tools`, `grammar` (GBNF),
//! `json_schema`, or `domino.gbnf`/`domino.lark`/`domino.regex` — and two are a 400.

use super::AppState;
use super::error::ApiError;
use super::worker::{CancelOnDrop, DecodeSettings, Event, Job, JobConstraint};
use crate::constraint::{ConstraintSpec, parse_lookahead};
use crate::decode::SamplingConfig;
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::EngineGrammar;
use crate::decode::methods::{DecoderConfig, Method};
use crate::grammar::{CompileOptions, GrammarSource, PropertyOrder, WhitespacePolicy};
use crate::vocab::TokenId;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedReceiver;

/// The `"domino"` request object: decoding method and options, and grammars the OpenAI API
/// has no field for.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DominoOptions {
    /// `domino`, `none`, `llama-grammar`, `naive` or `template`.
    pub method: Option<String>,
    /// Lookahead: a number or `"inf"`.
    pub k: Option<Value>,
    /// Speculative draft length (0 = off).
    pub draft: Option<usize>,
    pub draft_threshold: Option<f32>,
    /// `cost` or `threshold`.
    pub draft_policy: Option<String>,
    pub opportunistic: Option<bool>,
    /// A GBNF grammar (as llama-server's `grammar`).
    pub gbnf: Option<String>,
    /// A Lark grammar.
    pub lark: Option<String>,
    /// A regex the whole output must match.
    pub regex: Option<String>,
    /// Start rule of `gbnf`/`lark`.
    pub start: Option<String>,
    /// Whitespace in JSON output: `flexible`, `compact` or `pretty`.
    pub whitespace: Option<String>,
    /// Schema objects' members: `any` order (the default) or `schema` order.
    pub property_order: Option<String>,
    /// Ignore unsupported schema keywords instead of failing.
    pub lenient: Option<bool>,
    /// Token healing of a raw prompt's end (`/completion`, `/v1/completions`; default on).
    pub token_healing: Option<bool>,
    /// The end-of-reasoning marker for `reasoning_format` `deepseek`/`auto` (default
    /// `</think>`).
    pub reasoning_end: Option<String>,
}

/// Parse a request body (a 400 naming the problem when it is not the endpoint's JSON).
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid_json(format!("the request body is not valid: {e}")))
}

/// `stop`: a string or an array of strings (OpenAI allows up to 4; llama-server any).
pub fn stop_strings(stop: &Option<Value>) -> Result<Vec<String>, ApiError> {
    let bad = || {
        ApiError::bad_request("`stop` must be a string or an array of strings").with_param("stop")
    };
    match stop {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// Sampling from the request's fields (OpenAI's defaults: temperature 1, top-p 1; a
/// missing seed is 0, so equal requests give equal outputs).
pub fn sampling(
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<usize>,
    min_p: Option<f32>,
    seed: Option<i64>,
) -> Result<SamplingConfig, ApiError> {
    let config = SamplingConfig {
        temperature: temperature.unwrap_or(1.0),
        top_k: top_k.unwrap_or(0),
        top_p: top_p.unwrap_or(1.0),
        min_p: min_p.unwrap_or(0.0),
        seed: seed.unwrap_or(0) as u64,
    };
    config
        .validate()
        .map_err(|e| ApiError::bad_request(e).with_code("invalid_sampling"))?;
    Ok(config)
}

/// The constraint a request names, with the request field it came from (for errors).
pub struct NamedConstraint {
    pub source: GrammarSource,
    pub param: &'static str,
}

/// Collect the constraints a request names; more than one is a 400.
pub fn one_constraint(
    candidates: Vec<Option<NamedConstraint>>,
) -> Result<Option<NamedConstraint>, ApiError> {
    let mut named: Vec<NamedConstraint> = candidates.into_iter().flatten().collect();
    if named.len() > 1 {
        let params: Vec<&str> = named.iter().map(|n| n.param).collect();
        return Err(ApiError::bad_request(format!(
            "a request can name one constraint, this one names {}",
            params.join(" and ")
        ))
        .with_code("conflicting_constraints"));
    }
    Ok(named.pop())
}

impl DominoOptions {
    /// The grammar named in this object, if any.
    pub fn constraint(&self) -> Result<Option<NamedConstraint>, ApiError> {
        let named = [
            self.gbnf.clone().map(|g| NamedConstraint {
                source: GrammarSource::Gbnf(g),
                param: "domino.gbnf",
            }),
            self.lark.clone().map(|g| NamedConstraint {
                source: GrammarSource::Lark(g),
                param: "domino.lark",
            }),
            self.regex.clone().map(|g| NamedConstraint {
                source: GrammarSource::Regex(g),
                param: "domino.regex",
            }),
        ];
        one_constraint(named.into_iter().collect())
    }

    fn compile_options(&self) -> Result<CompileOptions, ApiError> {
        let whitespace = match &self.whitespace {
            None => WhitespacePolicy::Flexible,
            Some(w) => w.parse::<WhitespacePolicy>().map_err(|e| {
                ApiError::bad_request(format!("domino.whitespace: {e}"))
                    .with_param("domino.whitespace")
            })?,
        };
        let property_order = match self.property_order.as_deref() {
            None | Some("any") => PropertyOrder::Any,
            Some("schema") => PropertyOrder::Schema,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "domino.property_order: `{other}` is neither `any` nor `schema`"
                ))
                .with_param("domino.property_order"));
            }
        };
        Ok(CompileOptions {
            start: self.start.clone(),
            whitespace,
            lenient: self.lenient.unwrap_or(false),
            property_order,
            ..CompileOptions::default()
        })
    }

    /// The server's decoding settings with this object's overrides.
    fn settings(&self, defaults: &DecodeSettings) -> Result<DecodeSettings, ApiError> {
        let field = |name: &str, e: String| {
            ApiError::bad_request(format!("domino.{name}: {e}"))
                .with_param(format!("domino.{name}"))
        };
        let mut s = defaults.clone();
        if let Some(m) = &self.method {
            s.method = m.parse::<Method>().map_err(|e| field("method", e))?;
        }
        if let Some(k) = &self.k {
            s.k = match k {
                Value::Number(n) => Some(
                    n.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| field("k", format!("expected a lookahead, got {n}")))?,
                ),
                Value::String(s) => parse_lookahead(s).map_err(|e| field("k", e))?,
                other => {
                    return Err(field(
                        "k",
                        format!("expected a number or \"inf\", got {other}"),
                    ));
                }
            };
        }
        if let Some(d) = self.draft {
            s.draft = d;
        }
        if let Some(t) = self.draft_threshold {
            if !(0.0..=1.0).contains(&t) {
                return Err(field(
                    "draft_threshold",
                    format!("must be in [0, 1], got {t}"),
                ));
            }
            s.draft_threshold = t;
        }
        if let Some(p) = &self.draft_policy {
            s.draft_policy = p
                .parse::<DraftPolicy>()
                .map_err(|e| field("draft_policy", e.to_string()))?;
        }
        if let Some(o) = self.opportunistic {
            s.opportunistic = o;
        }
        Ok(s)
    }
}

/// A generation request, endpoint-independent.
pub struct Plan {
    pub prompt: Vec<TokenId>,
    /// Requested token limit; `None` = until the context is full.
    pub max_tokens: Option<usize>,
    pub sampling: SamplingConfig,
    pub logprobs: bool,
    /// Alternatives listed per token (needs `logprobs`).
    pub top_logprobs: usize,
    pub stop: Vec<String>,
    pub constraint: Option<NamedConstraint>,
    /// Tagged regions (tool calls, reasoning) instead of a whole-output constraint, with the
    /// request field they come from.
    pub regions: Option<(crate::decode::regions::TagPlan, &'static str)>,
    /// Token healing of a raw prompt's end (`domino.token_healing`, on by default for the
    /// completion endpoints; chat prompts end in the template's assistant header and are
    /// never healed).
    pub token_healing: bool,
    pub domino: DominoOptions,
}

/// A job in the queue: its event channel and its prompt length; dropping it cancels the job.
pub struct Started {
    pub events: UnboundedReceiver<Event>,
    pub prompt_tokens: usize,
    pub cancel: CancelOnDrop,
}

/// Check the plan against the context, compile (or fetch) its constraint, and queue it.
pub async fn start(state: &AppState, plan: Plan) -> Result<Started, ApiError> {
    state
        .metrics
        .requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let n_ctx = state.slot_ctx;
    let prompt_tokens = plan.prompt.len();
    if prompt_tokens == 0 {
        return Err(ApiError::bad_request("the prompt is empty").with_param("prompt"));
    }
    if prompt_tokens >= n_ctx {
        return Err(ApiError::bad_request(format!(
            "the prompt is {prompt_tokens} tokens, but a slot's context holds {n_ctx} (raise --ctx-size or lower --parallel)"
        ))
        .with_param("messages")
        .with_code("context_length_exceeded"));
    }
    let room = n_ctx - prompt_tokens;
    let max_tokens = plan.max_tokens.map_or(room, |m| m.min(room));
    let settings = plan.domino.settings(&state.config.decode)?;
    let mut compile = plan.domino.compile_options()?;
    compile.budget = state.config.grammar_budget;
    let constraint = match (plan.constraint, plan.regions) {
        (Some(named), Some((_, param))) => {
            return Err(ApiError::bad_request(format!(
                "a request can name one constraint, this one names {} and {param}",
                named.param
            ))
            .with_code("conflicting_constraints"));
        }
        (None, Some((regions, param))) => {
            if matches!(settings.method, Method::None | Method::LlamaGrammar) {
                return Err(ApiError::bad_request(format!(
                    "{param} needs the domino engine (method {} cannot constrain tagged regions)",
                    settings.method.as_str()
                ))
                .with_param("domino.method"));
            }
            let (grammar, key) = state
                .cache
                .get_or_compile_plan(regions, compile, state.model.vocabulary())
                .await
                .map_err(|e| ApiError::from_anyhow(&e, param))?;
            JobConstraint::Engine { grammar, key }
        }
        (constraint, None) => match constraint {
            None => JobConstraint::None,
            Some(_) if settings.method == Method::None => JobConstraint::None,
            Some(named) if settings.method == Method::LlamaGrammar => {
                JobConstraint::LlamaGrammar(Box::new(DecoderConfig {
                    method: Method::LlamaGrammar,
                    source: Some(named.source),
                    compile,
                    ..DecoderConfig::default()
                }))
            }
            Some(named) => {
                let spec = ConstraintSpec {
                    label: named.param.to_string(),
                    source: named.source,
                    compile,
                };
                let (grammar, key) = state
                    .cache
                    .get_or_compile(spec, state.model.vocabulary())
                    .await
                    .map_err(|e| ApiError::from_anyhow(&e, named.param))?;
                JobConstraint::Engine {
                    grammar: EngineGrammar::Plain(grammar),
                    key,
                }
            }
        },
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let job = Job {
        prompt: plan.prompt,
        max_tokens,
        sampling: plan.sampling,
        logprobs: plan.logprobs,
        top_logprobs: plan.top_logprobs,
        stop: plan.stop,
        constraint,
        decode: settings,
        token_healing: plan.token_healing,
        deadline: state.config.timeout.map(|t| Instant::now() + t),
        cancel: cancel.clone(),
        events: tx,
    };
    state.pool.submit(job)?;
    Ok(Started {
        events: rx,
        prompt_tokens,
        cancel: CancelOnDrop(cancel),
    })
}

/// Wait for a job's end (the deltas are dropped: the outcome has the whole text).
pub async fn finish(mut started: Started) -> Result<super::worker::Outcome, ApiError> {
    while let Some(event) = started.events.recv().await {
        match event {
            Event::Delta(_) => {}
            Event::Done(outcome) => return Ok(outcome),
            Event::Failed(e) => return Err(e),
        }
    }
    Err(ApiError::internal(
        "the generation slot stopped without an answer",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_is_a_string_or_strings() {
        assert_eq!(stop_strings(&Some(Value::from("x"))).unwrap(), vec!["x"]);
        assert_eq!(
            stop_strings(&Some(serde_json::json!(["a", "b"]))).unwrap(),
            vec!["a", "b"]
        );
        assert!(stop_strings(&Some(serde_json::json!([1]))).is_err());
    }

    #[test]
    fn domino_options_override_the_defaults_and_reject_typos() {
        let defaults = DecodeSettings {
            method: Method::Domino,
            k: None,
            opportunistic: false,
            draft: 8,
            draft_threshold: 0.8,
            draft_policy: DraftPolicy::Cost,
        };
        let o: DominoOptions =
            serde_json::from_value(serde_json::json!({"method": "naive", "k": 2, "draft": 0}))
                .unwrap();
        let s = o.settings(&defaults).unwrap();
        assert_eq!((s.method, s.k, s.draft), (Method::Naive, Some(2), 0));
        let inf: DominoOptions = serde_json::from_value(serde_json::json!({"k": "inf"})).unwrap();
        assert_eq!(inf.settings(&defaults).unwrap().k, None);
        assert!(
            serde_json::from_value::<DominoOptions>(serde_json::json!({"methd": "x"})).is_err()
        );
        let bad: DominoOptions =
            serde_json::from_value(serde_json::json!({"method": "magic"})).unwrap();
        assert_eq!(
            bad.settings(&defaults).unwrap_err().param.as_deref(),
            Some("domino.method")
        );
    }

    #[test]
    fn two_constraints_are_refused() {
        let c = |param| {
            Some(NamedConstraint {
                source: GrammarSource::Json,
                param,
            })
        };
        assert!(one_constraint(vec![c("grammar"), None]).unwrap().is_some());
        let err = one_constraint(vec![c("grammar"), c("json_schema")])
            .err()
            .unwrap();
        assert!(
            err.message.contains("grammar and json_schema"),
            "{}",
            err.message
        );
    }
}
