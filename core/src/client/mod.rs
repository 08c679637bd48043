//! The blocking client that short-lived commands use to talk to a supervisor.
//!
//! Plain std sockets (named pipes on Windows), no async runtime: a `k run`
//! pays for one connect, one request and one reply, and nothing else, which
//! is most of why it is fast.

use std::io::{ErrorKind, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::paths::{ensure_runtime_root, PathError};
use crate::session::{Liveness, Registry, SessionError, SessionName, SessionRecord};
use crate::socket::codec::{encode, CodecError, Frame, FrameDecoder, Message};
use crate::socket::protocol::{Event, Request, Response, Waiting};
use crate::socket::{is_dialable, ClientStream};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Paths(#[from] PathError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("session '{name}' was stale (its supervisor, pid {supervisor_pid}, is gone); removed its socket")]
    Stale { name: String, supervisor_pid: u32 },
    #[error("cannot reach session '{name}': {source}")]
    Connect {
        name: String,
        source: std::io::Error,
    },
    #[error("connection to the supervisor lost: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error("the supervisor closed the connection")]
    Closed,
    #[error("{0}")]
    Server(String),
    #[error("unexpected reply from the supervisor: {0}")]
    Unexpected(String),
}

pub struct Client {
    stream: ClientStream,
    decoder: FrameDecoder,
    /// What each read fills: small at first, as a reply is, and grown to
    /// [`READ_CHUNK`] once a read fills it (a stream of output). Not a 64 KiB
    /// array on the stack: the stack probe touches such a frame page by
    /// page, sixteen page faults for each function holding one: 32 of the
    /// 115 a whole `k run` took.
    read_buf: Vec<u8>,
    next_id: u32,
}

/// How long [`Client::kill`] waits, after the reply, for the supervisor to
/// exit.
const SUPERVISOR_EXIT_WAIT: Duration = Duration::from_secs(5);

/// The first reads' size, and the most one read takes in.
const FIRST_READ: usize = 4 * 1024;
const READ_CHUNK: usize = 64 * 1024;

impl Client {
    pub fn connect(socket: &Path) -> std::io::Result<Self> {
        Ok(Self {
            stream: crate::socket::connect(socket)?,
            decoder: FrameDecoder::default(),
            read_buf: vec![0; FIRST_READ],
            next_id: 1,
        })
    }

    /// Connects to the live session `name`; a stale one is cleaned up and
    /// reported as [`ClientError::Stale`].
    pub fn for_session(name: &SessionName) -> Result<(Self, SessionRecord), ClientError> {
        let registry = Registry::new(ensure_runtime_root()?, is_dialable);
        let record = registry
            .record(name)
            .ok_or_else(|| SessionError::NotFound(name.to_string()))?;
        // The common case costs one connect; only a socket that refuses is
        // looked at more closely (and cleaned up when stale).
        if let Ok(client) = Self::connect(&record.socket) {
            return Ok((client, record));
        }
        match registry.judge(record) {
            Liveness::Stale(r) => Err(ClientError::Stale {
                name: name.to_string(),
                supervisor_pid: r.supervisor_pid,
            }),
            Liveness::Live(record) => {
                let client =
                    Self::connect(&record.socket).map_err(|source| ClientError::Connect {
                        name: name.to_string(),
                        source,
                    })?;
                Ok((client, record))
            }
        }
    }

    pub fn send(&mut self, message: Message) -> Result<u32, ClientError> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        if let Err(e) = self.stream.write_all(&encode(&Frame::new(id, message))) {
            // A supervisor that refuses a connection (peer uid check) says
            // why and hangs up, possibly before our write: its reason, still
            // readable, beats "broken pipe".
            return Err(self.last_words().unwrap_or(ClientError::Io(e)));
        }
        Ok(id)
    }

    /// The error reply a supervisor sent before it closed the connection.
    fn last_words(&mut self) -> Option<ClientError> {
        match self.read_frame().ok()?.message {
            Message::Response(Response::Error { message }) => Some(ClientError::Server(message)),
            _ => None,
        }
    }

    pub fn read_frame(&mut self) -> Result<Frame, ClientError> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(frame);
            }
            if self.read_some()? == 0 {
                return Err(ClientError::Closed);
            }
        }
    }

    /// One read into the decoder; 0 at the end of the stream.
    fn read_some(&mut self) -> std::io::Result<usize> {
        let n = self.stream.read(&mut self.read_buf)?;
        self.decoder.push(&self.read_buf[..n]);
        if n == self.read_buf.len() && n < READ_CHUNK {
            self.read_buf.resize(READ_CHUNK, 0);
        }
        Ok(n)
    }

    /// Like [`Self::read_frame`], but gives up at `deadline`: `None` when
    /// no whole frame arrived by then. For waits that must end (a tool call
    /// with a timeout) on a connection the supervisor pushes events on.
    pub fn read_frame_until(&mut self, deadline: Instant) -> Result<Option<Frame>, ClientError> {
        loop {
            if let Some(frame) = self.decoder.next_frame()? {
                return Ok(Some(frame));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream.set_read_timeout(Some(left))?;
            let read = self.read_some();
            self.stream.set_read_timeout(None)?;
            match read {
                Ok(0) => return Err(ClientError::Closed),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sends `request` and returns its response; an error response becomes
    /// [`ClientError::Server`].
    pub fn request(&mut self, request: Request) -> Result<Response, ClientError> {
        let id = self.send(Message::Request(request))?;
        loop {
            let frame = self.read_frame()?;
            match frame.message {
                Message::Response(Response::Error { message }) => {
                    return Err(ClientError::Server(message))
                }
                Message::Response(r) if frame.id == id => return Ok(r),
                // Events pushed before the reply are not ours to handle here.
                Message::Event(_) | Message::Output(_) => continue,
                other => return Err(ClientError::Unexpected(format!("{other:?}"))),
            }
        }
    }

    /// Asks the supervisor to end its program ([`Request::Kill`]: hangup
    /// and terminate, then kill after `grace`) and returns the reply once
    /// the supervisor process, `supervisor_pid`, is gone too (waited for at
    /// most [`SUPERVISOR_EXIT_WAIT`]). A supervisor answers once its child
    /// has ended, then cleans up and exits: a caller that returned on the
    /// reply could still find the session there (`k new` of its name
    /// refused, its processes listed).
    pub fn kill(&mut self, supervisor_pid: u32, grace: Duration) -> Result<Response, ClientError> {
        let reply = self.request(Request::Kill {
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        })?;
        crate::session::wait_gone(supervisor_pid, SUPERVISOR_EXIT_WAIT);
        Ok(reply)
    }

    /// [`Self::request`] for a request that may wait (`deliver`, `nudge`
    /// with `wait_for`): first asks the supervisor to say what it waits
    /// for ([`Request::ReportWaits`]), then calls `on_wait` each time that
    /// changes and about once a second while it lasts (so a person sees
    /// for how long), and with `None` once it no longer waits and when
    /// the reply came. A supervisor that cannot report waits stays silent.
    pub fn request_telling_waits(
        &mut self,
        request: Request,
        on_wait: &mut dyn FnMut(Option<&Waiting>),
    ) -> Result<Response, ClientError> {
        match self.request(Request::ReportWaits) {
            Ok(_) | Err(ClientError::Server(_)) => {}
            Err(e) => return Err(e),
        }
        let id = self.send(Message::Request(request))?;
        let mut now: Option<Waiting> = None;
        let reply = loop {
            let next = Instant::now() + Duration::from_secs(1);
            let frame = match self.read_frame_until(next) {
                Ok(Some(frame)) => frame,
                Ok(None) => {
                    on_wait(now.as_ref());
                    continue;
                }
                Err(e) => break Err(e),
            };
            match frame.message {
                Message::Event(Event::Waiting { wait }) => {
                    now = wait;
                    on_wait(now.as_ref());
                }
                Message::Response(Response::Error { message }) => {
                    break Err(ClientError::Server(message))
                }
                Message::Response(r) if frame.id == id => break Ok(r),
                Message::Event(_) | Message::Output(_) => {}
                other => break Err(ClientError::Unexpected(format!("{other:?}"))),
            }
        };
        on_wait(None);
        reply
    }

    /// A second handle on the same connection, for a writer thread.
    pub fn try_clone_stream(&self) -> Result<ClientStream, ClientError> {
        self.stream.try_clone().map_err(ClientError::Io)
    }
}

pub mod attach;
