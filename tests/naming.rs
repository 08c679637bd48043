//! One way to name things: the id of what a command acts on is positional
//! (`runtime show bob`), `--id bob` still works and means the same, and
//! the two given differently are refused in one line; `runtime rm` removes
//! a dead record and refuses a live one, saying how to stop it; a
//! forgotten `--` before a program is answered with the corrected command.

mod support;

use serde_json::Value;
use support::acp::Served;
use support::env::TestEnv;

/// A configured (never served) runtime `bob` of agent `bob`.
fn configured(env: &TestEnv) {
    env.run_ok(&["--actor", "bob", "runtime", "configure", "bob"]);
}

/// `--json` output without the fields that change between two reads.
fn stable(run: support::run::Run) -> Value {
    let mut v = run.ok().json();
    if let Some(o) = v.as_object_mut() {
        o.remove("updated");
    }
    v
}

#[test]
fn the_positional_and_the_id_forms_agree() {
    let env = TestEnv::new();
    configured(&env);
    let positional = stable(env.run(&["runtime", "show", "bob", "--json"]));
    let flag = stable(env.run(&["runtime", "show", "--id", "bob", "--json"]));
    assert_eq!(positional, flag);
    assert_eq!(positional["id"], "bob");
    // Both at once, the same: accepted.
    let both = stable(env.run(&["runtime", "show", "bob", "--id", "bob", "--json"]));
    assert_eq!(both, positional);

    // A message to bob (no runtime online: it waits), redelivered both ways.
    let sent = env
        .run_ok(&["--actor", "alice", "send", "--to", "bob", "--json", "hi"])
        .json();
    let id = sent["id"].as_str().unwrap().to_owned();
    env.run_ok(&["message", "cancel", &id]);
    let again = env.run_ok(&["message", "redeliver", &id, "--json"]).json();
    assert_eq!(again["status"], "PENDING", "{again}");
    env.run_ok(&["message", "cancel", "--id", &id]);
    let again = env
        .run_ok(&["message", "redeliver", "--id", &id, "--json"])
        .json();
    assert_eq!(again["status"], "PENDING", "{again}");

    // `runtime deliver` names the runtime then the text, in either form:
    // both reach the same refusal (bob is not online), not a usage error.
    let positional = env
        .run(&["runtime", "deliver", "bob", "hello"])
        .fails_with_one_line();
    let flag = env.run(&["runtime", "deliver", "--id", "bob", "hello"]);
    assert_eq!(flag.code(), 1, "{flag:#?}");
    assert_eq!(flag.stderr, positional.stderr);
    assert!(flag.stderr.contains("runtime bob is offline"), "{flag:#?}");
}

#[test]
fn two_different_ids_are_refused_in_one_line() {
    let env = TestEnv::new();
    configured(&env);
    let run = env
        .run(&["runtime", "show", "bob", "--id", "alice"])
        .fails_with_one_line();
    assert_eq!(
        run.stderr.trim(),
        "agent-comms: the id is given twice, as bob and as --id alice; give it once"
    );
}

#[test]
fn rm_refuses_an_online_runtime_and_removes_a_dead_one() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "normal", &[], &[]);
    let refused = env.run(&["runtime", "rm", "A"]).fails_with_one_line();
    assert_eq!(
        refused.stderr.trim(),
        "agent-comms: runtime A is ONLINE, so its record stays; stop it first with: agent-comms session kill A"
    );
    assert_eq!(support::acp::show(&env, &served.id)["status"], "ONLINE");

    // The printed way to stop it works, and then the record goes.
    env.run_ok(&["session", "kill", "A"]);
    let removed = env.run_ok(&["runtime", "rm", "A"]);
    assert_eq!(removed.stdout.trim(), "runtime A removed (it was OFFLINE)");
    let list = env.run_ok(&["runtime", "list", "--json"]).json();
    assert_eq!(list, serde_json::json!([]));

    // Gone: a second rm says so and where to look.
    let again = env
        .run(&["runtime", "rm", "--id", "A"])
        .fails_with_one_line();
    assert!(again.stderr.contains("no runtime 'A'"), "{again:#?}");
}

/// A runtime whose supervisor died without a word keeps a record that
/// says ONLINE, which doctor reports until `runtime rm` removes it.
#[test]
fn rm_of_a_dead_record_ends_what_doctor_says_of_it() {
    let env = TestEnv::new();
    let served = Served::start(&env, "A", "normal", &[], &["--heartbeat-ms", "100"]);
    env.signal(served.supervisor_pid(), libc::SIGKILL);
    // (Checked once and sent: it may end between two checks.)
    if env.is_ours(served.agent_pid()) {
        support::procs::signal(served.agent_pid(), libc::SIGKILL);
    }
    support::wait_until("A's heartbeat stale", || {
        support::acp::show(&env, "A")["status"] == "OFFLINE"
    });
    let about_a = |env: &TestEnv| -> Vec<Value> {
        let doctor = env.run(&["doctor", "--json"]).json();
        let all = doctor.as_array().unwrap().clone();
        all.into_iter()
            .filter(|f| f["subject"] == "runtime A")
            .collect()
    };
    let before = about_a(&env);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["code"], "ENDPOINT_NOT_DIALABLE");
    assert!(
        before[0]["repair"]
            .as_str()
            .unwrap()
            .ends_with("or forget the record: agent-comms runtime rm A"),
        "{before:?}"
    );
    env.run_ok(&["runtime", "rm", "A"]);
    assert_eq!(about_a(&env), Vec::<Value>::new());
}

#[test]
fn a_forgotten_double_dash_is_answered_with_the_corrected_command() {
    let env = TestEnv::new();
    for (args, fixed) in [
        (
            &["session", "new", "work", "bash", "-i"][..],
            "agent-comms session new work -- bash -i",
        ),
        (
            &["runtime", "interactive-serve", "--id", "x", "claude"][..],
            "agent-comms runtime interactive-serve --id x -- claude",
        ),
        (
            &[
                "runtime",
                "interactive-serve",
                "x",
                "claude",
                "--model",
                "opus",
            ][..],
            "agent-comms runtime interactive-serve x -- claude --model opus",
        ),
        (
            &["runtime", "acp-serve", "coder", "opencode", "acp"][..],
            "agent-comms runtime acp-serve coder -- opencode acp",
        ),
    ] {
        let run = env.run(args).fails_with_one_line();
        assert_eq!(run.code(), 2, "{run:#?}");
        assert_eq!(
            run.stderr.trim(),
            format!("agent-comms: put `--` before the program: {fixed}")
        );
    }
    // Asking for help is not a forgotten `--`.
    let help = env.run_ok(&["session", "new", "work", "--help"]);
    assert!(help.stdout.contains("Examples:"), "{help:#?}");
    // Nothing was started by the refused commands.
    assert_eq!(env.ls_json(), Vec::<Value>::new());
}
