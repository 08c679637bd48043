//! Tool calls on demand, per API, on the wire: a prompt with `TOOL=` and
//! `ARGS64=` gets a streamed tool call in the API's shape; the next request,
//! carrying the tool's result, gets text quoting it; requests without tools
//! or asking for structured output are not turned into calls; the log
//! records the call and the result.

mod common;

use std::time::Duration;

use agent_comms_mockmodel::{tools, Config, LoggedRequest, MockServer, ToolCall, CANNED_REPLY};
use common::{chat_text, post, Response};
use serde_json::{json, Value};

/// Arguments with spaces, quotes and a line break: what ARGS64 is for.
fn arguments() -> Value {
    json!({"file_path": "/tmp/a \"b\".txt", "content": "line 1\nline 2"})
}

fn knob(tool: &str) -> String {
    format!("write it {} DELTAS=3", tools::knob(tool, &arguments()))
}

const RESULT: &str = "File created successfully at: /tmp/a \"b\".txt";

fn log(server: &MockServer, n: usize) -> Vec<LoggedRequest> {
    server.wait_for_requests(n, Duration::from_secs(5)).unwrap()
}

fn check_logged_call(r: &LoggedRequest, id: &str, name: &str) {
    assert_eq!(
        r.tool_call,
        Some(ToolCall {
            id: id.into(),
            name: name.into(),
            namespace: None,
            arguments: arguments(),
        })
    );
    assert_eq!(r.reply, None);
    assert_eq!(r.tool_result, None);
}

fn check_logged_follow_up(r: &LoggedRequest) {
    assert_eq!(r.tool_call, None);
    assert_eq!(r.tool_result.as_deref(), Some(RESULT));
    assert_eq!(
        r.reply.as_deref(),
        Some(format!("tool result received: {RESULT}").as_str())
    );
}

fn data(resp: &Response) -> Vec<Value> {
    resp.events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(|e| e.json())
        .collect()
}

#[test]
fn anthropic_tool_use_then_text() {
    let server = MockServer::start(Config::default()).unwrap();
    let tools =
        json!([{"name": "Bash", "input_schema": {}}, {"name": "Write", "input_schema": {}}]);
    let user = json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>r</system-reminder>"},
        {"type": "text", "text": knob("Write")}]});
    let body = json!({"model": "m", "max_tokens": 100, "stream": true, "tools": tools,
        "messages": [user]});
    let resp = post(server.port(), "/v1/messages?beta=true", &body);
    let mut want = vec!["message_start", "content_block_start"];
    want.extend(["content_block_delta"; 3]);
    want.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(resp.event_names(), want);
    let events = data(&resp);
    let block = &events[1]["content_block"];
    assert_eq!(block["type"], "tool_use");
    assert_eq!(block["name"], "Write");
    let id = block["id"].as_str().unwrap().to_string();
    let partial: String = events[2..5]
        .iter()
        .map(|e| {
            assert_eq!(e["delta"]["type"], "input_json_delta");
            e["delta"]["partial_json"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        arguments()
    );
    assert_eq!(events[6]["delta"]["stop_reason"], "tool_use");

    let follow = json!({"model": "m", "max_tokens": 100, "stream": true, "tools": tools,
        "messages": [user,
            {"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Write",
                "input": arguments()}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": id,
                "content": [{"type": "text", "text": RESULT}]}]}]});
    let resp = post(server.port(), "/v1/messages?beta=true", &follow);
    let events = data(&resp);
    assert_eq!(events[1]["content_block"]["type"], "text");
    let text: String = events
        .iter()
        .filter(|e| e["delta"]["type"] == "text_delta")
        .map(|e| e["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, format!("tool result received: {RESULT}"));
    let stop = events
        .iter()
        .find(|e| e["type"] == "message_delta")
        .unwrap();
    assert_eq!(stop["delta"]["stop_reason"], "end_turn");

    let log = log(&server, 2);
    check_logged_call(&log[0], &id, "Write");
    check_logged_follow_up(&log[1]);
}

#[test]
fn responses_function_call_then_text() {
    let server = MockServer::start(Config::default()).unwrap();
    let tools = json!([{"type": "function", "name": "exec_command", "parameters": {}},
        {"type": "web_search"}]);
    let user = json!({"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": knob("exec_command")}]});
    let body = json!({"model": "m", "stream": true, "tools": tools, "input": [user]});
    let resp = post(server.port(), "/v1/responses", &body);
    let mut want = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
    ];
    want.extend(["response.function_call_arguments.delta"; 3]);
    want.extend([
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(resp.event_names(), want);
    let events = data(&resp);
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], json!(i));
    }
    let added = &events[2]["item"];
    assert_eq!(added["type"], "function_call");
    assert_eq!(added["name"], "exec_command");
    let call_id = added["call_id"].as_str().unwrap().to_string();
    let item_id = added["id"].clone();
    let partial: String = events[3..6]
        .iter()
        .map(|e| {
            assert_eq!(e["item_id"], item_id);
            e["delta"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        arguments()
    );
    assert_eq!(events[6]["arguments"], json!(partial));
    let done = &events[7]["item"];
    assert_eq!(
        (&done["status"], &done["call_id"]),
        (&json!("completed"), &json!(call_id))
    );
    let completed = &events[8]["response"];
    assert_eq!(completed["output"][0]["type"], "function_call");
    assert_eq!(completed["output"][0]["arguments"], json!(partial));

    let follow = json!({"model": "m", "stream": true, "tools": tools, "input": [user,
        {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": partial},
        {"type": "function_call_output", "call_id": call_id, "output": RESULT}]});
    let resp = post(server.port(), "/v1/responses", &follow);
    let events = data(&resp);
    assert_eq!(events[2]["item"]["type"], "message");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, format!("tool result received: {RESULT}"));

    let log = log(&server, 2);
    check_logged_call(&log[0], &call_id, "exec_command");
    check_logged_follow_up(&log[1]);
}

#[test]
fn chat_tool_calls_then_text() {
    let server = MockServer::start(Config::default()).unwrap();
    let tools = json!([{"type": "function", "function": {"name": "write", "parameters": {}}}]);
    let user = json!({"role": "user", "content": [{"type": "text", "text": knob("write")}]});
    let body = json!({"model": "m", "stream": true, "stream_options": {"include_usage": true},
        "tools": tools, "messages": [{"role": "system", "content": "s"}, user]});
    let resp = post(server.port(), "/v1/chat/completions", &body);
    assert_eq!(resp.events.last().unwrap().data, "[DONE]");
    let chunks = data(&resp);
    // Three argument pieces, the finish chunk, the usage chunk.
    assert_eq!(chunks.len(), 5, "{chunks:?}");
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    let call = &first["tool_calls"][0];
    assert_eq!(
        (&call["index"], &call["type"]),
        (&json!(0), &json!("function"))
    );
    assert_eq!(call["function"]["name"], "write");
    let id = call["id"].as_str().unwrap().to_string();
    let partial: String = chunks[..3]
        .iter()
        .map(|c| {
            let call = &c["choices"][0]["delta"]["tool_calls"][0];
            assert_eq!(call["index"], 0);
            call["function"]["arguments"].as_str().unwrap()
        })
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        arguments()
    );
    assert_eq!(chunks[3]["choices"][0]["finish_reason"], "tool_calls");
    assert!(chunks[4]["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let follow = json!({"model": "m", "stream": true, "tools": tools, "messages": [user,
        {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "write", "arguments": partial}}]},
        {"role": "tool", "tool_call_id": id, "content": RESULT}]});
    let resp = post(server.port(), "/v1/chat/completions", &follow);
    assert_eq!(chat_text(&resp), format!("tool result received: {RESULT}"));
    let finish = data(&resp)
        .into_iter()
        .find_map(|c| c["choices"][0]["finish_reason"].as_str().map(String::from));
    assert_eq!(finish.as_deref(), Some("stop"));

    let log = log(&server, 2);
    check_logged_call(&log[0], &id, "write");
    check_logged_follow_up(&log[1]);
}

#[test]
fn whole_tool_calls() {
    let server = MockServer::start(Config::default()).unwrap();
    let port = server.port();
    let msg = json!({"model": "m", "max_tokens": 10, "tools": [{"name": "Write"}],
        "messages": [{"role": "user", "content": knob("Write")}]});
    let v = post(port, "/v1/messages", &msg).json();
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][0]["type"], "tool_use");
    assert_eq!(v["content"][0]["input"], arguments());

    let resp = json!({"model": "m", "input": knob("f"),
        "tools": [{"type": "function", "name": "f"}]});
    let v = post(port, "/v1/responses", &resp).json();
    assert_eq!(v["output"][0]["type"], "function_call");
    let args = v["output"][0]["arguments"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), arguments());

    // A tool in a namespace (Codex's MCP tools) is called by namespace.
    let namespaced = json!({"model": "m", "input": knob("mcp__s__f"),
        "tools": [{"type": "namespace", "name": "mcp__s",
            "tools": [{"type": "function", "name": "f"}]}]});
    let v = post(port, "/v1/responses", &namespaced).json();
    let call = &v["output"][0];
    assert_eq!(
        (&call["type"], &call["namespace"], &call["name"]),
        (&json!("function_call"), &json!("mcp__s"), &json!("f"))
    );

    let chat = json!({"model": "m", "messages": [{"role": "user", "content": knob("f")}],
        "tools": [{"type": "function", "function": {"name": "f"}}]});
    let v = post(port, "/v1/chat/completions", &chat).json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let args = choice["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert_eq!(serde_json::from_str::<Value>(args).unwrap(), arguments());
}

#[test]
fn side_requests_and_mistakes_get_text() {
    let server = MockServer::start(Config::default()).unwrap();
    let port = server.port();
    let tools = json!([{"type": "function", "function": {"name": "bash"}},
        {"type": "function", "function": {"name": "read"}}]);
    let say = |content: String, tools: Option<&Value>, extra: Value| {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": content}]});
        if let Some(t) = tools {
            body["tools"] = t.clone();
        }
        if let (Value::Object(b), Value::Object(e)) = (&mut body, extra) {
            b.extend(e);
        }
        let v = post(port, "/v1/chat/completions", &body).json();
        let m = &v["choices"][0]["message"];
        assert_eq!(m["tool_calls"], Value::Null, "{v}");
        m["content"].as_str().unwrap().to_string()
    };
    // A title request: no tools, the prompt quoted inside.
    assert_eq!(say(knob("write"), None, json!({})), CANNED_REPLY);
    // Structured output.
    let schema = json!({"response_format": {"type": "json_schema",
        "json_schema": {"name": "t", "schema": {"type": "object"}}}});
    assert_eq!(say(knob("bash"), Some(&tools), schema), "{}");
    // A tool the request does not offer.
    assert_eq!(
        say(knob("write"), Some(&tools), json!({})),
        "mock-model-server: TOOL=write is not a tool of this request; it offers: bash, read"
    );
    // Arguments that are not a JSON object.
    let bad = say("TOOL=bash ARGS=ls".into(), Some(&tools), json!({}));
    assert!(
        bad.starts_with("mock-model-server: ARGS is not JSON"),
        "{bad}"
    );

    // Claude Code's suggestion request after a tool turn: the conversation
    // holds the knob, but the last user message is its own instruction.
    let suggestion = json!({"model": "m", "max_tokens": 10, "tools": [{"name": "Write"}],
        "messages": [
            {"role": "user", "content": knob("Write")},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
            {"role": "assistant", "content": "tool result received: ok"},
            {"role": "user", "content": "[SUGGESTION MODE: Suggest what the user might type next]"}]});
    let v = post(port, "/v1/messages", &suggestion).json();
    assert_eq!(v["content"][0]["text"], CANNED_REPLY);
    // Codex's approval review: structured output, tools offered, the
    // agent's history (knob included) quoted in the prompt.
    let review = json!({"model": "m", "input": format!("history: {}", knob("exec_command")),
        "tools": [{"type": "function", "name": "exec_command"}],
        "text": {"format": {"type": "json_schema", "name": "r", "schema": {"type": "object"}}}});
    let v = post(port, "/v1/responses", &review).json();
    assert_eq!(v["output"][0]["type"], "message");

    let log = log(&server, 6);
    assert!(log.iter().all(|r| r.tool_call.is_none()));
}
