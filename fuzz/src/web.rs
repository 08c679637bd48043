//! The web server's fuzz targets, one function each, as `lib.rs` has
//! core's (its `WEB_TARGETS` names them). Apart because they need
//! the web crate, which core cannot depend on: `fuzz_targets/web_*.rs`
//! include this file, and the root package's `tests/fuzz_regressions.rs`
//! replays every input under `fuzz/regressions/web_*/` through it on
//! stable, in every `cargo test`.

mod framing;

use agent_comms_core::acp::bridge::bounds::MAX_CLIENT_LINE;
use agent_comms_web::relay;
use framing::{line_seen, peer_of, read_lines, split_input};

/// A target: it panics when its input breaks a property.
pub type Target = fn(&[u8]);

/// The web server's targets, named as `fuzz_targets/NAME.rs` and the
/// folders of `fuzz/regressions/` spell them.
pub const TARGETS: &[(&str, Target)] = &[("web_frames", web_frames)];

/// The page's WebSocket messages as the relay hands them to the bridge
/// (`relay::line`), read back through the bridge's own framing, as a
/// client's connection is: `how | split` (see [`split_input`]), each piece
/// one text message. `how`'s two high bits pick how the bridge's socket
/// delivers the lines ([`peer_of`]); its low six bits the longest line the
/// bridge takes: 63 is the real [`MAX_CLIENT_LINE`] (the page's own limit),
/// others 1 to 63 bytes. Each message becomes one line of its length, with
/// no line break of its own, and the bridge gets exactly one message per
/// message, in order: the message with its line breaks as spaces, or
/// nothing for a blank one, or the too-long report with the message's
/// length (so a message is never split in two, merged with the next one, or
/// cut short).
pub fn web_frames(data: &[u8]) {
    let Some((&how, rest)) = data.split_first() else {
        return;
    };
    let max = match how & 63 {
        63 => MAX_CLIENT_LINE,
        small => usize::from(small) + 1,
    };
    let (peer, deadline) = peer_of(how);
    let messages: Vec<String> = split_input(rest)
        .into_iter()
        .map(|m| String::from_utf8_lossy(m).into_owned())
        .collect();
    let mut written = Vec::new();
    let mut expected = Vec::new();
    for message in &messages {
        let line = relay::line(message);
        let (text, end) = line.split_at(line.len() - 1);
        assert_eq!(end, "\n", "{message:?} became {line:?}");
        assert_eq!(text.len(), message.len(), "{message:?} became {line:?}");
        assert!(!text.contains(['\n', '\r']), "{message:?} became {line:?}");
        expected.extend(line_seen(text.as_bytes(), max));
        written.push(line.into_bytes());
    }
    let pieces: Vec<&[u8]> = written.iter().map(Vec::as_slice).collect();
    let seen = read_lines(&pieces, peer, max, deadline);
    assert_eq!(seen, expected, "max {max}, {peer:?}");
}
