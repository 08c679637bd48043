//! Help that teaches: every command of `agent-comms` has a description,
//! every argument a help line, every command that does something an
//! `Examples:` section; and every example runs, pasted into `sh` in a
//! world of its own (AGENT_COMMS_RUNTIME_DIR, AGENT_COMMS_HOME, HOME and
//! the project private to it) where the sessions, runtimes, messages and
//! files it names were set up first, with tests/fakes/bin on PATH so that
//! `claude`, `codex` and `opencode` are the fakes. `k` and `km` are hand
//! parsed (their usage text is the cells contract's): their examples are
//! read from `--help` and run in order, as the script they are.
//!
//! An example that needs what a test cannot make offline is listed in
//! [`SETUP_DEPENDENT`] with the reason; it is still checked to be a
//! command line clap accepts.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::acp::{fake_agent, Served};
use support::cells::{K, KM};
use support::env::TestEnv;
use support::run::{run_bounded, Run};
use support::{wait_until, BIN, TIMEOUT};

/// Examples that need something offline tests cannot make, and why.
const SETUP_DEPENDENT: &[(&str, &str)] = &[
    (
        "--provider claude-code --prompt",
        "runs Claude Code's ACP adapter, which needs the real CLI and an account",
    ),
    (
        "--takeover-pid 4242",
        "takes over a provider process that is running with that pid",
    ),
    (
        "agent-comms runtime bind-conversation bob$",
        "reads the conversation of a provider that is running and on one",
    ),
    ("ssh dev-box", "runs on another machine"),
    (
        "acp attach --socket /srv/acp/coder.sock",
        "another user's shared runtime",
    ),
    (
        "claude --mcp-config",
        "runs the Claude Code CLI itself with the snippet",
    ),
    (
        "postgres://",
        "needs a PostgreSQL database (tests/store_cmd.rs runs these commands against one)",
    ),
];

/// Whether `example` is the one `text` names: containing it, or exactly
/// it when it ends with `$`.
fn names(example: &str, text: &str) -> bool {
    text.strip_suffix('$')
        .map_or_else(|| example.contains(text), |exact| example == exact)
}

/// How an example is run and when it counts as accepted.
enum How {
    /// To completion; accepted with one of these exit codes.
    Exits(&'static [i32]),
    /// In a terminal of its own, ended as a person would.
    Terminal(End),
    /// A server on standard input and output: accepted when it answers
    /// this request line.
    Stdio(&'static str),
    /// Runs until stopped: accepted once it has printed a line.
    Streams,
}

enum End {
    /// Wait for `needle` in the output, then type `keys`; exits 0. (For
    /// `attach`, the session's redraw: the terminal is raw by then.)
    Type(&'static str, &'static [u8]),
    /// Wait until session `name` is listed, then type `keys`; exits 0.
    Listed(&'static str, &'static [u8]),
    /// Wait until runtime `id` is ONLINE, then end its session.
    Online(&'static str),
}

const MCP_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"help-examples","version":"0"}}}"#;
const ACP_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}"#;

/// An example's text, and how the examples that name it run.
type Rule = (&'static str, fn() -> How);

/// How each example runs, by the first rule whose text it contains.
fn how(example: &str) -> How {
    const RULES: &[Rule] = &[
        ("session attach work --detach-key C-]", || {
            How::Terminal(End::Type("ready-5", b"\x1d"))
        }),
        ("session attach work", || {
            How::Terminal(End::Type("ready-5", b"\x1c"))
        }),
        ("session watch work", || {
            How::Terminal(End::Type("ready-5", b"q"))
        }),
        ("session run work", || {
            How::Terminal(End::Listed("work", b"exit\r"))
        }),
        ("session run py", || {
            How::Terminal(End::Listed("py", b"exit()\r"))
        }),
        ("runtime interactive-serve", || {
            How::Terminal(End::Online("bob"))
        }),
        ("acp attach coder", || How::Stdio(ACP_INITIALIZE)),
        ("mcp config", || How::Exits(&[0])),
        ("agent-comms mcp", || How::Stdio(MCP_INITIALIZE)),
        ("alice mcp", || How::Stdio(MCP_INITIALIZE)),
        ("agent-comms top", || {
            How::Terminal(End::Type("sessions and runtimes", b"q"))
        }),
        ("--follow", || How::Streams),
        ("session logs work -f", || How::Streams),
        ("acp serve-web", || How::Streams),
        ("--listen 127.0.0.1:0", || How::Exits(&[0])),
        // No turn runs in the fixture: the documented "nothing to cancel".
        ("runtime cancel", || How::Exits(&[0, 1])),
        // Doctor's findings (2) are its answer, not a failure.
        ("agent-comms doctor", || How::Exits(&[0, 2])),
    ];
    RULES
        .iter()
        .find(|(text, _)| names(example, text))
        .map_or(How::Exits(&[0]), |(_, how)| how())
}

/// agent-comms' command tree as it parses, with its globals propagated.
fn built_command() -> clap::Command {
    let mut cmd = agent_comms::cli::agent_comms::command();
    cmd.build();
    cmd
}

#[test]
fn every_command_and_argument_is_described_with_examples() {
    let cmd = built_command();
    let mut missing = Vec::new();
    walk(&cmd, &mut Vec::new(), &mut |path, c| {
        let name = path.join(" ");
        if c.get_about().is_none() {
            missing.push(format!("`{name}` has no description"));
        }
        for arg in c.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("`{name}`'s {id} has no help"));
            }
        }
        let acts = c.get_subcommands().next().is_none() || c.get_name() == "mcp";
        if acts && !examples_of(c).iter().any(|_| true) {
            missing.push(format!("`{name}` has no Examples"));
        }
    });
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_actor_is_offered_only_where_it_counts_and_accepted_everywhere() {
    let env = TestEnv::new();
    let help = |args: &[&str]| env.run_ok(args).stdout;
    assert!(!help(&["session", "ls", "--help"]).contains("--actor"));
    assert!(!help(&["doctor", "--help"]).contains("--actor"));
    assert!(help(&["send", "--help"]).contains("--actor"));
    assert!(help(&["message", "cancel", "--help"]).contains("--actor"));
    // Hidden is not refused: before the command and after it.
    env.run_ok(&["--actor", "alice", "session", "ls"]);
    env.run_ok(&["session", "ls", "--actor", "alice"]);
    // And the value reaches the command: an actor it checks is checked.
    let run = env
        .run(&["session", "ls", "--actor", "not an id"])
        .fails_with_one_line();
    assert!(run.stderr.contains("invalid agent id"), "{run:#?}");
}

#[test]
fn every_agent_comms_example_runs() {
    let cmd = built_command();
    let mut examples = Vec::new();
    walk(&cmd, &mut Vec::new(), &mut |_, c| {
        examples.extend(examples_of(c))
    });
    assert!(examples.len() > 60, "only {} examples", examples.len());
    let mut failed = Vec::new();
    for example in &examples {
        if let Some((_, why)) = SETUP_DEPENDENT.iter().find(|(t, _)| names(example, t)) {
            eprintln!("setup-dependent, not run ({why}): {example}");
            continue;
        }
        let env = TestEnv::new();
        let line = set_up(&env, example);
        if let Err(e) = run_example(&env, example, &line) {
            failed.push(format!("{example}\n    {e}"));
        }
    }
    assert!(
        failed.is_empty(),
        "examples that failed:\n{}",
        failed.join("\n")
    );
}

#[test]
fn every_k_and_km_example_runs_in_order() {
    let env = TestEnv::new();
    for (program, bin) in [("k", &*K), ("km", &*KM)] {
        let help = run_bounded(env.command_of(bin, &["--help"]), "--help");
        let examples = examples_in(&help.stdout);
        assert!(!examples.is_empty(), "{program} --help has no Examples");
        if program == "k" {
            assert!(examples.first().unwrap().starts_with("k new "));
        } else {
            // k's examples end with `k kill py`; km's need it running.
            shell(&env, "k new py python3").ok();
        }
        for example in examples {
            let run = shell(&env, &example);
            assert!(run.success(), "`{example}` failed: {run:#?}");
        }
    }
}

/// Calls `f` on `cmd` and each command below it, with its path.
fn walk(
    cmd: &clap::Command,
    path: &mut Vec<String>,
    f: &mut impl FnMut(&[String], &clap::Command),
) {
    path.push(cmd.get_name().to_owned());
    f(path, cmd);
    // `help` is clap's own, in every command that has subcommands.
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        walk(sub, path, f);
    }
    path.pop();
}

fn examples_of(cmd: &clap::Command) -> Vec<String> {
    let after = cmd
        .get_after_help()
        .or(cmd.get_after_long_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    examples_in(&after)
}

/// The lines indented under `Examples:`, up to a blank line, without
/// their `# comment`.
fn examples_in(text: &str) -> Vec<String> {
    let Some(at) = text.find("Examples:\n") else {
        return Vec::new();
    };
    text[at + "Examples:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .map(|l| match l.find("   # ").or_else(|| l.find("  # ")) {
            Some(i) => l[..i].trim().to_owned(),
            None => l.trim().to_owned(),
        })
        .collect()
}

/// Makes what `example` names, and returns it as the line to run.
fn set_up(env: &TestEnv, example: &str) -> String {
    let mut line = example.replace("opencode acp", &fake_agent());
    let creates = |what: &str| example.contains(what);
    if example.contains(" work") && !creates("session new work") && !creates("session run work") {
        env.start_bash("work");
    }
    if example.contains(" coder") && !creates("runtime acp-serve coder") {
        Served::start(env, "coder", "normal", &[], &[]);
    }
    // A message sent in an example is delivered by bob online; the ones
    // an example shows, cancels or redelivers wait for bob offline.
    if example.contains("send --to bob") {
        Served::start(env, "bob", "normal", &[], &[]);
    } else if example.contains(" bob") || example.contains("inv_") {
        env.run_ok(&["--actor", "bob", "runtime", "configure", "bob"]);
    }
    // A follower prints the messages there are, then each change.
    if example.contains("list --follow") {
        env.run_ok(&["--actor", "alice", "send", "--to", "bob", "hi"]);
    }
    for placeholder in ["inv_3f2a9c1d0b7e", "inv_91c04e2d5a6f"] {
        if line.contains(placeholder) {
            let sent = env
                .run_ok(&["--actor", "alice", "send", "--to", "bob", "--json", "hi"])
                .json();
            line = line.replace(placeholder, sent["id"].as_str().unwrap());
        }
    }
    if example.contains("my-repl.toml") {
        env.run_ok(&[
            "adapters",
            "new",
            "my-repl",
            "--dir",
            &env.work.display().to_string(),
        ]);
    }
    if example.contains("review.md") {
        std::fs::write(env.work.join("review.md"), "# Review\n\nLooks good.\n").unwrap();
    }
    if example.contains("~/.config") {
        std::fs::create_dir_all(env.user_home().join(".config")).unwrap();
    }
    line
}

fn run_example(env: &TestEnv, example: &str, line: &str) -> Result<(), String> {
    match how(example) {
        How::Exits(codes) => {
            let run = shell(env, line);
            if codes.contains(&run.code()) && !run.stderr.contains("Usage:") {
                Ok(())
            } else {
                Err(format!(
                    "exit {} (accepted: {codes:?}): {run:#?}",
                    run.code()
                ))
            }
        }
        How::Terminal(end) => {
            let script = format!("PATH={}; cd {}; {line}", path_var(), env.work.display());
            let mut term = env.term_with(&["sh", "-c", &script], &[], true);
            match end {
                End::Type(needle, keys) => {
                    if !term.wait_output(needle, TIMEOUT) {
                        term.kill();
                        return Err(format!("never showed {needle:?}: {}", term.output()));
                    }
                    term.write(keys);
                    let status = term.wait_exit();
                    status
                        .success()
                        .then_some(())
                        .ok_or_else(|| format!("ended with {status:?}: {}", term.output()))
                }
                End::Listed(name, keys) => {
                    wait_until(&format!("session {name} listed"), || {
                        env.ls_entry(name).is_some()
                    });
                    term.write(keys);
                    let status = term.wait_exit();
                    status
                        .success()
                        .then_some(())
                        .ok_or_else(|| format!("ended with {status:?}: {}", term.output()))
                }
                End::Online(id) => {
                    wait_until(&format!("runtime {id} online"), || {
                        let run = env.run(&["runtime", "show", id, "--json"]);
                        run.success() && run.json()["status"] == "ONLINE"
                    });
                    env.run_ok(&["session", "kill", id]);
                    term.wait_exit();
                    Ok(())
                }
            }
        }
        How::Stdio(request) => {
            let mut child = spawn(env, line, Stdio::piped());
            let mut stdin = child.stdin.take().unwrap();
            let written = writeln!(stdin, "{request}");
            let answered = written
                .ok()
                .and_then(|()| first_line(&mut child))
                .filter(|l| l.contains("\"result\""));
            stop(&mut child);
            answered
                .map(|_| ())
                .ok_or_else(|| "no answer to initialize".to_owned())
        }
        How::Streams => {
            let mut child = spawn(env, line, Stdio::null());
            let printed = first_line(&mut child);
            stop(&mut child);
            printed
                .map(|_| ())
                .ok_or_else(|| "printed nothing".to_owned())
        }
    }
}

/// PATH for the examples: the binaries under test, then the fakes.
fn path_var() -> String {
    let bins = Path::new(BIN).parent().unwrap().display().to_string();
    let fakes = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/bin");
    format!(
        "{bins}:{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `sh -c LINE` in the example's world: its directory, its variables,
/// [`path_var`].
fn shell_command(env: &TestEnv, line: &str) -> Command {
    let mut cmd = env.command_of("sh", &["-c", line]);
    cmd.env("PATH", path_var()).current_dir(&env.work);
    cmd
}

fn shell(env: &TestEnv, line: &str) -> Run {
    run_bounded(shell_command(env, line), line)
}

fn spawn(env: &TestEnv, line: &str, stdin: Stdio) -> std::process::Child {
    shell_command(env, &format!("exec {line}"))
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sh")
}

/// The first line `child` prints, within [`TIMEOUT`].
fn first_line(child: &mut std::process::Child) -> Option<String> {
    let stdout = child.stdout.take()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let deadline = Instant::now() + TIMEOUT;
    rx.recv_timeout(deadline - Instant::now())
        .ok()
        .filter(|l| !l.is_empty())
}

/// Ends `child` by its pid (SIGTERM, then SIGKILL) and reaps it.
fn stop(child: &mut std::process::Child) {
    support::procs::terminate(child.id(), Duration::from_secs(5));
    let _ = child.wait();
}
