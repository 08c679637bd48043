//! Anthropic Messages API (Claude Code): `POST /v1/messages[?beta=true]`.
//!
//! A streamed reply is `message_start`, `content_block_start`,
//! `content_block_delta` (`text_delta`) per piece, `content_block_stop`,
//! `message_delta` (`stop_reason: "end_turn"`, usage) and `message_stop`,
//! which is what the Anthropic SDK inside Claude Code assembles a message
//! from. A session-title request asks for JSON through
//! `output_config.format` (or the older `output_format`).

use serde_json::{json, Value};

use crate::sse::{Event, EventSource, Reply};

/// Text of the last user message that has any.
pub fn prompt(body: &Value) -> Option<String> {
    let messages = body.get("messages")?.as_array()?;
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| crate::content_text(m.get("content")?, &["text"]))
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
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": "end_turn",
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
        vec![Event::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        )]
    }

    fn delta(&mut self, text: &str) -> Vec<Event> {
        vec![Event::named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
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
                    "delta": {"stop_reason": "end_turn", "stop_sequence": null},
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
    fn structured() {
        let s = json!({"type": "object"});
        let body = json!({"output_config": {"format": {"type": "json_schema", "schema": s}}});
        assert_eq!(schema(&body), Some(s));
        assert_eq!(schema(&json!({"output_config": {"effort": "low"}})), None);
    }
}
