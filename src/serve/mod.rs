//! `domino serve`: an HTTP server that llama-server and OpenAI clients can talk to
//! unchanged, with domino's exact constraints behind every grammar, schema and tool call.
//!
//! # Shape
//! - [`ServeConfig`]: what the command line says (the CLI builds it; nothing here knows clap).
//! - [`run`]: load the model, start the slots ([`worker::Pool`]), bind, print
//!   `listening on http://ADDR` on stderr, serve until Ctrl-C.
//! - Routes (axum on tokio): `GET /health`, `GET /v1/models`, `GET /metrics`,
//!   `POST /v1/chat/completions` ([`chat`]), `POST /v1/completions` and `POST /completion`
//!   ([`completions`]), `POST /tokenize`, `POST /detokenize`. Unknown routes get 404, wrong
//!   methods 405, bodies over the limit 413, all as OpenAI-shaped errors ([`error`]).
//! - The HTTP side never touches llama.cpp state beyond tokenizing: generation happens on the
//!   slot threads ([`worker`]), constraints come from the shared [`grammar_cache`], counters
//!   go to [`metrics`].
//!
//! A panic in a handler is caught (answered 500, logged, the server goes on), as is one in
//! a slot ([`worker`]).

pub mod chat;
pub mod completions;
pub mod error;
pub mod grammar_cache;
pub mod metrics;
pub mod request;
pub mod sse;
pub mod tools;
pub mod worker;

use crate::models::ModelConfig;
use crate::runtime::{Model, SessionOptions};
use crate::vocab::TokenId;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use error::ApiError;
use futures_util::FutureExt;
use grammar_cache::GrammarCache;
use metrics::Metrics;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use worker::{DecodeSettings, Pool};

/// Everything `domino serve` is configured with.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub model: ModelConfig,
    /// The model's name in responses and `/v1/models` (default: the file name).
    pub alias: Option<String>,
    pub host: String,
    /// 0 = any free port (the bound one is printed).
    pub port: u16,
    /// Generation slots; each gets `model.ctx / parallel` positions.
    pub parallel: usize,
    /// Requests that may wait for a slot before new ones get 503.
    pub queue: usize,
    pub api_key: Option<String>,
    /// Longest a generation may run; past it the partial result is returned, flagged.
    pub timeout: Option<Duration>,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// Compiled grammars kept.
    pub grammar_cache: usize,
    /// The compile budget of a request's grammar (time and memory; see
    /// [`crate::engine::budget`]): over it the request gets a 400 naming the limit.
    pub grammar_budget: crate::engine::budget::Budget,
    /// Decoding settings for requests that do not override them.
    pub decode: DecodeSettings,
}

/// What every handler shares.
pub struct AppState {
    pub model: Arc<Model>,
    pub model_id: String,
    pub pool: Arc<Pool>,
    pub cache: Arc<GrammarCache>,
    pub metrics: Arc<Metrics>,
    pub config: ServeConfig,
    /// Positions of one slot's context.
    pub slot_ctx: usize,
}

/// Seconds since the Unix epoch (OpenAI's `created`).
pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Load the model, start the slots, and serve until Ctrl-C.
pub fn run(config: ServeConfig) -> anyhow::Result<()> {
    if config.parallel == 0 {
        return Err(crate::diag::UsageError("--parallel must be at least 1".into()).into());
    }
    let model = Arc::new(config.model.load()?);
    // The vocabulary's trie is shared by every grammar: build it before the first request.
    crate::engine::warm_vocabulary(&model.vocabulary());
    let slot_ctx = (config.model.ctx as usize / config.parallel).max(16);
    // One context for all slots: llama.cpp splits it evenly between their sequences.
    let options = SessionOptions {
        n_ctx: (slot_ctx * config.parallel) as u32,
        ..config.model.session_options()
    };
    let metrics = Arc::new(Metrics::default());
    let pool = Pool::start(
        model.clone(),
        options,
        config.parallel,
        config.queue,
        metrics.clone(),
    )?;
    let model_id = config.alias.clone().unwrap_or_else(|| {
        model
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.name())
    });
    let state = Arc::new(AppState {
        model,
        model_id,
        pool,
        cache: Arc::new(GrammarCache::new(config.grammar_cache)),
        metrics,
        slot_ctx,
        config,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .worker_threads(2)
        .build()?;
    runtime.block_on(serve(state))
}

async fn serve(state: Arc<AppState>) -> anyhow::Result<()> {
    let addr = format!("{}:{}", state.config.host, state.config.port);
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    eprintln!(
        "domino serve: {} on {} slot(s) of {} positions; listening on http://{bound}",
        state.model_id, state.config.parallel, state.slot_ctx
    );
    axum::serve(listener, router(state))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// The routes (see the module doc).
pub fn router(state: Arc<AppState>) -> Router {
    let body_limit = state.config.body_limit;
    Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/metrics", get(metrics_text))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/v1/chat/completions", post(chat_handler))
        .route("/chat/completions", post(chat_handler))
        .route("/v1/completions", post(openai_completion_handler))
        .route("/completions", post(openai_completion_handler))
        .route("/completion", post(llama_completion_handler))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn(catch_panics))
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

/// Every request but `/health` needs the API key when `--api-key` is set.
async fn authorize(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(key) = &state.config.api_key {
        let path = request.uri().path();
        let public = path == "/health" || path == "/v1/health";
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .or_else(|| {
                request
                    .headers()
                    .get("x-api-key")
                    .and_then(|v| v.to_str().ok())
            });
        if !public && given != Some(key.as_str()) {
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(request).await
}

/// A panic while serving a request is caught here, logged and answered 500; the server goes on.
async fn catch_panics(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    match std::panic::AssertUnwindSafe(next.run(request))
        .catch_unwind()
        .await
    {
        Ok(response) => response,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            ApiError::internal(format!("the request to {path} panicked: {what}")).into_response()
        }
    }
}

/// The body of a POST, or the OpenAI-shaped reason it could not be read (413 over the limit).
fn body_bytes(
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        let status = rejection.status();
        let text = rejection.body_text();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::payload_too_large(format!(
                "the request body is over the limit (--body-limit): {text}"
            ))
        } else {
            ApiError::invalid_json(text)
        }
    })
}

async fn chat_handler(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    chat::completions(state, body_bytes(body)?).await
}

async fn openai_completion_handler(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    completions::openai(state, body_bytes(body)?).await
}

async fn llama_completion_handler(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Response, ApiError> {
    completions::llama(state, body_bytes(body)?).await
}

async fn not_found(request: Request) -> ApiError {
    ApiError::not_found(request.uri().path())
}

async fn method_not_allowed(method: Method, request: Request) -> ApiError {
    ApiError::method_not_allowed(method.as_str(), request.uri().path())
}

async fn health() -> axum::Json<Value> {
    axum::Json(json!({"status": "ok"}))
}

async fn models(State(state): State<Arc<AppState>>) -> axum::Json<Value> {
    axum::Json(json!({
        "object": "list",
        "data": [{
            "id": state.model_id,
            "object": "model",
            "created": unix_time(),
            "owned_by": "domino",
            "meta": {
                "n_vocab": state.model.n_vocab(),
                "n_ctx_train": state.model.n_ctx_train(),
                "n_ctx_slot": state.slot_ctx,
                "slots": state.pool.slots(),
            },
        }],
    }))
}

async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(&state.cache, state.pool.slots()),
    )
        .into_response()
}

#[derive(Deserialize)]
struct TokenizeRequest {
    content: String,
    #[serde(default)]
    add_special: bool,
    #[serde(default = "yes")]
    parse_special: bool,
    #[serde(default)]
    with_pieces: bool,
}

fn yes() -> bool {
    true
}

async fn tokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    let r: TokenizeRequest = request::parse_body(&body_bytes(body)?)?;
    let tokens = state
        .model
        .tokenize(&r.content, r.add_special, r.parse_special);
    let tokens: Vec<Value> = if r.with_pieces {
        let vocab = state.model.vocabulary();
        tokens
            .iter()
            .map(|&t| {
                let bytes = vocab.bytes(t);
                let piece = match std::str::from_utf8(bytes) {
                    Ok(s) => json!(s),
                    Err(_) => json!(bytes),
                };
                json!({"id": t.0, "piece": piece})
            })
            .collect()
    } else {
        tokens.iter().map(|t| json!(t.0)).collect()
    };
    Ok(axum::Json(json!({"tokens": tokens})))
}

#[derive(Deserialize)]
struct DetokenizeRequest {
    tokens: Vec<u32>,
}

async fn detokenize(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<axum::Json<Value>, ApiError> {
    let r: DetokenizeRequest = request::parse_body(&body_bytes(body)?)?;
    let ids: Vec<TokenId> = r.tokens.into_iter().map(TokenId).collect();
    let bytes = state
        .model
        .detokenize(&ids)
        .map_err(|e| ApiError::bad_request(e.to_string()).with_param("tokens"))?;
    Ok(axum::Json(
        json!({"content": String::from_utf8_lossy(&bytes)}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[tokio::test]
    async fn a_panicking_handler_is_answered_500_and_the_server_goes_on() {
        async fn boom() -> &'static str {
            panic!("boom")
        }
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/health", get(health))
            .layer(middleware::from_fn(catch_panics));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let get_path = |path: &'static str| async move {
            tokio::task::spawn_blocking(move || {
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                let request =
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                stream.write_all(request.as_bytes()).unwrap();
                let mut response = String::new();
                stream.read_to_string(&mut response).unwrap();
                response
            })
            .await
            .unwrap()
        };
        let response = get_path("/boom").await;
        assert!(response.starts_with("HTTP/1.1 500"), "{response}");
        assert!(
            response.contains("the request to /boom panicked: boom"),
            "{response}"
        );
        assert!(get_path("/health").await.starts_with("HTTP/1.1 200"));
    }
}
