//! HTTP behaviour: keep-alive, pipelining, `Expect`, chunked and encoded
//! bodies, HTTP/1.0, the small endpoints, concurrency, aborted clients,
//! loopback-only binding, the log file, shutdown.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

use agent_comms_mockmodel::{Api, Config, LoggedRequest, MockServer, StartError, CANNED_REPLY};
use common::{post, Client};
use serde_json::{json, Value};

fn server() -> MockServer {
    MockServer::start(Config::default()).unwrap()
}

fn chat(prompt: &str) -> Value {
    json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": prompt}]})
}

fn chat_text(resp: &common::Response) -> String {
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

#[test]
fn root_models_and_unknown_paths() {
    let server = server();
    let mut c = Client::connect(server.port());
    let head = c.request("HEAD", "/", None);
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    let get = c.request("GET", "/", None);
    assert_eq!(get.status, 200);
    assert_eq!(
        get.header("content-length"),
        Some(get.body.len().to_string().as_str())
    );
    let models = c.request("GET", "/v1/models", None).json();
    assert_eq!(models["data"][0]["id"], "mock-1");
    assert_eq!(c.request("GET", "/v1/nothing", None).status, 404);
    assert_eq!(c.request("GET", "/v1/messages", None).status, 405);
    let count = c.request(
        "POST",
        "/v1/messages/count_tokens",
        Some(&json!({"model": "m", "messages": []})),
    );
    assert!(count.json()["input_tokens"].as_u64().is_some());
    let log = server.wait_for_requests(6, Duration::from_secs(5)).unwrap();
    let apis: Vec<Api> = log.iter().map(|r| r.api).collect();
    assert_eq!(
        apis,
        [
            Api::Root,
            Api::Root,
            Api::Models,
            Api::Unknown,
            Api::AnthropicMessages,
            Api::AnthropicCountTokens
        ]
    );
    assert_eq!(log[3].status, 404);
    assert_eq!(log[4].status, 405);
}

#[test]
fn keep_alive_and_pipelining() {
    let server = server();
    let mut c = Client::connect(server.port());
    for word in ["one", "two"] {
        let resp = c.request(
            "POST",
            "/v1/chat/completions",
            Some(&chat(&format!("REPLY={word}"))),
        );
        assert_eq!(resp.header("connection"), Some("keep-alive"));
        assert_eq!(chat_text(&resp), word);
    }
    // Two requests in one write, the second arriving while the first streams.
    let a = chat("REPLY=three SLOW=0.2 DELTAS=3").to_string();
    let b = chat("REPLY=four").to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{a}\
         POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{b}",
        a.len(),
        b.len()
    );
    let first = c.send_raw(raw.as_bytes(), false);
    assert_eq!(chat_text(&first), "three");
    let second = c.read_response(Instant::now(), false);
    assert_eq!(chat_text(&second), "four");
    assert_eq!(
        server
            .wait_for_requests(4, Duration::from_secs(5))
            .unwrap()
            .len(),
        4
    );
}

#[test]
fn expect_continue_and_chunked_request_body() {
    let server = server();
    let mut c = Client::connect(server.port());
    let body = chat("REPLY=chunked").to_string();
    let (x, y) = body.split_at(10);
    c.stream
        .write_all(
            b"POST /v1/chat/completions HTTP/1.1\r\nexpect: 100-continue\r\n\
              transfer-encoding: chunked\r\n\r\n",
        )
        .unwrap();
    let mut interim = [0u8; 25];
    c.stream.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    let chunks = format!(
        "{:x};ext=1\r\n{x}\r\n{:x}\r\n{y}\r\n0\r\n\r\n",
        x.len(),
        y.len()
    );
    let resp = c.send_raw(chunks.as_bytes(), false);
    assert_eq!(chat_text(&resp), "chunked");
    let r = &server.wait_for_requests(1, Duration::from_secs(5)).unwrap()[0];
    assert_eq!(
        r.headers.get("expect").map(String::as_str),
        Some("100-continue")
    );
    assert_eq!(r.prompt.as_deref(), Some("REPLY=chunked"));
}

#[test]
fn undecodable_bodies_get_the_canned_reply() {
    let server = server();
    let mut c = Client::connect(server.port());
    let junk = [0x28u8, 0xb5, 0x2f, 0xfd, 0, 1, 2, 3];
    let mut raw = format!(
        "POST /v1/responses HTTP/1.1\r\ncontent-encoding: zstd\r\ncontent-length: {}\r\n\r\n",
        junk.len()
    )
    .into_bytes();
    raw.extend_from_slice(&junk);
    let resp = c.send_raw(&raw, false);
    assert_eq!(
        resp.events.last().unwrap().name.as_deref(),
        Some("response.completed")
    );
    let text =
        resp.events.last().unwrap().json()["response"]["output"][0]["content"][0]["text"].clone();
    assert_eq!(text, CANNED_REPLY);
    let bad = "{not json";
    let raw = format!(
        "POST /v1/messages HTTP/1.1\r\ncontent-length: {}\r\n\r\n{bad}",
        bad.len()
    );
    let resp = c.send_raw(raw.as_bytes(), false);
    assert_eq!(
        resp.events.last().unwrap().name.as_deref(),
        Some("message_stop")
    );
    let log = server.wait_for_requests(2, Duration::from_secs(5)).unwrap();
    assert_eq!(
        log[0].body_error.as_deref(),
        Some("unsupported content-encoding: zstd")
    );
    assert!(log[0].body.is_none() && log[0].prompt.is_none());
    assert!(log[1]
        .body_error
        .as_deref()
        .unwrap()
        .starts_with("invalid JSON"));
    assert!(log.iter().all(|r| r.completed));
}

#[test]
fn http10_stream_is_close_delimited() {
    let server = server();
    let mut c = Client::connect(server.port());
    let body = chat("REPLY=old DELTAS=3").to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.0\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let resp = c.send_raw(raw.as_bytes(), false);
    assert_eq!(resp.header("transfer-encoding"), None);
    assert_eq!(resp.header("connection"), Some("close"));
    assert_eq!(chat_text(&resp), "old");
    assert_eq!(resp.events.last().unwrap().data, "[DONE]");
}

#[test]
fn malformed_request_gets_400() {
    let server = server();
    let mut c = Client::connect(server.port());
    let resp = c.send_raw(b"NONSENSE\r\n\r\n", false);
    assert_eq!(resp.status, 400);
    assert_eq!(resp.header("connection"), Some("close"));
}

#[test]
fn concurrent_requests_overlap() {
    let server = server();
    let port = server.port();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            std::thread::spawn(move || {
                let prompt = format!("REPLY=reply-number-{i} SLOW=0.5 DELTAS=5");
                chat_text(&post(port, "/v1/chat/completions", &chat(&prompt)))
            })
        })
        .collect();
    let texts: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, t) in texts.iter().enumerate() {
        assert_eq!(t, &format!("reply-number-{i}"));
    }
    let log = server.wait_for_requests(4, Duration::from_secs(5)).unwrap();
    // Every stream was still running when the last one started.
    let last_start = log.iter().map(|r| r.first_delta_at.unwrap()).max().unwrap();
    let first_end = log.iter().map(|r| r.last_delta_at.unwrap()).min().unwrap();
    assert!(last_start < first_end, "streams did not overlap: {log:#?}");
}

#[test]
fn arrivals_timeouts_and_aborted_clients() {
    let server = server();
    let port = server.port();
    let err = server
        .wait_for_requests(1, Duration::from_millis(50))
        .unwrap_err();
    assert!(err.requests.is_empty());

    let mut c = Client::connect(port);
    let body = chat("THINK=3").to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    c.stream.write_all(raw.as_bytes()).unwrap();
    let seen = server.wait_for_arrivals(1, Duration::from_secs(5)).unwrap();
    assert!(!seen[0].is_finished());
    let err = server
        .wait_for_requests(1, Duration::from_millis(100))
        .unwrap_err();
    assert_eq!(err.requests.len(), 1);
    // The client gives up (an interrupted turn): noticed during the pause.
    let gave_up = Instant::now();
    drop(c);
    let log = server.wait_for_requests(1, Duration::from_secs(5)).unwrap();
    assert!(
        gave_up.elapsed() < Duration::from_secs(2),
        "{:?}",
        gave_up.elapsed()
    );
    let r: &LoggedRequest = &log[0];
    assert!(r.aborted && !r.completed);
    assert!(r.first_delta_at.is_none());
}

#[test]
fn loopback_only() {
    for host in ["0.0.0.0", "::", "192.0.2.1"] {
        let config = Config {
            host: host.parse::<IpAddr>().unwrap(),
            ..Config::default()
        };
        match MockServer::start(config) {
            Err(StartError::NotLoopback(ip)) => assert_eq!(ip.to_string(), host),
            Err(e) => panic!("{host}: wrong error {e}"),
            Ok(s) => panic!("{host}: listening on {}", s.base_url()),
        }
    }
    let s = MockServer::start(Config {
        host: "127.0.0.2".parse().unwrap(),
        ..Config::default()
    });
    // 127.0.0.0/8 is loopback; binding it works on Linux.
    if let Ok(s) = s {
        assert!(s.base_url().starts_with("http://127.0.0.2:"));
    }
}

#[test]
fn log_file_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("requests.jsonl");
    let server = MockServer::start(Config::default().with_log_file(&path)).unwrap();
    let port = server.port();
    post(port, "/v1/chat/completions", &chat("REPLY=logged"));
    post(port, "/v1/messages", &chat("REPLY=again"));
    server.wait_for_requests(2, Duration::from_secs(5)).unwrap();
    let started = Instant::now();
    drop(server);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<LoggedRequest> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].reply.as_deref(), Some("logged"));
    assert_eq!(lines[1].reply.as_deref(), Some("again"));
    let raw: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(raw["received_at"].as_f64().unwrap() > 1.0e9);
}

#[test]
fn shutdown_with_streams_in_flight() {
    let server = server();
    let port = server.port();
    let mut c = Client::connect(port);
    let body = chat("THINK=30").to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    c.stream.write_all(raw.as_bytes()).unwrap();
    server.wait_for_arrivals(1, Duration::from_secs(5)).unwrap();
    let started = Instant::now();
    server.shutdown();
    assert!(started.elapsed() < Duration::from_secs(2));
    // The connection was closed by the server.
    let mut rest = Vec::new();
    let _ = c.stream.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("[DONE]"));
}
