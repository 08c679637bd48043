//! OpenAI Chat Completions API (opencode, through `@ai-sdk/openai-compatible`):
//! `POST /v1/chat/completions`.
//!
//! A streamed reply is one `chat.completion.chunk` per piece (the first
//! carries `role: "assistant"`), a chunk with `finish_reason: "stop"`, a
//! usage chunk with no choices when `stream_options.include_usage` is set,
//! and `data: [DONE]`. Structured output is asked for through
//! `response_format`.

use serde_json::{json, Value};

use crate::sse::{Event, EventSource, Reply};

/// Text of the last user message that has any.
pub fn prompt(body: &Value) -> Option<String> {
    body.get("messages")?
        .as_array()?
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| crate::content_text(m.get("content")?, &["text"]))
}

/// The JSON schema the reply must fit, for a structured-output request.
pub fn schema(body: &Value) -> Option<Value> {
    let format = body.get("response_format")?;
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => Some(
            format
                .pointer("/json_schema/schema")
                .cloned()
                .unwrap_or(json!({})),
        ),
        Some("json_object") => Some(json!({"type": "object"})),
        _ => None,
    }
}

fn usage(r: &Reply) -> Value {
    let out = r.output_tokens();
    json!({"prompt_tokens": r.input_tokens, "completion_tokens": out,
        "total_tokens": r.input_tokens + out})
}

/// The whole completion, for a request without `"stream": true`.
pub fn complete(r: &Reply) -> Value {
    json!({"id": r.id, "object": "chat.completion", "created": r.created,
        "model": r.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": r.text},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": usage(r)})
}

/// Whether the request asked for a usage chunk at the end of the stream.
pub fn include_usage(body: &Value) -> bool {
    body.pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The streamed events of a reply.
pub struct Stream {
    reply: Reply,
    include_usage: bool,
    sent_role: bool,
}

impl Stream {
    pub fn new(reply: Reply, include_usage: bool) -> Stream {
        Stream {
            reply,
            include_usage,
            sent_role: false,
        }
    }

    fn chunk(&self, choices: Value, usage: Option<Value>) -> Event {
        let r = &self.reply;
        let mut c = json!({"id": r.id, "object": "chat.completion.chunk",
            "created": r.created, "model": r.model, "choices": choices});
        if self.include_usage {
            c["usage"] = usage.unwrap_or(Value::Null);
        }
        Event::data(c.to_string())
    }
}

impl EventSource for Stream {
    fn delta(&mut self, text: &str) -> Vec<Event> {
        let delta = if self.sent_role {
            json!({"content": text})
        } else {
            self.sent_role = true;
            json!({"role": "assistant", "content": text})
        };
        let choices = json!([{"index": 0, "delta": delta, "logprobs": null,
            "finish_reason": null}]);
        vec![self.chunk(choices, None)]
    }

    fn finish(&mut self) -> Vec<Event> {
        let stop = json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "stop"}]);
        let mut events = vec![self.chunk(stop, None)];
        if self.include_usage {
            events.push(self.chunk(json!([]), Some(usage(&self.reply))));
        }
        events.push(Event::data("[DONE]"));
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_user_message() {
        let body = json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "say hello DELTAS=3"}]},
        ]});
        assert_eq!(prompt(&body).as_deref(), Some("say hello DELTAS=3"));
    }

    #[test]
    fn structured() {
        let s = json!({"type": "object"});
        let body = json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "x", "schema": s}}});
        assert_eq!(schema(&body), Some(s));
        assert_eq!(schema(&json!({"response_format": {"type": "text"}})), None);
    }
}
