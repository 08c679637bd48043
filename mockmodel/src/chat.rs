//! OpenAI Chat Completions API (opencode, through `@ai-sdk/openai-compatible`):
//! `POST /v1/chat/completions`.
//!
//! A streamed reply is one `chat.completion.chunk` per piece (the first
//! carries `role: "assistant"`), a chunk with `finish_reason: "stop"`, a
//! usage chunk with no choices when `stream_options.include_usage` is set,
//! and `data: [DONE]`. A tool call streams its arguments as `tool_calls`
//! deltas and finishes with `finish_reason: "tool_calls"`; its result comes
//! back as a `role: "tool"` message. Structured output is asked for through
//! `response_format`.

use serde_json::{json, Value};

use crate::sse::{Event, EventSource, Reply};
use crate::tools::result_text;

/// Text of the last user message that has any.
pub fn prompt(body: &Value) -> Option<String> {
    body.get("messages")?
        .as_array()?
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|m| crate::content_text(m.get("content")?, &["text"]))
}

/// Names of the `function` tools.
pub fn tools(body: &Value) -> Vec<String> {
    crate::tools::offered(body, |kind| kind == Some("function"), "/function/name")
}

/// The content of the `role: "tool"` messages that end the conversation.
pub fn tool_result(body: &Value) -> Option<String> {
    let results: Vec<String> = body
        .get("messages")?
        .as_array()?
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .map(|m| result_text(m.get("content")))
        .collect();
    (!results.is_empty()).then(|| results.into_iter().rev().collect::<Vec<_>>().join("\n"))
}

fn finish_reason(r: &Reply) -> &'static str {
    match r.tool {
        Some(_) => "tool_calls",
        None => "stop",
    }
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
        "choices": [{"index": 0, "message": message(r),
            "logprobs": null, "finish_reason": finish_reason(r)}],
        "usage": usage(r)})
}

fn message(r: &Reply) -> Value {
    match &r.tool {
        Some(t) => json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": t.id, "type": "function",
            "function": {"name": t.name, "arguments": r.text}}]}),
        None => json!({"role": "assistant", "content": r.text}),
    }
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
        let first = !self.sent_role;
        self.sent_role = true;
        let mut delta = match &self.reply.tool {
            // The first piece names the call; the others only add arguments.
            Some(t) if first => json!({"content": null, "tool_calls": [{"index": 0,
                "id": t.id, "type": "function",
                "function": {"name": t.name, "arguments": text}}]}),
            Some(_) => json!({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}),
            None => json!({"content": text}),
        };
        if first {
            delta["role"] = json!("assistant");
        }
        let choices = json!([{"index": 0, "delta": delta, "logprobs": null,
            "finish_reason": null}]);
        vec![self.chunk(choices, None)]
    }

    fn finish(&mut self) -> Vec<Event> {
        let stop = json!([{"index": 0, "delta": {}, "logprobs": null,
            "finish_reason": finish_reason(&self.reply)}]);
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
    fn tools_and_results() {
        let body = json!({"tools": [{"type": "function", "function": {"name": "write"}},
            {"type": "function", "function": {"name": "bash"}}]});
        assert_eq!(tools(&body), ["write", "bash"]);
        let body = json!({"messages": [
            {"role": "user", "content": "TOOL=write"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "write", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Wrote file successfully."},
        ]});
        assert_eq!(
            tool_result(&body).as_deref(),
            Some("Wrote file successfully.")
        );
        assert_eq!(
            tool_result(&json!({"messages": [{"role": "user", "content": "x"}]})),
            None
        );
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
