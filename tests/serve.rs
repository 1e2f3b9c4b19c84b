//! `domino serve` over HTTP on the default model: constrained chat output validates, tool
//! calls parse and validate, streams join to the non-streamed text, GBNF is obeyed,
//! concurrent requests all finish, a disconnect frees its slot, and every error class gets
//! an OpenAI-shaped answer.

mod common;
#[path = "common/server.rs"]
mod server;

use serde_json::{Value, json};
use server::Server;
use std::io::{BufRead, BufReader};

fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 150}
        },
        "required": ["name", "age"],
        "additionalProperties": false
    })
}

fn valid(schema: &Value, doc: &Value) -> bool {
    jsonschema::validator_for(schema).unwrap().is_valid(doc)
}

fn chat(content: &str, extra: Value) -> Value {
    let mut body = json!({
        "model": "any",
        "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": content}],
        "max_tokens": 48,
        "temperature": 0,
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body
}

fn error_of(r: &server::Response, status: u16) -> Value {
    assert_eq!(r.status, status, "{}", r.body);
    let body = r.json();
    let error = &body["error"];
    assert!(
        error["message"].is_string() && error["type"].is_string(),
        "{body}"
    );
    assert!(
        error.get("param").is_some() && error.get("code").is_some(),
        "{body}"
    );
    error.clone()
}

#[test]
fn json_schema_and_tool_call_outputs_validate() {
    let s = Server::start(&[]);
    let schema = person_schema();
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "Describe a person as JSON with a name and an age.",
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "person", "strict": true, "schema": schema}}}),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["object"], "chat.completion");
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    let doc: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("{e}: {content:?}"));
    assert!(valid(&schema, &doc), "{doc}");
    assert!(body["usage"]["completion_tokens"].as_u64().unwrap() > 0);

    let parameters = json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["C", "F"]}},
        "required": ["city", "unit"],
        "additionalProperties": false
    });
    let tools = json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": parameters}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}, "additionalProperties": false}}}
    ]);
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "What is the weather in Paris?",
            json!({"tools": tools, "tool_choice": "required"}),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let choice = &r.json()["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{choice}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    match call["function"]["name"].as_str().unwrap() {
        "get_weather" => assert!(valid(&parameters, &arguments), "{arguments}"),
        "get_time" => assert_eq!(arguments, json!({})),
        other => panic!("unknown tool {other}"),
    }
    // A named function is the one called.
    let r = s.post(
        "/v1/chat/completions",
        &chat("What time is it?", json!({"tools": tools, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}})),
    );
    let call = &r.json()["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather", "{}", r.body);

    // The grammar was compiled once per distinct constraint: /metrics counts the misses
    // (the json_schema one and the two tool-call plans) and no hit so far.
    let metric = |name: &str| -> u64 {
        let metrics = s.get("/metrics").body;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {metrics}"))
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(metric("domino_grammar_cache_misses_total"), 3);
    assert_eq!(metric("domino_grammar_cache_hits_total"), 0);
    // The same tools request again: its plan comes from the cache (one hit, no new miss),
    // and so does the same answer.
    let again = s.post(
        "/v1/chat/completions",
        &chat(
            "What is the weather in Paris?",
            json!({"tools": tools, "tool_choice": "required"}),
        ),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(
        again.json()["choices"][0]["message"]["tool_calls"][0]["function"],
        choice["message"]["tool_calls"][0]["function"]
    );
    assert_eq!(metric("domino_grammar_cache_misses_total"), 3);
    assert_eq!(metric("domino_grammar_cache_hits_total"), 1);
}

#[test]
fn parallel_tool_calls_list_every_call_or_at_most_one() {
    let s = Server::start(&[]);
    let parameters = json!({
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 20}},
        "required": ["city"],
        "additionalProperties": false
    });
    let tools = json!([{"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city", "parameters": parameters}}]);
    let ask = |extra: Value| {
        let mut body = chat(
            "What is the weather in Paris and in London?",
            json!({"tools": tools, "tool_choice": "required", "max_tokens": 120}),
        );
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = s.post("/v1/chat/completions", &body);
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["choices"][0].clone()
    };
    let calls_of = |choice: &Value| -> Vec<Value> {
        assert_eq!(choice["finish_reason"], "tool_calls", "{choice}");
        let calls = choice["message"]["tool_calls"].as_array().unwrap().clone();
        for c in &calls {
            assert_eq!(c["function"]["name"], "get_weather");
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
            assert!(valid(&parameters, &args), "{c}");
        }
        calls
    };
    // OpenAI's default is true: both calls the model writes are listed, each validated.
    let default = calls_of(&ask(json!({})));
    assert_eq!(default.len(), 2, "{default:?}");
    assert_ne!(default[0]["function"], default[1]["function"]);
    let explicit = calls_of(&ask(json!({"parallel_tool_calls": true})));
    assert_eq!(explicit.len(), 2);
    // false: the grammar ends after one call.
    let one = calls_of(&ask(json!({"parallel_tool_calls": false})));
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(one[0]["function"], default[0]["function"]);
}

#[test]
fn streamed_chunks_join_to_the_non_streamed_text() {
    let s = Server::start(&[]);
    let request = chat(
        "Write one sentence about the sea.",
        json!({"temperature": 0.8, "seed": 7, "max_tokens": 24}),
    );
    let whole = s.post("/v1/chat/completions", &request).json();
    let expected = whole["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!expected.is_empty());

    let mut streaming = request.clone();
    streaming["stream"] = json!(true);
    streaming["stream_options"] = json!({"include_usage": true});
    let r = s.post("/v1/chat/completions", &streaming);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let events = r.events();
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "{}",
        r.body
    );
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let joined: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(joined, expected);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let finish = chunks
        .iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, whole["choices"][0]["finish_reason"].as_str());
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage, &whole["usage"]);

    // llama-server's /completion streams the same way, its last event carrying `stop: true`.
    let body = json!({"prompt": "The sea is", "n_predict": 12, "temperature": 0});
    let whole = s.post("/completion", &body).json();
    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    let events: Vec<Value> = s
        .post("/completion", &streaming)
        .events()
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let joined: String = events
        .iter()
        .filter_map(|e| e["content"].as_str())
        .collect();
    assert_eq!(joined, whole["content"].as_str().unwrap());
    assert_eq!(events.last().unwrap()["stop"], true);
}

#[test]
fn completion_with_a_gbnf_grammar_obeys_it() {
    let s = Server::start(&[]);
    let grammar = r#"root ::= "The answer is " ("yes" | "no") "." "#;
    let r = s.post(
        "/completion",
        &json!({"prompt": "Is the sky blue?", "grammar": grammar, "n_predict": 32, "temperature": 0.9, "seed": 3}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    let content = body["content"].as_str().unwrap();
    assert!(
        content == "The answer is yes." || content == "The answer is no.",
        "{content:?}"
    );
    assert_eq!(body["stop_type"], "eos");
    // The OpenAI completions endpoint takes a grammar too, and the `domino` object a regex.
    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "Three letters:", "max_tokens": 16, "domino": {"regex": "[a-c]{3}"}}),
    );
    let text = r.json()["choices"][0]["text"].as_str().unwrap().to_string();
    assert!(
        text.len() == 3 && text.chars().all(|c| "abc".contains(c)),
        "{text:?}"
    );
    // A stop string ends the text before it.
    let r = s.post(
        "/completion",
        &json!({"prompt": "x", "grammar": r#"root ::= "one, two, three""#, "stop": [", thr"], "temperature": 0}),
    );
    let body = r.json();
    assert_eq!(body["content"], "one, two");
    assert_eq!(body["stop_type"], "word");
    assert_eq!(body["stopping_word"], ", thr");
}

#[test]
fn concurrent_requests_all_finish_valid() {
    let s = Server::start(&["--parallel", "2"]);
    let schema = person_schema();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (s, schema) = (&s, &schema);
                scope.spawn(move || {
                    let r = s.post(
                        "/v1/chat/completions",
                        &chat(
                            &format!("Person number {i} as JSON."),
                            json!({"temperature": 0.7, "seed": i, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}}),
                        ),
                    );
                    assert_eq!(r.status, 200, "{}", r.body);
                    let content = r.json()["choices"][0]["message"]["content"].as_str().unwrap().to_string();
                    let doc: Value = serde_json::from_str(&content).unwrap_or_else(|e| panic!("{e}: {content:?}"));
                    assert!(valid(schema, &doc), "{doc}");
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
    let metrics = s.get("/metrics").body;
    assert!(metrics.contains("domino_requests_total 4"), "{metrics}");
    assert!(
        metrics.contains("domino_grammar_cache_hits_total 3"),
        "{metrics}"
    );
}

/// `top_logprobs` (chat), `logprobs: n` (completions) and `n_probs` (llama-server) list the
/// unmasked model's most likely tokens per position, best first; greedy picks the first.
#[test]
fn top_logprobs_list_the_most_likely_tokens_best_first() {
    let s = Server::start(&[]);
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "Say hello.",
            json!({"temperature": 0.0, "max_tokens": 6, "logprobs": true, "top_logprobs": 3}),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let content = r.json()["choices"][0]["logprobs"]["content"].clone();
    let items = content.as_array().unwrap();
    assert!(!items.is_empty(), "{content}");
    for item in items {
        let top = item["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3, "{item}");
        let lps: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
        assert!(
            lps.windows(2).all(|w| w[0] >= w[1]),
            "not best first: {item}"
        );
        assert!(lps.iter().all(|&lp| lp <= 0.0), "{item}");
        assert_eq!(
            item["token"], top[0]["token"],
            "greedy takes the most likely: {item}"
        );
        assert_eq!(item["logprob"], top[0]["logprob"], "{item}");
    }

    let r = s.post(
        "/v1/completions",
        &json!({"prompt": "The capital of France is", "max_tokens": 3, "temperature": 0.0, "logprobs": 2}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let lp = r.json()["choices"][0]["logprobs"].clone();
    let top = lp["top_logprobs"].as_array().unwrap();
    assert_eq!(top.len(), lp["tokens"].as_array().unwrap().len(), "{lp}");
    assert!(
        top.iter()
            .all(|t| t.as_object().unwrap().len() <= 2 && !t.as_object().unwrap().is_empty()),
        "{lp}"
    );

    let r = s.post(
        "/completion",
        &json!({"prompt": "The capital of France is", "n_predict": 3, "temperature": 0.0, "n_probs": 4}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let probs = r.json()["completion_probabilities"].clone();
    for p in probs.as_array().unwrap() {
        assert_eq!(p["top_logprobs"].as_array().unwrap().len(), 4, "{p}");
        assert_eq!(p["id"], p["top_logprobs"][0]["id"], "{p}");
    }

    let too_many = s.post(
        "/v1/chat/completions",
        &chat("Hi", json!({"logprobs": true, "top_logprobs": 21})),
    );
    assert_eq!(error_of(&too_many, 400)["param"], "top_logprobs");
    let without = s.post(
        "/v1/chat/completions",
        &chat("Hi", json!({"top_logprobs": 2})),
    );
    assert_eq!(error_of(&without, 400)["param"], "top_logprobs");
}

/// Streams that ask for log-probabilities carry them (in the final chunk: forced tokens get
/// theirs from a later pass), and they equal the non-streamed answer's, token for token —
/// with a grammar that forces tokens, so the late-filled ones are covered.
#[test]
fn streamed_logprobs_equal_the_non_streamed_ones() {
    let s = Server::start(&[]);
    let request = chat(
        "Give a JSON object with your name.",
        json!({"temperature": 0.0, "max_tokens": 16, "logprobs": true, "top_logprobs": 2,
               "response_format": {"type": "json_object"}}),
    );
    let whole = s.post("/v1/chat/completions", &request).json();
    let expected = whole["choices"][0]["logprobs"]["content"].clone();
    assert!(!expected.as_array().unwrap().is_empty(), "{whole}");
    let mut streaming = request.clone();
    streaming["stream"] = json!(true);
    let events = s.post("/v1/chat/completions", &streaming).events();
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let streamed: Vec<Value> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["logprobs"]["content"].as_array())
        .flatten()
        .cloned()
        .collect();
    assert_eq!(Value::Array(streamed), expected);

    let body = json!({"prompt": "The capital of France is", "max_tokens": 4, "temperature": 0.0, "logprobs": 2});
    let whole = s.post("/v1/completions", &body).json();
    let mut streaming = body.clone();
    streaming["stream"] = json!(true);
    let events = s.post("/v1/completions", &streaming).events();
    let with_logprobs: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str::<Value>(e).unwrap())
        .filter(|c| !c["choices"][0]["logprobs"].is_null())
        .map(|c| c["choices"][0]["logprobs"].clone())
        .collect();
    assert_eq!(with_logprobs, vec![whole["choices"][0]["logprobs"].clone()]);
}

/// `domino.property_order`: `schema` keeps the schema's member order (the reasoning steps of
/// the GSM8K schema before its answer); an unknown value is a 400 naming the field.
#[test]
fn property_order_is_a_request_option() {
    let s = Server::start(&[]);
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo_root().join("grammars/gsm8k.schema.json")).unwrap(),
    )
    .unwrap();
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "What is 2 + 3?",
            json!({"temperature": 0.0, "max_tokens": 12, "response_format": {"type": "json_schema", "json_schema": {"name": "g", "schema": schema}}, "domino": {"property_order": "schema"}}),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let content = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let first_key = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    assert!(
        content
            .trim_start()
            .trim_start_matches('{')
            .trim_start()
            .starts_with(&format!("\"{first_key}\"")),
        "schema order starts with `{first_key}`: {content:?}"
    );
    let bad = s.post(
        "/v1/chat/completions",
        &chat("Hi", json!({"domino": {"property_order": "random"}})),
    );
    assert_eq!(error_of(&bad, 400)["param"], "domino.property_order");
}

/// Continuous batching: two busy slots are decoded in the same forward passes, and what a
/// slot generates does not depend on its neighbour (greedy: the same text alone and beside
/// another request).
#[test]
fn slots_share_forward_passes_and_do_not_change_each_others_output() {
    let s = Server::start(&["--parallel", "2"]);
    let request = |prompt: &str, max_tokens: u32| {
        chat(
            prompt,
            json!({"temperature": 0.0, "max_tokens": max_tokens}),
        )
    };
    let text = |r: &server::Response| {
        assert_eq!(r.status, 200, "{}", r.body);
        r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let alone = text(&s.post("/v1/chat/completions", &request("Count from 1 to 10.", 24)));
    let counter = |m: &str, name: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(&format!("domino_{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {m}"))
    };
    let before = s.get("/metrics").body;
    let (beside, _) = std::thread::scope(|scope| {
        let a = scope
            .spawn(|| text(&s.post("/v1/chat/completions", &request("Count from 1 to 10.", 24))));
        let b = scope.spawn(|| {
            text(&s.post(
                "/v1/chat/completions",
                &request("Write a short poem about the sea.", 48),
            ))
        });
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(beside, alone, "a neighbour changed a greedy output");
    let after = s.get("/metrics").body;
    let passes = counter(&after, "batch_passes_total") - counter(&before, "batch_passes_total");
    let sequences =
        counter(&after, "batch_sequences_total") - counter(&before, "batch_sequences_total");
    assert!(
        sequences > passes,
        "no forward pass served both slots ({sequences} slot-passes in {passes} passes)"
    );
}

#[test]
fn a_full_queue_answers_503_and_a_disconnect_frees_the_slot() {
    let s = Server::start(&["--parallel", "1", "--queue", "0", "--timeout", "0"]);
    // Occupy the only slot with a long stream and read its first event.
    let long = chat(
        "Tell me a long story.",
        json!({"max_tokens": 2000, "stream": true}),
    )
    .to_string();
    let stream = s.send("POST", "/v1/chat/completions", &[], &long);
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    let mut line = String::new();
    while !line.starts_with("data: ") {
        line.clear();
        let read = reader.read_line(&mut line).unwrap();
        head.push_str(&line);
        assert!(read > 0, "the stream ended before its first event:\n{head}");
    }
    let busy = s.post(
        "/v1/chat/completions",
        &chat("Hi", json!({"max_tokens": 4})),
    );
    let error = error_of(&busy, 503);
    assert_eq!(error["code"], "queue_full");
    assert_eq!(busy.header("retry-after"), Some("1"));
    // Hang up: the slot is freed at its next token, and a new request completes.
    drop(reader);
    let mut answered = None;
    for _ in 0..100 {
        let r = s.post(
            "/v1/chat/completions",
            &chat("Hi", json!({"max_tokens": 4})),
        );
        if r.status == 200 {
            answered = Some(r);
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let r = answered.expect("the slot was never freed after the client hung up");
    assert_eq!(r.json()["usage"]["completion_tokens"], 4);
    let metrics = s.get("/metrics").body;
    assert!(
        metrics.contains("domino_requests_cancelled_total 1"),
        "{metrics}"
    );
}

#[test]
fn every_error_class_gets_an_openai_shaped_answer() {
    let s = Server::start(&[
        "--ctx-size",
        "64",
        "--body-limit",
        "4000",
        "--api-key",
        "sesame",
        "--timeout",
        "0.3",
    ]);
    let auth = [("Authorization", "Bearer sesame")];
    let post = |path: &str, body: &str| s.request("POST", path, &auth, body);

    // 401 without the key (except /health).
    let error = error_of(&s.post("/v1/chat/completions", &chat("x", json!({}))), 401);
    assert_eq!(error["type"], "authentication_error");
    assert_eq!(s.get("/health").status, 200);
    // 404 and 405.
    assert_eq!(
        error_of(&s.request("GET", "/v2/nothing", &auth, ""), 404)["type"],
        "not_found_error"
    );
    error_of(&s.request("GET", "/v1/chat/completions", &auth, ""), 405);
    // 413 over the body limit.
    let big = chat(&"word ".repeat(2000), json!({})).to_string();
    assert_eq!(
        error_of(&post("/v1/chat/completions", &big), 413)["code"],
        "payload_too_large"
    );
    // 400: not JSON, wrong field types.
    assert_eq!(
        error_of(&post("/v1/chat/completions", "{oops"), 400)["code"],
        "invalid_json"
    );
    error_of(&post("/v1/chat/completions", r#"{"messages": "hi"}"#), 400);
    // 400: a bad schema, with its JSON pointer.
    let bad_schema = chat(
        "x",
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "b", "schema": {"type": "object", "properties": {"a": {"type": "strin"}}}}}}),
    );
    let error = error_of(&post("/v1/chat/completions", &bad_schema.to_string()), 400);
    assert!(
        error["message"].as_str().unwrap().contains("/properties/a"),
        "{error}"
    );
    assert_eq!(error["param"], "response_format");
    // 400: an unsupported keyword, named.
    let unsupported = chat(
        "x",
        json!({"response_format": {"type": "json_schema", "json_schema": {"name": "u", "schema": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}}),
    );
    let error = error_of(&post("/v1/chat/completions", &unsupported.to_string()), 400);
    assert_eq!(error["code"], "unsupported:uniqueItems", "{error}");
    // 400: a grammar error with line:column.
    let error = error_of(
        &post(
            "/completion",
            &json!({"prompt": "x", "grammar": "root ::= (\"a\""}).to_string(),
        ),
        400,
    );
    assert!(
        error["message"].as_str().unwrap().contains("1:10"),
        "{error}"
    );
    // 400: two constraints at once.
    let both =
        json!({"prompt": "x", "grammar": "root ::= \"a\"", "json_schema": {"type": "string"}});
    assert_eq!(
        error_of(&post("/completion", &both.to_string()), 400)["code"],
        "conflicting_constraints"
    );
    // 400: a prompt longer than the context.
    let long = chat(&"word ".repeat(100), json!({}));
    assert_eq!(
        error_of(&post("/v1/chat/completions", &long.to_string()), 400)["code"],
        "context_length_exceeded"
    );
    // 400: a bad `domino` option.
    let bad_option = json!({"prompt": "x", "domino": {"method": "magic"}});
    assert_eq!(
        error_of(&post("/completion", &bad_option.to_string()), 400)["param"],
        "domino.method"
    );
    // Past --timeout the partial result comes back, flagged.
    let r = post(
        "/completion",
        &json!({"prompt": "Once upon a time", "n_predict": 40, "temperature": 0}).to_string(),
    );
    let body = r.json();
    assert_eq!(r.status, 200, "{body}");
    assert_eq!(body["timed_out"], true, "{body}");
    assert!(body["tokens_predicted"].as_u64().unwrap() < 40, "{body}");
    // The server is still up.
    assert_eq!(s.get("/health").status, 200);
}

#[test]
fn tokenize_detokenize_models_and_metrics() {
    let s = Server::start(&["--alias", "smol"]);
    let tokens = s
        .post("/tokenize", &json!({"content": "Hello world"}))
        .json()["tokens"]
        .clone();
    assert!(tokens.as_array().unwrap().len() >= 2, "{tokens}");
    let text = s.post("/detokenize", &json!({"tokens": tokens})).json()["content"].clone();
    assert_eq!(text, "Hello world");
    let pieces = s
        .post(
            "/tokenize",
            &json!({"content": "Hello world", "with_pieces": true}),
        )
        .json();
    let joined: String = pieces["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["piece"].as_str().unwrap())
        .collect();
    assert_eq!(joined, "Hello world");
    let models = s.get("/v1/models").json();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "smol");
    let r = s.get("/metrics");
    assert!(r.header("content-type").unwrap().starts_with("text/plain"));
    assert!(
        r.body.contains("# TYPE domino_requests_total counter"),
        "{}",
        r.body
    );
}

#[test]
fn reasoning_format_frees_the_text_before_the_marker() {
    let s = Server::start(&[]);
    // SmolLM2 writes no `</think>`; every answer has a space, so the first space ends the
    // "reasoning" here, and the answer after it must be an integer.
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "How many legs does a cat have?",
            json!({
                "reasoning_format": "deepseek",
                "domino": {"reasoning_end": " "},
                "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}},
                "max_tokens": 48,
                "temperature": 0
            }),
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let message = &r.json()["choices"][0]["message"];
    let reasoning = message["reasoning_content"].as_str().unwrap();
    assert!(
        !reasoning.is_empty() && !reasoning.contains(' '),
        "{message}"
    );
    let content = message["content"].as_str().unwrap();
    assert!(
        serde_json::from_str::<Value>(content)
            .is_ok_and(|v| valid(&json!({"type": "integer"}), &v)),
        "{message}"
    );
    // Without reasoning_format the constraint applies from the first token.
    let r = s.post(
        "/v1/chat/completions",
        &chat(
            "How many legs does a cat have?",
            json!({
                "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "integer"}}},
                "max_tokens": 16,
                "temperature": 0
            }),
        ),
    );
    let message = &r.json()["choices"][0]["message"];
    assert!(message.get("reasoning_content").is_none(), "{message}");
    assert!(serde_json::from_str::<Value>(message["content"].as_str().unwrap()).is_ok());
    let r = s.post(
        "/v1/chat/completions",
        &chat("Hi", json!({"reasoning_format": "sometimes"})),
    );
    let e = error_of(&r, 400);
    assert!(
        e["message"].as_str().unwrap().contains("reasoning_format"),
        "{e}"
    );
}

/// A request's grammar over the compile budget (`--grammar-memory`) gets a 400 naming the
/// limit; its compile thread stops, and the server goes on answering.
#[test]
fn a_grammar_over_its_compile_budget_is_a_400_naming_the_limit() {
    let s = Server::start(&["--grammar-memory", "16", "--grammar-timeout", "60"]);
    let mut bomb = String::from("root ::= r0\n");
    for i in 0..20_000 {
        bomb.push_str(&format!(
            "r{i} ::= \"value-{i:05}-a\" r{} | \"(\" r{i} \")\" | \"v{i}\"\n",
            i + 1
        ));
    }
    bomb.push_str("r20000 ::= \"end\"\n");
    let started = std::time::Instant::now();
    let r = s.post(
        "/completion",
        &json!({"prompt": "x", "grammar": bomb, "n_predict": 4}),
    );
    let error = error_of(&r, 400);
    assert_eq!(error["code"], "grammar_limit", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("memory budget of 16 MB"),
        "{error}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let ok = s.post(
        "/completion",
        &json!({"prompt": "Say yes:", "grammar": "root ::= \"yes\" | \"no\"", "n_predict": 4}),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
}
