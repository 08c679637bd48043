//! A raw HTTP/1.1 client on `std::net::TcpStream`, so the tests check the
//! bytes on the wire (framing, keep-alive, event timing) rather than what
//! some client library makes of them.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One server-sent event and when its last byte arrived.
#[derive(Debug, Clone)]
pub struct TimedEvent {
    /// Since the request was sent.
    pub at: Duration,
    pub name: Option<String>,
    pub data: String,
}

impl TimedEvent {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("{e}: {}", self.data))
    }
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub events: Vec<TimedEvent>,
    /// Since the request was sent, when the body was complete.
    pub done_at: Duration,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn event_names(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e.name.clone().unwrap_or_default())
            .collect()
    }
}

pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Client {
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends a request with a JSON body (or none) and reads the response.
    pub fn request(&mut self, method: &str, path: &str, body: Option<&Value>) -> Response {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nx-api-key: secret-key\r\nuser-agent: raw-test\r\n\r\n",
            body.len()
        );
        self.send_raw(format!("{head}{body}").as_bytes(), method == "HEAD")
    }

    /// Sends raw bytes and reads one response.
    pub fn send_raw(&mut self, bytes: &[u8], head_only: bool) -> Response {
        let start = Instant::now();
        self.stream.write_all(bytes).unwrap();
        self.read_response(start, head_only)
    }

    fn fill(&mut self) -> usize {
        let mut tmp = [0u8; 8192];
        let n = self.stream.read(&mut tmp).unwrap();
        self.buf.extend_from_slice(&tmp[..n]);
        n
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill() > 0, "connection closed early");
        }
        self.buf.drain(..n).collect()
    }

    fn line(&mut self) -> String {
        loop {
            if let Some(p) = find(&self.buf, b"\r\n") {
                let l = String::from_utf8(self.buf[..p].to_vec()).unwrap();
                self.buf.drain(..p + 2);
                return l;
            }
            assert!(self.fill() > 0, "connection closed early");
        }
    }

    pub fn read_response(&mut self, start: Instant, head_only: bool) -> Response {
        let mut status_line = self.line();
        // Skip interim responses (100 Continue).
        while status_line.starts_with("HTTP/1.1 1") {
            while !self.line().is_empty() {}
            status_line = self.line();
        }
        let status: u16 = status_line.split(' ').nth(1).unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let l = self.line();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap();
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let mut resp = Response {
            status,
            headers,
            body: Vec::new(),
            events: Vec::new(),
            done_at: Duration::ZERO,
        };
        let mut sse = Vec::new();
        if head_only {
        } else if resp.header("transfer-encoding") == Some("chunked") {
            loop {
                let size = usize::from_str_radix(&self.line(), 16).unwrap();
                let data = self.take(size);
                assert_eq!(self.take(2), b"\r\n");
                if size == 0 {
                    break;
                }
                resp.body.extend_from_slice(&data);
                sse.extend_from_slice(&data);
                parse_events(&mut sse, start.elapsed(), &mut resp.events);
            }
        } else if let Some(len) = resp.header("content-length") {
            let len: usize = len.parse().unwrap();
            resp.body = self.take(len);
        } else {
            // Close-delimited (HTTP/1.0).
            loop {
                let mut data: Vec<u8> = self.buf.drain(..).collect();
                let n = data.len();
                resp.body.extend_from_slice(&data);
                sse.append(&mut data);
                parse_events(&mut sse, start.elapsed(), &mut resp.events);
                if n == 0 && self.fill() == 0 {
                    break;
                }
            }
        }
        resp.done_at = start.elapsed();
        resp
    }
}

fn parse_events(buf: &mut Vec<u8>, at: Duration, out: &mut Vec<TimedEvent>) {
    while let Some(p) = find(buf, b"\n\n") {
        let text = String::from_utf8(buf[..p].to_vec()).unwrap();
        buf.drain(..p + 2);
        let mut ev = TimedEvent {
            at,
            name: None,
            data: String::new(),
        };
        for line in text.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                ev.name = Some(n.to_string());
            } else if let Some(d) = line.strip_prefix("data: ") {
                if !ev.data.is_empty() {
                    ev.data.push('\n');
                }
                ev.data.push_str(d);
            }
        }
        out.push(ev);
    }
}

/// A one-off request on a fresh connection.
pub fn post(port: u16, path: &str, body: &Value) -> Response {
    Client::connect(port).request("POST", path, Some(body))
}

/// The text pieces of a streamed Chat Completions reply, one per delta.
pub fn chat_deltas(resp: &Response) -> Vec<String> {
    resp.events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .filter_map(|e| {
            e.json()["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}

/// The whole text of a streamed Chat Completions reply.
pub fn chat_text(resp: &Response) -> String {
    chat_deltas(resp).concat()
}
