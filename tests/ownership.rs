//! Files and endpoints that must be the user's own (issue 12, defect 1,
//! and two of defect 9): a project store another user made or may read is
//! refused with its repair, discovery never takes another user's
//! `.agent-comms/`, a client never talks to an endpoint another uid serves,
//! doctor says so, the runtime-dir check holds for any spelling of the
//! path, and a damaged database names itself and the next step.
//!
//! The tests marked `needs root` act as a second user,
//! `agentcomms-neighbour` (created here when missing): only root can.
//! `.ci/run` runs them with `--include-ignored`.

mod support;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use support::acp::{notes, transcript, Served};
use support::env::TestEnv;
use support::run::{run_bounded, Run};

const NEIGHBOUR: &str = "agentcomms-neighbour";
/// A user a policy lets watch a runtime (the bridge test).
const OPERATOR: &str = "agentcomms-operator";

/// The second user's uid and gid, creating the user once if missing.
fn neighbour() -> (u32, u32) {
    user(NEIGHBOUR)
}

/// User `name`'s uid and gid, creating the user once if missing.
fn user(name: &str) -> (u32, u32) {
    static CREATED: Mutex<()> = Mutex::new(());
    let _one_at_a_time = CREATED.lock().unwrap();
    let id = |flag: &str| {
        let out = Command::new("id").args([flag, name]).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    if id("-u").is_none() {
        let status = Command::new("useradd")
            .args(["-M", "-N", "-s", "/usr/sbin/nologin", name])
            .status()
            .expect("run useradd");
        assert!(status.success(), "useradd {name} failed");
    }
    (id("-u").unwrap(), id("-g").unwrap())
}

/// `ARGS…` run as the second user, with no supplementary groups, and a
/// `PATH` of system directories only (ours may be private to us).
fn as_neighbour(args: &[&str]) -> Command {
    as_user(NEIGHBOUR, args)
}

/// `ARGS…` run as user `name`, as [`as_neighbour`] does.
fn as_user(name: &str, args: &[&str]) -> Command {
    let (uid, gid) = user(name);
    let mut cmd = Command::new("setpriv");
    cmd.args([
        &format!("--reuid={uid}"),
        &format!("--regid={gid}"),
        "--clear-groups",
        "--",
    ]);
    cmd.args(args)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env_remove("PYENV_VERSION");
    cmd
}

/// A directory anyone may create entries in, as `/tmp` is (1777), inside
/// a temporary directory everybody may traverse.
fn sticky_shared() -> (tempfile::TempDir, PathBuf) {
    let outer = tempfile::Builder::new()
        .prefix("ac-shared-")
        .tempdir()
        .unwrap();
    fs::set_permissions(outer.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let shared = outer.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    (outer, shared)
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().mode() & 0o7777
}

fn doctor_codes(run: &Run) -> Vec<String> {
    let findings: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("doctor --json printed no JSON ({e}): {run:#?}"));
    findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_owned())
        .collect()
}

fn configure(env: &TestEnv) -> Run {
    env.run(&["--actor", "bob", "runtime", "configure", "--id", "bob"])
}

/// (a) Another user's 0777 `.agent-comms/` (with a 0666 `state.db`) above
/// a repository, in a sticky shared directory: the owner's commands use
/// the repository's own store and leave the planted one untouched.
#[test]
#[ignore = "needs root to act as a second user"]
fn another_users_state_directory_above_the_repository_is_not_used() {
    let env = TestEnv::new();
    let (_outer, shared) = sticky_shared();
    let planted = shared.join(".agent-comms");
    let mut plant = as_neighbour(&[
        "sh",
        "-c",
        "umask 0 && mkdir -m 0777 \"$1\" && : > \"$1/state.db\" && chmod 666 \"$1/state.db\"",
        "sh",
    ]);
    plant.arg(&planted);
    assert!(plant.status().unwrap().success());
    let repo = shared.join("repo");
    fs::create_dir_all(repo.join(".git")).unwrap();

    let mut cmd = env.command(&["--actor", "bob", "runtime", "configure", "--id", "bob"]);
    cmd.env_remove("AGENT_COMMS_PROJECT").current_dir(&repo);
    run_bounded(cmd, "runtime configure in the repository").ok();

    assert_eq!(
        fs::metadata(planted.join("state.db")).unwrap().len(),
        0,
        "the planted store was written to"
    );
    let own = repo.join(".agent-comms");
    assert_eq!(mode(&own), 0o700);
    assert_eq!(mode(&own.join("state.db")), 0o600);
}

/// An explicitly named project whose state directory belongs to another
/// user is refused, not used and not silently replaced.
#[test]
#[ignore = "needs root to act as a second user"]
fn an_explicit_project_with_another_users_state_directory_is_refused() {
    let env = TestEnv::new();
    let (uid, gid) = neighbour();
    let state = env.project.join(".agent-comms");
    fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(uid), Some(gid)).unwrap();
    let run = configure(&env).fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("belongs to uid {uid}"))
            && run.stderr.contains("AGENT_COMMS_PROJECT"),
        "{run:#?}"
    );
    assert!(!state.join("state.db").exists());
    let doctor = env.run(&["doctor", "--json"]);
    assert_eq!(doctor.code(), 2, "{doctor:#?}");
    assert_eq!(doctor_codes(&doctor), ["STORE_NOT_PRIVATE"]);
}

/// (b) A state database others may read (0666), a state directory others
/// may write (0777), and a WAL file others may read: each refused with the
/// exact chmod, which then makes the command work; doctor reports it.
#[test]
fn a_store_open_to_other_users_is_refused_with_the_chmod_that_repairs_it() {
    let env = TestEnv::new();
    configure(&env).ok();
    let state = env.project.join(".agent-comms");
    let db = state.join("state.db");
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&db), 0o600);

    fs::set_permissions(&db, fs::Permissions::from_mode(0o666)).unwrap();
    let run = configure(&env).fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("chmod 600 {}", db.display())),
        "{run:#?}"
    );
    let doctor = env.run(&["doctor", "--json"]);
    assert_eq!(doctor.code(), 2, "{doctor:#?}");
    assert_eq!(doctor_codes(&doctor), ["STORE_NOT_PRIVATE"]);
    let text = env.run(&["doctor"]);
    assert!(
        text.stdout
            .contains(&format!("repair: chmod 600 {}", db.display())),
        "{text:#?}"
    );
    fs::set_permissions(&db, fs::Permissions::from_mode(0o600)).unwrap();

    fs::set_permissions(&state, fs::Permissions::from_mode(0o777)).unwrap();
    let run = configure(&env).fails_with_one_line();
    assert!(
        run.stderr
            .contains(&format!("chmod 700 {}", state.display())),
        "{run:#?}"
    );
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();

    let wal = state.join("state.db-wal");
    fs::write(&wal, b"").unwrap();
    fs::set_permissions(&wal, fs::Permissions::from_mode(0o644)).unwrap();
    let run = configure(&env).fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("chmod 600 {}", wal.display())),
        "{run:#?}"
    );
    fs::set_permissions(&wal, fs::Permissions::from_mode(0o600)).unwrap();
    configure(&env).ok();
    env.run_ok(&["doctor"]);
}

/// A Unix socket another user serves, which logs every byte it receives
/// and answers nothing.
struct ForeignServer {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

const LOGGING_SERVER: &str = r#"
import socket, sys
path, log = sys.argv[1], sys.argv[2]
open(log, "wb").close()
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    c.settimeout(2)
    try:
        data = c.recv(65536)
        with open(log, "ab") as f:
            f.write(data)
    except OSError:
        pass
    c.close()
"#;

impl ForeignServer {
    fn start(dir: &Path) -> Self {
        let socket = dir.join("neighbour.sock");
        let log = dir.join("neighbour.log");
        let mut cmd = as_neighbour(&["python3", "-c", LOGGING_SERVER]);
        cmd.arg(&socket).arg(&log).stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("start python3 as the neighbour");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "the neighbour's server did not start");
        Self { child, socket, log }
    }

    fn received(&self) -> Vec<u8> {
        fs::read(&self.log).unwrap()
    }
}

impl Drop for ForeignServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Points runtime `bob` at `endpoint` as ONLINE on this host with a fresh
/// heartbeat, as another user who could write the store once would.
fn point_runtime_at(env: &TestEnv, endpoint: &Path, pid: u32) {
    env.run_ok(&["runtime", "list", "--json"]);
    let host = fs::read_to_string(env.home.join("host-id")).unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let sql = format!(
        "UPDATE runtimes SET status = 'ONLINE', host = '{}', endpoint = '{}', \
         endpoint_id = 'planted', pid = {pid}, last_heartbeat = {now}, \
         heartbeat_ms = 3600000 WHERE id = 'bob';",
        host.trim(),
        endpoint.display()
    );
    let db = env.project.join(".agent-comms").join("state.db");
    let status = Command::new("sqlite3").arg(&db).arg(sql).status().unwrap();
    assert!(status.success(), "sqlite3 could not update the record");
}

/// (c, d) A runtime record that names a socket another uid serves:
/// `runtime deliver` refuses before sending a byte, `send --wait` does not
/// believe it, and doctor reports FOREIGN_ENDPOINT.
#[test]
#[ignore = "needs root to act as a second user"]
fn an_endpoint_served_by_another_user_is_never_sent_to() {
    let env = TestEnv::new();
    let (uid, _) = neighbour();
    let (_outer, shared) = sticky_shared();
    let server = ForeignServer::start(&shared);
    configure(&env).ok();
    point_runtime_at(&env, &server.socket, server.child.id());

    let run = env.run(&["runtime", "deliver", "--id", "bob", "secret text"]);
    assert_eq!(
        String::from_utf8_lossy(&server.received()),
        "",
        "bytes reached the other user's socket"
    );
    let run = run.fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("uid {uid}")),
        "the refusal should name the stranger: {run:#?}"
    );
    let sent = env.run_ok(&[
        "--actor", "alice", "send", "--to", "bob", "--json", "a secret",
    ]);
    let sent: Value = serde_json::from_str(sent.stdout.trim()).unwrap();
    assert_ne!(sent["status"], "DELIVERED", "{sent}");

    let doctor = env.run(&["doctor", "--json"]);
    assert_eq!(doctor.code(), 2, "{doctor:#?}");
    assert!(
        doctor_codes(&doctor).contains(&"FOREIGN_ENDPOINT".to_owned()),
        "{doctor:#?}"
    );
    assert_eq!(
        String::from_utf8_lossy(&server.received()),
        "",
        "bytes reached the other user's socket"
    );
}

/// A symlinked runtime root is refused however it is spelled, a trailing
/// `/` included (which makes the kernel follow the link).
#[test]
fn a_symlinked_runtime_root_is_refused_with_a_trailing_slash_too() {
    let env = TestEnv::new();
    let real = env.base().join("real-run");
    fs::create_dir(&real).unwrap();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o700)).unwrap();
    let link = env.base().join("link-run");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    for spelling in [
        link.display().to_string(),
        format!("{}/", link.display()),
        format!("{}//", link.display()),
        format!("{}/.", link.display()),
    ] {
        let mut cmd = env.command(&["session", "ls"]);
        cmd.env("AGENT_COMMS_RUNTIME_DIR", &spelling);
        let run =
            run_bounded(cmd, &format!("session ls with root {spelling}")).fails_with_one_line();
        assert!(run.stderr.contains("is a symlink"), "{spelling}: {run:#?}");
    }
}

/// Overwrites the pages after the first of the store at `db` with junk.
fn damage(db: &Path) {
    let len = fs::metadata(db).unwrap().len() as usize;
    assert!(len > 4096, "the store is one page: nothing to damage");
    let mut bytes = fs::read(db).unwrap();
    for b in &mut bytes[4096..] {
        *b = 0xA5;
    }
    fs::write(db, bytes).unwrap();
}

/// A damaged database: every command names the file and the next step,
/// and `store check` says what is wrong (and ok on a sound one).
#[test]
fn a_damaged_store_names_its_file_and_the_next_step() {
    let env = TestEnv::new();
    configure(&env).ok();
    env.run_ok(&["--actor", "alice", "send", "--to", "bob", "hello"]);
    let db = env.project.join(".agent-comms").join("state.db");

    let check = env.run_ok(&["store", "check"]);
    assert!(
        check.stdout.contains("ok") && check.stdout.contains(&db.display().to_string()),
        "{check:#?}"
    );
    let json: Value =
        serde_json::from_str(env.run_ok(&["store", "check", "--json"]).stdout.trim()).unwrap();
    assert_eq!(json["ok"], true, "{json}");

    damage(&db);
    for args in [
        &["runtime", "list"][..],
        &["message", "list"][..],
        &["--actor", "alice", "send", "--to", "bob", "again"][..],
    ] {
        let run = env.run(args).fails_with_one_line();
        assert!(
            run.stderr.contains(&db.display().to_string())
                && run.stderr.contains("agent-comms store check"),
            "{args:?}: {run:#?}"
        );
    }
    let check = env.run(&["store", "check"]);
    assert_eq!(check.code(), 2, "{check:#?}");
    assert!(
        check.stdout.contains(&db.display().to_string()) && check.stdout.contains("mv "),
        "{check:#?}"
    );
    let json: Value =
        serde_json::from_str(env.run(&["store", "check", "--json"]).stdout.trim()).unwrap();
    assert_eq!(json["ok"], false, "{json}");
    assert!(!json["problems"].as_array().unwrap().is_empty(), "{json}");
}

/// The ACP bridge (docs/acp.md, "Who may attach"): a uid the policy lists
/// as an observer attaches through the shared socket and only watches; one
/// it does not list is refused with one JSON-RPC error, logged; nothing
/// either sends reaches the agent.
#[test]
#[ignore = "needs root to act as a second user"]
fn the_bridge_admits_only_the_users_its_policy_lists() {
    let env = TestEnv::new();
    let (stranger, _) = neighbour();
    let (operator, _) = user(OPERATOR);
    // A directory of ours others may enter but not write, for the socket.
    let outer = tempfile::Builder::new()
        .prefix("ac-bridge-")
        .tempdir()
        .unwrap();
    fs::set_permissions(outer.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let socket = outer.path().join("rt.sock");
    let policy = env.base().join("policy.toml");
    fs::write(
        &policy,
        format!(
            "[clients]\nobserver_uids = [{operator}]\nsocket = \"{}\"\n",
            socket.display()
        ),
    )
    .unwrap();
    let served = Served::start(
        &env,
        "rt",
        "normal",
        &[],
        &["--policy", policy.to_str().unwrap()],
    );
    assert_eq!(
        mode(&socket) & 0o777,
        0o666,
        "guarded by the peer check, not the mode"
    );
    let session = served.session_id();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#
            .to_owned(),
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"session/resume","params":{{"sessionId":"{session}","cwd":"/"}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{{"sessionId":"{session}","prompt":[{{"type":"text","text":"sneaky"}}]}}}}"#
        ),
    ];
    let attach_as = |name: &str| {
        let mut cmd = as_user(
            name,
            &[
                support::BIN,
                "acp",
                "attach",
                "--socket",
                socket.to_str().unwrap(),
            ],
        );
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut replies = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut got = Vec::new();
        for line in &lines {
            use std::io::Write;
            if writeln!(stdin, "{line}").is_err() {
                break;
            }
            match replies.next() {
                Some(Ok(reply)) => got.push(serde_json::from_str::<Value>(&reply).unwrap()),
                _ => break,
            }
        }
        drop(stdin);
        let _ = child.wait();
        got
    };
    let refused = attach_as(NEIGHBOUR);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert_eq!(refused[0]["error"]["code"], -32001);
    let why = refused[0]["error"]["message"].as_str().unwrap();
    assert!(
        why.contains(&format!("uid {stranger} may not attach")),
        "{why}"
    );
    let watched = attach_as(OPERATOR);
    assert_eq!(watched.len(), 3, "{watched:?}");
    assert_eq!(watched[0]["result"]["protocolVersion"], 1);
    assert!(watched[1]["result"].is_object(), "{watched:?}");
    assert_eq!(
        watched[2]["error"]["code"], -32001,
        "an observer's prompt: {watched:?}"
    );
    assert!(served.prompted().is_empty(), "a prompt reached the agent");
    let notes = notes(&transcript(&env, "rt"));
    assert!(
        notes.iter().any(|n| n.starts_with(&format!(
            "refused: a client: connection refused: uid {stranger}"
        ))),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!("(observer, uid {operator}, via socket)"))),
        "{notes:?}"
    );
}
