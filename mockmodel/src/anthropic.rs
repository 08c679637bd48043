//! Anthropic Messages API (Claude Code): `POST /v1/messages[?beta=true]`.
//!
//! A streamed reply is `message_start`, `content_block_start`,
//! `content_block_delta` (`text_delta`) per piece, `content_block_stop`,
//! `message_delta` (`stop_reason: "end_turn"`, usage) and `message_stop`,
//! which is what the Anthropic SDK inside Claude Code assembles a message
//! from. A tool call is one `tool_use` block whose input is streamed as
//! `input_json_delta` pieces, with `stop_reason: "tool_use"`; its result
//! comes back as a `tool_result` block in the next user message. A
//! session-title request asks for JSON through `output_config.format` (or
//! the older `output_format`).

use serde_json::{json, Value};

use crate::sse::{Event, EventSource, Reply};
use crate::tools::result_text;

/// Text of the last user message that has any.
pub fn prompt(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| crate::content_text(m.get("content")?, &["text"]))
}

/// Names of the tools the client runs itself (server tools such as web
/// search have a `type` of their own).
pub fn tools(body: &Value) -> Vec<String> {
    crate::tools::offered(body, |kind| kind.is_none_or(|k| k == "custom"), "/name")
}

/// The text of the tool results the last message carries, when it is a
/// user message holding `tool_result` blocks.
pub fn tool_result(body: &Value) -> Option<String> {
    let last = body.get("messages")?.as_array()?.last()?;
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let results: Vec<String> = last
        .get("content")?
        .as_array()?
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| result_text(b.get("content")))
        .collect();
    (!results.is_empty()).then(|| results.join("\n"))
}

fn stop_reason(reply: &Reply) -> &'static str {
    match reply.tool {
        Some(_) => "tool_use",
        None => "end_turn",
    }
}

/// The JSON schema the reply must fit, for a structured-output request.
pub fn schema(body: &Value) -> Option<Value> {
    let format = body
        .pointer("/output_config/format")
        .or_else(|| body.get("output_format"))?;
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => Some(format.get("schema").cloned().unwrap_or(json!({}))),
        _ => None,
    }
}

fn usage(reply: &Reply, output_tokens: u64) -> Value {
    json!({
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    })
}

/// The whole message, for a request without `"stream": true`.
pub fn message(reply: &Reply) -> Value {
    json!({
        "id": reply.id,
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [match &reply.tool {
            Some(t) => json!({"type": "tool_use", "id": t.id, "name": t.name, "input": t.arguments}),
            None => json!({"type": "text", "text": reply.text}),
        }],
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage(reply, reply.output_tokens()),
    })
}

/// The answer to `POST /v1/messages/count_tokens`.
pub fn count_tokens(input_tokens: u64) -> Value {
    json!({"input_tokens": input_tokens})
}

/// The streamed events of a reply.
pub struct Stream(pub Reply);

impl EventSource for Stream {
    fn preamble(&mut self) -> Vec<Event> {
        let r = &self.0;
        let mut message = message(r);
        message["content"] = json!([]);
        message["stop_reason"] = Value::Null;
        message["usage"] = usage(r, 1);
        vec![Event::named(
            "message_start",
            &json!({"type": "message_start", "message": message}),
        )]
    }

    fn first(&mut self) -> Vec<Event> {
        let block = match &self.0.tool {
            Some(t) => json!({"type": "tool_use", "id": t.id, "name": t.name, "input": {}}),
            None => json!({"type": "text", "text": ""}),
        };
        vec![Event::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": block}),
        )]
    }

    fn delta(&mut self, text: &str) -> Vec<Event> {
        let delta = match self.0.tool {
            Some(_) => json!({"type": "input_json_delta", "partial_json": text}),
            None => json!({"type": "text_delta", "text": text}),
        };
        vec![Event::named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        )]
    }

    fn finish(&mut self) -> Vec<Event> {
        let r = &self.0;
        vec![
            Event::named(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": 0}),
            ),
            Event::named(
                "message_delta",
                &json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason(r), "stop_sequence": null},
                    "usage": {"output_tokens": r.output_tokens()}}),
            ),
            Event::named("message_stop", &json!({"type": "message_stop"})),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_user_text() {
        let body = json!({"messages": [
            {"role": "user", "content": "first THINK=1"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>x</system-reminder>"},
                {"type": "image", "source": {}},
                {"type": "text", "text": "say hello SLOW=8"}]},
        ]});
        assert_eq!(
            prompt(&body).as_deref(),
            Some("<system-reminder>x</system-reminder>\nsay hello SLOW=8")
        );
    }

    #[test]
    fn tools_and_results() {
        let body = json!({"tools": [{"name": "Write", "input_schema": {}},
            {"type": "custom", "name": "Bash"},
            {"type": "web_search_20250305", "name": "web_search"}]});
        assert_eq!(tools(&body), ["Write", "Bash"]);
        assert!(tools(&json!({})).is_empty());
        let body = json!({"messages": [
            {"role": "user", "content": "TOOL=Write"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "File created"}]},
                {"type": "text", "text": "<system-reminder>x</system-reminder>"}]},
        ]});
        assert_eq!(tool_result(&body).as_deref(), Some("File created"));
        let body = json!({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "plain"}]}]});
        assert_eq!(tool_result(&body).as_deref(), Some("plain"));
        assert_eq!(
            tool_result(&json!({"messages": [{"role": "user", "content": "hi"}]})),
            None
        );
    }

    #[test]
    fn structured() {
        let s = json!({"type": "object"});
        let body = json!({"output_config": {"format": {"type": "json_schema", "schema": s}}});
        assert_eq!(schema(&body), Some(s));
        assert_eq!(schema(&json!({"output_config": {"effort": "low"}})), None);
    }
}
