//! What a supervisor holds for its connections, and when it says no.
//!
//! The sizes are the protocol's (`socket::limits`); this module keeps the
//! account: how many connections are open, how many bytes of unfinished
//! frames they hold together, and how long a frame has been unfinished.
//! A refusal is a sentence for the client; the connection then closes, as
//! its stream could only be read further by holding what was refused.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::socket::codec::{CodecError, Frame, FrameDecoder};
use crate::socket::limits::{
    frame_kind, frame_limit, partial_frame_deadline, BUFFER_BUDGET, MAX_CONNECTIONS,
    MAX_REQUEST_FRAME, UNBUDGETED_FRAME,
};

#[derive(Debug, thiserror::Error)]
pub(crate) enum Refusal {
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("{kind} of {len} bytes exceeds its limit of {limit} bytes (see the limits in docs/protocol.md)")]
    TooLarge {
        kind: String,
        len: usize,
        limit: usize,
    },
    #[error("a frame of {len} bytes does not fit: unfinished frames of other connections hold the supervisor's buffer budget of {budget} bytes; retry once they are done")]
    Budget { len: usize, budget: usize },
    #[error("the session already serves {cap} connections, its limit; close some (attach, watch, waiting sends) and retry")]
    TooMany { cap: usize },
    #[error("a frame stayed unfinished for {0:?}; send each frame whole")]
    Unfinished(Duration),
}

/// The account shared by one supervisor's connections.
pub(crate) struct Limits {
    connections: AtomicUsize,
    /// Bytes of unfinished frames held against [`BUFFER_BUDGET`].
    budgeted: AtomicUsize,
    deadline: Duration,
}

impl Limits {
    /// The protocol's limits, with the partial-frame deadline as the
    /// environment may set it.
    pub fn from_env() -> Self {
        Self {
            connections: AtomicUsize::new(0),
            budgeted: AtomicUsize::new(0),
            deadline: partial_frame_deadline(),
        }
    }

    /// A place for one more connection, given back when the slot drops.
    pub fn admit(self: &Arc<Self>) -> Result<Slot, Refusal> {
        let taken = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_CONNECTIONS).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Slot(self.clone())),
            Err(_) => Err(Refusal::TooMany {
                cap: MAX_CONNECTIONS,
            }),
        }
    }

    fn reserve(&self, len: usize) -> Result<(), Refusal> {
        self.budgeted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held + len <= BUFFER_BUDGET).then_some(held + len)
            })
            .map(drop)
            .map_err(|_| Refusal::Budget {
                len,
                budget: BUFFER_BUDGET,
            })
    }

    fn release(&self, len: usize) {
        self.budgeted.fetch_sub(len, Ordering::AcqRel);
    }
}

/// One open connection's place under [`MAX_CONNECTIONS`].
pub(crate) struct Slot(Arc<Limits>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's incoming bytes: its frame decoder, what its unfinished
/// frame holds of the budget, and since when it has been waiting.
pub(crate) struct Inbound {
    decoder: FrameDecoder,
    limits: Arc<Limits>,
    /// Bytes of the budget held for the unfinished frame.
    reserved: usize,
    /// When the frame began to be waited for; `None` between frames.
    waiting_since: Option<Instant>,
}

impl Inbound {
    pub fn new(limits: Arc<Limits>) -> Self {
        Self {
            decoder: FrameDecoder::new(MAX_REQUEST_FRAME),
            limits,
            reserved: 0,
            waiting_since: None,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.decoder.push(bytes);
    }

    /// The next whole frame within its limit, `Ok(None)` when more bytes
    /// are needed (and the budget allows waiting for them).
    pub fn next_frame(&mut self) -> Result<Option<Frame>, Refusal> {
        let len = self.decoder.head_len().map(|total| total - 4);
        let Some(frame) = self.decoder.next_frame()? else {
            if self.decoder.buffered() > 0 {
                self.waiting_since.get_or_insert_with(Instant::now);
                if let Some(len) = len.filter(|&len| len > UNBUDGETED_FRAME) {
                    self.hold(len)?;
                }
            }
            return Ok(None);
        };
        self.hold(0)?;
        self.waiting_since = None;
        let len = len.expect("a decoded frame had a length");
        let limit = frame_limit(&frame.message);
        if len > limit {
            return Err(Refusal::TooLarge {
                kind: frame_kind(&frame.message),
                len,
                limit,
            });
        }
        Ok(Some(frame))
    }

    /// When the unfinished frame must have arrived whole; `None` between
    /// frames.
    pub fn deadline(&self) -> Option<Instant> {
        self.waiting_since.map(|since| since + self.limits.deadline)
    }

    /// The refusal for a frame that missed its [`Inbound::deadline`].
    pub fn unfinished(&self) -> Refusal {
        Refusal::Unfinished(self.limits.deadline)
    }

    /// Holds `len` bytes of the budget for the unfinished frame (0: none).
    fn hold(&mut self, len: usize) -> Result<(), Refusal> {
        if len == self.reserved {
            return Ok(());
        }
        self.limits.release(std::mem::take(&mut self.reserved));
        self.limits.reserve(len)?;
        self.reserved = len;
        Ok(())
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        self.limits.release(self.reserved);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::socket::codec::{encode, Message};
    use crate::socket::limits::SMALL_REQUEST;
    use crate::socket::protocol::Request;

    fn limits() -> Arc<Limits> {
        Arc::new(Limits::from_env())
    }

    /// The length field and first header bytes of a frame of `len`.
    fn announce(len: usize) -> Vec<u8> {
        let mut bytes = (len as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&[1, 0, 1]);
        bytes
    }

    #[test]
    fn large_unfinished_frames_share_one_budget_and_give_it_back() {
        let limits = limits();
        let per_frame = MAX_REQUEST_FRAME;
        let fit = BUFFER_BUDGET / per_frame;
        let mut holders: Vec<Inbound> = (0..fit).map(|_| Inbound::new(limits.clone())).collect();
        for inbound in &mut holders {
            inbound.push(&announce(per_frame));
            assert!(inbound.next_frame().unwrap().is_none());
        }
        let mut one_more = Inbound::new(limits.clone());
        one_more.push(&announce(per_frame));
        assert!(matches!(one_more.next_frame(), Err(Refusal::Budget { .. })));
        // Small requests are answered all the same.
        let mut small = Inbound::new(limits.clone());
        small.push(&encode(&Frame::new(1, Message::Request(Request::Info))));
        assert!(small.next_frame().unwrap().is_some());
        // A connection that closes gives its share back.
        holders.pop();
        let mut again = Inbound::new(limits.clone());
        again.push(&announce(per_frame));
        assert!(again.next_frame().unwrap().is_none());
    }

    #[test]
    fn a_small_request_padded_beyond_its_limit_is_refused() {
        let mut inbound = Inbound::new(limits());
        let mut payload = br#"{"type":"info"}"#.to_vec();
        payload.resize(SMALL_REQUEST + 1, b' ');
        let mut frame = encode(&Frame::new(3, Message::Input(payload)));
        frame[6] = 1; // the request tag
        inbound.push(&frame);
        let refusal = inbound.next_frame().unwrap_err().to_string();
        assert!(
            refusal.starts_with("request 'info' of 4104 bytes exceeds its limit of 4103 bytes"),
            "{refusal}"
        );
    }

    #[test]
    fn connections_beyond_the_cap_are_refused_until_one_leaves() {
        let limits = limits();
        let mut slots: Vec<Slot> = (0..MAX_CONNECTIONS)
            .map(|_| limits.admit().unwrap())
            .collect();
        assert!(matches!(limits.admit(), Err(Refusal::TooMany { .. })));
        slots.pop();
        assert!(limits.admit().is_ok());
    }

    #[test]
    fn the_deadline_runs_only_while_a_frame_is_unfinished() {
        let mut inbound = Inbound::new(limits());
        assert_eq!(inbound.deadline(), None);
        let frame = encode(&Frame::new(1, Message::Request(Request::Info)));
        inbound.push(&frame[..5]);
        assert!(inbound.next_frame().unwrap().is_none());
        assert!(inbound.deadline().is_some());
        inbound.push(&frame[5..]);
        assert!(inbound.next_frame().unwrap().is_some());
        assert_eq!(inbound.deadline(), None);
    }
}
