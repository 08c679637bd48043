//! A small HTTP/1.1 server connection: just what the clients use.
//!
//! The clients are Node's undici (Claude Code, opencode) and Rust's
//! reqwest/hyper (Codex). They keep connections alive between requests, may
//! send `Expect: 100-continue` or a chunked request body, and read a
//! streamed reply as it comes; so requests are read one after another on a
//! connection, streamed responses use chunked transfer encoding (or, for an
//! HTTP/1.0 client, are delimited by closing the connection), and every
//! piece is written as soon as it is due (`TCP_NODELAY`).

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::Instant;

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request: its head, and its body with any chunked framing removed.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub http10: bool,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    pub fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, q)| q)
    }

    fn has_token(&self, header: &str, token: &str) -> bool {
        self.header(header)
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    }

    /// Whether the connection stays open after the response.
    pub fn keep_alive(&self) -> bool {
        if self.has_token("connection", "close") {
            false
        } else {
            !self.http10 || self.has_token("connection", "keep-alive")
        }
    }
}

/// Why a request could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Malformed or too large; answered 400 and the connection closed.
    Bad(&'static str),
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// One client connection.
pub struct Conn {
    reader: OwnedReadHalf,
    writer: OwnedWriteHalf,
    /// Bytes read but not used yet (the start of a pipelined request).
    buf: Vec<u8>,
    /// How the body of the response being streamed is framed.
    chunked: bool,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Unknown",
    }
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        let (reader, writer) = stream.into_split();
        Conn {
            reader,
            writer,
            buf: Vec::new(),
            chunked: false,
        }
    }

    async fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 16 * 1024];
        let n = self.reader.read(&mut tmp).await?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    /// Reads the next request; `None` when the client closed the connection
    /// between requests.
    pub async fn read_request(&mut self) -> Result<Option<Request>, ReadError> {
        let end = loop {
            // Stray line breaks between requests are allowed (RFC 9112 2.2).
            let skip = self.buf.iter().take_while(|b| **b == b'\r' || **b == b'\n');
            let skip = skip.count();
            self.buf.drain(..skip);
            if let Some(p) = find(&self.buf, b"\r\n\r\n") {
                break p;
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ReadError::Bad("request head too large"));
            }
            if self.fill().await? == 0 {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(ReadError::Bad("connection closed inside a request head")),
                };
            }
        };
        let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or_default().split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (start.next(), start.next(), start.next(), start.next())
        else {
            return Err(ReadError::Bad("malformed request line"));
        };
        let http10 = match version {
            "HTTP/1.1" => false,
            "HTTP/1.0" => true,
            _ => return Err(ReadError::Bad("unsupported HTTP version")),
        };
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .ok_or(ReadError::Bad("malformed header line"))?;
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let mut req = Request {
            method: method.to_string(),
            target: target.to_string(),
            http10,
            headers,
            body: Vec::new(),
        };
        if !http10 && req.has_token("expect", "100-continue") {
            self.writer
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await?;
        }
        req.body = if req.has_token("transfer-encoding", "chunked") {
            self.read_chunked().await?
        } else if let Some(len) = req.header("content-length") {
            let len: usize = len
                .parse()
                .map_err(|_| ReadError::Bad("malformed content-length"))?;
            if len > MAX_BODY {
                return Err(ReadError::Bad("request body too large"));
            }
            self.take(len).await?
        } else {
            Vec::new()
        };
        Ok(Some(req))
    }

    /// The next `n` bytes.
    async fn take(&mut self, n: usize) -> Result<Vec<u8>, ReadError> {
        while self.buf.len() < n {
            if self.fill().await? == 0 {
                return Err(ReadError::Bad("connection closed inside a request body"));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    async fn line(&mut self) -> Result<String, ReadError> {
        loop {
            if let Some(p) = find(&self.buf, b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..p]).into_owned();
                self.buf.drain(..p + 2);
                return Ok(line);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ReadError::Bad("chunk line too long"));
            }
            if self.fill().await? == 0 {
                return Err(ReadError::Bad("connection closed inside a chunked body"));
            }
        }
    }

    async fn read_chunked(&mut self) -> Result<Vec<u8>, ReadError> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await?;
            let size = line.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| ReadError::Bad("malformed chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line().await?.is_empty() {}
                return Ok(body);
            }
            if body.len() + size > MAX_BODY {
                return Err(ReadError::Bad("request body too large"));
            }
            body.extend(self.take(size).await?);
            if self.take(2).await? != b"\r\n" {
                return Err(ReadError::Bad("malformed chunk"));
            }
        }
    }

    fn head(status: u16, headers: &[(&str, String)]) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {status} {}\r\n", reason(status));
        for (n, v) in headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }

    fn connection(keep_alive: bool) -> (&'static str, String) {
        let v = if keep_alive { "keep-alive" } else { "close" };
        ("connection", v.to_string())
    }

    /// A whole response with a `Content-Length` (no body for `HEAD`).
    pub async fn respond(
        &mut self,
        req: &Request,
        status: u16,
        content_type: &str,
        extra: &[(&str, String)],
        body: &[u8],
    ) -> io::Result<()> {
        let mut headers = vec![
            ("content-type", content_type.to_string()),
            ("content-length", body.len().to_string()),
            Self::connection(req.keep_alive()),
        ];
        headers.extend(extra.iter().map(|(n, v)| (*n, v.clone())));
        let mut out = Self::head(status, &headers);
        if req.method != "HEAD" {
            out.extend_from_slice(body);
        }
        self.writer.write_all(&out).await
    }

    /// Starts a streamed response: chunked, or close-delimited for HTTP/1.0.
    pub async fn start_stream(
        &mut self,
        req: &Request,
        content_type: &str,
        extra: &[(&str, String)],
    ) -> io::Result<()> {
        self.chunked = !req.http10;
        let mut headers = vec![
            ("content-type", content_type.to_string()),
            ("cache-control", "no-cache".to_string()),
            Self::connection(req.keep_alive() && self.chunked),
        ];
        if self.chunked {
            headers.push(("transfer-encoding", "chunked".to_string()));
        }
        headers.extend(extra.iter().map(|(n, v)| (*n, v.clone())));
        self.writer.write_all(&Self::head(200, &headers)).await
    }

    /// Writes one piece of a streamed body.
    pub async fn send(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if self.chunked {
            let mut out = format!("{:x}\r\n", data.len()).into_bytes();
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\n");
            self.writer.write_all(&out).await
        } else {
            self.writer.write_all(data).await
        }
    }

    /// Ends a streamed body.
    pub async fn end_stream(&mut self) -> io::Result<()> {
        if self.chunked {
            self.writer.write_all(b"0\r\n\r\n").await?;
        }
        self.writer.flush().await
    }

    /// Waits until `deadline`, failing early if the client closes the
    /// connection (an interrupted turn). Bytes that arrive meanwhile (a
    /// pipelined request) are kept for the next read.
    pub async fn pause_until(&mut self, deadline: Instant) -> io::Result<()> {
        loop {
            let mut tmp = [0u8; 4096];
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(deadline) => return Ok(()),
                r = self.reader.read(&mut tmp) => match r? {
                    0 => return Err(io::ErrorKind::ConnectionAborted.into()),
                    n => self.buf.extend_from_slice(&tmp[..n]),
                },
            }
        }
    }
}
