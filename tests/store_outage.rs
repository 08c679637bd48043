//! `send --wait` while the PostgreSQL store goes away (issue 32, finding
//! 6): a script must be able to tell from the exit status and the line
//! whether its message was stored, so that it never sends one twice.
//!
//! - the store gone before `send`: it fails at once (within the store's
//!   connect timeout, not at the end of `--wait`), exit 3, "not stored";
//! - the store restarting while `send --wait` waits: the message is
//!   delivered once, and `send` reports it (exit 0), having re-read its
//!   state on a new connection;
//! - the store gone until the wait's end: exit 4, "stored as ID, outcome
//!   not known yet", `"outcome_known": false` with `--json`; once the store
//!   is back the message is delivered, once.
//!
//! The runtime is the fake claude (tests/fakes) served in a test-side
//! terminal on a database of the test process's private PostgreSQL server
//! (agent_comms_testing::postgres). Each test stops that server, which the
//! others share: they take [`OUTAGE`] in turn.

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use agent_comms_core::store::postgres::Target;
use agent_comms_core::store::{
    Invocation, InvocationFilter, InvocationStatus, PgStore, Store, StoreError,
};
use agent_comms_testing::postgres::{self, Database, Server};
use serde_json::Value;
use support::env::TestEnv;
use support::fakes::{fake, fake_events, named_ids, serve_argv};
use support::run::{try_run_within, Run};
use support::term::Term;
use support::{poll_within, wait_until, TIMEOUT};

const STORE: &str = "AGENT_COMMS_STORE";
/// The store's connect timeout (core/src/store/postgres/conn.rs).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// What a `send` may take beyond its bound on a loaded machine (a debug
/// build's start, the runtime's socket).
const SLACK: Duration = Duration::from_secs(3);

/// Taken by each test for as long as it may stop the shared server.
static OUTAGE: Mutex<()> = Mutex::new(());

fn server() -> &'static Server {
    postgres::server().unwrap_or_else(|e| panic!("{e}"))
}

/// One test's world: a project on a fresh database, and the runtime bob
/// (the fake claude) online in a test-side terminal.
struct World {
    env: TestEnv,
    url: String,
    term: Term,
    log: PathBuf,
}

impl World {
    fn new() -> World {
        let db: Database = server().fresh_database().unwrap_or_else(|e| panic!("{e}"));
        let url = db.url("127.0.0.1");
        let env = TestEnv::new();
        let log = env.base().join("bob-claude.log");
        let claude = fake("claude");
        let argv = serve_argv(
            "bob",
            "bob",
            "200",
            &["--keyboard-quiet-ms", "400"],
            &claude,
            &[],
        );
        let log_s = log.display().to_string();
        let term = env.term_with(&argv, &[(STORE, &url), ("FAKE_LOG", &log_s)], true);
        let world = World {
            env,
            url,
            term,
            log,
        };
        wait_until("runtime bob online", || {
            let run = world.run(&["runtime", "show", "--id", "bob", "--json"]);
            run.success() && run.json()["status"] == "ONLINE"
        });
        wait_until("the fake's start", || world.events("start").len() == 1);
        world
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self.env.command(args);
        cmd.env(STORE, &self.url);
        cmd
    }

    /// `agent-comms ARGS…` on the project's database, to completion.
    fn run(&self, args: &[&str]) -> Run {
        let what = format!("agent-comms {}", args.join(" "));
        try_run_within(self.command(args), &what, Duration::from_secs(90))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `agent-comms ARGS…` started now on a thread of its own: its run and
    /// how long it took, when it ends.
    fn spawn(&self, args: &[&str]) -> mpsc::Receiver<(Run, Duration)> {
        let what = format!("agent-comms {}", args.join(" "));
        let cmd = self.command(args);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let started = Instant::now();
            let run = try_run_within(cmd, &what, Duration::from_secs(90))
                .unwrap_or_else(|e| panic!("{e}"));
            let _ = tx.send((run, started.elapsed()));
        });
        rx
    }

    /// What `read` reads from the database, through the test's own
    /// connections — which a restart ends too, so a failed read is made
    /// again (on a new one) until it answers.
    fn read<T>(&self, read: impl Fn(&PgStore) -> Result<T, StoreError>) -> T {
        poll_within(TIMEOUT, "the store to answer the test", || {
            PgStore::open(Target::parse(&self.url, None).ok()?, None)
                .and_then(|store| read(&store))
                .ok()
        })
    }

    fn messages(&self) -> Vec<Invocation> {
        self.read(|s| s.invocations(&InvocationFilter::default()))
    }

    fn message(&self, id: &str) -> Invocation {
        self.read(|s| s.invocation(id))
            .expect("the message is stored")
    }

    fn events(&self, kind: &str) -> Vec<Value> {
        fake_events(&self.log, kind)
    }

    /// How many times the fake was told of message `id`.
    fn told(&self, id: &str) -> usize {
        self.events("submit")
            .iter()
            .filter_map(|s| s["text"].as_str())
            .filter(|t| t.starts_with("[agent-comms] "))
            .filter(|t| named_ids(t).iter().any(|n| n == id))
            .count()
    }

    /// Makes the fake busy with a turn that lasts until [`World::idle`]:
    /// nothing is delivered meanwhile.
    fn busy(&self) {
        self.run(&["runtime", "deliver", "--id", "bob", "hold BUSY=600000"])
            .ok();
        wait_until("the fake busy", || self.events("submit").len() == 1);
    }

    /// Ends the fake's turn (Esc, as a person would).
    fn idle(&self) {
        self.term.write(b"\x1b");
        wait_until("the turn interrupted", || {
            !self.events("interrupted").is_empty()
        });
    }

    /// Waits until `send` has stored its message; returns it.
    fn stored(&self) -> Invocation {
        let mut found = None;
        wait_until("the message stored", || {
            found = self.messages().into_iter().next();
            found.is_some()
        });
        found.unwrap()
    }
}

fn lines(run: &Run) -> Vec<&str> {
    run.stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// The store gone before `send --wait 60`: it fails at once, within the
/// store's connect timeout, says on one line that nothing was stored and
/// exits 3; `--json` says `"stored": false`. Nothing is in the store once
/// it is back.
#[test]
fn send_wait_with_the_store_gone_fails_at_once_saying_nothing_was_stored() {
    let _outage = OUTAGE.lock().unwrap_or_else(|p| p.into_inner());
    let w = World::new();
    server().stop().unwrap();
    let started = Instant::now();
    let run = w.run(&[
        "--actor", "alice", "send", "--to", "bob", "--wait", "60", "--json", "hello?",
    ]);
    let took = started.elapsed();
    let second = w.run(&["--actor", "alice", "send", "--to", "bob", "hello?"]);
    server().start_again().unwrap();
    eprintln!("send --wait 60 with the store gone took {took:?}: {run:#?}");
    assert!(
        took < CONNECT_TIMEOUT + SLACK,
        "took {took:?}, beyond the connect timeout: {run:#?}"
    );
    assert_eq!(run.code(), 3, "{run:#?}");
    let said = lines(&run);
    assert_eq!(said.len(), 1, "{run:#?}");
    for what in ["not stored", "is unreachable", "send it again"] {
        assert!(said[0].contains(what), "{what:?} missing: {run:#?}");
    }
    let j = run.json();
    assert_eq!(j["stored"], false, "{run:#?}");
    assert!(j["error"].as_str().unwrap().contains("unreachable"), "{j}");
    // Without --wait and --json alike.
    assert_eq!(second.code(), 3, "{second:#?}");
    assert!(second.stdout.is_empty(), "{second:#?}");
    assert!(lines(&second)[0].contains("not stored"), "{second:#?}");
    assert!(w.messages().is_empty(), "{:?}", w.messages());
}

/// The store restarting while `send --wait` waits: the runtime delivers
/// the message once the store is back, and `send` — whose connection the
/// restart ended — re-reads its state on a new one and exits 0.
#[test]
fn send_wait_across_a_store_restart_reports_the_delivery() {
    let _outage = OUTAGE.lock().unwrap_or_else(|p| p.into_inner());
    let w = World::new();
    w.busy();
    let sending = w.spawn(&[
        "--actor", "alice", "send", "--to", "bob", "--wait", "60", "--json", "hello?",
    ]);
    let inv = w.stored();
    assert_eq!(inv.status, InvocationStatus::Pending);
    server().stop().unwrap();
    let down = Instant::now();
    server().start_again().unwrap();
    eprintln!("the store was down for {:?}", down.elapsed());
    w.idle();
    let (run, took) = sending
        .recv_timeout(Duration::from_secs(90))
        .expect("send --wait ended");
    eprintln!("send --wait 60 across a restart took {took:?}: {run:#?}");
    assert_eq!(run.code(), 0, "{run:#?}");
    let j = run.json();
    assert_eq!(j["id"], inv.id.as_str());
    assert_eq!(j["status"], "DELIVERED", "{j}");
    assert_eq!(j["stored"], true, "{j}");
    assert_eq!(j["outcome_known"], true, "{j}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(w.told(&inv.id), 1, "{:#?}", w.events("submit"));
    assert_eq!(w.message(&inv.id).status, InvocationStatus::Delivered);
}

/// The store gone from a moment after `send --wait 6` stored its message
/// until after the wait: `send` cannot learn what became of it, and says
/// so — "stored as ID, outcome not known yet", exit 4, `"outcome_known":
/// false` — at the end of its wait, not later. The message is delivered
/// once the store is back, once: a script that heeded the line sent it
/// once.
#[test]
fn send_wait_that_cannot_learn_the_outcome_says_stored_as_id() {
    let _outage = OUTAGE.lock().unwrap_or_else(|p| p.into_inner());
    let w = World::new();
    w.busy();
    let wait = Duration::from_secs(6);
    let started = Instant::now();
    let sending = w.spawn(&[
        "--actor", "alice", "send", "--to", "bob", "--wait", "6", "--json", "hello?",
    ]);
    let inv = w.stored();
    server().stop().unwrap();
    // Idle while the store is gone: the inbox cannot lease the message.
    w.idle();
    let got = sending.recv_timeout(Duration::from_secs(90));
    let (run, _) = got.expect("send --wait ended");
    let took = started.elapsed();
    server().start_again().unwrap();
    eprintln!("send --wait 6 with the store gone took {took:?}: {run:#?}");
    assert!(
        took < wait + CONNECT_TIMEOUT + SLACK,
        "took {took:?}: {run:#?}"
    );
    assert_eq!(run.code(), 4, "{run:#?}");
    let said = lines(&run);
    assert_eq!(said.len(), 1, "{run:#?}");
    for what in [
        format!("stored as {}", inv.id),
        "outcome not known yet".into(),
        "do not send it again".into(),
        format!("agent-comms message show {}", inv.id),
    ] {
        assert!(said[0].contains(&what), "{what:?} missing: {run:#?}");
    }
    let j = run.json();
    assert_eq!(j["id"], inv.id.as_str(), "{j}");
    assert_eq!(j["stored"], true, "{j}");
    assert_eq!(j["outcome_known"], false, "{j}");
    // Back: the inbox delivers what waited, once.
    wait_until("the message delivered once the store is back", || {
        w.message(&inv.id).status == InvocationStatus::Delivered
    });
    assert_eq!(w.told(&inv.id), 1, "{:#?}", w.events("submit"));
}
