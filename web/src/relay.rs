//! One WebSocket, one bridge connection: each text message from the page
//! is one line to the bridge, each line from the bridge one text message
//! back. Nothing is parsed, kept or rewritten, except that a message's own
//! line breaks (JSON allows them between tokens) become spaces so that it
//! stays one line.
//!
//! A page that reads too slowly stops this relay reading the bridge, and
//! the bridge then drops the connection after its bounded backlog, as it
//! does for any slow client.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use axum::extract::ws::{close_code, CloseFrame, Message, Utf8Bytes, WebSocket};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::tokens::Role;

/// What makes a bridge connection an observer's (the bridge's extension;
/// `acp attach --read-only` sends the same).
const OBSERVE: &str = r#"{"jsonrpc":"2.0","method":"_agent_comms/observe","params":{}}"#;

/// Relays `socket` to a new connection to `bridge` until either side ends.
pub async fn run(mut socket: WebSocket, bridge: &Path, owner: u32, role: Role) {
    let stream = match connect(bridge, owner).await {
        Ok(stream) => stream,
        Err(e) => {
            let reason = format!("cannot reach the runtime's bridge: {e}");
            let _ = socket.send(close(close_code::AWAY, reason)).await;
            return;
        }
    };
    let (from_bridge, mut to_bridge) = stream.into_split();
    if role == Role::Observer && to_bridge.write_all(line(OBSERVE).as_bytes()).await.is_err() {
        return;
    }
    let mut lines = BufReader::new(from_bridge).lines();
    loop {
        tokio::select! {
            from_page = socket.recv() => match from_page {
                Some(Ok(Message::Text(text))) => {
                    if to_bridge.write_all(line(&text).as_bytes()).await.is_err() {
                        break;
                    }
                }
                Some(Ok(Message::Binary(_))) => {
                    let _ = socket.send(close(close_code::UNSUPPORTED, "ACP messages are text".into())).await;
                    break;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
            from_agent = lines.next_line() => match from_agent {
                Ok(Some(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    let _ = socket.send(close(close_code::AWAY, "the runtime's bridge closed the connection".into())).await;
                    break;
                }
            },
        }
    }
    // The page is gone: the bridge sees the end of its input and lets the
    // seat go.
    let _ = to_bridge.shutdown().await;
}

/// Connects to the bridge at `path`, which must be served by `owner` and
/// be a socket file of theirs: a path can be squatted, peer credentials
/// cannot.
pub async fn connect(path: &Path, owner: u32) -> io::Result<UnixStream> {
    let file_owner = std::fs::symlink_metadata(path)?.uid();
    let stream = UnixStream::connect(path).await?;
    let server = stream.peer_cred()?.uid();
    if server != owner || file_owner != owner {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {server}, not by uid {owner} who owns the runtime",
                path.display()
            ),
        ));
    }
    Ok(stream)
}

/// One message from the page as one line to the bridge: its own line
/// breaks become spaces (fuzzed with the bridge's framing: `web_frames`).
pub fn line(message: &str) -> String {
    let mut one = message.replace(['\n', '\r'], " ");
    one.push('\n');
    one
}

fn close(code: u16, reason: String) -> Message {
    Message::Close(Some(CloseFrame {
        code,
        reason: Utf8Bytes::from(reason),
    }))
}
