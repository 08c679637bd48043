//! `agent-comms mcp` driven by an MCP client none of our code wrote: the
//! official Python SDK (`mcp` from PyPI, the version
//! `scripts/install-mcp-sdk` pins), through `tests/mcp/driver.py`. The
//! driver starts the server as an agent's MCP configuration would and
//! makes each call the test asks for, concurrently, reporting results,
//! progress notifications and protocol errors as the SDK saw them.
//!
//! They need the SDK, so they are ignored unless asked for; `.ci/run`
//! installs it and runs them:
//!
//! ```sh
//! AGENT_COMMS_MCP_PYTHON="$(scripts/install-mcp-sdk)" \
//!     cargo test --test mcp -- --include-ignored
//! ```

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};

use serde_json::{json, Value};
use support::acp::Served;
use support::env::TestEnv;
use support::{wait_until, BIN, TIMEOUT};

/// The Python that has the SDK installed.
fn python() -> PathBuf {
    let python = std::env::var_os("AGENT_COMMS_MCP_PYTHON").expect(
        "AGENT_COMMS_MCP_PYTHON names the Python with the MCP SDK (scripts/install-mcp-sdk)",
    );
    PathBuf::from(python)
}

/// The driver, and through it the server.
struct Mcp {
    child: Child,
    /// Taken (closed) when the test ends: that ends the driver.
    stdin: Option<ChildStdin>,
    answers: Receiver<Value>,
    /// Answers read while waiting for another one.
    early: Vec<Value>,
    next_id: u64,
}

impl Mcp {
    fn start(env: &TestEnv, server_args: &[&str], vars: &[(&str, &str)]) -> Self {
        let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/driver.py");
        let mut command: Command = env.command_of(python(), &[driver, BIN]);
        command.args(server_args);
        for (k, v) in vars {
            command.env(k, v);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the driver starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("the driver printed no JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let mut mcp = Self {
            child,
            stdin,
            answers,
            early: Vec::new(),
            next_id: 1,
        };
        let init = mcp.answer(0);
        assert_eq!(
            init["initialized"]["serverInfo"]["name"], "agent-comms",
            "{init}"
        );
        mcp
    }

    fn send(&mut self, mut command: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        command["id"] = id.into();
        let stdin = self.stdin.as_mut().expect("the driver's input is open");
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        id
    }

    fn answer(&mut self, id: u64) -> Value {
        if let Some(at) = self.early.iter().position(|a| a["id"] == id) {
            return self.early.remove(at);
        }
        loop {
            let answer = self
                .answers
                .recv_timeout(TIMEOUT * 2)
                .unwrap_or_else(|_| panic!("no answer to command {id}"));
            if answer["id"] == id {
                return answer;
            }
            self.early.push(answer);
        }
    }

    /// Starts a call; its answer comes with [`Self::answer`].
    fn start_call(&mut self, tool: &str, args: Value) -> u64 {
        self.send(json!({"call": tool, "args": args}))
    }

    /// A call and its whole answer (result, progress, protocol error).
    fn call_answer(&mut self, tool: &str, args: Value) -> Value {
        let id = self.start_call(tool, args);
        self.answer(id)
    }

    /// A call that must succeed; its structured result.
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let answer = self.call_answer(tool, args);
        let result = &answer["result"];
        assert_eq!(result["isError"], false, "{tool}: {answer}");
        result["structuredContent"].clone()
    }

    /// A call that must be a tool error; its one line of text.
    fn error(&mut self, tool: &str, args: Value) -> String {
        let answer = self.call_answer(tool, args);
        assert_eq!(answer["result"]["isError"], true, "{tool}: {answer}");
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(!text.contains('\n'), "one line: {text:?}");
        text
    }

    /// Waits for a `resources/updated` notification of `uri`.
    fn updated(&mut self, uri: &str) {
        if let Some(at) = self.early.iter().position(|a| a["updated"] == uri) {
            self.early.remove(at);
            return;
        }
        loop {
            let next = self
                .answers
                .recv_timeout(TIMEOUT * 2)
                .unwrap_or_else(|_| panic!("no resources/updated of {uri}"));
            if next["updated"] == uri {
                return;
            }
            self.early.push(next);
        }
    }

    /// The notifications of `uri` received so far, taken.
    fn updates_so_far(&mut self, uri: &str) -> usize {
        while let Ok(next) = self.answers.try_recv() {
            self.early.push(next);
        }
        let before = self.early.len();
        self.early.retain(|a| a["updated"] != uri);
        before - self.early.len()
    }

    fn tools(&mut self) -> Vec<Value> {
        let id = self.send(json!({"list": true}));
        self.answer(id)["tools"].as_array().unwrap().clone()
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        // Closing its input ends the driver, and the server with it.
        drop(self.stdin.take());
        let (tx, rx) = channel();
        let pid = self.child.id();
        std::thread::spawn(move || {
            if rx.recv_timeout(TIMEOUT).is_err() {
                // SAFETY: the driver is our child; its pid is not reused
                // before we wait for it.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        });
        let _ = self.child.wait();
        let _ = tx.send(());
    }
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
}

fn text_of(answer: &Value) -> &str {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn every_tool_has_schemas_and_all_four_annotations() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    let tools = mcp.tools();
    for expected in [
        "cell_new",
        "cell_run",
        "cell_fire",
        "cell_poll",
        "cell_wait",
        "cell_interrupt",
        "cell_kill",
        "cell_list",
        "cell_history",
        "session_list",
        "session_snapshot",
        "session_output_since",
        "session_wait_for",
        "session_send",
        "message_send",
        "message_inbox",
        "message_show",
        "message_wait",
        "runtime_list",
        "acp_prompt",
        "acp_log",
    ] {
        assert!(
            names(&tools).contains(&expected),
            "{expected} missing: {:?}",
            names(&tools)
        );
    }
    for tool in &tools {
        let name = &tool["name"];
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        assert!(
            tool["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{name}"
        );
        let hints = &tool["annotations"];
        for hint in [
            "readOnlyHint",
            "destructiveHint",
            "idempotentHint",
            "openWorldHint",
        ] {
            assert!(hints[hint].is_boolean(), "{name}: {hint} not set: {hints}");
        }
    }
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn readonly_lists_only_tools_that_change_nothing() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp", "--tools", "readonly"], &[]);
    let tools = mcp.tools();
    assert!(!tools.is_empty());
    for tool in &tools {
        assert_eq!(
            tool["annotations"]["readOnlyHint"], true,
            "{}",
            tool["name"]
        );
    }
    let listed = names(&tools);
    for hidden in [
        "cell_new",
        "cell_run",
        "cell_kill",
        "session_send",
        "message_send",
        "acp_prompt",
    ] {
        assert!(!listed.contains(&hidden), "{hidden} listed in readonly");
    }
    assert!(listed.contains(&"cell_wait") && listed.contains(&"session_snapshot"));
    // Not listed is not callable either.
    let refused = mcp.call_answer("cell_new", json!({"session": "x"}));
    assert!(refused["protocol_error"].is_string(), "{refused}");
    assert_eq!(env.ls_json(), Vec::<Value>::new(), "nothing was started");
}

/// Issue 32, finding 7: a read-only server's `cell_wait` took another
/// server's cell result away (the owner's own `cell_wait` then said
/// "unknown cell"). Reading changes nothing now.
#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn a_readonly_servers_wait_leaves_the_cell_result_to_its_owner() {
    let env = TestEnv::new();
    let mut owner = Mcp::start(&env, &["mcp"], &[]);
    owner.call(
        "cell_new",
        json!({"session": "sh", "command": "bash --norc --noprofile"}),
    );
    let fired = owner.call("cell_fire", json!({"session": "sh", "code": "echo mine"}));
    let id = fired["cell_id"].clone();
    let mut observer = Mcp::start(&env, &["mcp", "--tools", "readonly"], &[]);
    for _ in 0..2 {
        let seen = observer.call(
            "cell_wait",
            json!({"session": "sh", "cell_id": id, "timeout": 30}),
        );
        assert_eq!(seen["status"], "done", "{seen}");
    }
    let seen = observer.call("cell_poll", json!({"session": "sh", "cell_id": id}));
    assert_eq!(seen["status"], "done", "{seen}");
    let mine = owner.call(
        "cell_wait",
        json!({"session": "sh", "cell_id": id, "timeout": 30}),
    );
    assert_eq!(
        (&mine["status"], &mine["output"]),
        (&json!("done"), &json!("mine")),
        "{mine}"
    );
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn a_python_repl_keeps_its_variables_and_reports_progress() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    let new = mcp.call("cell_new", json!({"session": "py", "command": "python3"}));
    assert_eq!(new["started"], true);
    let again = mcp.call("cell_new", json!({"session": "py", "command": "python3"}));
    assert_eq!(again["started"], false, "{again}");
    let first = mcp.call("cell_run", json!({"session": "py", "code": "x = 41"}));
    assert_eq!(first["status"], "done", "{first}");
    let code = "import time\nfor i in range(3):\n    print('step', i, flush=True); time.sleep(0.3)\nprint(x + 1)";
    let answer = mcp.call_answer("cell_run", json!({"session": "py", "code": code}));
    let result = &answer["result"]["structuredContent"];
    assert_eq!(result["status"], "done", "{answer}");
    assert_eq!(result["output"], "step 0\nstep 1\nstep 2\n42");
    assert_eq!(result["exit_code"], 0);
    assert_eq!(text_of(&answer), "step 0\nstep 1\nstep 2\n42");
    // The output came as progress too, line by line, while the cell ran.
    let progress: Vec<&str> = answer["progress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for line in ["step 0", "step 1", "step 2", "42"] {
        assert!(
            progress.contains(&line),
            "{line} not in progress {progress:?}"
        );
    }
    // A failing cell is a result, not a tool error: the model reads it.
    let failed = mcp.call("cell_run", json!({"session": "py", "code": "1/0"}));
    assert!(
        failed["output"]
            .as_str()
            .unwrap()
            .contains("ZeroDivisionError"),
        "{failed}"
    );
    assert_eq!(failed["exit_code"], 1);
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn cell_wait_returns_when_a_fired_cell_ends() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    mcp.call(
        "cell_new",
        json!({"session": "sh", "command": "bash --norc --noprofile"}),
    );
    let fired = mcp.call(
        "cell_fire",
        json!({"session": "sh", "code": "sleep 2; echo slept"}),
    );
    assert_eq!(fired["status"], "fired", "{fired}");
    let id = fired["cell_id"].clone();
    // The session is named once; the only live cell session is meant after.
    let waited = mcp.call("cell_wait", json!({"cell_id": id, "timeout": 30}));
    assert_eq!(
        waited["status"], "done",
        "returned before the cell ended: {waited}"
    );
    assert_eq!(waited["output"], "slept");
    // A wait that runs out says the cell still runs.
    mcp.call("cell_fire", json!({"code": "sleep 30"}));
    let short = mcp.call("cell_wait", json!({"timeout": 0.5}));
    assert_eq!(short["status"], "running", "{short}");
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn cancelling_a_cell_run_interrupts_the_cell() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    mcp.call(
        "cell_new",
        json!({"session": "sh", "command": "bash --norc --noprofile"}),
    );
    let run = mcp.start_call(
        "cell_run",
        json!({"session": "sh", "code": "sleep 60", "timeout": 120}),
    );
    wait_until("the cell runs", || {
        mcp.call("cell_poll", json!({"session": "sh"}))["status"] == "running"
    });
    let cancel = mcp.send(json!({"cancel": run}));
    mcp.answer(cancel);
    assert_eq!(mcp.answer(run)["cancelled"], true);
    // The run's own answer took the interrupted result with it: what is
    // left to see is that nothing runs any more, long before `sleep 60`
    // could have ended, and that the REPL is free for the next cell.
    wait_until("the cell is interrupted", || {
        mcp.call("cell_list", json!({}))["sessions"][0]["state"] != "running"
    });
    let next = mcp.call("cell_run", json!({"session": "sh", "code": "echo free"}));
    assert_eq!(next["output"], "free");
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn message_wait_returns_when_another_agents_message_lands() {
    let env = TestEnv::new();
    // alice needs a runtime for anyone to message her; bob sends.
    env.run_ok(&["--actor", "alice", "runtime", "configure", "--id", "alice"]);
    let mut mcp = Mcp::start(&env, &["--actor", "alice", "mcp"], &[]);
    assert_eq!(mcp.call("message_inbox", json!({}))["messages"], json!([]));
    let waiting = mcp.start_call("message_wait", json!({"timeout": 60}));
    let sent = env.run_ok(&[
        "--actor",
        "bob",
        "send",
        "--to",
        "alice",
        "--json",
        "the build is green",
    ]);
    let id = sent.json()["id"].clone();
    let answer = mcp.answer(waiting);
    let message = &answer["result"]["structuredContent"]["message"];
    assert_eq!(message["id"], id, "{answer}");
    assert_eq!(message["from"], "bob");
    assert_eq!(message["body"], "the build is green");
    let inbox = mcp.call("message_inbox", json!({}));
    assert_eq!(inbox["messages"][0]["id"], id);
    assert_eq!(inbox["unread"], 1, "not yet announced in a prompt: {inbox}");
    let shown = mcp.call("message_show", json!({"id": id}));
    assert_eq!(shown["body"], "the build is green");
    // And back: alice's message reaches bob's store row as sent by alice.
    env.run_ok(&["--actor", "bob", "runtime", "configure", "--id", "bob"]);
    let reply = mcp.call("message_send", json!({"to": "bob", "text": "thanks"}));
    let row = env
        .run_ok(&["message", "show", reply["id"].as_str().unwrap(), "--json"])
        .json();
    assert_eq!(row["from"], "alice");
    assert_eq!(row["body"], "thanks");
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn a_session_is_read_only_for_what_is_new_and_waited_on_without_polling() {
    let env = TestEnv::new();
    env.start_bash("b");
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    env.send_line("b", "echo first-$((20+1))");
    env.wait_screen("b", "first-21");
    let first = mcp.call("session_output_since", json!({"session": "b"}));
    assert!(
        first["text"].as_str().unwrap().contains("first-21"),
        "{first}"
    );
    env.send_line("b", "echo second-$((20+2))");
    env.wait_screen("b", "second-22");
    let next = mcp.call(
        "session_output_since",
        json!({"session": "b", "cursor": first["cursor"]}),
    );
    let text = next["text"].as_str().unwrap();
    assert!(
        text.contains("second-22") && !text.contains("first-21"),
        "{next}"
    );
    // A wait for text that is not there yet returns once it shows.
    let waiting = mcp.start_call(
        "session_wait_for",
        json!({"session": "b", "regex": "third-[0-9]+", "timeout": 30}),
    );
    mcp.call(
        "session_send",
        json!({"session": "b", "text": "echo third-$((20+3))", "keys": ["Enter"]}),
    );
    let seen = mcp.answer(waiting);
    assert_eq!(seen["result"]["structuredContent"]["found"], true, "{seen}");
    assert!(seen["result"]["structuredContent"]["line"]
        .as_str()
        .unwrap()
        .contains("third-23"));
    let screen = mcp.call("session_snapshot", json!({"session": "b", "rows": 3}));
    assert_eq!(screen["lines"].as_array().unwrap().len(), 3, "{screen}");
    let listed = mcp.call("session_list", json!({}));
    assert_eq!(listed["sessions"][0]["session"], "b");
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn mistakes_are_tool_errors_that_say_what_to_call_and_the_server_keeps_serving() {
    let env = TestEnv::new();
    let mut mcp = Mcp::start(&env, &["mcp"], &[]);
    assert_eq!(
        mcp.error("cell_run", json!({"session": "nope", "code": "1"})),
        "no session 'nope'; cell_new creates one"
    );
    assert!(mcp
        .error("cell_run", json!({"code": "1"}))
        .contains("cell_new starts one"));
    assert!(mcp
        .error("session_snapshot", json!({"session": "../x"}))
        .contains("not a session name"));
    assert!(mcp
        .error("session_wait_for", json!({"session": "b", "regex": "("}))
        .contains("regex"));
    assert!(mcp
        .error(
            "cell_new",
            json!({"session": "r", "command": "no-such-repl-here"})
        )
        .contains("command not found"));
    assert!(mcp.error("message_inbox", json!({})).contains("--actor"));
    assert!(mcp
        .error("cell_wait", json!({"timeout": -1}))
        .contains("timeout"));
    // Arguments the schema refuses are refused with the field named.
    let wrong_type = mcp.call_answer("cell_run", json!({"session": "s", "code": 5}));
    let refusal = wrong_type["protocol_error"]
        .as_str()
        .unwrap_or_else(|| text_of(&wrong_type));
    assert!(
        refusal.contains("code") || refusal.contains("string"),
        "{wrong_type}"
    );
    let unknown = mcp.call_answer("cell_poll", json!({"sesion": "s"}));
    let refusal = unknown["protocol_error"]
        .as_str()
        .unwrap_or_else(|| text_of(&unknown));
    assert!(refusal.contains("sesion"), "{unknown}");
    // Still serving.
    assert_eq!(mcp.call("session_list", json!({}))["sessions"], json!([]));
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn the_server_never_kills_its_own_session_nor_others_in_the_default_set() {
    let env = TestEnv::new();
    env.start_bash("outside");
    let mut mine = Mcp::start(&env, &["mcp"], &[]);
    mine.call(
        "cell_new",
        json!({"session": "mine", "command": "bash --norc --noprofile"}),
    );
    let refused = mine.error("cell_kill", json!({"session": "outside"}));
    assert!(
        refused.contains("was not started by this server"),
        "{refused}"
    );
    assert!(env.record("outside").is_some(), "outside still runs");
    assert_eq!(
        mine.call("cell_kill", json!({"session": "mine"}))["done"],
        "killed"
    );
    wait_until("mine ends", || env.record("mine").is_none());
    // A server running inside `outside`, with every tool: not its own.
    let mut inside = Mcp::start(
        &env,
        &["mcp", "--tools", "all"],
        &[("AGENT_COMMS_SESSION", "outside")],
    );
    let own = inside.error("cell_kill", json!({"session": "outside"}));
    assert!(own.contains("the one this server runs in"), "{own}");
    let typed = inside.error("session_send", json!({"session": "outside", "text": "x"}));
    assert!(typed.contains("the one this server runs in"), "{typed}");
    assert!(env.record("outside").is_some());
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn subscribers_are_told_when_a_message_arrives_or_a_cell_ends() {
    let env = TestEnv::new();
    env.run_ok(&["--actor", "alice", "runtime", "configure", "--id", "alice"]);
    let mut mcp = Mcp::start(&env, &["--actor", "alice", "mcp"], &[]);
    mcp.call(
        "cell_new",
        json!({"session": "sh", "command": "bash --norc --noprofile"}),
    );
    let id = mcp.send(json!({"resources": true}));
    let listed = mcp.answer(id);
    let uris: Vec<&str> = listed["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        uris,
        ["agent-comms://inbox", "agent-comms://cells/sh"],
        "{listed}"
    );
    for uri in ["agent-comms://inbox", "agent-comms://cells/sh"] {
        let id = mcp.send(json!({"subscribe": uri}));
        assert_eq!(mcp.answer(id)["ok"], true);
    }
    // A message to alice: the inbox changed.
    env.run_ok(&["--actor", "bob", "send", "--to", "alice", "ping"]);
    mcp.updated("agent-comms://inbox");
    let id = mcp.send(json!({"read": "agent-comms://inbox"}));
    let read = mcp.answer(id);
    let inbox: Value = serde_json::from_str(read["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(inbox["messages"][0]["body"], "ping", "{read}");
    // A fired cell: told when it ends, not when it starts.
    mcp.call(
        "cell_fire",
        json!({"session": "sh", "code": "sleep 1; echo done"}),
    );
    assert_eq!(mcp.updates_so_far("agent-comms://cells/sh"), 0);
    mcp.updated("agent-comms://cells/sh");
    let result = mcp.call("cell_poll", json!({"session": "sh"}));
    assert_eq!(
        result["status"], "done",
        "told before the cell ended: {result}"
    );
    assert_eq!(result["output"], "done");
}

#[test]
#[ignore = "needs the MCP Python SDK: AGENT_COMMS_MCP_PYTHON (scripts/install-mcp-sdk)"]
fn an_acp_runtime_is_prompted_and_its_transcript_read() {
    let env = TestEnv::new();
    let served = Served::start(&env, "carol", "normal", &[], &[]);
    let mut mcp = Mcp::start(&env, &["--actor", "alice", "mcp"], &[]);
    let turn = mcp.call(
        "acp_prompt",
        json!({"runtime": "carol", "text": "summarize the diff"}),
    );
    assert_eq!(turn["stop_reason"], "end_turn", "{turn}");
    let transcript = turn["transcript"].as_str().unwrap();
    assert!(
        transcript.contains("working on: summarize the diff"),
        "{transcript}"
    );
    assert_eq!(served.prompted(), ["summarize the diff"]);
    // The whole log, then only what came after it.
    let log = mcp.call("acp_log", json!({"runtime": "carol"}));
    assert!(log["transcript"]
        .as_str()
        .unwrap()
        .contains("summarize the diff"));
    let next = log["next"].clone();
    let later = mcp.call("acp_log", json!({"runtime": "carol", "after": next}));
    assert_eq!(later["transcript"], "", "{later}");
    // Its own runtime is refused: the prompt would wait for its own turn.
    let mut own = Mcp::start(&env, &["--actor", "carol", "mcp"], &[]);
    let refused = own.error("acp_prompt", json!({"runtime": "carol", "text": "hi"}));
    assert!(refused.contains("your own"), "{refused}");
    assert!(mcp
        .error("acp_log", json!({"runtime": "nobody"}))
        .contains("runtime_list"));
}
