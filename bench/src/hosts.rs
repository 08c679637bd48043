//! The hosts section (issue 18): agents on several hosts sharing one control
//! plane in a PostgreSQL database, next to today's single host on a SQLite
//! file, all in the same run: the store's operations, a message from `send`
//! to DELIVERED, and a long queue drained on another host.
//!
//! Why it is measured this way:
//!
//! - A host, to agent-comms, is a home (which holds the host's id) and a
//!   runtime directory. Two pairs of them are two hosts to a shared store:
//!   a `send` on one finds the recipient's runtime recorded on the other,
//!   stores the message and, with `--wait`, waits for it on the store
//!   (LISTEN/NOTIFY), which is also what wakes the runtime there; on its
//!   own host, `send` nudges the runtime over its socket instead. Hosts of
//!   their own network (namespaces, as the tests use) need root, which a
//!   benchmark should not: these share this machine's loopback, and the
//!   rows say so. A real network adds its round trips to every store call.
//! - The database is the private server of `agent-comms-testing`, made for
//!   tests: it runs with `fsync` (and `synchronous_commit`) off, so its
//!   commits wait for no disk, where the SQLite file's each do
//!   (`synchronous=FULL`, on disk). The rows say that too: the PostgreSQL
//!   store rows show its protocol's cost, not a durable server's.
//! - The three ways a message goes are measured in turn, one message each
//!   per round, so a change in the machine's load falls on all of them;
//!   the two runtimes (SQLite, PostgreSQL) are served at once, on two hosts,
//!   and the two PostgreSQL ways send to the same runtime: they differ only
//!   in the sender's host. Each series is checked as the delivery section's
//!   are: every message DELIVERED, every notification received once, in
//!   order.
//! - A queue drained on another host is the same drain as on one host once
//!   it starts (the messages wait in the store, whoever sent them), so its
//!   peer is today's: one host, SQLite.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agent_comms_core::control::messages::{notification, Named};
use agent_comms_core::store::Store;
use agent_comms_testing::postgres::{self, Server};
use anyhow::{ensure, Context};

use crate::bench::{Bench, Host};
use crate::delivery::{delivered, drained, queue_rows, store_ops, DRAIN_TURN_MS};
use crate::progress;
use crate::report::{both, judge, Row, Section};
use crate::runtimes::{FakeLog, Project, Served, CLAUDE, RECEIVER, SENDER};
use crate::stats::{latencies, Summary};

const TITLE: &str = "Hosts: a control plane shared in PostgreSQL (issue 18)";
/// Issue 18's goal: a message to another host's runtime is DELIVERED
/// (median) within this much of one to a runtime on the sender's host.
const CROSS_HOST_GOAL_MS: f64 = 20.0;

pub fn section(bench: &Bench) -> Section {
    let repo = bench.repo();
    let server = postgres::server();
    let pg = server
        .as_ref()
        .map_or_else(|_| "PostgreSQL".to_owned(), |s| described(s));
    let mut rows = Vec::new();
    progress("store operations on SQLite and on PostgreSQL");
    rows.extend(store(bench, &server, &pg));
    let there = bench.other_host("2");
    progress("messages on one host and across hosts");
    rows.extend(sends(bench, &repo, &server, &there, &pg));
    progress(&format!(
        "{} messages queued for another host, drained there",
        bench.plan.queued
    ));
    rows.extend(drains(bench, &repo, &server, &there, &pg));
    Section {
        title: TITLE.to_owned(),
        intro: "Agents on two hosts sharing one control plane in a PostgreSQL database, next to \
                today's single host on a SQLite file, in the same run: the store's operations, \
                a message from `send` to DELIVERED on the same host and across hosts, and a \
                queue sent to an offline runtime on another host, drained once it is served."
            .to_owned(),
        rows,
        method: method(bench, &repo, &pg),
    }
}

/// "PostgreSQL VERSION, fsync off": the server measured, for the rows.
fn described(server: &Server) -> String {
    let version = Command::new(server.bin("postgres"))
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            // "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)"
            text.split_whitespace().nth(2).map(str::to_owned)
        });
    match version {
        Some(version) => format!("PostgreSQL {version}, fsync off"),
        None => "PostgreSQL, fsync off".to_owned(),
    }
}

/// A fresh database of its own on the server: its URL, password included,
/// over TCP to this machine's loopback.
fn database(server: &Result<&Server, String>) -> anyhow::Result<String> {
    let server = server.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
    let db = server.fresh_database().map_err(anyhow::Error::msg)?;
    Ok(db.url("127.0.0.1"))
}

/// What a failure of the set-up leaves for every row that needed it.
fn failed<T>(e: &anyhow::Error) -> Result<T, String> {
    Err(format!("{e:#}"))
}

// ---------------------------------------------------------------------------
// The store

/// The delivery section's in-process store operations, on each store.
fn store(bench: &Bench, server: &Result<&Server, String>, pg: &str) -> Vec<Row> {
    let n = bench.plan.store_ops;
    let on = |project: anyhow::Result<Project>| {
        let project = project?;
        project.configure(bench)?;
        store_ops(&*project.store()?, n)
    };
    let sqlite = on(Project::new(bench, "hosts-store-sqlite"));
    let shared = database(server).and_then(|url| {
        on(Project::on(
            bench,
            "hosts-store-pg",
            bench.host(),
            Some(&url),
        ))
    });
    let systems = [
        (
            "`SqliteStore` in process (WAL, synchronous=FULL, on disk)".to_owned(),
            sqlite,
        ),
        (
            format!("`PgStore` in process ({pg}; TCP to 127.0.0.1)"),
            shared,
        ),
    ];
    let kinds = [
        format!("`Store::insert_invocation`, store growing from 0 to {n}"),
        format!("`Store::lease_next` + `finish_attempt` (delivered), {n} queued"),
    ];
    let mut rows = Vec::new();
    for (kind, what) in kinds.iter().enumerate() {
        for (system, measured) in &systems {
            let result = match measured {
                Ok(samples) => Ok(latencies(if kind == 0 { &samples.0 } else { &samples.1 })),
                Err(e) => failed(e),
            };
            rows.push(Row::new(what, system, result));
        }
    }
    rows
}

// ---------------------------------------------------------------------------
// `send` → DELIVERED, three ways

/// `send --wait` into idle served runtimes, the three ways in turn.
fn sends(
    bench: &Bench,
    repo: &Path,
    server: &Result<&Server, String>,
    there: &anyhow::Result<Host>,
    pg: &str,
) -> Vec<Row> {
    let what = "message to an idle served runtime, fake claude (`FAKE_BUSY_MS=0`): \
                `send --wait` → DELIVERED, the CLI call";
    let measured = send_samples(bench, repo, server, there);
    let summary = |way: usize| match &measured {
        Ok(samples) => Ok(latencies(&samples[way])),
        Err(e) => failed(e),
    };
    let (sqlite, same, across) = (summary(0), summary(1), summary(2));
    let target = cross_host_goal(&across, &sqlite, &same);
    let mut across = Row::new(
        what,
        &format!(
            "across hosts, PostgreSQL ({pg}): sent on host 1; the runtime, on host 2, woken by \
             the store (LISTEN/NOTIFY), which tells the sender too; the hosts share this \
             machine's loopback (not network namespaces: those need root)"
        ),
        across,
    );
    across.target = target;
    vec![
        Row::new(
            what,
            "same host, SQLite (today's path): the runtime nudged over its socket",
            sqlite,
        ),
        Row::new(
            what,
            &format!("same host, PostgreSQL ({pg}; TCP to 127.0.0.1): the runtime nudged over its socket"),
            same,
        ),
        across,
    ]
}

/// Issue 18's goal, judged against both same-host medians.
fn cross_host_goal(
    across: &Result<Summary, String>,
    sqlite: &Result<Summary, String>,
    same: &Result<Summary, String>,
) -> String {
    let goal = format!("median within {CROSS_HOST_GOAL_MS} ms of the same host's");
    let measured = both(across, sqlite).zip(both(across, same).map(|(_, s)| s));
    let Some(((across, sqlite), same)) = measured else {
        return judge(&goal, None);
    };
    let over = |base: &Summary| across.median.value() - base.median.value();
    let (over_sqlite, over_same) = (over(sqlite), over(same));
    judge(
        &format!(
            "{goal} ({over_sqlite:+.1} ms over SQLite's, {over_same:+.1} ms over PostgreSQL's)"
        ),
        Some(over_sqlite <= CROSS_HOST_GOAL_MS && over_same <= CROSS_HOST_GOAL_MS),
    )
}

/// The samples of the three ways, in [`sends`]' order: SQLite on one host,
/// PostgreSQL on one host, PostgreSQL across hosts.
fn send_samples(
    bench: &Bench,
    repo: &Path,
    server: &Result<&Server, String>,
    there: &anyhow::Result<Host>,
) -> anyhow::Result<[Vec<Duration>; 3]> {
    let url = database(server)?;
    let there = there.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let sqlite = Project::new(bench, "hosts-sqlite")?;
    // The recipient's checkout on host 2, and a sender's on host 1.
    let shared = Project::on(bench, "hosts-pg-2", there.clone(), Some(&url))?;
    let sender = Project::on(bench, "hosts-pg-1", bench.host(), Some(&url))?;
    let logs = [
        FakeLog::new(bench, "hosts-sqlite-claude")?,
        FakeLog::new(bench, "hosts-pg-claude")?,
    ];
    let mut served = [
        Served::start(bench, &sqlite, repo, &CLAUDE, &logs[0], 0)?,
        Served::start(bench, &shared, repo, &CLAUDE, &logs[1], 0)?,
    ];
    served[0].wait_online(&sqlite)?;
    served[1].wait_online(&shared)?;
    let stores = [sqlite.store()?, shared.store()?];
    across_hosts(&*stores[1], &sender, &shared)?;
    // Each way: who sends, and to which of the two runtimes.
    let ways = [(&sqlite, 0), (&shared, 1), (&sender, 1)];
    let mut expected: [Vec<String>; 2] = Default::default();
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for i in 0..=bench.plan.host_sends {
        for (way, (from, to)) in ways.iter().enumerate() {
            let text = format!("bench message {i}, way {way}");
            let (took, id) = from.send(bench, &text, true)?;
            let inv = delivered(&*stores[*to], &id)?;
            expected[*to].push(notification(&[Named::new(&inv)?]));
            // The first round warms up.
            if i > 0 {
                samples[way].push(took);
            }
        }
    }
    for (log, expected) in logs.iter().zip(&expected) {
        log.received_in_order(expected)?;
    }
    Ok(samples)
}

/// Checks that messages from `sender` cross hosts: the served runtime is
/// recorded on `recipient`'s host, which is not the sender's.
fn across_hosts(store: &dyn Store, sender: &Project, recipient: &Project) -> anyhow::Result<()> {
    let (from, to) = (sender.host().id()?, recipient.host().id()?);
    let runtime = store
        .runtime(RECEIVER)?
        .context("the served runtime is not in the store")?;
    ensure!(
        from != to && runtime.host.as_deref() == Some(to.as_str()),
        "not across hosts: the sender is on host {from}, the runtime on {:?}",
        runtime.host
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// A queue drained on another host

/// The delivery section's queue, on one host (SQLite) and across hosts.
fn drains(
    bench: &Bench,
    repo: &Path,
    server: &Result<&Server, String>,
    there: &anyhow::Result<Host>,
    pg: &str,
) -> Vec<Row> {
    let n = bench.plan.queued;
    let what = format!(
        "{n} messages queued while offline, drained once served (fake claude, \
         `FAKE_BUSY_MS={DRAIN_TURN_MS}`)"
    );
    let sqlite =
        Project::new(bench, "hosts-drain-sqlite").and_then(|p| drained(bench, repo, &p, &p));
    let across = (|| {
        let url = database(server)?;
        let there = there.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        let recipient = Project::on(bench, "hosts-drain-2", there.clone(), Some(&url))?;
        let sender = Project::on(bench, "hosts-drain-1", bench.host(), Some(&url))?;
        drained(bench, repo, &recipient, &sender)
    })();
    let mut rows = queue_rows(n, &what, "same host, SQLite (today's path)", sqlite, None);
    rows.extend(queue_rows(
        n,
        &what,
        &format!("across hosts, PostgreSQL ({pg}): sent on host 1, served on host 2"),
        across,
        None,
    ));
    rows
}

// ---------------------------------------------------------------------------

/// How each row is measured, printed under the table.
fn method(bench: &Bench, repo: &Path, pg: &str) -> Vec<String> {
    let plan = &bench.plan;
    let (debounce, enter_delay) = CLAUDE.waits(repo);
    vec![
        format!(
            "**hosts**: a host is an `AGENT_COMMS_HOME` (its `host-id` file) and an \
             `AGENT_COMMS_RUNTIME_DIR` of its own, with a project checkout of its own; host 1 \
             is the benchmark's, host 2 a second pair in its scratch directory. Both run on this \
             machine and reach the database over its loopback (TCP to 127.0.0.1), not from \
             network namespaces of their own as the tests' hosts do (`tests/hosts.rs`): those \
             need root. Checked before the sends: the runtime is recorded on host 2's id, and \
             the sender's is host 1's."
        ),
        format!(
            "**database**: {pg}: the private server of `agent-comms-testing` (the \
             distribution's binaries; `fsync`, `synchronous_commit` and `full_page_writes` \
             off: made for tests, its commits wait for no disk), a fresh database and role per \
             measurement, reached by password (SCRAM) as `AGENT_COMMS_STORE=postgres://…`. \
             The SQLite stores are files in projects under `target/`, on disk, each \
             transaction synced: the PostgreSQL rows show the protocol's cost, not a durable \
             server's."
        ),
        format!(
            "**store**: as in the delivery section, in process: {} `insert_invocation`s, then \
             as many `lease_next` + `finish_attempt` with evidence, each timed alone; once on a \
             SQLite file, once through `PgStore::open` on a database, each after `runtime \
             configure`.",
            plan.store_ops
        ),
        format!(
            "**send → DELIVERED**: `--actor {RECEIVER} runtime interactive-serve --id \
             {RECEIVER} -- claude` (`FAKE_BUSY_MS=0`: always idle) served twice at once, in \
             terminals the benchmark opens: on host 1 in a SQLite project, on host 2 in a \
             project on the database. Then {} rounds, after one untimed, of `--actor {SENDER} \
             send --to {RECEIVER} --wait 60 --json TEXT`, one per way in turn: on host 1 to the \
             SQLite runtime; on host 2 to the database's (nudged over its socket, as on one \
             host); on host 1, in a checkout of its own, to the same runtime on host 2 (the \
             send stores the message and waits on the store's LISTEN/NOTIFY; the runtime's \
             inbox is woken by it). Timed from spawn to exit: the time is the CLI's `send \
             --wait`, as in the delivery section's message row, not the store's `delivered` \
             time; `send --wait` returns once the store says DELIVERED, checked after each; \
             each fake's log holds the notifications naming them, once, in order. The goal: \
             the cross-host median within {CROSS_HOST_GOAL_MS} ms of both same-host medians.",
            plan.host_sends
        ),
        format!(
            "**queue**: as in the delivery section, {} messages sent while the runtime is \
             registered (`runtime configure`) but not served, then `interactive-serve` started \
             with `FAKE_BUSY_MS={DRAIN_TURN_MS}` (the `claude-code` profile: debounce \
             {debounce}, Enter delay {enter_delay}); once on one host (SQLite), once sent on \
             host 1 into the database and served on host 2. Total: from spawning the serve to \
             the last `delivered` time in the store; turns: notifications the fake received; \
             none lost: `invocation list --status DELIVERED --json` counted, and each message \
             named once, in queue order, by the fake's notifications, none typed while busy.",
            plan.queued
        ),
    ]
}
