//! The endpoint protocol spoken by hand, for tests that send what the
//! real clients never would: raw frames, partial frames, garbage.

use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;

use super::TIMEOUT;

/// One protocol v1 frame: `len | version | tag | id | payload`.
pub fn frame(version: u8, tag: u16, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = ((1 + 2 + 4 + payload.len()) as u32).to_be_bytes().to_vec();
    out.push(version);
    out.extend_from_slice(&tag.to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

pub const TAG_REQUEST: u16 = 1;
pub const TAG_RESPONSE: u16 = 2;
pub const TAG_INPUT: u16 = 4;
pub const TAG_OUTPUT: u16 = 5;

#[derive(Debug)]
pub struct RawFrame {
    pub tag: u16,
    pub id: u32,
    pub payload: Vec<u8>,
}

impl RawFrame {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.payload)
            .unwrap_or_else(|e| panic!("frame payload is not JSON ({e}): {self:?}"))
    }
}

pub fn connect(socket: &Path) -> UnixStream {
    let s = UnixStream::connect(socket).expect("connect to the session socket");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s
}

/// The next frame, or None at the end of the stream.
pub fn read_frame(s: &mut UnixStream) -> Option<RawFrame> {
    let mut header = [0u8; 11];
    match s.read_exact(&mut header) {
        Ok(()) => {}
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset
            ) =>
        {
            return None
        }
        Err(e) => panic!("reading from the supervisor: {e}"),
    }
    let len = u32::from_be_bytes(header[..4].try_into().unwrap()) as usize;
    assert_eq!(header[4], 1, "protocol version");
    let mut payload = vec![0u8; len - 7];
    s.read_exact(&mut payload).expect("a whole frame");
    Some(RawFrame {
        tag: u16::from_be_bytes([header[5], header[6]]),
        id: u32::from_be_bytes(header[7..11].try_into().unwrap()),
        payload,
    })
}

/// Reads the error reply to request `id`.
pub fn expect_error(s: &mut UnixStream, id: u32) -> String {
    let f = read_frame(s).expect("an error reply, not the end of the stream");
    assert_eq!((f.tag, f.id), (TAG_RESPONSE, id), "{f:?}");
    let v = f.json();
    assert_eq!(v["type"], "error", "{v}");
    v["message"].as_str().unwrap().to_owned()
}
