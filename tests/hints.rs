//! Every printed hint runs: for each repair, "run:" or "with:" hint the
//! commands print, a row of [`HINTS`] produces the situation in a world of
//! its own, reads the hint from what was printed, and runs it as a user
//! would paste it; it must be accepted (exit 0, or the code its command
//! documents for what it found). A new hint is one more row.
//!
//! Placeholders a hint leaves to the user are filled in as the user would:
//! `<provider command>` with a fake provider, `<ACP command>` with the fake
//! ACP agent, `ID`/`AGENT` with the agent of the row, `FILE` with a file.
//!
//! Hints not here, and why: the damaged-store hint (`store check`) needs a
//! SQLite file damaged in its pages; the delivery hints that follow a
//! screen the adapter cannot read (`session snapshot`, `adapters check`)
//! and a text left in an input line (`session attach`) need a provider in
//! that state, and are run by tests/interactive.rs's scenarios; `message
//! redeliver` after a given-up delivery needs a delivery that failed.

mod support;

use std::process::Command;

use support::acp::{fake_agent, Served};
use support::cells::K;
use support::env::TestEnv;
use support::fakes::fake;
use support::run::{run_bounded, Run};
use support::{wait_until, BIN};

/// One hint: how to make a command print it, where it starts, and what
/// running it may exit with.
struct Hint {
    name: &'static str,
    /// Makes the situation and returns everything printed (stdout, stderr).
    produce: fn(&TestEnv) -> String,
    /// The text just before the hint.
    after: &'static str,
    /// Exit codes that mean "accepted" for this hint's command.
    codes: &'static [i32],
}

const HINTS: &[Hint] = &[
    Hint {
        name: "a session name in use",
        produce: |env| {
            env.start_bash("work");
            printed(&env.run(&["session", "new", "work", "--", "bash"]))
        },
        after: "end it with: ",
        codes: &[0],
    },
    Hint {
        name: "no such session",
        produce: |env| printed(&env.run(&["session", "snapshot", "nope"])),
        after: "see running ones with: ",
        codes: &[0],
    },
    Hint {
        name: "no such adapter",
        produce: |env| {
            printed(&env.run(&["session", "new", "w", "--provider", "nope", "--", "bash"]))
        },
        after: "see them with: ",
        codes: &[0],
    },
    Hint {
        name: "no such runtime",
        produce: |env| printed(&env.run(&["runtime", "show", "nope"])),
        after: "see them with: ",
        codes: &[0],
    },
    Hint {
        name: "no such message",
        produce: |env| printed(&env.run(&["message", "show", "inv_000000000000"])),
        after: "see them with: ",
        codes: &[0],
    },
    Hint {
        name: "no runtimes at all",
        produce: |env| printed(&env.run(&["runtime", "list"])),
        after: "start one with: ",
        codes: &[0],
    },
    Hint {
        name: "a message to an agent without a runtime",
        produce: |env| printed(&env.run(&["--actor", "alice", "send", "--to", "bob", "hi"])),
        after: "start one with: ",
        codes: &[0],
    },
    Hint {
        name: "runtime deliver to an offline runtime",
        produce: |env| {
            configure_bob(env);
            printed(&env.run(&["runtime", "deliver", "bob", "hi"]))
        },
        after: "start it with: ",
        codes: &[0],
    },
    Hint {
        name: "send --wait with no runtime online: how to start one",
        produce: send_wait_offline,
        after: "start one with: ",
        codes: &[0],
    },
    Hint {
        name: "send --wait with no runtime online: follow the message",
        produce: send_wait_offline,
        after: "follow it with: ",
        codes: &[0],
    },
    Hint {
        name: "send --wait with no runtime online: take it back",
        produce: send_wait_offline,
        after: "take it back: ",
        codes: &[0],
    },
    Hint {
        name: "a text of two lines delivered",
        produce: |env| {
            configure_bob(env);
            env.start_bash("work");
            printed(&env.run(&["session", "deliver", "work", "one\ntwo"]))
        },
        after: "is typed: ",
        codes: &[0],
    },
    Hint {
        name: "an ACP runtime's log before it ever ran",
        produce: |env| printed(&env.run(&["acp", "log", "bob"])),
        after: "start it with: ",
        codes: &[0],
    },
    Hint {
        name: "cancel on an ACP runtime that is not running",
        produce: |env| printed(&env.run(&["runtime", "cancel", "bob"])),
        after: "start it with: ",
        codes: &[0],
    },
    Hint {
        name: "an ACP runtime served twice",
        produce: |env| {
            serve_acp(env, "bob", &[]);
            printed(&env.run(&[
                "--actor",
                "bob",
                "runtime",
                "acp-serve",
                "bob",
                "--",
                &fake_agent(),
            ]))
        },
        after: "end it with: ",
        codes: &[0],
    },
    Hint {
        name: "a snapshot of an ACP runtime",
        produce: |env| {
            serve_acp(env, "bob", &[]);
            printed(&env.run(&["session", "snapshot", "bob"]))
        },
        after: "see what it does with: ",
        codes: &[0],
    },
    Hint {
        name: "rm of an online runtime",
        produce: |env| {
            serve_acp(env, "bob", &[]);
            printed(&env.run(&["runtime", "rm", "bob"]))
        },
        after: "stop it first with: ",
        codes: &[0],
    },
    Hint {
        name: "doctor: RUNTIME_MISMATCH",
        produce: |env| {
            env.run_ok(&[
                "--actor",
                "bob",
                "runtime",
                "configure",
                "bob",
                "--kind",
                "ACP",
            ]);
            printed(&env.run(&["doctor"]))
        },
        after: "repair: ",
        codes: &[0],
    },
    Hint {
        name: "doctor: AMBIGUOUS_RUNTIMES",
        produce: |env| {
            serve_acp(env, "A", &["--actor", "bob"]);
            serve_acp(env, "B", &["--actor", "bob"]);
            printed(&env.run(&["doctor"]))
        },
        after: "repair: ",
        codes: &[0],
    },
    Hint {
        name: "doctor: ENDPOINT_NOT_DIALABLE, serve it again",
        produce: dead_acp_runtime,
        after: "serve it again: ",
        codes: &[0],
    },
    Hint {
        name: "doctor: ENDPOINT_NOT_DIALABLE, forget the record",
        produce: dead_acp_runtime,
        after: "forget the record: ",
        codes: &[0],
    },
    Hint {
        name: "doctor: INVALID_PROFILE",
        produce: |env| {
            broken_profile(env);
            printed(&env.run(&["doctor"]))
        },
        after: "then run: ",
        // `adapters check` of a profile still broken: 1, "invalid".
        codes: &[0, 1],
    },
    Hint {
        name: "adapters list: a profile that did not load",
        produce: |env| {
            broken_profile(env);
            printed(&env.run(&["adapters", "list"]))
        },
        after: "fix it and run: ",
        codes: &[0, 1],
    },
    Hint {
        name: "adapters new: check what was written",
        produce: |env| {
            let dir = env.work.display().to_string();
            printed(&env.run(&["adapters", "new", "mine", "--dir", &dir]))
        },
        after: "then run: ",
        codes: &[0],
    },
    Hint {
        name: "a store file open to others",
        produce: |env| {
            configure_bob(env);
            let db = env.project.join(".agent-comms/state.db");
            chmod(&db, 0o644);
            printed(&env.run(&["runtime", "list"]))
        },
        after: "run: ",
        codes: &[0],
    },
    Hint {
        name: "k: a session that does not exist",
        produce: |env| {
            let run = run_bounded(
                env.command_of(K.as_str(), &["status", "nope"]),
                "k status nope",
            );
            printed(&run)
        },
        after: "use ",
        codes: &[0],
    },
];

#[test]
fn every_printed_hint_runs() {
    for hint in HINTS {
        let env = TestEnv::new();
        let said = (hint.produce)(&env);
        let line = extract(&said, hint.after).unwrap_or_else(|| {
            panic!("[{}] no hint after {:?} in:\n{said}", hint.name, hint.after)
        });
        let argv = words(&env, &line);
        let run = run_hint(&env, &argv);
        assert!(
            hint.codes.contains(&run.code()),
            "[{}] the hint `{line}` was not accepted (exit {}, accepted: {:?}): {run:#?}",
            hint.name,
            run.code(),
            hint.codes
        );
        // A usage error is never "accepted", whatever its code.
        assert!(
            !run.stderr.contains("Usage:"),
            "[{}] the hint `{line}` is not a valid command line: {run:#?}",
            hint.name
        );
    }
}

/// The hint after `after`: up to the end of its clause (`;`, `)`, a
/// backquote or the line's end).
fn extract(said: &str, after: &str) -> Option<String> {
    let start = said.find(after)? + after.len();
    let rest = &said[start..];
    let end = rest.find([';', ')', '`', '\n']).unwrap_or(rest.len());
    Some(rest[..end].trim().to_owned())
}

/// The hint's words with its placeholders filled in; `agent-comms` is the
/// binary under test.
fn words(env: &TestEnv, line: &str) -> Vec<String> {
    let file = env.work.join("message.txt");
    std::fs::write(&file, "a message\nof two lines\n").unwrap();
    let line = line
        .replace("<provider command>", &fake("claude"))
        .replace("<ACP command>", &fake_agent())
        .replace("FILE", &file.display().to_string());
    line.split_whitespace()
        .map(|w| match w {
            "agent-comms" => BIN.to_owned(),
            "k" => K.to_owned(),
            "ID" | "AGENT" => "bob".to_owned(),
            w => w.trim_matches('\'').to_owned(),
        })
        .collect()
}

/// Runs a hint. A serve in a terminal is accepted once its runtime is
/// ONLINE (then its session is ended); a detached one is ended after.
fn run_hint(env: &TestEnv, argv: &[String]) -> Run {
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    if argv.contains(&"interactive-serve") {
        let id = subject_after(&argv, "interactive-serve");
        let mut term = env.term_with(&argv, &[], true);
        wait_until(&format!("runtime {id} online"), || {
            let run = env.run(&["runtime", "show", &id, "--json"]);
            run.success() && run.json()["status"] == "ONLINE"
        });
        let killed = env.run(&["session", "kill", &id]);
        term.wait_exit();
        return killed;
    }
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    // The hints that send do it as an agent, as scripts and agents do.
    cmd.env("AGENT_COMMS_ACTOR", "alice").current_dir(&env.work);
    let run = run_bounded(cmd, &argv.join(" "));
    if argv.contains(&"acp-serve") && run.success() {
        let id = subject_after(&argv, "acp-serve");
        env.run_ok(&["session", "kill", &id]);
    }
    run
}

/// The runtime a serve names: the first word after `verb` that is not an
/// option (or the value of `--id`).
fn subject_after(argv: &[&str], verb: &str) -> String {
    let at = argv.iter().position(|a| *a == verb).unwrap();
    let rest = &argv[at + 1..];
    match rest.iter().position(|a| *a == "--id") {
        Some(i) => rest[i + 1].to_owned(),
        None => rest
            .iter()
            .find(|a| !a.starts_with('-'))
            .unwrap()
            .to_string(),
    }
}

fn printed(run: &Run) -> String {
    format!("{}{}", run.stdout, run.stderr)
}

fn configure_bob(env: &TestEnv) {
    env.run_ok(&["--actor", "bob", "runtime", "configure", "bob"]);
}

fn send_wait_offline(env: &TestEnv) -> String {
    configure_bob(env);
    printed(&env.run(&[
        "--actor", "alice", "send", "--to", "bob", "--wait", "1", "hi",
    ]))
}

/// Runtime `id` served detached by the fake ACP agent (as agent `id`, or
/// `--actor A` in `extra`); remembered for cleanup.
fn serve_acp(env: &TestEnv, id: &str, extra: &[&str]) -> Served {
    Served::start(env, id, "normal", &[], extra)
}

/// An ACP runtime whose supervisor and agent died without a word: its
/// record says ONLINE, its heartbeat went stale.
fn dead_acp_runtime(env: &TestEnv) -> String {
    let served = serve_acp(env, "bob", &["--heartbeat-ms", "100"]);
    env.signal(served.supervisor_pid(), libc::SIGKILL);
    // The agent may outlive its supervisor a moment; it goes too.
    // (Checked once and sent: it may end between two checks.)
    if env.is_ours(served.agent_pid()) {
        support::procs::signal(served.agent_pid(), libc::SIGKILL);
    }
    wait_until("bob's heartbeat stale", || {
        support::acp::show(env, "bob")["status"] == "OFFLINE"
    });
    printed(&env.run(&["doctor"]))
}

fn broken_profile(env: &TestEnv) {
    let dir = env.home.join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("broken.toml"), "name = \n").unwrap();
}

fn chmod(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
