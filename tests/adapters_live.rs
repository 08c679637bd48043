//! Adapters reading live sessions: the profile's rules, a plugin, and a
//! plugin that fails while the session runs — which is reported, set aside,
//! and replaced by the rules, the session unharmed.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::env::TestEnv;
use support::run::run_within;
use support::wait_until;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A user profile for bash whose rules read `WORKING`/`READY` lines, with
/// `plugin` when given.
fn install_profile(env: &TestEnv, name: &str, plugin: Option<PathBuf>) {
    install_profile_debounced(env, name, plugin, 0);
}

fn install_profile_debounced(env: &TestEnv, name: &str, plugin: Option<PathBuf>, debounce_ms: u64) {
    let dir = env.home.join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = plugin.map_or(String::new(), |p| {
        format!("plugin = {:?}\n", p.display().to_string())
    });
    let text = format!(
        "schema = 1\nname = \"{name}\"\nversion = \"0.1.0\"\nkind = \"agent\"\ncommands = [\"{name}-prog\"]\n{plugin}\
         [detect]\ndebounce_ms = {debounce_ms}\n\
         [[detect.rules]]\nstate = \"busy\"\nscreen = \"^WORKING\"\n\
         [[detect.rules]]\nstate = \"idle\"\nscreen = \"^READY\"\n"
    );
    std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
}

fn activity(env: &TestEnv, session: &str) -> Value {
    let run = env.run_ok(&["session", "activity", session, "--json"]);
    serde_json::from_str(run.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {run:#?}"))
}

fn start_shell(env: &TestEnv, session: &str, provider: &str) {
    env.start(
        session,
        &[
            "--provider",
            provider,
            "--env",
            "PS1=READY$ ",
            "--",
            "bash",
            "--norc",
            "--noprofile",
        ],
    );
    env.wait_screen(session, "READY$");
}

#[test]
fn the_rules_read_a_live_screen() {
    let env = TestEnv::new();
    install_profile(&env, "lines", None);
    start_shell(&env, "s", "lines");
    let idle = activity(&env, "s");
    assert_eq!(
        (idle["activity"].as_str(), idle["by"].as_str()),
        (Some("idle"), Some("rules")),
        "{idle}"
    );
    env.send_line("s", "clear; echo WORKING; sleep 30");
    wait_until("the rules to see WORKING", || {
        activity(&env, "s")["activity"] == "busy"
    });
}

/// The debounce sees every screen the program shows, not only the ones
/// somebody asked about: a busy moment nobody queried still holds idle back.
#[test]
fn a_busy_moment_between_two_questions_holds_idle_back() {
    let env = TestEnv::new();
    install_profile_debounced(&env, "slow", None, 60_000);
    start_shell(&env, "s", "slow");
    env.send_line("s", "clear; echo WORKING; sleep 1; clear");
    env.wait_screen("s", "WORKING");
    wait_until("the screen to be back at the prompt", || {
        !env.snapshot("s").contains("WORKING")
    });
    let a = activity(&env, "s");
    assert_eq!(
        (a["raw"].as_str(), a["activity"].as_str()),
        (Some("idle"), Some("busy")),
        "{a}"
    );
}

#[test]
fn a_session_without_an_adapter_says_how_to_give_it_one() {
    let env = TestEnv::new();
    env.start("plain", &["--", "sleep", "30"]);
    let run = env
        .run(&["session", "activity", "plain"])
        .fails_with_one_line();
    assert!(run.stderr.contains("--provider"), "{run:#?}");
}

#[test]
fn a_plugin_that_fails_mid_session_is_set_aside_for_the_rules() {
    let wasm = repo().join("target/wasm/wasm32-wasip2/release/wasm_faults.wasm");
    assert!(
        wasm.is_file(),
        "{} is missing: run scripts/build-plugins",
        wasm.display()
    );
    let env = TestEnv::new();
    install_profile(&env, "faulty", Some(wasm));
    start_shell(&env, "f", "faulty");

    // The fault guest answers idle to any title it is not told to act on.
    let first = activity(&env, "f");
    assert_eq!(
        (first["activity"].as_str(), first["by"].as_str()),
        (Some("idle"), Some("plugin")),
        "{first}"
    );

    // A title of "loop" makes its classify run forever.
    env.send_line("f", "printf '\\033]0;loop\\007'; clear");
    wait_until("the plugin to be stopped and set aside", || {
        let a = activity(&env, "f");
        a["by"] == "rules"
            && a["plugin_error"]
                .as_str()
                .is_some_and(|e| e.contains("deadline"))
    });

    // The session is unharmed and the rules keep answering.
    env.send_line("f", "echo still-here");
    env.wait_screen("f", "still-here");
    let later = activity(&env, "f");
    assert_eq!(
        (later["activity"].as_str(), later["by"].as_str()),
        (Some("idle"), Some("rules")),
        "{later}"
    );
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo has no other preconditions.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Far less than the hang (forever) and the minutes a 32 MB profile took.
const QUICK: std::time::Duration = std::time::Duration::from_secs(10);

#[test]
fn a_fifo_or_an_oversized_profile_is_reported_and_hangs_no_command() {
    let env = TestEnv::new();
    let dir = env.home.join("providers");
    std::fs::create_dir_all(&dir).unwrap();
    mkfifo(&dir.join("fifo.toml"));
    // 32 MB of programs claimed: valid TOML, far over the size limit.
    let mut big =
        String::from("schema = 1\nname = \"big\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [");
    let mut i = 0;
    while big.len() < 32 << 20 {
        big.push_str(&format!("\"prog-{i}\", "));
        i += 1;
    }
    big.push_str("]\n");
    std::fs::write(dir.join("big.toml"), big).unwrap();
    // A profile whose Wasm plugin is a FIFO: loaded by the supervisor.
    mkfifo(&dir.join("stuck.wasm"));
    install_profile(&env, "stuck", Some(dir.join("stuck.wasm")));

    let list = run_within(env.command(&["adapters", "list"]), "adapters list", QUICK).ok();
    let fifo = dir.join("fifo.toml").display().to_string();
    let big = dir.join("big.toml").display().to_string();
    assert!(
        list.stdout.contains(&format!(
            "error: {fifo}:1:1: not read: it is a FIFO, not a regular file"
        )),
        "{list:#?}"
    );
    assert!(
        list.stdout
            .contains(&format!("error: {big}:1:1: not read: it holds"))
            && list.stdout.contains("over the 1 MiB limit for a profile"),
        "{list:#?}"
    );
    // The other adapters still load, the FIFO plugin's profile among them.
    assert!(list.stdout.contains("stuck "), "{list:#?}");

    // Both start within the harness's bound (they hung before).
    env.start("plain", &["--", "sleep", "30"]);
    start_shell(&env, "plugged", "stuck");
    let report = activity(&env, "plugged");
    assert!(
        report["plugin_error"]
            .as_str()
            .is_some_and(|e| e.contains("it is a FIFO, not a regular file")),
        "the plugin's problem is reported: {report}"
    );
    let check = run_within(
        env.command(&["adapters", "check", "stuck"]),
        "adapters check",
        QUICK,
    );
    assert!(check.stdout.contains("not a regular file"), "{check:#?}");

    let doctor = run_within(env.command(&["doctor"]), "doctor", QUICK);
    assert!(
        doctor.stdout.contains(&format!(
            "repair: fix or remove it, then run: agent-comms adapters check {fifo}"
        )),
        "{doctor:#?}"
    );
}
