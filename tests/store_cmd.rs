//! `store migrate` and `store status` through the real binary, against a
//! real PostgreSQL server (agent_comms_testing::postgres: a private server
//! for this test process, a fresh database and role per test).
//!
//! The project to move holds 1000 messages in every state: the cheap ones
//! made through the CLI (`runtime configure`, `send`, `message cancel`),
//! the rest — deliveries with evidence, retries, give-ups, an abandoned
//! lease, a batch in flight — through the store API on the project's own
//! file, as the supervisors would have left them. What counts is what a
//! user sees: after the move, with AGENT_COMMS_STORE naming the database,
//! `message list` and `message show` print what they printed before.

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use agent_comms_core::delivery::Evidence;
use agent_comms_core::store::postgres::Target;
use agent_comms_core::store::{
    state_db_path, AttemptResult, InvocationStatus, NewInvocation, PgStore, RuntimeRecord,
    RuntimeStatus, SqliteStore, Store,
};
use agent_comms_core::time::unix_millis;
use agent_comms_testing::postgres::{self, Database};
use serde_json::Value;
use support::env::TestEnv;
use support::run::{run_bounded, Run};

const STORE: &str = "AGENT_COMMS_STORE";
const PASSWORD: &str = "AGENT_COMMS_STORE_PASSWORD";

fn database() -> Database {
    let server = postgres::server().unwrap_or_else(|e| panic!("{e}"));
    server.fresh_database().unwrap_or_else(|e| panic!("{e}"))
}

/// `agent-comms ARGS…` in `env`, with `vars` set and no store variables
/// inherited from whoever runs the tests.
fn run_with(env: &TestEnv, vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd: Command = env.command(args);
    cmd.env_remove(STORE).env_remove(PASSWORD);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    run_bounded(cmd, &format!("agent-comms {}", args.join(" ")))
}

/// `agent-comms ARGS…` in `env` with its store the database at `url`.
fn on(env: &TestEnv, url: &str, args: &[&str]) -> Run {
    run_with(env, &[(STORE, url)], args)
}

fn sqlite(env: &TestEnv, args: &[&str]) -> Run {
    run_with(env, &[], args)
}

fn open_pg(url: &str) -> PgStore {
    PgStore::open(Target::parse(url, None).unwrap(), None).unwrap()
}

fn runtime(id: &str, status: RuntimeStatus, host: &str, now: u64) -> RuntimeRecord {
    RuntimeRecord {
        id: id.into(),
        agent: id.into(),
        kind: "INTERACTIVE".into(),
        connector: "INTERACTIVE".into(),
        max_concurrent: 1,
        status,
        host: Some(host.into()),
        endpoint: (status == RuntimeStatus::Online).then(|| format!("/nonexistent/{id}.sock")),
        endpoint_id: Some(format!("ep-{id}")),
        pid: None,
        // Beats every hour: fresh for the whole test, so ONLINE stays so.
        last_heartbeat: Some(now),
        heartbeat_ms: 3_600_000,
        provider: Some("claude-code".into()),
        conversation_id: Some(format!("conv-{id}")),
        status_reason: (status != RuntimeStatus::Online).then(|| "stopped by the test".into()),
        updated: now,
    }
}

fn evidence(at: u64, presses: u32, style: &str, stop: Option<&str>) -> Evidence {
    Evidence {
        echoed: at + 40,
        entered: at + 55,
        submitted: at + 90,
        enter_presses: presses,
        style: style.into(),
        stop_reason: stop.map(str::to_owned),
    }
}

/// Messages the project holds, by state, once [`project`] made them.
const PENDING: u64 = 495;
const DELIVERING: u64 = 3;
const DELIVERED: u64 = 350;
const UNAVAILABLE: u64 = 100;
const FAILED: u64 = 52;

/// A project whose SQLite store holds 1000 messages in every state; the
/// ids of those made through the CLI and cancelled.
fn project(env: &TestEnv) -> Vec<String> {
    sqlite(env, &["--actor", "bob", "runtime", "configure", "bob"]).ok();
    let store = SqliteStore::open(&state_db_path(&env.project)).unwrap();
    let now = unix_millis();
    let hour = 3_600_000;
    for (id, status) in [
        ("carol", RuntimeStatus::Draining),
        ("dave", RuntimeStatus::Revoked),
        ("erin", RuntimeStatus::Online),
        ("frank", RuntimeStatus::Offline),
        ("grace", RuntimeStatus::Online),
    ] {
        store
            .save_runtime(&runtime(id, status, "h_other", now))
            .unwrap();
    }
    // Interleaved, so that each agent's queue is spread over the seq order.
    let mut queue: Vec<&str> = [
        ("bob", 394),
        ("carol", 20),
        ("dave", 100),
        ("erin", 400),
        ("frank", 30),
        ("grace", 50),
    ]
    .iter()
    .flat_map(|&(to, n)| std::iter::repeat_n(to, n))
    .collect();
    let n = queue.len();
    queue = (0..n).map(|i| queue[i * 7919 % n]).collect();
    for (i, to) in queue.iter().enumerate() {
        let unavailable = *to == "dave";
        store
            .insert_invocation(&NewInvocation {
                from: if i % 3 == 0 { "alice" } else { "zoe" },
                to,
                body: &format!(
                    "message {i} to {to}\nwith a second line, and \u{1b}[1mbold\u{1b}[0m"
                ),
                status: if unavailable {
                    InvocationStatus::Unavailable
                } else {
                    InvocationStatus::Pending
                },
                reason: unavailable.then_some("no runtime of dave is online"),
                now: now + i as u64,
            })
            .unwrap();
    }
    let lease = |agent: &str, limit| {
        let leased = store
            .lease_batch(agent, agent, &format!("ep-{agent}"), now, now + hour, limit)
            .unwrap();
        assert_eq!(leased.len(), limit, "{agent}");
        leased.iter().map(|(_, a)| a.id).collect::<Vec<_>>()
    };
    // bob: 300 delivered in batches of 10, every third after a failure.
    for batch in 0..30u64 {
        if batch % 3 == 0 {
            let ids = lease("bob", 10);
            let busy = AttemptResult::Failed("the program stayed busy".into());
            assert_eq!(store.finish_attempts(&ids, &busy, now + 5).unwrap(), 10);
        }
        let ids = lease("bob", 10);
        let ev = evidence(now + batch * 100, 1 + (batch % 2) as u32, "paste", None);
        let done = AttemptResult::Delivered(ev);
        assert_eq!(store.finish_attempts(&ids, &done, now + 9).unwrap(), 10);
    }
    // carol: given up after five failures.
    for _ in 0..5 {
        let ids = lease("carol", 20);
        let failed = AttemptResult::Failed("the input line held unsent text".into());
        store.finish_attempts(&ids, &failed, now + 7).unwrap();
    }
    // frank: a notification that cannot be composed.
    let ids = lease("frank", 30);
    let never = AttemptResult::Undeliverable("the notification cannot be composed".into());
    store.finish_attempts(&ids, &never, now + 7).unwrap();
    // grace: prompts an ACP agent answered.
    let ids = lease("grace", 50);
    let prompt = AttemptResult::Delivered(evidence(now, 0, "prompt", Some("end_turn")));
    store.finish_attempts(&ids, &prompt, now + 8).unwrap();
    // erin: 20 leases abandoned when its supervisor stopped, then a batch
    // of three in flight.
    lease("erin", 20);
    let released = store
        .release_attempts(Some("erin"), now + 3, "the supervisor stopped")
        .unwrap();
    assert_eq!(released.len(), 20);
    lease("erin", 3);
    drop(store);

    // The CLI's: six to bob, two of them cancelled.
    let sent: Vec<String> = (0..6)
        .map(|i| {
            let text = format!("from the CLI {i}");
            let run = sqlite(
                env,
                &["--actor", "alice", "send", "--to", "bob", "--json", &text],
            )
            .ok();
            run.json()["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let cancelled = vec![sent[1].clone(), sent[4].clone()];
    for id in &cancelled {
        sqlite(env, &["--actor", "alice", "message", "cancel", id]).ok();
    }
    cancelled
}

fn message_counts(status: &Value) -> Vec<(String, u64)> {
    status["messages"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect()
}

#[test]
fn a_migrated_project_shows_every_message_as_before_and_a_second_run_changes_nothing() {
    let env = TestEnv::new();
    let cancelled = project(&env);
    let db = database();
    let url = db.url("127.0.0.1");
    let bare = db.url_without_password("127.0.0.1");

    // What the user sees before: every message, and a sample in full —
    // delivered ones with their evidence, the batch in flight, the
    // cancelled, the given up.
    let list = sqlite(&env, &["message", "list", "--json"]).ok().stdout;
    let views: Vec<Value> = serde_json::from_str(&list).unwrap();
    assert_eq!(views.len(), 1000);
    let mut sample: Vec<String> = views
        .iter()
        .enumerate()
        .filter(|(i, v)| i % 23 == 0 || v["status"] != "PENDING")
        .map(|(_, v)| v["id"].as_str().unwrap().to_owned())
        .take(150)
        .collect();
    sample.extend(cancelled.iter().cloned());
    let show_args = |ids: &[String]| -> Vec<String> {
        let mut args = vec!["message".to_owned(), "show".to_owned(), "--json".to_owned()];
        args.extend(ids.iter().cloned());
        args
    };
    let args = show_args(&sample);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let shown = sqlite(&env, &args).ok().stdout;
    assert!(
        shown.contains("\"style\":\"paste\"") && shown.contains("\"stop_reason\":\"end_turn\"")
    );
    assert!(
        shown.contains("\"outcome\":\"IN_PROGRESS\""),
        "the sample holds the batch in flight"
    );
    let before = sqlite(&env, &["store", "status", "--json"]).ok().json();
    assert_eq!(before["backend"], "sqlite");
    assert_eq!(
        message_counts(&before),
        vec![
            ("PENDING".into(), PENDING),
            ("DELIVERING".into(), DELIVERING),
            ("DELIVERED".into(), DELIVERED),
            ("UNAVAILABLE".into(), UNAVAILABLE),
            ("FAILED".into(), FAILED),
        ]
    );

    // The move: the password from the environment, not the command line.
    let run = run_with(
        &env,
        &[(PASSWORD, db.password())],
        &["store", "migrate", "--to", &bare],
    )
    .ok();
    let out = &run.stdout;
    assert!(
        out.starts_with(&format!(
            "copied {} into {bare}, in one transaction: ",
            state_db_path(&env.project).display()
        )),
        "{run:#?}"
    );
    assert!(
        out.contains("1000 messages (495 PENDING, 3 DELIVERING, 350 DELIVERED, 100 UNAVAILABLE, 52 FAILED), 603 attempts"),
        "{run:#?}"
    );
    assert!(out.contains(&format!("    store = \"{bare}\"")), "{run:#?}");
    assert!(out.contains("password_file") && out.contains(&format!("export {STORE}='{bare}'")));
    assert!(out.contains("the SQLite file is left as it was"));
    assert!(!out.contains(db.password()) && !run.stderr.contains(db.password()));

    // Every row as it was, leases and all; and what the user sees, the same.
    let file = SqliteStore::open(&state_db_path(&env.project)).unwrap();
    let pg = open_pg(&url);
    let copied = pg.snapshot().unwrap();
    assert_eq!(copied, file.snapshot().unwrap());
    assert_eq!(
        on(&env, &url, &["message", "list", "--json"]).ok().stdout,
        list
    );
    assert_eq!(on(&env, &url, &args).ok().stdout, shown);
    let after = on(&env, &url, &["store", "status", "--json"]).ok().json();
    assert_eq!(after["backend"], "postgres");
    assert_eq!(after["location"], bare.as_str());
    assert_eq!(after["messages"], before["messages"]);
    assert_eq!(after["runtimes"], before["runtimes"]);
    assert_eq!(after["runtimes"]["ONLINE"], 2, "{after}");

    // Again: nothing to do, nothing changed.
    let again = sqlite(&env, &["store", "migrate", "--to", &url, "--json"])
        .ok()
        .json();
    assert_eq!(again["already"], true, "{again}");
    assert_eq!(again["copied"]["messages"], 1000);
    assert_eq!(again["copied"]["by_status"], before["messages"]);
    assert_eq!(again["target"], bare.as_str());
    let text = sqlite(&env, &["store", "migrate", "--to", &url])
        .ok()
        .stdout;
    assert!(
        text.starts_with(&format!(
            "already migrated: {bare} holds exactly this project's "
        )),
        "{text}"
    );
    assert_eq!(pg.snapshot().unwrap(), copied);

    // New rows come after the copied ones.
    let new = on(
        &env,
        &url,
        &[
            "--actor",
            "alice",
            "send",
            "--to",
            "bob",
            "--json",
            "after the move",
        ],
    )
    .ok()
    .json();
    let listed: Vec<Value> =
        serde_json::from_str(&on(&env, &url, &["message", "list", "--json"]).ok().stdout).unwrap();
    assert_eq!(listed.len(), 1001);
    assert_eq!(listed.last().unwrap()["id"], new["id"]);
    let newest = pg.invocation(new["id"].as_str().unwrap()).unwrap().unwrap();
    assert!(newest.seq > copied.invocations.iter().map(|i| i.seq).max().unwrap());
    let (_, attempt) = pg
        .lease_next("bob", "bob", "ep-after", pg.now(), pg.now() + 60_000)
        .unwrap()
        .unwrap();
    assert!(attempt.id > copied.attempts.iter().map(|a| a.id).max().unwrap());
}

#[test]
fn a_database_holding_other_data_is_refused_and_replaced_with_force() {
    let env = TestEnv::new();
    project(&env);
    let db = database();
    let url = db.url("127.0.0.1");
    // Somebody else's project in it.
    let other = TestEnv::new();
    on(
        &other,
        &url,
        &["--actor", "zed", "runtime", "configure", "zed"],
    )
    .ok();
    on(
        &other,
        &url,
        &["--actor", "yan", "send", "--to", "zed", "theirs"],
    )
    .ok();
    let pg = open_pg(&url);
    let theirs = pg.snapshot().unwrap();

    let run = sqlite(&env, &["store", "migrate", "--to", &url]).fails_with_one_line();
    assert_eq!(run.code(), 1);
    assert!(
        run.stderr.contains(&format!(
            "the database at {} already holds 2 agents, 1 runtime, 1 message (1 PENDING), 0 attempts, which is not this project's state; nothing was copied; to delete what it holds and copy this project's in its place, run again with --force",
            db.url_without_password("127.0.0.1")
        )),
        "{run:#?}"
    );
    assert!(!run.stderr.contains(db.password()));
    assert_eq!(pg.snapshot().unwrap(), theirs, "refused: nothing changed");

    let run = sqlite(&env, &["store", "migrate", "--to", &url, "--force"]).ok();
    assert!(
        run.stdout.contains(
            "    replacing what it held: 2 agents, 1 runtime, 1 message (1 PENDING), 0 attempts"
        ),
        "{run:#?}"
    );
    let file = SqliteStore::open(&state_db_path(&env.project)).unwrap();
    assert_eq!(pg.snapshot().unwrap(), file.snapshot().unwrap());
    assert_eq!(
        on(&env, &url, &["message", "list", "--json"]).ok().stdout,
        sqlite(&env, &["message", "list", "--json"]).ok().stdout
    );
}

#[test]
fn nothing_is_migrated_without_sqlite_state_or_from_a_project_already_on_postgres() {
    let env = TestEnv::new();
    let db = database();
    let url = db.url("127.0.0.1");
    let bare = db.url_without_password("127.0.0.1");
    let run = sqlite(&env, &["store", "migrate", "--to", &url]).fails_with_one_line();
    let db_file = state_db_path(&env.project);
    assert!(
        run.stderr.contains(&format!(
            "there is no SQLite state to copy: {} does not exist",
            db_file.display()
        )),
        "{run:#?}"
    );
    assert!(!db_file.exists());
    let untouched = on(&env, &url, &["store", "status", "--json"]).ok().json();
    assert_eq!(
        untouched["schema"], 0,
        "nothing to copy: the database was not touched"
    );

    sqlite(&env, &["--actor", "bob", "runtime", "configure", "bob"]).ok();
    let run = on(&env, &url, &["store", "migrate", "--to", &url]).fails_with_one_line();
    assert!(
        run.stderr.contains(&format!("the project's store already is the PostgreSQL database at {bare} (named by {STORE}): it cannot be copied into itself")),
        "{run:#?}"
    );
    assert!(!run.stderr.contains(db.password()));
    // A check of a project on PostgreSQL checks the database.
    let run = on(&env, &url, &["store", "check"]).ok();
    assert!(
        run.stdout.starts_with("the project's store is PostgreSQL"),
        "{run:#?}"
    );
    assert!(
        run.stdout.contains(&format!("store:     postgres {bare}")),
        "{run:#?}"
    );
}

#[test]
fn status_tells_both_back_ends_and_an_unreachable_database_in_one_line() {
    let env = TestEnv::new();
    // No store yet: said, and not made.
    let fresh = sqlite(&env, &["store", "status", "--json"]).ok().json();
    assert_eq!(fresh["exists"], false);
    assert_eq!(fresh["ok"], true);
    assert!(!state_db_path(&env.project).exists());

    sqlite(&env, &["--actor", "bob", "runtime", "configure", "bob"]).ok();
    sqlite(&env, &["--actor", "alice", "send", "--to", "bob", "hello"]).ok();
    let s = sqlite(&env, &["store", "status", "--json"]).ok().json();
    assert_eq!(s["backend"], "sqlite");
    assert_eq!(
        s["location"],
        state_db_path(&env.project).display().to_string()
    );
    assert_eq!(
        (s["exists"].clone(), s["reachable"].clone()),
        (true.into(), true.into())
    );
    assert_eq!(s["schema"], s["schema_expected"]);
    assert!(s["latency_ms"].as_f64().is_some(), "{s}");
    assert_eq!(s["runtimes"]["OFFLINE"], 1);
    assert_eq!(s["messages"]["PENDING"], 1);
    assert_eq!(s["hosts"], Value::Null);
    assert_eq!(s["problems"], serde_json::json!([]));

    let db = database();
    let url = db.url("127.0.0.1");
    let bare = db.url_without_password("127.0.0.1");
    // An empty database: reachable, no tables yet, and none made.
    let empty = on(&env, &url, &["store", "status", "--json"]).ok().json();
    assert_eq!(
        (empty["exists"].clone(), empty["schema"].clone()),
        (false.into(), 0.into())
    );
    let still = on(&env, &url, &["store", "status", "--json"]).ok().json();
    assert_eq!(still["schema"], 0, "status made no tables");

    sqlite(&env, &["store", "migrate", "--to", &url]).ok();
    on(&env, &url, &["message", "list"]).ok();
    let run = on(&env, &url, &["store", "status", "--json"]).ok();
    assert!(!run.stdout.contains(db.password()));
    let p = run.json();
    assert_eq!(p["backend"], "postgres");
    assert_eq!(p["location"], bare.as_str());
    assert_eq!(p["reachable"], true);
    assert_eq!(p["schema"], p["schema_expected"]);
    assert_eq!(p["messages"], s["messages"]);
    let hosts = p["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "the host that listed the messages: {p}");
    for key in ["id", "name", "version", "schema", "skew_ms", "seen"] {
        assert!(!hosts[0][key].is_null(), "{key}: {p}");
    }
    let text = on(&env, &url, &["store", "status"]).ok().stdout;
    assert!(
        text.starts_with(&format!("store:     postgres {bare}\nreachable: yes, ")),
        "{text}"
    );
    assert!(
        text.contains("messages:  1 PENDING\n") && text.ends_with("ok\n"),
        "{text}"
    );

    // Nothing listens on port 1: one line, exit 2, soon, and no password.
    let nowhere = format!(
        "postgres://{}:{}@127.0.0.1:1/{}",
        db.user(),
        db.password(),
        db.name()
    );
    let started = Instant::now();
    let run = on(&env, &nowhere, &["store", "status"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.code(), 2, "{run:#?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:#?}");
    let said = format!(
        "the database at postgres://{}@127.0.0.1:1/{} is unreachable (",
        db.user(),
        db.name()
    );
    assert!(run.stdout.starts_with(&said), "{run:#?}");
    assert!(run.stderr.is_empty(), "{run:#?}");
    assert!(!run.stdout.contains(db.password()) && !run.stderr.contains(db.password()));
    let run = on(&env, &nowhere, &["store", "status", "--json"]);
    assert_eq!(run.code(), 2);
    let j = run.json();
    assert_eq!(
        (j["reachable"].clone(), j["ok"].clone()),
        (false.into(), false.into())
    );
    assert!(
        j["error"].as_str().unwrap().contains("is unreachable"),
        "{j}"
    );
    assert!(!run.stdout.contains(db.password()));
}
