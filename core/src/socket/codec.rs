//! The versioned frame codec spoken on every endpoint socket.
//!
//! A frame is `len: u32 BE | version: u8 | tag: u16 BE | id: u32 BE | payload`,
//! where `len` counts everything after itself. The tag says how to read the
//! payload: JSON for requests, responses and events; raw bytes for terminal
//! input and output, which are the bulk of the traffic and must not pay for
//! escaping. Every frame carries a request id so that a reply can be matched
//! to its request on a connection that also carries pushed events.
//!
//! Decoding never fails on content: an unknown tag, a newer version or JSON
//! that does not fit becomes [`Message::Invalid`], which the server answers
//! with an error reply while the connection lives on. Only a length beyond
//! the decoder's limit is fatal, since the stream can no longer be
//! re-synchronised. The limit is [`MAX_FRAME`] for what a client reads (a
//! screen, a cell's output); a supervisor reads requests and sets its own,
//! smaller one (see `socket::limits`).

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::protocol::{Event, Request, Response};

pub const PROTOCOL_VERSION: u8 = 1;
/// Largest frame a client accepts; larger lengths mean the peer speaks
/// something else.
pub const MAX_FRAME: usize = 16 << 20;
/// Bytes before the payload: the length field, version, tag and id.
pub const HEADER: usize = 4 + 1 + 2 + 4;

const TAG_REQUEST: u16 = 1;
const TAG_RESPONSE: u16 = 2;
const TAG_EVENT: u16 = 3;
const TAG_INPUT: u16 = 4;
const TAG_OUTPUT: u16 = 5;

#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Response(Response),
    Event(Event),
    /// Bytes for the PTY (attach clients typing).
    Input(Vec<u8>),
    /// Bytes from the PTY (attach and watch streams).
    Output(Vec<u8>),
    /// A frame that could be delimited but not understood.
    Invalid {
        tag: u16,
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub id: u32,
    pub message: Message,
}

impl Frame {
    pub fn new(id: u32, message: Message) -> Self {
        Self { id, message }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CodecError {
    #[error("malformed or oversized frame: length {len} exceeds the limit of {limit} bytes (see the limits in docs/protocol.md); is the peer speaking agent-comms protocol v{PROTOCOL_VERSION}?")]
    TooLarge { len: usize, limit: usize },
}

pub fn encode(frame: &Frame) -> Vec<u8> {
    let (tag, payload): (u16, std::borrow::Cow<'_, [u8]>) = match &frame.message {
        Message::Request(r) => (TAG_REQUEST, json(r).into()),
        Message::Response(r) => (TAG_RESPONSE, json(r).into()),
        Message::Event(e) => (TAG_EVENT, json(e).into()),
        Message::Input(b) => (TAG_INPUT, b.as_slice().into()),
        Message::Output(b) => (TAG_OUTPUT, b.as_slice().into()),
        Message::Invalid { tag, reason } => (*tag, reason.as_bytes().into()),
    };
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&((HEADER - 4 + payload.len()) as u32).to_be_bytes());
    out.push(PROTOCOL_VERSION);
    out.extend_from_slice(&tag.to_be_bytes());
    out.extend_from_slice(&frame.id.to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

fn json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("protocol types serialize")
}

/// Buffer capacity a decoder keeps between frames; a larger one made for a
/// large frame is given back once that frame is decoded.
const KEPT_CAPACITY: usize = 64 << 10;

/// Accumulates bytes from a stream and yields whole frames.
pub struct FrameDecoder {
    buf: Vec<u8>,
    /// Largest `len` accepted.
    limit: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new(MAX_FRAME)
    }
}

impl FrameDecoder {
    /// A decoder that refuses frames whose `len` exceeds `limit`.
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            limit,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that are not yet part of a returned frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The whole size (length field included) of the frame at the head of
    /// the buffer, once its length field has arrived.
    pub fn head_len(&self) -> Option<usize> {
        let prefix: [u8; 4] = self.buf.get(..4)?.try_into().expect("four bytes");
        Some(4 + u32::from_be_bytes(prefix) as usize)
    }

    /// The next whole frame, `Ok(None)` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, CodecError> {
        let Some(total) = self.head_len() else {
            return Ok(None);
        };
        let len = total - 4;
        if len > self.limit {
            return Err(CodecError::TooLarge {
                len,
                limit: self.limit,
            });
        }
        // Wait for the whole frame, even one too short to hold a header:
        // consuming part of it would read the rest as the next length.
        if self.buf.len() < total {
            self.buf.reserve_exact(total - self.buf.len());
            return Ok(None);
        }
        let frame: Vec<u8> = self.buf.drain(..total).collect();
        if self.buf.capacity() > KEPT_CAPACITY {
            // A large frame must not keep its allocation after it is done.
            self.buf.shrink_to(KEPT_CAPACITY);
        }
        if len < HEADER - 4 {
            return Ok(Some(Frame::new(
                0,
                Message::Invalid {
                    tag: 0,
                    reason: format!("frame of {len} bytes is shorter than a header"),
                },
            )));
        }
        let version = frame[4];
        let tag = u16::from_be_bytes([frame[5], frame[6]]);
        let id = u32::from_be_bytes(frame[7..11].try_into().unwrap());
        let payload = &frame[HEADER..];
        let message = if version != PROTOCOL_VERSION {
            Message::Invalid {
                tag,
                reason: format!(
                    "protocol version {version} is not supported (this supervisor speaks v{PROTOCOL_VERSION}); use the agent-comms that started the session"
                ),
            }
        } else {
            decode_payload(tag, payload)
        };
        Ok(Some(Frame::new(id, message)))
    }
}

fn decode_payload(tag: u16, payload: &[u8]) -> Message {
    fn parse<T: DeserializeOwned>(tag: u16, p: &[u8], wrap: fn(T) -> Message) -> Message {
        match serde_json::from_slice(p) {
            Ok(v) => wrap(v),
            Err(e) => Message::Invalid {
                tag,
                reason: format!("malformed message: {e}"),
            },
        }
    }
    match tag {
        TAG_REQUEST => parse(tag, payload, Message::Request),
        TAG_RESPONSE => parse(tag, payload, Message::Response),
        TAG_EVENT => parse(tag, payload, Message::Event),
        TAG_INPUT => Message::Input(payload.to_vec()),
        TAG_OUTPUT => Message::Output(payload.to_vec()),
        other => Message::Invalid {
            tag: other,
            reason: format!("unknown message tag {other}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(message: Message) -> Message {
        let mut d = FrameDecoder::default();
        let bytes = encode(&Frame::new(7, message));
        // Feed byte by byte: frames must survive any split.
        for b in &bytes {
            assert!(d.next_frame().unwrap().is_none());
            d.push(std::slice::from_ref(b));
        }
        let f = d.next_frame().unwrap().unwrap();
        assert_eq!(f.id, 7);
        f.message
    }

    #[test]
    fn messages_roundtrip() {
        for m in [
            Message::Request(Request::Snapshot),
            Message::Output(b"\x1b[1mhi\xff".to_vec()),
            Message::Input(vec![]),
            Message::Response(Response::Error {
                message: "x".into(),
            }),
        ] {
            assert_eq!(roundtrip(m.clone()), m);
        }
    }

    #[test]
    fn unknown_tags_versions_and_json_decode_to_invalid() {
        let mut d = FrameDecoder::default();
        let mut raw = encode(&Frame::new(1, Message::Input(b"x".to_vec())));
        raw[6] = 99; // tag low byte
        d.push(&raw);
        assert!(matches!(
            d.next_frame().unwrap().unwrap().message,
            Message::Invalid { tag: 99, .. }
        ));
        let mut raw = encode(&Frame::new(2, Message::Request(Request::Info)));
        raw[4] = 9;
        d.push(&raw);
        assert!(matches!(
            d.next_frame().unwrap().unwrap().message,
            Message::Invalid { .. }
        ));
        let mut bad = encode(&Frame::new(
            3,
            Message::Input(b"{\"type\":\"nope\"}".to_vec()),
        ));
        bad[6] = TAG_REQUEST as u8;
        d.push(&bad);
        let f = d.next_frame().unwrap().unwrap();
        assert_eq!(f.id, 3);
        assert!(matches!(f.message, Message::Invalid { tag: 1, .. }));
    }

    #[test]
    fn garbage_text_is_fatal_not_a_huge_allocation() {
        let mut d = FrameDecoder::default();
        d.push(b"hello supervisor\n");
        assert!(matches!(d.next_frame(), Err(CodecError::TooLarge { .. })));
    }

    #[test]
    fn a_short_frame_split_across_reads_keeps_the_stream_in_step() {
        // A frame too short for a header, its body arriving in a second read:
        // it is consumed whole, and the frame after it decodes intact.
        let mut stream = vec![0, 0, 0, 3, 0xaa];
        let info = encode(&Frame::new(5, Message::Request(Request::Info)));
        let mut d = FrameDecoder::default();
        d.push(&stream);
        assert_eq!(d.next_frame().unwrap(), None);
        stream = vec![0xbb, 0xcc];
        stream.extend_from_slice(&info);
        d.push(&stream);
        let short = d.next_frame().unwrap().unwrap();
        assert!(matches!(short.message, Message::Invalid { tag: 0, .. }));
        assert_eq!(
            d.next_frame().unwrap(),
            Some(Frame::new(5, Message::Request(Request::Info)))
        );
        assert_eq!(d.next_frame().unwrap(), None);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// One frame of a stream: a well-formed message, or one that is
        /// delimited but shorter than a header (`len` below 7).
        #[derive(Debug, Clone)]
        enum Piece {
            Valid(Frame),
            Short(Vec<u8>),
        }

        impl Piece {
            fn bytes(&self) -> Vec<u8> {
                match self {
                    Piece::Valid(frame) => encode(frame),
                    Piece::Short(body) => {
                        let mut out = (body.len() as u32).to_be_bytes().to_vec();
                        out.extend_from_slice(body);
                        out
                    }
                }
            }
        }

        fn message() -> impl Strategy<Value = Message> {
            let bytes = || proptest::collection::vec(any::<u8>(), 0..300);
            prop_oneof![
                bytes().prop_map(Message::Input),
                bytes().prop_map(Message::Output),
                Just(Message::Request(Request::Info)),
                Just(Message::Request(Request::Snapshot)),
                any::<String>().prop_map(|data| Message::Request(Request::Write { data })),
                (any::<u16>(), any::<u16>())
                    .prop_map(|(rows, cols)| Message::Request(Request::Resize { rows, cols })),
                any::<String>().prop_map(|message| Message::Response(Response::Error { message })),
            ]
        }

        fn piece() -> impl Strategy<Value = Piece> {
            prop_oneof![
                4 => (any::<u32>(), message()).prop_map(|(id, m)| Piece::Valid(Frame::new(id, m))),
                1 => proptest::collection::vec(any::<u8>(), 0..7).prop_map(Piece::Short),
            ]
        }

        proptest! {
            #[test]
            fn any_split_of_a_valid_stream_decodes_to_the_same_frames(
                pieces in proptest::collection::vec(piece(), 1..12),
                cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
            ) {
                let stream: Vec<u8> = pieces.iter().flat_map(Piece::bytes).collect();
                let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
                cuts.push(stream.len());
                cuts.sort_unstable();
                let mut d = FrameDecoder::default();
                let mut decoded = Vec::new();
                let mut start = 0;
                for cut in cuts {
                    d.push(&stream[start..cut]);
                    start = cut;
                    while let Some(frame) = d.next_frame().unwrap() {
                        decoded.push(frame);
                    }
                }
                prop_assert_eq!(decoded.len(), pieces.len());
                for (got, want) in decoded.iter().zip(&pieces) {
                    match want {
                        Piece::Valid(frame) => prop_assert_eq!(got, frame),
                        Piece::Short(_) => prop_assert!(
                            matches!(got.message, Message::Invalid { tag: 0, .. }),
                            "a short frame decodes to invalid, got {:?}", got
                        ),
                    }
                }
            }
        }
    }
}
