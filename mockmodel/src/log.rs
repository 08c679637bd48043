//! The request log: what each client asked for and when its reply went out.
//!
//! Entries are added when a request arrives and updated as its reply is
//! sent, so a test can wait (on a condition variable, without polling) for
//! requests to arrive or to be answered. With a log file, each answered
//! request is appended to it as one JSON line.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::pacing::Pacing;
use crate::tools::ToolCall;

/// Which API a request was routed to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/messages` (Claude Code).
    AnthropicMessages,
    /// `POST /v1/messages/count_tokens`.
    AnthropicCountTokens,
    /// `POST /v1/responses` (Codex).
    OpenaiResponses,
    /// `POST /v1/chat/completions` (opencode).
    OpenaiChat,
    /// `GET /v1/models`.
    Models,
    /// `GET /` or `HEAD /` (Claude Code's connectivity check).
    Root,
    /// Anything else (answered 404 or 405).
    Unknown,
}

/// Headers worth keeping (names lower-case). Credentials are never kept:
/// `authorization` and `x-api-key` are logged as `<redacted>`.
pub const HEADERS_OF_INTEREST: &[&str] = &[
    "accept",
    "accept-encoding",
    "anthropic-beta",
    "anthropic-version",
    "authorization",
    "connection",
    "content-encoding",
    "content-length",
    "content-type",
    "expect",
    "openai-beta",
    "originator",
    "session_id",
    "transfer-encoding",
    "user-agent",
    "x-api-key",
    "x-app",
];

/// One request as the server saw and answered it. Times are Unix times in
/// seconds (as `f64`) in the JSON form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoggedRequest {
    /// 1-based arrival order.
    pub id: u64,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// The JSON body, when there was one that could be decoded and parsed.
    pub body: Option<Value>,
    /// Why a non-empty body could not be read (unsupported
    /// `Content-Encoding`, invalid JSON); the defaults then apply.
    pub body_error: Option<String>,
    pub api: Api,
    /// The `model` field of the body.
    pub model: Option<String>,
    /// Text of the last user message that has text (where the pacing and
    /// tool tokens are read). A request with `tool_result` set continues a
    /// turn: its `prompt` is still that turn's prompt (Codex, opencode) or
    /// whatever text came with the result (Claude Code).
    pub prompt: Option<String>,
    /// Whether the body asked for JSON-schema output (answered at once).
    pub structured: bool,
    /// Whether the reply was streamed as server-sent events.
    pub stream: bool,
    /// The pacing that applied.
    pub pacing: Pacing,
    /// The reply text sent (for the three model APIs), unless the reply was
    /// a tool call.
    pub reply: Option<String>,
    /// The tool call sent instead of text ([`crate::tools`]).
    #[serde(default)]
    pub tool_call: Option<ToolCall>,
    /// The text of the tool result(s) the last message carried (which the
    /// reply then quotes).
    #[serde(default)]
    pub tool_result: Option<String>,
    /// HTTP status answered.
    pub status: u16,
    #[serde(with = "unix_secs")]
    pub received_at: SystemTime,
    /// When the first piece of reply text was written.
    #[serde(with = "opt_unix_secs")]
    pub first_delta_at: Option<SystemTime>,
    /// When the last piece of reply text was written.
    #[serde(with = "opt_unix_secs")]
    pub last_delta_at: Option<SystemTime>,
    /// When the response was complete (or the client went away).
    #[serde(with = "opt_unix_secs")]
    pub finished_at: Option<SystemTime>,
    /// The whole response was written.
    pub completed: bool,
    /// The client closed the connection before the response was complete.
    pub aborted: bool,
}

impl LoggedRequest {
    /// Time from arrival to the first piece of text.
    pub fn time_to_first_delta(&self) -> Option<Duration> {
        self.first_delta_at?.duration_since(self.received_at).ok()
    }

    /// Time from the first piece of text to the last.
    pub fn stream_duration(&self) -> Option<Duration> {
        self.last_delta_at?
            .duration_since(self.first_delta_at?)
            .ok()
    }

    /// Answered or given up (the entry will not change any more).
    pub fn is_finished(&self) -> bool {
        self.finished_at.is_some()
    }
}

/// The request log shared by the server's connections and its owner.
pub(crate) struct RequestLog {
    entries: Mutex<Vec<LoggedRequest>>,
    changed: Condvar,
    file: Option<Mutex<File>>,
    /// Instants are mapped to wall-clock times through one fixed pair, so
    /// that differences between logged times match the monotonic clock.
    base: (Instant, SystemTime),
}

impl RequestLog {
    pub fn new(path: Option<&Path>) -> std::io::Result<RequestLog> {
        let file = match path {
            Some(p) => Some(Mutex::new(
                File::options().create(true).append(true).open(p)?,
            )),
            None => None,
        };
        Ok(RequestLog {
            entries: Mutex::new(Vec::new()),
            changed: Condvar::new(),
            file,
            base: (Instant::now(), SystemTime::now()),
        })
    }

    /// The wall-clock time of an instant.
    pub fn wall(&self, at: Instant) -> SystemTime {
        self.base.1 + at.saturating_duration_since(self.base.0)
    }

    fn lock(&self) -> MutexGuard<'_, Vec<LoggedRequest>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an entry, giving it the next id; returns that id.
    pub fn push(&self, mut entry: LoggedRequest) -> u64 {
        let mut entries = self.lock();
        entry.id = entries.len() as u64 + 1;
        let id = entry.id;
        entries.push(entry);
        drop(entries);
        self.changed.notify_all();
        id
    }

    /// Changes entry `id`; appends it to the log file once it is finished.
    pub fn update(&self, id: u64, f: impl FnOnce(&mut LoggedRequest)) {
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(id as usize - 1) else {
            return;
        };
        let was_finished = entry.is_finished();
        f(entry);
        let line = (!was_finished && entry.is_finished())
            .then(|| serde_json::to_string(entry).ok())
            .flatten();
        drop(entries);
        self.changed.notify_all();
        if let (Some(line), Some(file)) = (line, &self.file) {
            let mut file = file.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(file, "{line}").and_then(|()| file.flush());
        }
    }

    pub fn snapshot(&self) -> Vec<LoggedRequest> {
        self.lock().clone()
    }

    /// Waits until `cond` holds for the entries or `timeout` passes.
    pub fn wait(
        &self,
        timeout: Duration,
        cond: impl Fn(&[LoggedRequest]) -> bool,
    ) -> Result<Vec<LoggedRequest>, Vec<LoggedRequest>> {
        let deadline = Instant::now() + timeout;
        let mut entries = self.lock();
        loop {
            if cond(&entries) {
                return Ok(entries.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(entries.clone());
            }
            entries = self
                .changed
                .wait_timeout(entries, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

fn to_secs(t: &SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn from_secs(s: f64) -> SystemTime {
    UNIX_EPOCH + Duration::try_from_secs_f64(s).unwrap_or_default()
}

/// `Duration` as seconds (`f64`).
pub(crate) mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

/// `SystemTime` as Unix seconds (`f64`).
mod unix_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(super::to_secs(t))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        Ok(super::from_secs(f64::deserialize(d)?))
    }
}

/// `Option<SystemTime>` as Unix seconds (`f64`) or null.
mod opt_unix_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::SystemTime;

    pub fn serialize<S: Serializer>(t: &Option<SystemTime>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.serialize_some(&super::to_secs(t)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SystemTime>, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.map(super::from_secs))
    }
}
