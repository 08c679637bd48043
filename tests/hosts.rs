//! Several hosts, one control plane, end to end: each host is a network
//! namespace of its own (agent_comms_testing::hosts) with its own runtime
//! directory, home (so its own host id) and project checkout, and every
//! command on it runs the real binary inside that namespace, reaching one
//! real PostgreSQL server (agent_comms_testing::postgres) over the host's
//! own link — which a test can cut.
//!
//! Providers are the fakes (tests/fakes), served with `interactive-serve`
//! in a test-side terminal; the assertions read what the fakes received,
//! and the store's record through `message show --json`.
//!
//! Needs root (network namespaces): run with
//! `cargo test --test hosts -- --include-ignored` as root (`.ci/run` does).

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::RwLock;
use std::time::{Duration, Instant};

use agent_comms_testing::hosts::Host;
use agent_comms_testing::postgres::{self, Database};
use serde_json::Value;
use support::env::TestEnv;
use support::fakes::{fake, fake_events, named_ids, serve_argv};
use support::run::{run_within, Run};
use support::term::Term;
use support::{wait_until, wait_until_within, BIN};

const HEARTBEAT_MS: &str = "200";

/// Taken for writing by the test that restarts the shared server, for
/// reading by every other: nobody else's traffic sees the restart.
static SERVER: RwLock<()> = RwLock::new(());

/// One machine: a namespace, and the private world of its commands.
struct Node {
    net: Host,
    env: TestEnv,
    store: String,
}

impl Node {
    fn new(db: &Database) -> Node {
        agent_comms_testing::hosts::available().unwrap_or_else(|e| panic!("{e}"));
        // Namespaces are named by process and index: unique across tests.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let net = Host::new(NEXT.fetch_add(1, Ordering::Relaxed)).unwrap_or_else(|e| panic!("{e}"));
        let store = db.url(&net.db_address());
        Node {
            net,
            env: TestEnv::new(),
            store,
        }
    }

    fn vars(&self) -> Vec<(&'static str, String)> {
        vec![("AGENT_COMMS_STORE", self.store.clone())]
    }

    /// `agent-comms ARGS…` on this host.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = self
            .env
            .command_of("ip", &["netns", "exec", self.net.name(), BIN]);
        cmd.args(args);
        for (k, v) in self.vars() {
            cmd.env(k, v);
        }
        cmd
    }

    fn run_within(&self, args: &[&str], limit: Duration) -> Run {
        run_within(
            self.command(args),
            &format!("agent-comms {}", args.join(" ")),
            limit,
        )
    }

    fn run(&self, args: &[&str]) -> Run {
        self.run_within(args, Duration::from_secs(30))
    }

    #[track_caller]
    fn run_ok(&self, args: &[&str]) -> Run {
        self.run(args).ok()
    }

    fn host_id(&self) -> String {
        std::fs::read_to_string(self.env.home.join("host-id"))
            .expect("the host id, made by the first command")
            .trim()
            .to_owned()
    }

    /// `interactive-serve` of runtime `id` (agent `agent`) on this host,
    /// with a fake `provider`; returns once it is ONLINE.
    fn serve(&self, agent: &str, id: &str, provider: &str, vars: &[(&str, &str)]) -> Served {
        let served = self.spawn_serve(agent, id, provider, vars);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let run = self.run(&["runtime", "show", id, "--json"]);
            if run.success() && run.json()["status"] == "ONLINE" {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id} not online after 30 s: {run:#?}\nits terminal:\n{}",
                served.term.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_until("the fake's start", || {
            fake_events(&served.log, "start").len() == 1
        });
        served
    }

    fn spawn_serve(&self, agent: &str, id: &str, provider: &str, vars: &[(&str, &str)]) -> Served {
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let n = STARTS.fetch_add(1, Ordering::Relaxed);
        let log = self.env.base().join(format!("{id}-{n}.log"));
        let log_s = log.display().to_string();
        let exe = fake(provider);
        let serve = serve_argv(agent, id, HEARTBEAT_MS, &[], &exe, &[]);
        let mut argv = vec!["ip", "netns", "exec", self.net.name()];
        argv.extend_from_slice(&serve);
        let store = self.store.clone();
        let mut all_vars = vec![
            ("FAKE_LOG", log_s.as_str()),
            ("AGENT_COMMS_STORE", store.as_str()),
        ];
        all_vars.extend_from_slice(vars);
        Served {
            term: self.env.term_with(&argv, &all_vars, true),
            log,
        }
    }

    /// `send` as `from`; the new message's id.
    fn send(&self, from: &str, to: &str, text: &str) -> String {
        let run = self.run_ok(&["--actor", from, "send", "--to", to, "--json", text]);
        run.json()["id"].as_str().unwrap().to_owned()
    }

    fn message(&self, id: &str) -> Value {
        self.run_ok(&["message", "show", id, "--json"]).json()
    }
}

/// A provider served on one host.
struct Served {
    term: Term,
    log: PathBuf,
}

impl Served {
    fn submits(&self) -> Vec<Value> {
        fake_events(&self.log, "submit")
    }

    /// The message ids each notification named, in the order received.
    fn named(&self) -> Vec<String> {
        self.submits()
            .iter()
            .flat_map(|s| named_ids(s["text"].as_str().unwrap_or_default()))
            .collect()
    }
}

fn database() -> Database {
    let server = postgres::server().unwrap_or_else(|e| panic!("{e}"));
    server.fresh_database().unwrap_or_else(|e| panic!("{e}"))
}

/// `senders` agents on `node` (named `PREFIX0`…) each send `each`
/// messages to `to`, at once; their ids, by sender, in sending order.
fn send_from(node: &Node, prefix: &str, senders: usize, each: usize, to: &str) -> Vec<Vec<String>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..senders)
            .map(|s| {
                scope.spawn(move || {
                    let from = format!("{prefix}{s}");
                    (0..each)
                        .map(|m| node.send(&from, to, &format!("message {m} from {from}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Every id in `sent` named exactly once in `named`, each sender's in the
/// order it sent them.
#[track_caller]
fn each_once_in_order(sent: &[Vec<String>], named: &[String]) {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for id in named {
        *count.entry(id).or_default() += 1;
    }
    for ids in sent {
        for id in ids {
            assert_eq!(
                count.get(id.as_str()),
                Some(&1),
                "{id} named {:?} times",
                count.get(id.as_str())
            );
        }
        let at: Vec<usize> = ids
            .iter()
            .map(|id| named.iter().position(|n| n == id).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "out of order: {ids:?}");
    }
}

/// Waits until every message in `ids` reads DELIVERED on `node`.
fn wait_delivered(node: &Node, ids: &[String], within: Duration) {
    let want = ids.len();
    wait_until_within(within, &format!("{want} messages delivered"), || {
        let run = node.run(&["message", "list", "--status", "DELIVERED", "--json"]);
        run.success()
            && run
                .json()
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| ids.iter().any(|id| m["id"] == id.as_str()))
                .count()
                == want
    });
}

// ---------------------------------------------------------------------------

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn agents_on_two_hosts_message_each_other_each_message_once_by_its_own_host() {
    let _shared = SERVER.read().unwrap();
    let db = database();
    let (one, two) = (Node::new(&db), Node::new(&db));
    let alice = one.serve("alice", "alice", "claude", &[("FAKE_BUSY_MS", "40")]);
    let bob = two.serve("bob", "bob", "claude", &[("FAKE_BUSY_MS", "40")]);
    let (to_bob, to_alice) = std::thread::scope(|scope| {
        let to_bob = scope.spawn(|| send_from(&one, "a", 8, 25, "bob"));
        let to_alice = scope.spawn(|| send_from(&two, "b", 8, 25, "alice"));
        (to_bob.join().unwrap(), to_alice.join().unwrap())
    });
    let all_to_bob: Vec<String> = to_bob.concat();
    let all_to_alice: Vec<String> = to_alice.concat();
    wait_delivered(&one, &all_to_bob, Duration::from_secs(120));
    wait_delivered(&two, &all_to_alice, Duration::from_secs(120));
    each_once_in_order(&to_bob, &bob.named());
    each_once_in_order(&to_alice, &alice.named());
    for served in [&alice, &bob] {
        assert!(served.submits().iter().all(|s| s["while_busy"] == false));
    }
    // The recipient's host delivered each, as the record says anywhere.
    let (h1, h2) = (one.host_id(), two.host_id());
    assert_ne!(h1, h2);
    for (id, host) in [(&all_to_bob[0], &h2), (&all_to_alice[0], &h1)] {
        let seen_from_one = one.message(id);
        let attempts = seen_from_one["delivery_attempts"].as_array().unwrap();
        let delivered: Vec<&Value> = attempts
            .iter()
            .filter(|a| a["outcome"] == "DELIVERED")
            .collect();
        assert_eq!(delivered.len(), 1, "{seen_from_one}");
        assert_eq!(delivered[0]["host"], host.as_str(), "{seen_from_one}");
    }
}

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn runtimes_of_one_agent_on_two_hosts_never_lease_a_message_twice() {
    let _shared = SERVER.read().unwrap();
    let db = database();
    let (one, two, three) = (Node::new(&db), Node::new(&db), Node::new(&db));
    // Agent bob has a runtime on each of two hosts: both race for its queue.
    let first = one.serve("bob", "bob-one", "claude", &[("FAKE_BUSY_MS", "30")]);
    let second = two.serve("bob", "bob-two", "claude", &[("FAKE_BUSY_MS", "30")]);
    let sent = send_from(&three, "s", 4, 25, "bob");
    let all = sent.concat();
    wait_delivered(&three, &all, Duration::from_secs(120));
    let named: Vec<String> = first.named().into_iter().chain(second.named()).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for id in &named {
        *count.entry(id).or_default() += 1;
    }
    for id in &all {
        assert_eq!(
            count.get(id.as_str()),
            Some(&1),
            "{id} typed {:?} times",
            count.get(id.as_str())
        );
    }
    // Leased once each: one attempt, the one that delivered it. (A second
    // lease of a message would be a second attempt, delivered or not.)
    let mut by_runtime: HashMap<String, usize> = HashMap::new();
    for id in &all {
        let shown = three.message(id);
        let attempts = shown["delivery_attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{shown}");
        assert_eq!(attempts[0]["outcome"], "DELIVERED", "{shown}");
        *by_runtime
            .entry(attempts[0]["runtime"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    eprintln!("messages delivered by each runtime: {by_runtime:?}");
}

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn a_serve_killed_mid_delivery_on_its_host_loses_nothing() {
    let _shared = SERVER.read().unwrap();
    let db = database();
    let (one, two) = (Node::new(&db), Node::new(&db));
    two.run_ok(&["--actor", "bob", "runtime", "configure", "bob"]);
    let ids: Vec<String> = (0..10)
        .map(|i| one.send("alice", "bob", &format!("are you there? {i}")))
        .collect();
    // The fake drops every Enter: the notification is typed and shown, and
    // its delivery waits for a submission that does not come.
    let mut served = two.serve("bob", "bob", "claude", &[("FAKE_DROP_ENTER", "1000")]);
    let supervisor = two
        .env
        .record("bob")
        .expect("bob's session record")
        .supervisor_pid;
    let statuses = || -> Vec<String> {
        ids.iter()
            .map(|id| one.message(id)["status"].as_str().unwrap().to_owned())
            .collect()
    };
    wait_until_within(
        Duration::from_secs(30),
        "the batch caught mid-delivery",
        || {
            two.env.signal(supervisor, libc::SIGSTOP);
            let caught = statuses() == ["DELIVERING"; 10];
            if !caught {
                two.env.signal(supervisor, libc::SIGCONT);
            }
            caught
        },
    );
    two.env.signal(supervisor, libc::SIGKILL);
    served.term.wait_exit();
    let restarted = two.spawn_serve("bob", "bob", "claude", &[]);
    restarted
        .term
        .wait_for("replacing the stale record of runtime bob");
    wait_until_within(
        Duration::from_secs(30),
        "delivered after the restart",
        || statuses() == ["DELIVERED"; 10],
    );
    each_once_in_order(std::slice::from_ref(&ids), &restarted.named());
    for id in &ids {
        let shown = one.message(id);
        let outcomes: Vec<&str> = shown["delivery_attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["outcome"].as_str().unwrap())
            .collect();
        let n = outcomes.len();
        assert!(n >= 2, "{id}: {outcomes:?}");
        assert_eq!(
            &outcomes[n - 2..],
            ["ABANDONED", "DELIVERED"],
            "{id}: {outcomes:?}"
        );
        assert!(
            outcomes[..n - 2].iter().all(|o| *o == "FAILED"),
            "{id}: {outcomes:?}"
        );
        let abandoned = &shown["delivery_attempts"][n - 2]["reason"];
        assert!(abandoned.as_str().unwrap().contains("restarted"), "{shown}");
    }
}

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn typing_into_another_hosts_runtime_is_refused_with_the_way_that_works() {
    let _shared = SERVER.read().unwrap();
    let db = database();
    let (one, two) = (Node::new(&db), Node::new(&db));
    let bob = two.serve("bob", "bob", "claude", &[]);
    let run = one
        .run(&["runtime", "deliver", "bob", "run the tests"])
        .fails_with_one_line();
    let line = run.stderr.trim();
    assert!(
        line.contains(&format!("runs on another host ({})", two.host_id())),
        "{line}"
    );
    assert!(line.contains("agent-comms send --to bob TEXT"), "{line}");
    assert!(
        bob.submits().is_empty(),
        "nothing was typed: {:?}",
        bob.submits()
    );
    // The way it names works: the message is delivered by bob's host.
    let id = one.send("alice", "bob", "run the tests");
    wait_delivered(&one, std::slice::from_ref(&id), Duration::from_secs(30));
    assert_eq!(bob.named(), [id]);
}

/// Waits until traffic is under way: the fake logging to `log` has
/// received a notification.
fn wait_flowing(log: &std::path::Path) {
    wait_until("a first delivery", || {
        !fake_events(log, "submit").is_empty()
    });
}

/// Sends `n` messages from alice (on `from`) to bob, one every `pace`,
/// while `during` runs; their ids.
fn traffic(from: &Node, n: usize, pace: Duration, during: impl FnOnce()) -> Vec<String> {
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            (0..n)
                .map(|i| {
                    std::thread::sleep(pace);
                    from.send("alice", "bob", &format!("during traffic {i}"))
                })
                .collect::<Vec<_>>()
        });
        during();
        sender.join().unwrap()
    })
}

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn a_host_cut_off_from_the_database_fails_fast_keeps_its_session_and_loses_nothing() {
    let _shared = SERVER.read().unwrap();
    let db = database();
    let (one, two) = (Node::new(&db), Node::new(&db));
    let mut bob = two.serve("bob", "bob", "claude", &[("FAKE_BUSY_MS", "40")]);
    let ids = traffic(&one, 40, Duration::from_millis(250), || {
        wait_flowing(&bob.log);
        two.net.cut();
        let cut_at = Instant::now();
        // Host 2's commands fail in one line, bounded, never hang.
        let started = Instant::now();
        let run = two.run_within(&["runtime", "list"], Duration::from_secs(20));
        let took = started.elapsed();
        assert_eq!(run.code(), 1, "{run:#?}");
        let line = run.stderr.trim();
        assert!(!line.contains('\n'), "{line}");
        assert!(line.contains("is unreachable"), "{line}");
        assert!(!line.contains(db.password()), "{line}");
        eprintln!("a command on the cut-off host failed after {took:?}: {line}");
        // Its session keeps running, and says so without the database.
        assert!(!bob.term.exited(), "the serve ended while cut off");
        let ls = two.run_ok(&["session", "ls", "--json"]);
        assert!(
            ls.json()
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["name"] == "bob"),
            "{ls:#?}"
        );
        // Everywhere else, its runtime reads OFFLINE once heartbeats stop.
        wait_until_within(Duration::from_secs(10), "bob offline from host 1", || {
            one.run_ok(&["runtime", "show", "bob", "--json"]).json()["status"] == "OFFLINE"
        });
        let rest = Duration::from_secs(30).saturating_sub(cut_at.elapsed());
        std::thread::sleep(rest);
        two.net.restore();
    });
    wait_delivered(&one, &ids, Duration::from_secs(90));
    each_once_in_order(std::slice::from_ref(&ids), &bob.named());
    assert!(bob.submits().iter().all(|s| s["while_busy"] == false));
    // Back: its heartbeats make it ONLINE everywhere again, and another
    // host may not claim it while it is.
    wait_until("bob online again from host 1", || {
        one.run_ok(&["runtime", "show", "bob", "--json"]).json()["status"] == "ONLINE"
    });
    let claim = one
        .run(&["--actor", "bob", "runtime", "configure", "bob"])
        .fails_with_one_line();
    assert!(claim.stderr.contains("is ONLINE"), "{claim:#?}");
    assert!(
        claim
            .stderr
            .contains(&format!("(on host {})", two.host_id())),
        "{claim:#?}"
    );
}

#[test]
#[ignore = "needs root to make network namespaces: cargo test --test hosts -- --include-ignored, as root"]
fn a_database_restarted_during_traffic_loses_nothing() {
    let _alone = SERVER.write().unwrap();
    let db = database();
    let (one, two) = (Node::new(&db), Node::new(&db));
    let bob = two.serve("bob", "bob", "claude", &[("FAKE_BUSY_MS", "40")]);
    let mut refused = 0;
    let ids: Vec<String> = std::thread::scope(|scope| {
        let log = &bob.log;
        let restart = scope.spawn(move || {
            wait_flowing(log);
            postgres::server()
                .unwrap()
                .restart()
                .unwrap_or_else(|e| panic!("{e}"));
        });
        let mut ids = Vec::new();
        for i in 0..30 {
            std::thread::sleep(Duration::from_millis(150));
            let run = one.run(&[
                "--actor",
                "alice",
                "send",
                "--to",
                "bob",
                "--json",
                &format!("restart {i}"),
            ]);
            if run.success() {
                ids.push(run.json()["id"].as_str().unwrap().to_owned());
            } else {
                // Refused while the server was down: said in one line, and
                // nothing stored (the sender knows to send it again).
                assert!(run.stderr.trim().contains("database"), "{run:#?}");
                refused += 1;
            }
        }
        restart.join().unwrap();
        ids
    });
    eprintln!("{refused} sends refused while the server restarted");
    wait_delivered(&one, &ids, Duration::from_secs(60));
    each_once_in_order(std::slice::from_ref(&ids), &bob.named());
    let all = one.run_ok(&["message", "list", "--json"]).json();
    assert_eq!(
        all.as_array().unwrap().len(),
        ids.len(),
        "nothing stored twice or lost"
    );
}
