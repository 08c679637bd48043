//! A local mock model server for offline tests and benchmarks of real
//! coding-agent CLIs.
//!
//! # Why
//!
//! agent-comms drives Claude Code, Codex and opencode through real
//! terminals, and those programs keep surprising: what their screens show
//! while a turn runs, when they look busy, how they title a session, what
//! they do between turns, all changes from release to release and none of
//! it can be learnt from their documentation. They have to be run for real.
//! This server lets them run whole turns with no account, no key and no
//! network: each is pointed at `http://127.0.0.1:PORT` (see the recordings
//! README for the settings each needs) and gets a canned reply streamed
//! exactly in the shape its SDK expects, at a pace the test chooses.
//!
//! # What it speaks
//!
//! - Anthropic Messages (`POST /v1/messages`, Claude Code), plus `HEAD /`
//!   and `GET /` (Claude Code's connectivity check) and
//!   `POST /v1/messages/count_tokens`;
//! - OpenAI Responses (`POST /v1/responses`, Codex);
//! - OpenAI Chat Completions (`POST /v1/chat/completions`, opencode);
//! - `GET /v1/models`, listing `mock-1`.
//!
//! Replies are streamed as server-sent events when the body says
//! `"stream": true` and sent whole otherwise. A request asking for
//! JSON-schema output (a session title) is answered at once with a minimal
//! instance of the schema ([`schema::instance`]).
//!
//! # Pacing
//!
//! The last user message may hold `THINK=<seconds>` (a silent pause before
//! the first piece of text), `SLOW=<seconds>` (the time from the first
//! piece to the last), `DELTAS=<n>` (how many pieces) and `REPLY=<word>`
//! (the reply text); the [`Config`] holds the defaults (no pause, all
//! pieces at once, 40 pieces, [`CANNED_REPLY`]).
//!
//! # Tool calls
//!
//! `TOOL=<name>` in the last user message, with `ARGS64=<base64 of a JSON
//! object>` or `ARGS=<a JSON object without spaces>` (default `{}`), makes
//! the reply a call of that tool: an Anthropic `tool_use` block
//! (`input_json_delta`, `stop_reason: "tool_use"`), a Responses
//! `function_call` item (naming its `namespace` for a tool offered in one,
//! see [`responses`]), a Chat Completions `tool_calls` delta
//! (`finish_reason: "tool_calls"`), its arguments cut into `DELTAS` pieces
//! and paced like text. [`tools::knob`] writes the tokens. The request that
//! brings the tool's result back gets the text `tool result received: `
//! and the result's first 200 characters; the log records the call
//! ([`LoggedRequest::tool_call`]) and the result
//! ([`LoggedRequest::tool_result`]). Requests without tools (titles) or
//! asking for structured output never get a call; see [`tools`] for the
//! rules and `docs/providers.md` for the tool names each CLI offers.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use agent_comms_mockmodel::{Config, MockServer};
//!
//! let server = MockServer::start(Config::default()).unwrap();
//! // ANTHROPIC_BASE_URL=server.base_url(), then type "say hello SLOW=2" ...
//! let log = server.wait_for_requests(1, Duration::from_secs(30)).unwrap();
//! println!("{:?}", log[0].stream_duration());
//! ```
//!
//! The server only ever listens on a loopback address: it is a test
//! fixture, and [`MockServer::start`] refuses any other address.

pub mod anthropic;
pub mod chat;
mod handle;
mod http;
mod log;
pub mod pacing;
pub mod responses;
pub mod schema;
mod server;
pub mod sse;
pub mod tools;

pub use log::{Api, LoggedRequest, HEADERS_OF_INTEREST};
pub use pacing::{Pacing, CANNED_REPLY, DEFAULT_DELTAS};
pub use server::{Config, MockServer, StartError, WaitTimeout};
pub use tools::ToolCall;

use serde_json::Value;

/// The text of a message's content: a plain string, or the `text` of the
/// parts whose `type` is one of `kinds`, joined by line breaks. `None` when
/// there is no text.
pub(crate) fn content_text(content: &Value, kinds: &[&str]) -> Option<String> {
    let text = match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| {
                p.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| kinds.contains(&t))
            })
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}
