//! OpenAI Responses API (Codex): `POST /v1/responses`.
//!
//! A streamed reply is `response.created`, `response.in_progress`,
//! `response.output_item.added` (a message), `response.content_part.added`,
//! `response.output_text.delta` per piece, `response.output_text.done`,
//! `response.content_part.done`, `response.output_item.done` and
//! `response.completed` with usage; Codex treats a stream that ends without
//! `response.completed` as failed and retries it. A tool call is a
//! `function_call` item instead, its arguments streamed as
//! `response.function_call_arguments.delta`; its result comes back as a
//! `function_call_output` input item. A session-title request asks for JSON
//! through `text.format`.
//!
//! Codex 0.171 offers an MCP server's tools inside one `namespace` tool,
//! `{"type": "namespace", "name": "mcp__<server>", "tools": [<function
//! tools>]}`, and runs a call of one only when the `function_call` item
//! names the `namespace` and the tool's own `name` (a flat
//! `mcp__<server>__<tool>` name is an unknown tool to it). Here such a tool
//! is offered to the knob as `<namespace>__<name>`
//! (`TOOL=mcp__agent_comms__cell_run`), and its call is sent that way.

use serde_json::{json, Value};

use crate::sse::{Event, EventSource, Reply};
use crate::tools::result_text;

/// Text of the last user message that has any (`input` may also be a
/// plain string).
pub fn prompt(body: &Value) -> Option<String> {
    let input = body.get("input")?;
    if let Some(s) = input.as_str() {
        return Some(s.to_string());
    }
    input
        .as_array()?
        .iter()
        .rev()
        .filter(|i| i.get("type").and_then(Value::as_str).unwrap_or("message") == "message")
        .filter(|i| i.get("role").and_then(Value::as_str) == Some("user"))
        .find_map(|i| crate::content_text(i.get("content")?, &["input_text", "text"]))
}

/// Names of the `function` tools (Codex's shell is the function
/// `exec_command`), then of the function tools in namespaces, as
/// `<namespace>__<name>` (see the module documentation).
pub fn tools(body: &Value) -> Vec<String> {
    let mut names = crate::tools::offered(body, |kind| kind == Some("function"), "/name");
    names.extend(namespaced(body).into_iter().map(|(name, _)| name));
    names
}

/// The function tools offered inside `namespace` tools: each one's
/// `<namespace>__<name>`, and its namespace.
pub fn namespaced(body: &Value) -> Vec<(String, String)> {
    let Some(tools) = body.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter(|t| t.get("type").and_then(Value::as_str) == Some("namespace"))
        .filter_map(|ns| Some((ns.get("name")?.as_str()?, ns)))
        .flat_map(|(namespace, ns)| {
            crate::tools::offered(ns, |kind| kind == Some("function"), "/name")
                .into_iter()
                .map(move |name| (format!("{namespace}__{name}"), namespace.to_owned()))
        })
        .collect()
}

/// The output of a function call, when the input's last user message or
/// call output is a call output.
pub fn tool_result(body: &Value) -> Option<String> {
    let last = body.get("input")?.as_array()?.iter().rev().find(|i| {
        let kind = i.get("type").and_then(Value::as_str).unwrap_or("message");
        kind == "function_call_output"
            || (kind == "message" && i.get("role").and_then(Value::as_str) == Some("user"))
    })?;
    (last.get("type").and_then(Value::as_str) == Some("function_call_output"))
        .then(|| result_text(last.get("output")))
}

/// The JSON schema the reply must fit, for a structured-output request.
pub fn schema(body: &Value) -> Option<Value> {
    let format = body.pointer("/text/format")?;
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => Some(format.get("schema").cloned().unwrap_or(json!({}))),
        Some("json_object") => Some(json!({"type": "object"})),
        _ => None,
    }
}

fn item_id(r: &Reply) -> String {
    match r.tool {
        Some(_) => format!("fc_{}", r.id),
        None => format!("msg_{}", r.id),
    }
}

/// The output item: a message holding `text`, or the function call with
/// `text` as its arguments.
fn output_item(r: &Reply, status: &str, text: Option<&str>) -> Value {
    if let Some(t) = &r.tool {
        let mut item = json!({"id": item_id(r), "type": "function_call", "status": status,
            "call_id": t.id, "name": t.name, "arguments": text.unwrap_or_default()});
        if let Some(ns) = &t.namespace {
            let name = t.name.strip_prefix(&format!("{ns}__")).unwrap_or(&t.name);
            item["namespace"] = json!(ns);
            item["name"] = json!(name);
        }
        return item;
    }
    let content = match text {
        Some(t) => json!([{"type": "output_text", "text": t, "annotations": []}]),
        None => json!([]),
    };
    json!({"id": item_id(r), "type": "message", "status": status,
        "role": "assistant", "content": content})
}

fn response(r: &Reply, status: &str, done: bool) -> Value {
    let (output, usage) = if done {
        let out = r.output_tokens();
        (
            json!([output_item(r, "completed", Some(&r.text))]),
            json!({"input_tokens": r.input_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": r.input_tokens + out}),
        )
    } else {
        (json!([]), Value::Null)
    };
    json!({"id": r.id, "object": "response", "created_at": r.created,
        "status": status, "error": null, "incomplete_details": null,
        "model": r.model, "output": output, "usage": usage})
}

/// The whole response, for a request without `"stream": true`.
pub fn complete(reply: &Reply) -> Value {
    response(reply, "completed", true)
}

/// The streamed events of a reply.
pub struct Stream {
    reply: Reply,
    seq: u64,
}

impl Stream {
    pub fn new(reply: Reply) -> Stream {
        Stream { reply, seq: 0 }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Event {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        Event::named(kind, &data)
    }

    fn part(&mut self, kind: &str, extra: Value) -> Event {
        let mut data = json!({"item_id": item_id(&self.reply), "output_index": 0,
            "content_index": 0});
        if let (Value::Object(d), Value::Object(e)) = (&mut data, extra) {
            d.extend(e);
        }
        self.event(kind, data)
    }
}

impl EventSource for Stream {
    fn preamble(&mut self) -> Vec<Event> {
        let r = response(&self.reply, "in_progress", false);
        vec![
            self.event("response.created", json!({"response": r})),
            self.event("response.in_progress", json!({"response": r})),
        ]
    }

    fn first(&mut self) -> Vec<Event> {
        let item = output_item(&self.reply, "in_progress", None);
        let added = self.event(
            "response.output_item.added",
            json!({"output_index": 0, "item": item}),
        );
        if self.reply.tool.is_some() {
            return vec![added];
        }
        vec![
            added,
            self.part(
                "response.content_part.added",
                json!({"part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        ]
    }

    fn delta(&mut self, text: &str) -> Vec<Event> {
        if self.reply.tool.is_some() {
            let data = json!({"item_id": item_id(&self.reply), "output_index": 0, "delta": text});
            return vec![self.event("response.function_call_arguments.delta", data)];
        }
        vec![self.part(
            "response.output_text.delta",
            json!({"delta": text, "logprobs": []}),
        )]
    }

    fn finish(&mut self) -> Vec<Event> {
        let text = self.reply.text.clone();
        let item = output_item(&self.reply, "completed", Some(&text));
        let done = response(&self.reply, "completed", true);
        let mut events = if self.reply.tool.is_some() {
            let data = json!({"item_id": item_id(&self.reply), "output_index": 0,
                "arguments": text});
            vec![self.event("response.function_call_arguments.done", data)]
        } else {
            vec![
                self.part(
                    "response.output_text.done",
                    json!({"text": text, "logprobs": []}),
                ),
                self.part(
                    "response.content_part.done",
                    json!({"part": {"type": "output_text", "text": text, "annotations": []}}),
                ),
            ]
        };
        events.push(self.event(
            "response.output_item.done",
            json!({"output_index": 0, "item": item}),
        ));
        events.push(self.event("response.completed", json!({"response": done})));
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_user_message() {
        let body = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "dev"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say hello"}]},
            {"type": "reasoning", "summary": []},
        ]});
        assert_eq!(prompt(&body).as_deref(), Some("say hello"));
        assert_eq!(prompt(&json!({"input": "hi"})).as_deref(), Some("hi"));
    }

    #[test]
    fn tools_and_results() {
        let body = json!({"tools": [
            {"type": "function", "name": "exec_command", "parameters": {}},
            {"type": "namespace", "name": "multi_agent_v1"},
            {"type": "web_search"}]});
        assert_eq!(tools(&body), ["exec_command"]);
        let body = json!({"input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "TOOL=exec_command"}]},
            {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 0"},
            {"type": "reasoning", "summary": []},
        ]});
        assert_eq!(
            tool_result(&body).as_deref(),
            Some("Process exited with code 0")
        );
        let mut next = body.clone();
        next["input"].as_array_mut().unwrap().push(
            json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "again"}]}),
        );
        assert_eq!(tool_result(&next), None);
    }

    #[test]
    fn namespaced_tools_are_offered_and_called_by_namespace() {
        let body = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "mcp__agent_comms", "description": "d",
                "tools": [{"type": "function", "name": "cell_run", "parameters": {}},
                    {"type": "function", "name": "cell_new", "parameters": {}}]}]});
        assert_eq!(
            tools(&body),
            [
                "exec_command",
                "mcp__agent_comms__cell_run",
                "mcp__agent_comms__cell_new"
            ]
        );
        let call = |name: &str, namespace: Option<&str>| Reply {
            id: "r".into(),
            model: "m".into(),
            text: "{}".into(),
            tool: Some(crate::ToolCall {
                id: "c1".into(),
                name: name.into(),
                namespace: namespace.map(String::from),
                arguments: json!({}),
            }),
            input_tokens: 1,
            created: 0,
        };
        let item = output_item(
            &call("mcp__agent_comms__cell_run", Some("mcp__agent_comms")),
            "completed",
            Some("{}"),
        );
        assert_eq!(
            (&item["namespace"], &item["name"]),
            (&json!("mcp__agent_comms"), &json!("cell_run"))
        );
        let item = output_item(&call("exec_command", None), "completed", Some("{}"));
        assert_eq!(item["name"], "exec_command");
        assert!(item.get("namespace").is_none(), "{item}");
    }

    #[test]
    fn structured() {
        let s = json!({"type": "object", "required": ["title"]});
        let body = json!({"text": {"format": {"type": "json_schema", "name": "t", "schema": s}}});
        assert_eq!(schema(&body), Some(s));
        assert_eq!(schema(&json!({"text": {"format": {"type": "text"}}})), None);
    }
}
