//! The readable view of an ACP run's transcript (`agent-comms acp log ID`).
//!
//! The tap ([`super::transcript`]) writes every JSON-RPC message in both
//! directions as one [`Entry`] per line; `--json` is the file as it is.
//! [`LogView`] turns entries into
//! what a person follows: the prompts sent and the agent's replies (a
//! streamed reply as one paragraph, also when followed live), its
//! thoughts, tool calls and their status, permission requests and how they
//! were answered, file and terminal requests and whether they were
//! served, stop reasons, and the supervisor's notes. Everything else
//! (usage, command lists, modes…) stays in the transcript only.
//!
//! Responses carry only an id, so the view remembers the requests it saw
//! until their response: what a stop reason, an answer or a refusal is
//! about. Every piece of text from the agent is escaped for the terminal
//! ([`crate::display`]); the line breaks of a message are kept, and its
//! further lines are indented under its first.

use std::collections::HashMap;

use serde_json::Value;

use super::transcript::{Direction, Entry};
use crate::display;

/// The width labels are padded to, so that text starts in one column.
const LABEL_WIDTH: usize = 10;
/// The further lines of a message, under its first: the time, a space,
/// the label and a space.
const INDENT: &str = "                    ";

/// The readable view, fed one entry at a time.
#[derive(Debug, Default)]
pub struct LogView {
    /// Requests awaiting their response, by who sent them and their id.
    pending: HashMap<(Direction, String), Pending>,
    /// Tool calls not yet finished, by id: an update names only what
    /// changed.
    tools: HashMap<String, Tool>,
    /// The paragraph still open for more chunks.
    open: Option<Paragraph>,
}

/// A request whose response the view shows.
#[derive(Debug)]
enum Pending {
    /// Ours: its method names it in an error.
    Sent { method: String, kind: Sent },
    /// The agent's permission request: what it is about and the options'
    /// kinds, to say which one the answer chose.
    Permission {
        about: String,
        kinds: HashMap<String, String>,
    },
    /// The agent's file or terminal request: its label and what it asks.
    Service { label: &'static str, what: String },
}

#[derive(Debug)]
enum Sent {
    Initialize,
    NewSession,
    /// `session/load` or `session/resume` of this session id.
    Continue {
        how: &'static str,
        session: String,
    },
    Prompt,
    Other,
}

#[derive(Debug, Clone, Default)]
struct Tool {
    title: String,
    kind: String,
    status: String,
}

impl Tool {
    fn shown(&self) -> String {
        format!("{} [{}] {}", self.title, self.kind, self.status)
    }
}

/// Who a paragraph is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Agent,
    Thought,
}

impl Speaker {
    fn label(self) -> &'static str {
        match self {
            Speaker::User => "user",
            Speaker::Agent => "agent",
            Speaker::Thought => "thought",
        }
    }
}

#[derive(Debug)]
struct Paragraph {
    speaker: Speaker,
    /// Chunks of another message (when the agent names them) start a new
    /// paragraph.
    message_id: Option<String>,
    /// The last text written ended a line: the next starts with the indent.
    at_line_start: bool,
}

impl LogView {
    pub fn new() -> Self {
        Self::default()
    }

    /// The text to print for `e`, possibly empty. A paragraph may be left
    /// open for the next chunk; [`LogView::finish`] closes it.
    pub fn push(&mut self, e: &Entry) -> String {
        let mut out = Out {
            text: String::new(),
            time: clock(&e.ts),
        };
        match (e.dir, &e.msg, &e.text) {
            (Direction::Note, msg, text) => {
                let note = text.clone().or_else(|| msg.as_ref().map(Value::to_string));
                self.line(&mut out, "note", note.as_deref().unwrap_or(""));
            }
            (dir, Some(Value::Object(msg)), _) => self.message(&mut out, dir, msg),
            (dir, Some(other), _) => {
                self.line(&mut out, "garbage", &format!("{}: {other}", side(dir)));
            }
            (dir, None, Some(text)) => {
                self.line(&mut out, "garbage", &format!("{}: {text}", side(dir)));
            }
            (_, None, None) => {}
        }
        out.text
    }

    /// The closing line break of a paragraph still open, if any.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.close(&mut out);
        out
    }

    fn message(&mut self, out: &mut Out, dir: Direction, msg: &serde_json::Map<String, Value>) {
        let id = msg.get("id").map(Value::to_string);
        let params = msg.get("params").unwrap_or(&Value::Null);
        match (msg.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => self.request(out, dir, id, method, params),
            (Some(method), None) => self.notification(out, dir, method, params),
            (None, Some(id)) => {
                let answered = match dir {
                    Direction::FromAgent => Direction::ToAgent,
                    _ => Direction::FromAgent,
                };
                let pending = self.pending.remove(&(answered, id));
                self.response(out, pending, msg.get("result"), msg.get("error"));
            }
            (None, None) => {}
        }
    }

    // Long: one table, method by method, of what a request shows and what
    // its response is remembered as; split, it would be read in pieces.
    fn request(&mut self, out: &mut Out, dir: Direction, id: String, method: &str, params: &Value) {
        let pending = match (dir, method) {
            (Direction::ToAgent, _) => {
                let kind = match method {
                    "initialize" => Sent::Initialize,
                    "session/new" => Sent::NewSession,
                    "session/load" | "session/resume" => Sent::Continue {
                        how: if method == "session/load" {
                            "loaded"
                        } else {
                            "resumed"
                        },
                        session: text_at(params, "sessionId"),
                    },
                    "session/prompt" => {
                        let prompt = params.get("prompt").and_then(Value::as_array);
                        let parts: Vec<String> =
                            prompt.into_iter().flatten().map(content_text).collect();
                        let mut text = parts.join("\n");
                        // A client's prompt says whose it is.
                        if let Some(from) = super::bridge::history::prompt_origin(params) {
                            text = format!("({from}) {text}");
                        }
                        self.paragraph(out, Speaker::User, None, &text);
                        self.close(&mut out.text);
                        Sent::Prompt
                    }
                    _ => Sent::Other,
                };
                Pending::Sent {
                    method: method.to_owned(),
                    kind,
                }
            }
            (_, "session/request_permission") => {
                let call = params.get("toolCall").unwrap_or(&Value::Null);
                let about = self.tool_about(call);
                let options = params.get("options").and_then(Value::as_array);
                let options: Vec<(String, String)> = options
                    .into_iter()
                    .flatten()
                    .map(|o| (text_at(o, "optionId"), text_at(o, "kind")))
                    .collect();
                let offered: Vec<String> = options
                    .iter()
                    .map(|(id, kind)| format!("{id} ({kind})"))
                    .collect();
                self.line(
                    out,
                    "permission",
                    &format!("{about}: {}", offered.join(", ")),
                );
                Pending::Permission {
                    about,
                    kinds: options.into_iter().collect(),
                }
            }
            (_, "fs/read_text_file" | "fs/write_text_file") => {
                let verb = if method == "fs/read_text_file" {
                    "read"
                } else {
                    "write"
                };
                Pending::Service {
                    label: "fs",
                    what: format!("{verb} {}", text_at(params, "path")),
                }
            }
            (_, "terminal/create") => {
                let mut command = vec![text_at(params, "command")];
                let args = params.get("args").and_then(Value::as_array);
                command.extend(args.into_iter().flatten().map(plain));
                let cwd = params.get("cwd").and_then(Value::as_str).unwrap_or("");
                let mut what = format!("create {}", command.join(" "));
                if !cwd.is_empty() {
                    what.push_str(&format!(" in {cwd}"));
                }
                Pending::Service {
                    label: "terminal",
                    what,
                }
            }
            (_, m) if m.starts_with("terminal/") => Pending::Service {
                label: "terminal",
                what: format!(
                    "{} {}",
                    &m["terminal/".len()..],
                    text_at(params, "terminalId")
                ),
            },
            _ => return,
        };
        self.pending.insert((dir, id), pending);
    }

    fn notification(&mut self, out: &mut Out, dir: Direction, method: &str, params: &Value) {
        match (dir, method) {
            (Direction::ToAgent, "session/cancel") => self.line(out, "cancel", "sent"),
            (Direction::FromAgent, "session/update") => {
                self.update(out, params.get("update").unwrap_or(&Value::Null));
            }
            _ => {}
        }
    }

    fn update(&mut self, out: &mut Out, update: &Value) {
        let speaker = match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("user_message_chunk") => Speaker::User,
            Some("agent_message_chunk") => Speaker::Agent,
            Some("agent_thought_chunk") => Speaker::Thought,
            Some("tool_call") => {
                let tool = Tool {
                    title: text_at(update, "title"),
                    kind: field_or(update, "kind", "other"),
                    status: field_or(update, "status", "pending"),
                };
                self.line(out, "tool", &tool.shown());
                self.tools.insert(text_at(update, "toolCallId"), tool);
                return;
            }
            Some("tool_call_update") => return self.tool_update(out, update),
            _ => return,
        };
        let message_id = update
            .get("messageId")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let content = update.get("content").unwrap_or(&Value::Null);
        self.paragraph(out, speaker, message_id, &content_text(content));
    }

    /// A tool call's new status or title; updates of its content or
    /// input alone are not shown.
    fn tool_update(&mut self, out: &mut Out, update: &Value) {
        let id = text_at(update, "toolCallId");
        let tool = self.tools.entry(id.clone()).or_default();
        let before = tool.clone();
        for (field, value) in [
            ("title", &mut tool.title),
            ("kind", &mut tool.kind),
            ("status", &mut tool.status),
        ] {
            if let Some(new) = update.get(field).and_then(Value::as_str) {
                *value = new.to_owned();
            }
        }
        // An update of a call the view never saw announced.
        if tool.title.is_empty() {
            tool.title.clone_from(&id);
        }
        if tool.kind.is_empty() {
            tool.kind = "other".into();
        }
        let changed = tool.status != before.status || tool.title != before.title;
        let shown = tool.shown();
        if matches!(tool.status.as_str(), "completed" | "failed") {
            self.tools.remove(&id);
        }
        if changed {
            self.line(out, "tool", &shown);
        }
    }

    fn response(
        &mut self,
        out: &mut Out,
        pending: Option<Pending>,
        result: Option<&Value>,
        error: Option<&Value>,
    ) {
        let failure = error.map(|e| {
            let code = e.get("code").map(Value::to_string).unwrap_or_default();
            format!("{} ({code})", text_at(e, "message"))
        });
        match (pending, failure) {
            (None, Some(failure)) => self.line(out, "error", &failure),
            (None, None) => {}
            (Some(Pending::Sent { method, .. }), Some(failure)) => {
                self.line(out, "error", &format!("{method}: {failure}"));
            }
            (Some(Pending::Sent { kind, .. }), None) => {
                let result = result.unwrap_or(&Value::Null);
                self.sent_result(out, kind, result);
            }
            (Some(Pending::Permission { about, .. }), Some(failure)) => {
                self.line(out, "answer", &format!("{about}: error: {failure}"));
            }
            (Some(Pending::Permission { about, kinds }), None) => {
                let outcome = result.and_then(|r| r.get("outcome"));
                let outcome = outcome.unwrap_or(&Value::Null);
                let answer = match outcome.get("outcome").and_then(Value::as_str) {
                    Some("selected") => {
                        let id = text_at(outcome, "optionId");
                        match kinds.get(&id) {
                            Some(kind) => format!("{id} ({kind})"),
                            None => format!("{id} (not offered)"),
                        }
                    }
                    Some(other) => other.to_owned(),
                    None => "no outcome".to_owned(),
                };
                self.line(out, "answer", &format!("{about}: {answer}"));
            }
            (Some(Pending::Service { label, what }), failure) => {
                let how = match failure {
                    Some(failure) => format!("refused: {failure}"),
                    None => "served".to_owned(),
                };
                self.line(out, label, &format!("{what}: {how}"));
            }
        }
    }

    fn sent_result(&mut self, out: &mut Out, kind: Sent, result: &Value) {
        match kind {
            Sent::Initialize => {
                let info = result.get("agentInfo").unwrap_or(&Value::Null);
                let name = text_at(info, "name");
                let version = text_at(info, "version");
                let protocol = result.get("protocolVersion").map(plain).unwrap_or_default();
                let who = format!("{name} {version}");
                let who = if who.trim().is_empty() {
                    "(no agentInfo)"
                } else {
                    who.trim()
                };
                self.line(out, "agent", &format!("{who}, protocol {protocol}"));
            }
            Sent::NewSession => {
                let id = text_at(result, "sessionId");
                self.line(out, "session", &format!("{id} (new)"));
            }
            Sent::Continue { how, session } => {
                self.line(out, "session", &format!("{session} ({how})"));
            }
            Sent::Prompt => self.line(out, "stop", &text_at(result, "stopReason")),
            Sent::Other => {}
        }
    }

    /// How a tool call is named: its title and kind as given, or as its
    /// `tool_call` said.
    fn tool_about(&self, call: &Value) -> String {
        let known = self.tools.get(&text_at(call, "toolCallId"));
        let title = call
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| known.map(|t| t.title.clone()))
            .unwrap_or_default();
        let kind = call
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or_else(|| known.map(|t| t.kind.clone()))
            .unwrap_or_else(|| "other".to_owned());
        format!("{title} [{kind}]")
    }

    /// One whole line: `HH:MM:SS label text`, `text` escaped onto it.
    fn line(&mut self, out: &mut Out, label: &str, text: &str) {
        self.close(&mut out.text);
        out.text.push_str(&format!(
            "{} {label:<LABEL_WIDTH$} {}\n",
            out.time,
            display::one_line(text)
        ));
    }

    /// `text` added to the paragraph of `speaker`, which is opened (with
    /// its header) unless it is the one open.
    fn paragraph(
        &mut self,
        out: &mut Out,
        speaker: Speaker,
        message_id: Option<String>,
        text: &str,
    ) {
        let continues = self.open.as_ref().is_some_and(|p| {
            p.speaker == speaker
                && match (&p.message_id, &message_id) {
                    (Some(open), Some(new)) => open == new,
                    _ => true,
                }
        });
        if !continues {
            self.close(&mut out.text);
            out.text
                .push_str(&format!("{} {:<LABEL_WIDTH$} ", out.time, speaker.label()));
            self.open = Some(Paragraph {
                speaker,
                message_id: None,
                at_line_start: false,
            });
        }
        let Some(open) = self.open.as_mut() else {
            return;
        };
        if message_id.is_some() {
            open.message_id = message_id;
        }
        for (i, piece) in text.split('\n').enumerate() {
            if i > 0 {
                out.text.push('\n');
                open.at_line_start = true;
            }
            if piece.is_empty() {
                continue;
            }
            if open.at_line_start {
                out.text.push_str(INDENT);
                open.at_line_start = false;
            }
            out.text.push_str(&display::one_line(piece));
        }
    }

    fn close(&mut self, out: &mut String) {
        if let Some(open) = self.open.take() {
            if !open.at_line_start {
                out.push('\n');
            }
        }
    }
}

/// What one entry prints, and the time its lines start with.
struct Out {
    text: String,
    time: String,
}

/// `HH:MM:SS` of an ISO 8601 timestamp.
fn clock(ts: &str) -> String {
    match ts.get(11..19) {
        Some(time) if ts.as_bytes().get(10) == Some(&b'T') => display::one_line(time).into_owned(),
        _ => "--:--:--".to_owned(),
    }
}

fn side(dir: Direction) -> &'static str {
    match dir {
        Direction::ToAgent => "to agent",
        _ => "from agent",
    }
}

/// A content block as text: its text, or what it is.
fn content_text(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => text_at(block, "text"),
        Some("resource_link") => format!("[link {}]", text_at(block, "uri")),
        Some("resource") => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            format!("[resource {}]", text_at(resource, "uri"))
        }
        Some(other) => format!("[{other}]"),
        None => String::new(),
    }
}

/// The field `key` of `v` as text; empty when absent.
fn text_at(v: &Value, key: &str) -> String {
    v.get(key).map(plain).unwrap_or_default()
}

fn field_or(v: &Value, key: &str, default: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or(default)
        .to_owned()
}

/// A string without its quotes; anything else as JSON.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The view of `entries` (time, direction, message), finished.
    fn render(entries: &[(&str, Direction, Value)]) -> String {
        let mut view = LogView::new();
        let mut out = String::new();
        for (seq, (time, dir, msg)) in entries.iter().enumerate() {
            out.push_str(&view.push(&Entry {
                seq: seq as u64,
                ts: format!("2026-12-01T{time}.250Z"),
                dir: *dir,
                msg: Some(msg.clone()),
                text: None,
            }));
        }
        out + &view.finish()
    }

    use Direction::{FromAgent, ToAgent};

    fn update(update: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session/update",
               "params": {"sessionId": "ses_1", "update": update}})
    }

    fn chunk(kind: &str, text: &str) -> Value {
        update(json!({"sessionUpdate": kind, "messageId": "m1",
                      "content": {"type": "text", "text": text}}))
    }

    #[test]
    fn a_turn_reads_as_prompt_streamed_reply_and_stop_reason() {
        let out = render(&[
            (
                "12:00:00",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": "p1", "method": "session/prompt",
                       "params": {"sessionId": "ses_1",
                                  "prompt": [{"type": "text", "text": "Fix the bug"}]}}),
            ),
            (
                "12:00:01",
                FromAgent,
                chunk("agent_thought_chunk", "Look at "),
            ),
            (
                "12:00:01",
                FromAgent,
                chunk("agent_thought_chunk", "main.rs"),
            ),
            (
                "12:00:02",
                FromAgent,
                chunk("agent_message_chunk", "I fixed "),
            ),
            (
                "12:00:02",
                FromAgent,
                update(json!({"sessionUpdate": "usage_update", "used": 10, "size": 100})),
            ),
            ("12:00:03", FromAgent, chunk("agent_message_chunk", "it.")),
            (
                "12:00:04",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": "p1",
                       "result": {"stopReason": "end_turn", "usage": {"totalTokens": 5}}}),
            ),
        ]);
        assert_eq!(
            out,
            "12:00:00 user       Fix the bug\n\
             12:00:01 thought    Look at main.rs\n\
             12:00:02 agent      I fixed it.\n\
             12:00:04 stop       end_turn\n"
        );
    }

    #[test]
    fn followed_live_a_paragraph_stays_open_until_something_else_comes() {
        let mut view = LogView::new();
        let entry = |seq, msg| Entry {
            seq,
            ts: "2026-12-01T09:30:05.000Z".into(),
            dir: FromAgent,
            msg: Some(msg),
            text: None,
        };
        assert_eq!(
            view.push(&entry(0, chunk("agent_message_chunk", "Hel"))),
            "09:30:05 agent      Hel"
        );
        assert_eq!(
            view.push(&entry(1, chunk("agent_message_chunk", "lo"))),
            "lo"
        );
        let skipped = update(json!({"sessionUpdate": "available_commands_update",
                                    "availableCommands": []}));
        assert_eq!(view.push(&entry(2, skipped)), "");
        assert_eq!(view.finish(), "\n");
        assert_eq!(view.finish(), "");
    }

    #[test]
    fn line_breaks_are_kept_and_indented_and_another_message_is_another_paragraph() {
        let second = update(
            json!({"sessionUpdate": "agent_message_chunk", "messageId": "m2",
                                   "content": {"type": "text", "text": "Done."}}),
        );
        let out = render(&[
            (
                "08:00:00",
                FromAgent,
                chunk("agent_message_chunk", "Plan:\n1. read"),
            ),
            (
                "08:00:00",
                FromAgent,
                chunk("agent_message_chunk", "\n2. edit\n"),
            ),
            ("08:00:01", FromAgent, second),
            (
                "08:00:02",
                FromAgent,
                chunk("user_message_chunk", "replayed\tprompt"),
            ),
        ]);
        assert_eq!(
            out,
            "08:00:00 agent      Plan:\n\
             \x20                   1. read\n\
             \x20                   2. edit\n\
             08:00:01 agent      Done.\n\
             08:00:02 user       replayed\\tprompt\n"
        );
    }

    #[test]
    fn escape_sequences_from_the_agent_are_neutralised() {
        let hostile = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\r\u{9b}31m\u{202e}gnp.exe\nnext";
        let out = render(&[
            ("10:00:00", FromAgent, chunk("agent_message_chunk", hostile)),
            (
                "10:00:01",
                FromAgent,
                update(json!({"sessionUpdate": "tool_call", "toolCallId": "t1",
                              "title": "Edit \u{1b}[1Aa.txt", "kind": "edit"})),
            ),
        ]);
        assert_eq!(
            out,
            "10:00:00 agent      ok\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\u{9b}31m\\u{202e}gnp.exe\n\
             \x20                   next\n\
             10:00:01 tool       Edit \\x1b[1Aa.txt [edit] pending\n"
        );
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'));
    }

    #[test]
    fn tool_calls_show_their_status_changes() {
        let tool_update = |fields: Value| {
            let mut u = json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_1"});
            u.as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            update(u)
        };
        let out = render(&[
            (
                "11:00:00",
                FromAgent,
                update(json!({"sessionUpdate": "tool_call", "toolCallId": "call_1",
                              "title": "Edit a.txt", "kind": "edit", "status": "pending"})),
            ),
            (
                "11:00:01",
                FromAgent,
                tool_update(json!({"status": "in_progress",
                                   "locations": [{"path": "/p/a.txt"}],
                                   "rawInput": {"path": "/p/a.txt"}})),
            ),
            // Content alone is not a change of status.
            (
                "11:00:02",
                FromAgent,
                tool_update(json!({"content": [{"type": "content",
                                    "content": {"type": "text", "text": "diff"}}]})),
            ),
            (
                "11:00:03",
                FromAgent,
                tool_update(json!({"status": "completed"})),
            ),
            (
                "11:00:04",
                FromAgent,
                update(json!({"sessionUpdate": "tool_call", "toolCallId": "call_2",
                              "title": "ls"})),
            ),
            (
                "11:00:05",
                FromAgent,
                update(
                    json!({"sessionUpdate": "tool_call_update", "toolCallId": "call_2",
                              "kind": "execute", "status": "failed"}),
                ),
            ),
        ]);
        assert_eq!(
            out,
            "11:00:00 tool       Edit a.txt [edit] pending\n\
             11:00:01 tool       Edit a.txt [edit] in_progress\n\
             11:00:03 tool       Edit a.txt [edit] completed\n\
             11:00:04 tool       ls [other] pending\n\
             11:00:05 tool       ls [execute] failed\n"
        );
    }

    #[test]
    fn permission_requests_show_the_options_and_the_answer() {
        let ask = |id: u64, call: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission",
                   "params": {"sessionId": "ses_1", "toolCall": call, "options": [
                       {"optionId": "once", "name": "Allow once", "kind": "allow_once"},
                       {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                       {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})
        };
        let out = render(&[
            (
                "13:00:00",
                FromAgent,
                update(json!({"sessionUpdate": "tool_call", "toolCallId": "c1",
                              "title": "Write b.txt", "kind": "edit"})),
            ),
            // The request names the call only by id: its title is known.
            ("13:00:01", FromAgent, ask(0, json!({"toolCallId": "c1"}))),
            (
                "13:00:02",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 0,
                       "result": {"outcome": {"outcome": "selected", "optionId": "once"}}}),
            ),
            (
                "13:00:03",
                FromAgent,
                ask(
                    1,
                    json!({"toolCallId": "c2", "title": "rm -rf /", "kind": "execute"}),
                ),
            ),
            (
                "13:00:04",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 1, "result": {"outcome": {"outcome": "cancelled"}}}),
            ),
        ]);
        assert_eq!(
            out,
            "13:00:00 tool       Write b.txt [edit] pending\n\
             13:00:01 permission Write b.txt [edit]: once (allow_once), always (allow_always), reject (reject_once)\n\
             13:00:02 answer     Write b.txt [edit]: once (allow_once)\n\
             13:00:03 permission rm -rf / [execute]: once (allow_once), always (allow_always), reject (reject_once)\n\
             13:00:04 answer     rm -rf / [execute]: cancelled\n"
        );
    }

    #[test]
    fn file_and_terminal_requests_show_whether_they_were_served() {
        let out = render(&[
            (
                "14:00:00",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 3, "method": "fs/write_text_file",
                       "params": {"sessionId": "ses_1", "path": "/etc/passwd", "content": "x"}}),
            ),
            // Our own request with the same id is another request.
            (
                "14:00:00",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode",
                       "params": {"sessionId": "ses_1", "modeId": "plan"}}),
            ),
            (
                "14:00:01",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602,
                       "message": "/etc/passwd is outside the roots the policy serves for writing files (/p)"}}),
            ),
            (
                "14:00:02",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 4, "method": "fs/read_text_file",
                       "params": {"sessionId": "ses_1", "path": "/p/a.txt", "line": 1}}),
            ),
            (
                "14:00:02",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 4, "result": {"content": "secret text"}}),
            ),
            (
                "14:00:03",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 5, "method": "terminal/create",
                       "params": {"sessionId": "ses_1", "command": "cargo",
                                  "args": ["test", "-q"], "cwd": "/p"}}),
            ),
            (
                "14:00:03",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 5, "result": {"terminalId": "term_1"}}),
            ),
            (
                "14:00:04",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 6, "method": "terminal/wait_for_exit",
                       "params": {"sessionId": "ses_1", "terminalId": "term_1"}}),
            ),
            (
                "14:00:09",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": 6, "result": {"exitCode": 0}}),
            ),
            (
                "14:00:10",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32602,
                       "message": "unknown mode"}}),
            ),
        ]);
        assert_eq!(
            out,
            "14:00:01 fs         write /etc/passwd: refused: /etc/passwd is outside the roots the policy serves for writing files (/p) (-32602)\n\
             14:00:02 fs         read /p/a.txt: served\n\
             14:00:03 terminal   create cargo test -q in /p: served\n\
             14:00:09 terminal   wait_for_exit term_1: served\n\
             14:00:10 error      session/set_mode: unknown mode (-32602)\n"
        );
    }

    #[test]
    fn the_session_set_up_cancel_and_errors_are_shown() {
        let out = render(&[
            (
                "15:00:00",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": "i", "method": "initialize",
                       "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            ),
            (
                "15:00:01",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": "i", "result": {"protocolVersion": 1,
                       "agentCapabilities": {"loadSession": true}, "authMethods": [],
                       "agentInfo": {"name": "opencode", "version": "1.18.33"}}}),
            ),
            (
                "15:00:02",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": "n", "method": "session/new",
                       "params": {"cwd": "/p", "mcpServers": []}}),
            ),
            (
                "15:00:03",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": "n", "result": {"sessionId": "ses_abc"}}),
            ),
            (
                "15:00:04",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": "l", "method": "session/load",
                       "params": {"sessionId": "ses_old", "cwd": "/p", "mcpServers": []}}),
            ),
            (
                "15:00:05",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": "l", "result": {}}),
            ),
            (
                "15:00:06",
                ToAgent,
                json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
                       "params": {"sessionId": "ses_old", "prompt": [
                           {"type": "text", "text": "Read this"},
                           {"type": "resource_link", "uri": "file:///p/a.txt", "name": "a.txt"}]}}),
            ),
            (
                "15:00:07",
                ToAgent,
                json!({"jsonrpc": "2.0", "method": "session/cancel",
                       "params": {"sessionId": "ses_old"}}),
            ),
            (
                "15:00:07",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": "p", "result": {"stopReason": "cancelled"}}),
            ),
            (
                "15:00:08",
                FromAgent,
                json!({"jsonrpc": "2.0", "id": null,
                       "error": {"code": -32700, "message": "Parse error"}}),
            ),
        ]);
        assert_eq!(
            out,
            "15:00:01 agent      opencode 1.18.33, protocol 1\n\
             15:00:03 session    ses_abc (new)\n\
             15:00:05 session    ses_old (loaded)\n\
             15:00:06 user       Read this\n\
             \x20                   [link file:///p/a.txt]\n\
             15:00:07 cancel     sent\n\
             15:00:07 stop       cancelled\n\
             15:00:08 error      Parse error (-32700)\n"
        );
    }

    #[test]
    fn notes_and_lines_that_are_not_json_are_marked() {
        let mut view = LogView::new();
        let at = |seq, dir, text: &str| Entry {
            seq,
            ts: "2026-12-01T16:00:00.000Z".into(),
            dir,
            msg: None,
            text: Some(text.into()),
        };
        let mut out = view.push(&at(
            0,
            Direction::Note,
            "policy answered allow_once for Edit a.txt",
        ));
        out += &view.push(&at(1, FromAgent, "Loading\u{1b}[5m..."));
        out += &view.push(&Entry {
            msg: Some(json!([1, 2])),
            ..at(2, FromAgent, "")
        });
        out += &view.push(&at(
            3,
            Direction::Note,
            "agent exited: exit status 1: panic\u{7}",
        ));
        assert_eq!(
            out,
            "16:00:00 note       policy answered allow_once for Edit a.txt\n\
             16:00:00 garbage    from agent: Loading\\x1b[5m...\n\
             16:00:00 garbage    from agent: [1,2]\n\
             16:00:00 note       agent exited: exit status 1: panic\\x07\n"
        );
    }

    #[test]
    fn an_entry_is_one_json_line_in_the_transcript_format() {
        let entry = Entry {
            seq: 7,
            ts: "2026-12-01T12:00:00.123Z".into(),
            dir: FromAgent,
            msg: Some(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            text: None,
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert!(!line.contains('\n'));
        // No `text` key when there is none.
        assert_eq!(
            serde_json::from_str::<Value>(&line).unwrap(),
            json!({"seq": 7, "ts": "2026-12-01T12:00:00.123Z", "dir": "from_agent",
                   "msg": {"jsonrpc": "2.0", "id": 1, "result": {}}})
        );
        assert_eq!(serde_json::from_str::<Entry>(&line).unwrap(), entry);
        let note: Entry = serde_json::from_str(
            r#"{"seq":8,"ts":"2026-12-01T12:00:01.000Z","dir":"note","text":"agent exited"}"#,
        )
        .unwrap();
        assert_eq!(note.dir, Direction::Note);
        assert_eq!(note.msg, None);
        let to: Direction = serde_json::from_str(r#""to_agent""#).unwrap();
        assert_eq!(to, ToAgent);
    }
}
