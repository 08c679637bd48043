//! Server-sent events, and the paced writing of a streamed reply.
//!
//! Each API describes its stream as events (see [`EventSource`]); the
//! driver here sends the API's opening events at once, keeps silent for the
//! think time, then sends the text pieces on schedule and the closing
//! events, noting when the first and last pieces went out.

use std::io;

use serde_json::Value;
use tokio::time::Instant;

use crate::http::Conn;
use crate::pacing::{offset, Pacing};
use crate::tools::ToolCall;

/// One server-sent event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The `event:` line, if any.
    pub name: Option<String>,
    /// The `data:` payload (one line).
    pub data: String,
}

impl Event {
    /// A named event whose data is a JSON value (Anthropic, Responses).
    pub fn named(name: &str, data: &Value) -> Event {
        Event {
            name: Some(name.to_string()),
            data: data.to_string(),
        }
    }

    /// An unnamed event (Chat Completions).
    pub fn data(data: impl Into<String>) -> Event {
        Event {
            name: None,
            data: data.into(),
        }
    }

    pub fn encode(&self, out: &mut String) {
        if let Some(name) = &self.name {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        for line in self.data.split('\n') {
            out.push_str("data: ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
}

fn encode(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        e.encode(&mut out);
    }
    out
}

/// What is being answered, shared by the three APIs.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Id of the message / response / completion.
    pub id: String,
    pub model: String,
    /// The whole reply text, or the tool call's arguments (JSON text) when
    /// `tool` is set: what is cut into pieces and streamed.
    pub text: String,
    /// Set when the reply is a tool call rather than text.
    pub tool: Option<ToolCall>,
    /// A rough token count of the request body.
    pub input_tokens: u64,
    /// Unix time in seconds.
    pub created: u64,
}

impl Reply {
    /// A rough token count of the reply (4 characters a token).
    pub fn output_tokens(&self) -> u64 {
        (self.text.chars().count() as u64).div_ceil(4).max(1)
    }
}

/// The event shapes of one API's stream.
pub trait EventSource: Send {
    /// Sent with the response head, before the think pause.
    fn preamble(&mut self) -> Vec<Event> {
        Vec::new()
    }
    /// Sent just before the first piece of text.
    fn first(&mut self) -> Vec<Event> {
        Vec::new()
    }
    /// One piece of text.
    fn delta(&mut self, text: &str) -> Vec<Event>;
    /// Sent after the last piece.
    fn finish(&mut self) -> Vec<Event>;
}

/// Moments of a stream that the log records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    FirstDelta,
    LastDelta,
}

/// Streams `pieces` through `src` on `conn` (whose response head is sent):
/// the preamble at once, the first piece `think` after `received`, the
/// others spread so the last goes out `slow` after the first; with
/// `at_once` there is no pause at all. `mark` is told when the first and
/// last pieces are written. Fails when the client goes away.
pub async fn stream(
    conn: &mut Conn,
    src: &mut dyn EventSource,
    pieces: &[String],
    pacing: Pacing,
    at_once: bool,
    received: Instant,
    mark: &mut (dyn FnMut(Mark, Instant) + Send),
) -> io::Result<()> {
    conn.send(encode(&src.preamble()).as_bytes()).await?;
    if !at_once && !pacing.think.is_zero() {
        conn.pause_until(received + pacing.think).await?;
    }
    let first = Instant::now();
    let n = pieces.len();
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 && !at_once && !pacing.slow.is_zero() {
            conn.pause_until(first + offset(pacing.slow, i, n)).await?;
        }
        let mut events = if i == 0 { src.first() } else { Vec::new() };
        events.extend(src.delta(piece));
        let now = Instant::now();
        if i == 0 {
            mark(Mark::FirstDelta, now);
        }
        if i + 1 == n {
            mark(Mark::LastDelta, now);
        }
        conn.send(encode(&events).as_bytes()).await?;
    }
    conn.send(encode(&src.finish()).as_bytes()).await?;
    conn.end_stream().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding() {
        let mut out = String::new();
        Event::named("message_stop", &serde_json::json!({"type": "message_stop"})).encode(&mut out);
        Event::data("[DONE]").encode(&mut out);
        assert_eq!(
            out,
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\ndata: [DONE]\n\n"
        );
    }
}
