//! Errors as the OpenAI API shapes them: `{"error": {"message", "type", "param", "code"}}`
//! with the HTTP status that says whose fault it was.
//!
//! Every failure of a request ends here, so a client always gets a reason, never a dropped
//! connection: malformed JSON and bad options (400), a grammar or schema the engine rejects
//! (400, with the grammar's `line:column` or the schema's JSON pointer in the message, and
//! an unsupported keyword named in `param`-like `code`), a prompt longer than the context
//! (400, `context_length_exceeded`), a missing key (401), unknown routes and methods
//! (404/405), a body over the limit (413), a full queue (503 with `Retry-After`) and
//! anything that went wrong inside (500, a panic included).

use crate::grammar::{ErrorKind, GrammarError};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// One failed request: the status and the OpenAI error object.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `not_found_error`,
    /// `server_error`, `unavailable_error`.
    pub kind: &'static str,
    /// The request field at fault, when one is.
    pub param: Option<String>,
    /// A stable machine-readable code (`invalid_json`, `invalid_grammar`, …).
    pub code: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
            kind,
            param: None,
            code: None,
        }
    }

    /// 400: the request asks for something wrong or impossible.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// 400 for a body that is not JSON or does not fit the endpoint's fields.
    pub fn invalid_json(message: impl Into<String>) -> ApiError {
        ApiError::bad_request(message).with_code("invalid_json")
    }

    /// 401: `--api-key` is set and the request did not carry it.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "Invalid API Key: send it as `Authorization: Bearer KEY`",
        )
        .with_code("invalid_api_key")
    }

    /// 404 for a route the server does not have.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found_error",
            format!("no such endpoint: {path}"),
        )
        .with_code("not_found")
    }

    /// 405 for a known route called with the wrong method.
    pub fn method_not_allowed(method: &str, path: &str) -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            format!("{method} is not allowed on {path}"),
        )
        .with_code("method_not_allowed")
    }

    /// 413 for a body over `--body-limit`.
    pub fn payload_too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            message,
        )
        .with_code("payload_too_large")
    }

    /// 503: every slot is busy and the queue is full; the client should retry.
    pub fn queue_full(queued: usize) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            format!("the server is busy: all slots are in use and {queued} requests are waiting"),
        )
        .with_code("queue_full")
    }

    /// 500: the server failed (a bug, llama.cpp, a panic): logged, and the server goes on.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
    }

    pub fn with_param(mut self, param: impl Into<String>) -> ApiError {
        self.param = Some(param.into());
        self
    }

    pub fn with_code(mut self, code: impl Into<String>) -> ApiError {
        self.code = Some(code.into());
        self
    }

    /// A failure of compiling or running a constraint named by request field `param`:
    /// grammar and usage errors are the client's (400, the grammar error's position in the
    /// message; an unsupported schema keyword is named in the code `unsupported:KEYWORD`),
    /// anything else is the server's (500).
    pub fn from_anyhow(err: &anyhow::Error, param: &str) -> ApiError {
        if let Some(g) = err.chain().find_map(|c| c.downcast_ref::<GrammarError>()) {
            let code = match (g.kind, &g.feature) {
                (ErrorKind::Unsupported, Some(f)) => format!("unsupported:{f}"),
                (ErrorKind::Unsupported, None) => "unsupported".to_string(),
                (ErrorKind::Limit, _) => "grammar_limit".to_string(),
                (ErrorKind::Invalid, _) => "invalid_grammar".to_string(),
            };
            return ApiError::bad_request(format!("{param}: {g}"))
                .with_param(param)
                .with_code(code);
        }
        if crate::diag::is_usage_error(err) {
            return ApiError::bad_request(format!("{err:#}")).with_param(param);
        }
        ApiError::internal(format!("{err:#}"))
    }

    /// The JSON body, as OpenAI and llama-server write it.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            eprintln!("error: {}", self.message);
        }
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_errors_are_the_clients_with_their_position() {
        let err = anyhow::Error::new(GrammarError::at(3, 7, "unexpected `)`"));
        let api = ApiError::from_anyhow(&err, "grammar");
        assert_eq!(api.status, StatusCode::BAD_REQUEST);
        assert!(api.message.contains("3:7"), "{}", api.message);
        assert_eq!(api.code.as_deref(), Some("invalid_grammar"));
        let other = ApiError::from_anyhow(&anyhow::anyhow!("disk on fire"), "grammar");
        assert_eq!(other.status, StatusCode::INTERNAL_SERVER_ERROR);
    }

    #[test]
    fn the_body_is_openai_shaped() {
        let body = ApiError::bad_request("no").with_param("messages").body();
        assert_eq!(body["error"]["message"], "no");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(body["error"]["param"], "messages");
        assert!(body["error"]["code"].is_null());
    }
}
