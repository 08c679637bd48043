//! How large each request may be, and how much a supervisor holds at once.
//!
//! Every connection is the user's own (the peer check sees to that), yet a
//! careless script or a stuck client must not take a session down: one
//! supervisor serves the person at the terminal, the agents that deliver to
//! it and `k`. So each kind of frame has a size fitted to what it carries,
//! unfinished frames share one budget, connections are capped, and a frame
//! must arrive whole soon after it began. The numbers are documented in
//! docs/protocol.md ("Limits").

use std::time::Duration;

use super::codec::{Message, HEADER};
use super::protocol::Request;
use crate::delivery::MAX_TEXT_BYTES;

/// Requests that carry only names, sizes and flags (`info`, `snapshot`,
/// `activity`, `resize`, `attach`, `kill`, `nudge` …).
pub const SMALL_REQUEST: usize = 4 << 10;
/// `deliver`: its text (at most [`MAX_TEXT_BYTES`], each byte up to six once
/// JSON escapes it) and its options.
pub const DELIVER_REQUEST: usize = 6 * MAX_TEXT_BYTES + SMALL_REQUEST;
/// Text for the PTY or the REPL (`write`, `cell_run`, `notify`): what a
/// command line can hold, with room for JSON escapes.
pub const TEXT_REQUEST: usize = 1 << 20;
/// One `input` frame of an attached terminal (it sends what one read gave).
pub const INPUT_FRAME: usize = 64 << 10;
/// The largest frame a supervisor reads: the largest request.
pub const MAX_REQUEST_FRAME: usize = TEXT_REQUEST;
/// Unfinished frames up to this size are held without drawing on the
/// budget: every small request and every delivery, so that they are
/// answered however large the frames other connections are sending.
pub const UNBUDGETED_FRAME: usize = 32 << 10;
/// All connections' unfinished frames above [`UNBUDGETED_FRAME`] together.
pub const BUFFER_BUDGET: usize = 16 << 20;
/// Connections served at once (attach and watch clients, waiting sends and
/// `k run`s, one-shot requests); one more is told so and closed.
pub const MAX_CONNECTIONS: usize = 256;
/// How long a frame may take to arrive whole, counted from when the
/// supervisor began waiting for its rest. A client writes a frame at once,
/// so anything near this is a client that stopped mid-frame.
pub const PARTIAL_FRAME_DEADLINE: Duration = Duration::from_secs(10);
/// Overrides [`PARTIAL_FRAME_DEADLINE`] (milliseconds), for tests.
pub const PARTIAL_FRAME_DEADLINE_VAR: &str = "AGENT_COMMS_FRAME_DEADLINE_MS";

/// The deadline in force: [`PARTIAL_FRAME_DEADLINE_VAR`] when it holds a
/// number of milliseconds, else the default.
pub fn partial_frame_deadline() -> Duration {
    std::env::var(PARTIAL_FRAME_DEADLINE_VAR)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(PARTIAL_FRAME_DEADLINE, Duration::from_millis)
}

/// The largest `len` (the bytes after the length field) a frame carrying
/// `message` may have on a supervisor's connection.
pub fn frame_limit(message: &Message) -> usize {
    let payload = match message {
        Message::Request(request) => request_limit(request),
        Message::Input(_) => INPUT_FRAME,
        // Not requests: they are answered with an error either way.
        Message::Response(_) | Message::Event(_) | Message::Output(_) | Message::Invalid { .. } => {
            SMALL_REQUEST
        }
    };
    HEADER - 4 + payload
}

fn request_limit(request: &Request) -> usize {
    match request {
        Request::Write { .. } | Request::CellRun { .. } | Request::Notify { .. } => TEXT_REQUEST,
        Request::Deliver { .. } => DELIVER_REQUEST,
        Request::Info
        | Request::Snapshot
        | Request::Activity
        | Request::Resize { .. }
        | Request::Attach { .. }
        | Request::Kill { .. }
        | Request::CellPoll { .. }
        | Request::CellInterrupt
        | Request::CellStatus
        | Request::Subscribe { .. }
        | Request::History { .. }
        | Request::OutputSince { .. }
        | Request::FollowOutput { .. }
        | Request::Nudge { .. }
        | Request::ReportWaits
        | Request::AcpStatus
        | Request::Cancel
        | Request::Follow
        | Request::Status => SMALL_REQUEST,
    }
}

/// What a frame is, for an error message: a request's `type`, else the
/// message kind.
pub fn frame_kind(message: &Message) -> String {
    match message {
        Message::Request(request) => serde_json::to_value(request)
            .ok()
            .and_then(|v| Some(format!("request '{}'", v.get("type")?.as_str()?)))
            .unwrap_or_else(|| "request".into()),
        Message::Response(_) => "response".into(),
        Message::Event(_) => "event".into(),
        Message::Input(_) => "input".into(),
        Message::Output(_) => "output".into(),
        Message::Invalid { .. } => "invalid frame".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::DeliveryOptions;
    use crate::socket::codec::{encode, Frame};

    fn len_of(message: Message) -> usize {
        encode(&Frame::new(u32::MAX, message)).len() - 4
    }

    #[test]
    fn the_largest_legitimate_delivery_fits_its_limit() {
        // Every byte a control character (refused later by validation, but
        // the frame limit must not be what says no) and options at their
        // largest.
        let text = "\u{1}".repeat(MAX_TEXT_BYTES);
        let options = DeliveryOptions {
            try_only: false,
            timeout_ms: u64::MAX,
        };
        let message = Message::Request(Request::Deliver { text, options });
        assert!(len_of(message.clone()) <= frame_limit(&message));
    }

    #[test]
    fn small_requests_fit_with_names_at_their_longest() {
        let message = Message::Request(Request::Nudge {
            wait_for: Some("x".repeat(128)),
            timeout_ms: u64::MAX,
        });
        assert!(len_of(message.clone()) <= frame_limit(&message));
        assert_eq!(frame_kind(&message), "request 'nudge'");
    }
}
