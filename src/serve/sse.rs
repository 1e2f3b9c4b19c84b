//! Server-sent events: a job's [`Event`]s framed as `data: {json}\n\n`, for the OpenAI and
//! llama-server streaming formats alike.
//!
//! A forwarding task reads the job's channel and writes frames into the response body; when
//! the client goes away the body is dropped, the forwarding task's next write fails, it
//! drops the job's channel, and the slot notices at its next token (the job is cancelled).
//! An error after the stream has begun is sent as one `data: {"error": ...}` frame.

use super::request::Started;
use super::worker::{Event, Outcome};
use axum::body::Body;
use axum::http::header;
use axum::response::Response;
use serde_json::Value;
use std::convert::Infallible;

/// How one endpoint writes its stream.
pub trait StreamFormat: Send + 'static {
    /// Frames before the first token.
    fn start(&mut self) -> Vec<Value> {
        Vec::new()
    }
    /// Frames for new text.
    fn delta(&mut self, text: String) -> Vec<Value>;
    /// The last frames.
    fn done(&mut self, outcome: Outcome) -> Vec<Value>;
    /// Whether the stream ends with `data: [DONE]` (OpenAI's endpoints do, llama-server's
    /// `/completion` does not).
    fn done_marker(&self) -> bool;
}

/// One SSE frame.
pub fn frame(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// Stream a started job as server-sent events in `format`.
pub fn sse_response(started: Started, mut format: impl StreamFormat) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(64);
    tokio::spawn(async move {
        // Held until this task ends: a client that leaves ends it, and the drop cancels the job.
        let _cancel = started.cancel;
        let mut events = started.events;
        let mut frames = format.start();
        let mut finished = false;
        loop {
            for f in frames.drain(..) {
                if tx.send(frame(&f)).await.is_err() {
                    return; // the client went away: dropping `events` cancels the job
                }
            }
            if finished {
                break;
            }
            match events.recv().await {
                Some(Event::Delta(text)) => frames = format.delta(text),
                Some(Event::Done(outcome)) => {
                    frames = format.done(outcome);
                    finished = true;
                }
                Some(Event::Failed(e)) => {
                    frames = vec![e.body()];
                    finished = true;
                }
                None => return,
            }
        }
        if format.done_marker() {
            let _ = tx.send("data: [DONE]\n\n".to_string()).await;
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|s| (Ok::<_, Infallible>(s), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("a valid response")
}
