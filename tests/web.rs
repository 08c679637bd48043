//! `acp serve-web` and `runtime acp-serve --listen` end to end, with the
//! fake ACP agent (`tests/fakes/acp_agent.py`): who is let in (tokens,
//! Origin, where it may listen), the ACP stream over WebSocket from a
//! client of our own, and the page itself in headless Chromium
//! (`tests/web/page.cjs`; docs/acp-web.md).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::env::{Record, TestEnv};
use support::procs::wait_gone;
use support::run::run_within;
use support::TIMEOUT;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

/// A policy that leaves edits to the people attached.
const ASK_EDITS: &str = "[[permissions.rule]]\ntool_kind = \"edit\"\nanswer = \"ask\"\n";

fn fake_agent() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fakes/acp_agent.py")
        .display()
        .to_string()
}

/// `runtime acp-serve --id ID --json EXTRA… -- acp_agent.py` in
/// `FAKE_ACP_MODE=mode`: its start line, the runtime remembered for
/// cleanup.
fn serve(env: &TestEnv, id: &str, mode: &str, extra: &[&str]) -> Value {
    let mut args = vec!["runtime", "acp-serve", "--id", id, "--json"];
    args.extend_from_slice(extra);
    let agent = fake_agent();
    args.extend(["--", &agent]);
    let mut cmd = env.command(&args);
    cmd.current_dir(&env.work).env("FAKE_ACP_MODE", mode);
    let started = run_within(cmd, &format!("acp-serve {id}"), TIMEOUT)
        .ok()
        .json();
    env.remember(Record {
        name: id.to_owned(),
        pid: started["agent_pid"].as_u64().unwrap() as u32,
        supervisor_pid: started["supervisor_pid"].as_u64().unwrap() as u32,
        socket: env.socket_path(id),
    });
    started
}

/// `acp serve-web ID --json ARGS…` running in the background: the child
/// and the URLs it printed.
fn serve_web(env: &TestEnv, id: &str, args: &[&str]) -> (Child, Value) {
    let mut all = vec!["acp", "serve-web", id, "--json"];
    all.extend_from_slice(args);
    let mut child = env
        .command(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start serve-web");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let urls = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    (child, urls)
}

/// `child`'s exit status, which must come within the timeout.
fn ended(child: &mut Child, what: &str) -> std::process::ExitStatus {
    assert!(wait_gone(child.id(), TIMEOUT), "{what} did not end");
    child.wait().unwrap()
}

fn origin_of(url: &str) -> String {
    url.split("/?").next().unwrap().to_owned()
}

/// `GET path` on `addr` with `Connection: close`: the status and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let status = reply.split(' ').nth(1).and_then(|s| s.parse().ok());
    let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status.unwrap_or(0), body.unwrap_or_default())
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the WebSocket `/acp?token=…` with `origin` (none: a program's).
async fn open(
    listen: &str,
    token: &str,
    origin: Option<&str>,
) -> Result<Socket, tungstenite::Error> {
    let mut request = format!("ws://{listen}/acp?token={token}")
        .into_client_request()
        .unwrap();
    if let Some(origin) = origin {
        request
            .headers_mut()
            .insert("Origin", origin.parse().unwrap());
    }
    Ok(tokio_tungstenite::connect_async(request).await?.0)
}

fn refused_with(result: Result<Socket, tungstenite::Error>) -> (u16, String) {
    match result {
        Err(tungstenite::Error::Http(response)) => {
            let body = response.body().as_deref().unwrap_or_default();
            (
                response.status().as_u16(),
                String::from_utf8_lossy(body).into_owned(),
            )
        }
        Err(other) => panic!("expected an HTTP refusal, got {other}"),
        Ok(_) => panic!("expected a refusal, the WebSocket opened"),
    }
}

/// An ACP client over the WebSocket: requests, and every notification
/// seen on the way.
struct Acp {
    socket: Socket,
    next: u64,
    seen: Vec<Value>,
}

impl Acp {
    fn new(socket: Socket) -> Self {
        Self {
            socket,
            next: 0,
            seen: Vec::new(),
        }
    }

    async fn send(&mut self, msg: Value) {
        self.socket
            .send(Message::text(msg.to_string()))
            .await
            .unwrap();
    }

    async fn recv(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(TIMEOUT, self.socket.next())
                .await
                .expect("a message within the timeout")
                .expect("the WebSocket is open")
                .expect("a WebSocket message");
            match msg {
                Message::Text(text) => {
                    return serde_json::from_str(text.as_str())
                        .unwrap_or_else(|e| panic!("{e}: {text}"))
                }
                Message::Close(frame) => panic!("closed: {frame:?}"),
                _ => {}
            }
        }
    }

    /// The response to a new request (notifications on the way are kept).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let msg = self.recv().await;
            if msg["id"] == id && msg.get("method").is_none() {
                return msg;
            }
            self.seen.push(msg);
        }
    }

    /// initialize, session/list, session/load: the session's id.
    async fn join(&mut self) -> String {
        let init = self
            .request(
                "initialize",
                json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
            .await;
        assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
        let list = self.request("session/list", json!({})).await;
        let session = list["result"]["sessions"][0]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("{list}"))
            .to_owned();
        let load = self
            .request(
                "session/load",
                json!({"sessionId": session, "cwd": "/", "mcpServers": []}),
            )
            .await;
        assert!(load.get("error").is_none(), "{load}");
        session
    }

    /// The agent's text in the updates seen so far.
    fn agent_text(&self) -> String {
        self.seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_page_and_the_websocket_want_the_token_and_the_websocket_its_own_origin() {
    let env = TestEnv::new();
    let started = serve(&env, "w1", "normal", &["--listen", "127.0.0.1:0"]);
    let web = &started["web"];
    let listen = web["listen"].as_str().unwrap();
    let url = web["url"].as_str().unwrap();
    let token = url.split("token=").nth(1).unwrap();
    assert_ne!(web["read_only_url"], web["url"]);

    let (status, body) = get(listen, "/");
    assert_eq!(status, 401);
    assert_eq!(body.lines().count(), 1, "{body}");
    assert!(body.contains("token"), "{body}");
    assert_eq!(get(listen, &format!("/?token={}", "0".repeat(32))).0, 401);
    let (status, page) = get(listen, &format!("/?token={token}"));
    assert_eq!(status, 200);
    assert!(page.contains(r#"data-role="controller""#), "{page}");
    let read_only = web["read_only_url"].as_str().unwrap();
    let (_, page) = get(listen, &read_only[read_only.find("/?").unwrap()..]);
    assert!(page.contains(r#"data-role="observer""#), "{page}");

    let rt = runtime();
    let (status, body) = refused_with(rt.block_on(open(listen, "", None)));
    assert_eq!(status, 401, "{body}");
    let foreign = rt.block_on(open(listen, token, Some("http://evil.example")));
    let (status, body) = refused_with(foreign);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("Origin"), "{body}");
    let own = origin_of(url);
    let mut acp = Acp::new(rt.block_on(open(listen, token, Some(&own))).unwrap());
    assert_eq!(
        rt.block_on(acp.join()),
        started["session_id"].as_str().unwrap()
    );

    // The token file is private, and goes with the runtime, as does the
    // web server.
    let tokens = env.runtime.join("w1.web.json");
    assert_eq!(
        std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let web_pid = web["pid"].as_u64().unwrap() as u32;
    drop(acp);
    env.run_ok(&["session", "kill", "w1"]);
    assert!(
        wait_gone(web_pid, TIMEOUT),
        "serve-web outlived its runtime"
    );
    assert!(!tokens.exists(), "the tokens outlived the runtime");
    env.assert_nothing_left(&[]);
}

#[test]
fn a_controller_prompts_over_the_websocket_and_an_observer_is_refused() {
    let env = TestEnv::new();
    serve(&env, "w2", "normal", &[]);
    let (mut child, urls) = serve_web(&env, "w2", &["--listen", "127.0.0.1:0"]);
    let listen = urls["listen"].as_str().unwrap().to_owned();
    let token = |key: &str| {
        urls[key]
            .as_str()
            .unwrap()
            .split("token=")
            .nth(1)
            .unwrap()
            .to_owned()
    };

    let rt = runtime();
    rt.block_on(async {
        let mut controller = Acp::new(open(&listen, &token("url"), None).await.unwrap());
        let session = controller.join().await;
        let mut observer = Acp::new(open(&listen, &token("read_only_url"), None).await.unwrap());
        assert_eq!(observer.join().await, session);

        let reply = controller
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello over websocket"}]}),
            )
            .await;
        assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
        assert_eq!(
            controller.agent_text(),
            "working on: hello over websocket — done."
        );

        let refused = observer
            .request(
                "session/prompt",
                json!({"sessionId": session, "prompt": [{"type": "text", "text": "from the observer"}]}),
            )
            .await;
        assert_eq!(refused["error"]["code"], -32001, "{refused}");
        // The observer saw the controller's turn, prompt included.
        let user: Vec<&Value> = observer
            .seen
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "user_message_chunk")
            .map(|m| &m["params"]["update"]["content"]["text"])
            .collect();
        assert_eq!(user, [&json!("hello over websocket")]);
        assert_eq!(
            observer.agent_text(),
            "working on: hello over websocket — done."
        );
    });
    let log = env.run_ok(&["acp", "log", "w2", "--json"]).stdout;
    assert!(!log.contains("from the observer"), "{log}");
    env.run_ok(&["session", "kill", "w2"]);
    let status = ended(&mut child, "serve-web after its runtime");
    assert!(status.success(), "serve-web ended with {status}");
}

#[test]
fn a_network_address_wants_allow_remote_and_a_token_file() {
    let env = TestEnv::new();
    // Refused before anything starts: no runtime is left running.
    let agent = fake_agent();
    let run = env.run(&[
        "runtime",
        "acp-serve",
        "--id",
        "w3",
        "--listen",
        "0.0.0.0:0",
        "--",
        &agent,
    ]);
    let run = run.fails_with_one_line();
    assert!(run.stderr.contains("--allow-remote"), "{}", run.stderr);
    assert!(run.stderr.contains("--token-file"), "{}", run.stderr);
    assert!(env.record_json("w3").is_none());

    let run = env.run(&["acp", "serve-web", "w3", "--listen", "127.0.0.1:0"]);
    let run = run.fails_with_one_line();
    assert!(run.stderr.contains("w3"), "{}", run.stderr);

    serve(&env, "w3", "normal", &[]);
    for args in [
        &["--listen", "0.0.0.0:0"][..],
        &["--listen", "0.0.0.0:0", "--allow-remote"],
    ] {
        let mut all = vec!["acp", "serve-web", "w3"];
        all.extend_from_slice(args);
        let run = env.run(&all).fails_with_one_line();
        assert!(
            run.stderr.contains("not a loopback address"),
            "{}",
            run.stderr
        );
    }

    let file = env.base().join("web-tokens.json");
    let file_arg = file.display().to_string();
    let remote = [
        "--listen",
        "0.0.0.0:0",
        "--allow-remote",
        "--token-file",
        &file_arg,
    ];
    let (mut child, urls) = serve_web(&env, "w3", &remote);
    assert!(
        urls["listen"].as_str().unwrap().starts_with("0.0.0.0:"),
        "{urls}"
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let port = urls["listen"].as_str().unwrap().rsplit(':').next().unwrap();
    let token = urls["url"]
        .as_str()
        .unwrap()
        .split("token=")
        .nth(1)
        .unwrap();
    assert_eq!(
        get(&format!("127.0.0.1:{port}"), &format!("/?token={token}")).0,
        200
    );
    // The file is kept: a second server reads the same tokens.
    env.signal(child.id(), libc::SIGTERM);
    assert!(ended(&mut child, "serve-web after SIGTERM").success());
    assert!(file.exists());
    let (mut again, same) = serve_web(&env, "w3", &remote);
    assert_eq!(
        same["url"].as_str().unwrap().split("token=").nth(1),
        Some(token)
    );
    env.run_ok(&["session", "kill", "w3"]);
    ended(&mut again, "serve-web after its runtime");
}

/// Where the page test's tools are: playwright-core's node_modules
/// (AGENT_COMMS_WEB_TEST_MODULES, else the cache .ci/run installs into)
/// and Chromium (CHROMIUM, else Debian's).
fn page_test_tools() -> (PathBuf, PathBuf) {
    let modules = std::env::var_os("AGENT_COMMS_WEB_TEST_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").expect("HOME");
            Path::new(&home).join(".cache/agent-comms/web-test/node_modules")
        });
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/usr/bin/chromium".into());
    assert!(
        modules.join("playwright-core").is_dir(),
        "playwright-core is not in {} (npm install --prefix {} playwright-core, as .ci/run does)",
        modules.display(),
        modules.parent().unwrap().display()
    );
    assert!(
        chromium.exists(),
        "{} is missing (apt-get install chromium, as .ci/run does)",
        chromium.display()
    );
    (modules, chromium)
}

#[test]
#[ignore = "needs Chromium and playwright-core (npm); .ci/run installs both and runs this with --include-ignored"]
fn the_page_in_chromium_shows_the_session_prompts_and_answers_a_permission() {
    let (modules, chromium) = page_test_tools();
    let env = TestEnv::new();
    let policy = env.base().join("policy.toml");
    std::fs::write(&policy, ASK_EDITS).unwrap();
    let policy = policy.display().to_string();
    let started = serve(
        &env,
        "w4",
        "permission",
        &["--policy", &policy, "--listen", "127.0.0.1:0"],
    );
    // A turn before any page is open: nobody to ask, so the policy's
    // fallback answers its permission.
    let earlier = "an earlier prompt, delivered by the runtime";
    env.run_ok(&["runtime", "deliver", "--id", "w4", earlier]);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web/page.cjs");
    let mut node = env.command_of("node", &[script.to_str().unwrap()]);
    node.env("NODE_PATH", &modules)
        .env("CHROMIUM", &chromium)
        .env("WEB_URL", started["web"]["url"].as_str().unwrap())
        .env(
            "WEB_READ_ONLY_URL",
            started["web"]["read_only_url"].as_str().unwrap(),
        )
        .env("EARLIER_PROMPT", earlier);
    if let Some(shot) = std::env::var_os("AGENT_COMMS_WEB_SCREENSHOT") {
        node.env("SCREENSHOT", shot);
    }
    let run = run_within(node, "tests/web/page.cjs", Duration::from_secs(120));
    assert!(run.success(), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains(" passed, 0 failed"), "{}", run.stdout);
    // The browser's answer is the one the agent got.
    let log = env.run_ok(&["acp", "log", "w4"]).stdout;
    assert!(log.contains("permission: allow"), "{log}");
}

/// Issue 32, finding 4: half-open HTTP requests without a token held the
/// web server's descriptors for as long as they liked, and pages had no
/// bound. Now it holds 64 connections, each gets 10 s for its headers, and
/// 16 pages attach at most.
#[test]
fn the_web_server_bounds_what_anyone_who_reaches_it_can_hold() {
    let env = TestEnv::new();
    let started = serve(&env, "w1", "normal", &["--listen", "127.0.0.1:0"]);
    let web = &started["web"];
    let listen = web["listen"].as_str().unwrap().to_owned();
    let url = web["url"].as_str().unwrap();
    let token = url.split("token=").nth(1).unwrap().to_owned();
    let half_open = || {
        let mut stream = TcpStream::connect(&listen).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        write!(stream, "GET / HTTP/1.1\r\nHost: {listen}\r\n").unwrap();
        stream
    };
    let held: Vec<TcpStream> = (0..64).map(|_| half_open()).collect();
    // One more is closed at once: read gives its end, not a timeout.
    let mut over = half_open();
    let mut rest = Vec::new();
    let at_once = std::time::Instant::now();
    let _ = over.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert!(at_once.elapsed() < Duration::from_secs(5));
    // The held ones are let go once their headers are late.
    let started_at = std::time::Instant::now();
    for mut stream in held {
        let mut rest = Vec::new();
        stream
            .read_to_end(&mut rest)
            .expect("closed, not a timeout");
    }
    assert!(started_at.elapsed() < Duration::from_secs(10) + TIMEOUT);
    assert_eq!(get(&listen, &format!("/?token={token}")).0, 200);

    // Pages: 16 at once, the 17th is told.
    let rt = runtime();
    let own = origin_of(url);
    let pages: Vec<Socket> = (0..16)
        .map(|_| rt.block_on(open(&listen, &token, Some(&own))).unwrap())
        .collect();
    let (status, body) = refused_with(rt.block_on(open(&listen, &token, Some(&own))));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("16 pages are attached"), "{body}");
    drop(pages);
    env.run_ok(&["session", "kill", "w1"]);
}
