//! `session logs NAME [-n N] [--follow]`: what the program printed, as
//! plain text (escape sequences and carriage returns removed), from the
//! text its supervisor keeps (the last 256 KiB). `--follow` keeps the
//! connection open and prints each new piece as the supervisor pushes it.

use std::io::Write;

use agent_comms_core::client::{Client, ClientError};
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{Event, OutputSince, Request, Response};
use anyhow::bail;

pub fn logs(
    mut client: Client,
    name: &str,
    last: Option<usize>,
    follow: bool,
) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    let first = if follow {
        let id = client.send(Message::Request(Request::FollowOutput { cursor: 0 }))?;
        first_reply(&mut client, id)?
    } else {
        match client.request(Request::OutputSince { cursor: 0 })? {
            Response::Output(since) => since,
            other => bail!("unexpected reply to output_since: {other:?}"),
        }
    };
    if first.skipped > 0 && last.is_none() {
        eprintln!(
            "agent-comms: session {name} printed more than is kept; its first {} bytes are gone",
            first.skipped
        );
    }
    let text = match last {
        Some(n) => last_lines(&first.text, n),
        None => &first.text,
    };
    if out
        .write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return Ok(0);
    }
    if !follow {
        return Ok(0);
    }
    loop {
        let frame = match client.read_frame() {
            Ok(frame) => frame,
            Err(ClientError::Closed) => bail!("lost the connection to session '{name}'"),
            Err(e) => return Err(e.into()),
        };
        match frame.message {
            Message::Event(Event::Printed(since)) => {
                if since.skipped > 0 {
                    eprintln!(
                        "agent-comms: {} bytes of session {name}'s output went by too fast to be shown",
                        since.skipped
                    );
                }
                // A reader that went away (`| head`) ends the command.
                if out
                    .write_all(since.text.as_bytes())
                    .and_then(|()| out.flush())
                    .is_err()
                {
                    return Ok(0);
                }
            }
            Message::Event(Event::Exited(info)) => {
                eprintln!("[session {name} ended: {info}]");
                return Ok(0);
            }
            _ => {}
        }
    }
}

/// The reply to `follow_output`: the text so far.
fn first_reply(client: &mut Client, id: u32) -> anyhow::Result<OutputSince> {
    loop {
        let frame = client.read_frame()?;
        match frame.message {
            Message::Response(Response::Output(since)) if frame.id == id => return Ok(since),
            Message::Response(Response::Error { message }) => bail!("{message}"),
            Message::Response(other) => bail!("unexpected reply to follow_output: {other:?}"),
            _ => {}
        }
    }
}

/// The last `n` lines of `text` (a line being the text up to and with its
/// line break; an unfinished last line counts as one).
fn last_lines(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((at, _)) => &text[at + 1..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn last_lines_counts_whole_and_unfinished_lines() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(last_lines("a\nb\n$ ", 2), "b\n$ ");
        assert_eq!(last_lines("a\nb\n", 5), "a\nb\n");
        assert_eq!(last_lines("a\n", 0), "");
    }
}
