//! Each API streamed with `THINK=0.2 SLOW=0.5 DELTAS=5`: the event sequence,
//! the text, the timing (lower bounds only) and the request log; structured
//! output; whole (non-streamed) replies.

mod common;

use std::time::Duration;

use agent_comms_mockmodel::{Api, Config, LoggedRequest, MockServer, CANNED_REPLY};
use common::{post, Response};
use serde_json::{json, Value};

const PACED: &str = "say hello THINK=0.2 SLOW=0.5 DELTAS=5";
const THINK: Duration = Duration::from_millis(200);
const SLOW: Duration = Duration::from_millis(500);

fn server() -> MockServer {
    MockServer::start(Config::default()).unwrap()
}

fn only_request(server: &MockServer) -> LoggedRequest {
    let log = server.wait_for_requests(1, Duration::from_secs(5)).unwrap();
    assert_eq!(log.len(), 1);
    log.into_iter().next().unwrap()
}

/// The text deltas of a stream, with their arrival times.
fn deltas(resp: &Response, pick: impl Fn(&Value) -> Option<String>) -> Vec<(Duration, String)> {
    resp.events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| pick(&e.json()).map(|t| (e.at, t)))
        .collect()
}

/// Lower bounds on the client's view and on the server's log.
fn check_timing(d: &[(Duration, String)], logged: &LoggedRequest) {
    assert_eq!(d.len(), 5, "{d:?}");
    let (first, last) = (d[0].0, d[4].0);
    eprintln!(
        "client: first delta after {first:?}, last {:?} after the first",
        last - first
    );
    assert!(first >= THINK, "first delta after {first:?}");
    // The client's clock sees the first delta late at worst, never early:
    // allow for that on the gap, not on the server's own log.
    assert!(
        last - first >= SLOW - Duration::from_millis(100),
        "{first:?} .. {last:?}"
    );
    let ttfd = logged.time_to_first_delta().unwrap();
    let spread = logged.stream_duration().unwrap();
    eprintln!("server: first delta after {ttfd:?}, spread {spread:?}");
    assert!(ttfd >= THINK, "{ttfd:?}");
    assert!(spread >= SLOW, "{spread:?}");
    assert!(logged.completed && !logged.aborted);
    assert_eq!(logged.pacing.think, THINK);
    assert_eq!(logged.pacing.slow, SLOW);
    assert_eq!(logged.pacing.deltas, 5);
    assert!(!logged.structured);
    assert!(logged.stream);
    assert_eq!(logged.reply.as_deref(), Some(CANNED_REPLY));
    assert_eq!(
        logged.headers.get("x-api-key").map(String::as_str),
        Some("<redacted>")
    );
    assert_eq!(
        logged.headers.get("user-agent").map(String::as_str),
        Some("raw-test")
    );
}

fn concat(d: &[(Duration, String)]) -> String {
    d.iter().map(|(_, t)| t.as_str()).collect()
}

#[test]
fn anthropic_messages_stream() {
    let server = server();
    let body = json!({"model": "claude-test", "max_tokens": 100, "stream": true,
        "messages": [{"role": "user", "content": [{"type": "text", "text": PACED}]}]});
    let resp = post(server.port(), "/v1/messages?beta=true", &body);
    assert_eq!(resp.status, 200);
    assert!(resp
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let mut want = vec!["message_start", "content_block_start"];
    want.extend(["content_block_delta"; 5]);
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(resp.event_names(), want);
    for e in &resp.events {
        assert_eq!(e.json()["type"], json!(e.name.as_deref().unwrap()));
    }
    let start = resp.events[0].json();
    assert_eq!(start["message"]["model"], "claude-test");
    assert_eq!(start["message"]["role"], "assistant");
    let md = resp.events[resp.events.len() - 2].json();
    assert_eq!(md["delta"]["stop_reason"], "end_turn");
    assert!(md["usage"]["output_tokens"].as_u64().unwrap() > 0);
    let d = deltas(&resp, |v| {
        (v["type"] == "content_block_delta" && v["delta"]["type"] == "text_delta")
            .then(|| v["delta"]["text"].as_str().unwrap().to_string())
    });
    assert_eq!(concat(&d), CANNED_REPLY);
    assert!(resp.events[0].at <= d[0].0);

    let r = only_request(&server);
    assert_eq!(r.api, Api::AnthropicMessages);
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.query.as_deref(), Some("beta=true"));
    assert_eq!(r.prompt.as_deref(), Some(PACED));
    assert_eq!(r.model.as_deref(), Some("claude-test"));
    assert_eq!(r.body.as_ref(), Some(&body));
    check_timing(&d, &r);
}

#[test]
fn openai_responses_stream() {
    let server = server();
    let body = json!({"model": "mock-1", "stream": true, "instructions": "be brief",
        "input": [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "<environment_context/>"}]},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": PACED}]}]});
    let resp = post(server.port(), "/v1/responses", &body);
    assert_eq!(resp.status, 200);
    let mut want = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    want.extend(["response.output_text.delta"; 5]);
    want.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(resp.event_names(), want);
    for (i, e) in resp.events.iter().enumerate() {
        let v = e.json();
        assert_eq!(v["type"], json!(e.name.as_deref().unwrap()));
        assert_eq!(v["sequence_number"], json!(i));
    }
    let d = deltas(&resp, |v| {
        (v["type"] == "response.output_text.delta").then(|| v["delta"].as_str().unwrap().into())
    });
    assert_eq!(concat(&d), CANNED_REPLY);
    let added = resp.events[2].json();
    assert_eq!(added["item"]["type"], "message");
    assert_eq!(added["item"]["role"], "assistant");
    let done = resp.events[resp.events.len() - 2].json();
    assert_eq!(done["item"]["content"][0]["text"], CANNED_REPLY);
    let completed = resp.events.last().unwrap().json();
    assert_eq!(completed["response"]["status"], "completed");
    assert_eq!(
        completed["response"]["output"][0]["content"][0]["text"],
        CANNED_REPLY
    );
    let usage = &completed["response"]["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["input_tokens"].as_u64().unwrap() + usage["output_tokens"].as_u64().unwrap()
    );

    let r = only_request(&server);
    assert_eq!(r.api, Api::OpenaiResponses);
    assert_eq!(r.prompt.as_deref(), Some(PACED));
    check_timing(&d, &r);
}

fn chat_stream(include_usage: bool) {
    let server = server();
    let mut body = json!({"model": "mock-1", "stream": true, "messages": [
        {"role": "system", "content": "You are opencode."},
        {"role": "user", "content": [{"type": "text", "text": PACED}]}]});
    if include_usage {
        body["stream_options"] = json!({"include_usage": true});
    }
    let resp = post(server.port(), "/v1/chat/completions", &body);
    assert_eq!(resp.status, 200);
    assert!(resp.events.iter().all(|e| e.name.is_none()));
    assert_eq!(resp.events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = resp.events[..resp.events.len() - 1]
        .iter()
        .map(|e| e.json())
        .collect();
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks.len(), 5 + 1 + usize::from(include_usage));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(chunks[1]["choices"][0]["delta"].get("role").is_none());
    let stop = &chunks[5]["choices"][0];
    assert_eq!(stop["finish_reason"], "stop");
    assert_eq!(stop["delta"], json!({}));
    if include_usage {
        assert_eq!(chunks[6]["choices"], json!([]));
        assert!(chunks[6]["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    } else {
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    }
    let d = deltas(&resp, |v| {
        v["choices"][0]["delta"]["content"]
            .as_str()
            .map(String::from)
    });
    assert_eq!(concat(&d), CANNED_REPLY);

    let r = only_request(&server);
    assert_eq!(r.api, Api::OpenaiChat);
    assert_eq!(r.prompt.as_deref(), Some(PACED));
    check_timing(&d, &r);
}

#[test]
fn openai_chat_stream_with_usage() {
    chat_stream(true);
}

#[test]
fn openai_chat_stream_without_usage() {
    chat_stream(false);
}

fn title_schema() -> Value {
    json!({"type": "object", "additionalProperties": false,
        "required": ["title", "tags", "score", "done"],
        "properties": {"title": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "score": {"type": "number"}, "done": {"type": "boolean"},
            "extra": {"type": "string"}}})
}

/// Parses structured output and checks that it fits `title_schema`.
fn check_title_json(text: &str) {
    let v: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        v,
        json!({"title": "Mock title", "tags": [], "score": 0, "done": false})
    );
}

/// Structured requests ignore THINK/SLOW: generous upper bound of 3 s
/// against a 5 s pause that would otherwise apply.
const SLOW_PROMPT: &str = "Generate a title THINK=5 SLOW=5";

fn check_structured_log(server: &MockServer, resp: &Response) {
    assert!(resp.done_at < Duration::from_secs(3), "{:?}", resp.done_at);
    let r = only_request(server);
    assert!(r.structured);
    assert!(r.completed);
}

#[test]
fn anthropic_structured_output() {
    let server = server();
    let body = json!({"model": "claude-haiku", "stream": true, "max_tokens": 50,
        "output_config": {"format": {"type": "json_schema", "schema": title_schema()}},
        "messages": [{"role": "user", "content": SLOW_PROMPT}]});
    let resp = post(server.port(), "/v1/messages", &body);
    let d = deltas(&resp, |v| v["delta"]["text"].as_str().map(String::from));
    assert_eq!(d.len(), 1);
    check_title_json(&concat(&d));
    check_structured_log(&server, &resp);
}

#[test]
fn responses_structured_output() {
    let server = server();
    let body = json!({"model": "mock-1", "stream": true, "input": SLOW_PROMPT,
        "text": {"format": {"type": "json_schema", "name": "title", "strict": true,
            "schema": title_schema()}}});
    let resp = post(server.port(), "/v1/responses", &body);
    let completed = resp.events.last().unwrap().json();
    check_title_json(
        completed["response"]["output"][0]["content"][0]["text"]
            .as_str()
            .unwrap(),
    );
    check_structured_log(&server, &resp);
}

#[test]
fn chat_structured_output_not_streamed() {
    let server = server();
    let body = json!({"model": "mock-1",
        "response_format": {"type": "json_schema",
            "json_schema": {"name": "title", "schema": title_schema()}},
        "messages": [{"role": "user", "content": SLOW_PROMPT}]});
    let resp = post(server.port(), "/v1/chat/completions", &body);
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let v = resp.json();
    assert_eq!(v["object"], "chat.completion");
    check_title_json(v["choices"][0]["message"]["content"].as_str().unwrap());
    check_structured_log(&server, &resp);
}

#[test]
fn whole_replies_and_reply_token() {
    let server = server();
    let port = server.port();
    let msg = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "ping REPLY=pong THINK=0.1"}]});
    let v = post(port, "/v1/messages", &msg).json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["content"][0]["text"], "pong");
    assert_eq!(v["stop_reason"], "end_turn");

    let resp = json!({"model": "m", "input": "ping REPLY=pong"});
    let v = post(port, "/v1/responses", &resp).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["content"][0]["text"], "pong");

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": "REPLY=pong"}]});
    let v = post(port, "/v1/chat/completions", &chat).json();
    assert_eq!(v["choices"][0]["message"]["content"], "pong");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    let log = server.wait_for_requests(3, Duration::from_secs(5)).unwrap();
    assert!(log
        .iter()
        .all(|r| !r.stream && r.reply.as_deref() == Some("pong")));
    assert!(log[0].time_to_first_delta().unwrap() >= Duration::from_millis(100));
}

#[test]
fn server_wide_defaults_apply() {
    let mut config = Config::default();
    config.pacing.think = Duration::from_millis(150);
    config.pacing.deltas = 3;
    config.reply = "abcdef".into();
    let server = MockServer::start(config).unwrap();
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]});
    let resp = post(server.port(), "/v1/chat/completions", &body);
    let d = deltas(&resp, |v| {
        v["choices"][0]["delta"]["content"]
            .as_str()
            .map(String::from)
    });
    assert_eq!(
        d.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["ab", "cd", "ef"]
    );
    assert!(d[0].0 >= Duration::from_millis(150));
}
