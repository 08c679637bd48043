//! `acp attach`: a client's standard input and output, carried to a
//! bridge socket and back unchanged — so any ACP client can use a running
//! session by naming `agent-comms acp attach ID` as its agent command, here
//! or through `ssh host agent-comms acp attach ID`.
//!
//! Before anything is sent, the server's uid is checked against the
//! socket file's owner (and, for the user's own runtime, against the user):
//! a path can be squatted, a peer's credentials cannot.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::ext::ObserveNotification;

/// Connects to the bridge at `path`, served by `owner` (none: whoever owns
/// the socket file, for a socket another user shares).
pub fn connect(path: &Path, owner: Option<u32>) -> io::Result<UnixStream> {
    let file_owner = std::fs::symlink_metadata(path)?.uid();
    let stream = UnixStream::connect(path)?;
    let server = crate::socket::server_uid(&stream)?;
    let expected = owner.unwrap_or(file_owner);
    if server != expected || server != file_owner {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is served by uid {server}, not by uid {expected} who owns the runtime; nothing was sent",
                path.display()
            ),
        ));
    }
    Ok(stream)
}

/// Copies `input` to the bridge and the bridge to `output` until the bridge
/// closes; `read_only` says so first.
pub fn pipe(
    stream: UnixStream,
    mut input: impl Read + Send + 'static,
    mut output: impl Write,
    read_only: bool,
) -> io::Result<()> {
    let mut to_bridge = stream.try_clone()?;
    if read_only {
        let observe = serde_json::json!({
            "jsonrpc": "2.0",
            "method": <ObserveNotification as agent_client_protocol::JsonRpcMessage>::method(&ObserveNotification {}),
            "params": {},
        });
        to_bridge.write_all(format!("{observe}\n").as_bytes())?;
    }
    std::thread::spawn(move || {
        let _ = io::copy(&mut input, &mut to_bridge);
        // The client is done: the bridge sees the end and closes.
        let _ = to_bridge.shutdown(Shutdown::Write);
    });
    let mut from_bridge = stream;
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = match from_bridge.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        output.write_all(&buf[..n])?;
        output.flush()?;
    }
}
