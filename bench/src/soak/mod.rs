//! The soak (issue 12): messages sent by 8 concurrent senders into one
//! served runtime while serves, providers and senders are SIGKILLed at
//! random and terminals resized, attached and detached; at the end, the
//! invariants are checked and printed, and a broken one fails the command.
//!
//! Why it is built this way:
//!
//! - It is a benchmark command, not a CI test: it runs for minutes
//!   (`--soak-seconds`, 600 by default, 60 with `--quick`), and what it finds
//!   is a finding to chase, with the message ids and times it printed.
//! - Everything is observed through what a user has: the CLI
//!   (`message list --json`, `message show IDS… --json`) and the fake
//!   provider's log of what it received. Not the store's internals: the
//!   checks stay right when a notification names several messages.
//! - A sender killed mid-flight may or may not have stored its message;
//!   only the ids a `send --json` printed are counted as sent.
//! - The serve's fds and memory are compared on one process: a restarted
//!   serve is a new one. So serves and providers are killed only in the
//!   first two thirds; the last serve lives through the last third (sends,
//!   sender kills, resizes, attach and detach go on) and is measured once
//!   it is warm against once it is idle after the drain.

mod chaos;
mod invariants;
mod random;
mod senders;

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::bench::Bench;
use crate::progress;
use crate::report::{judge, Row, Section};
use crate::runtimes::{FakeLog, Project};
use crate::stats::{one, Quantity};

use chaos::{Chaos, Tally};
use invariants::Verdict;
use random::Random;
use senders::KILL_WITHIN_MS;

const TITLE: &str = "Soak: delivery under chaos (issue 12)";
/// Concurrent senders.
const SENDERS: usize = 8;
/// The fake's busy time per turn.
const TURN_MS: u64 = 100;
/// How long the drain after the chaos may go without a message changing
/// state before it counts as stuck.
const DRAIN_STALL: Duration = Duration::from_secs(120);

/// The soak's section, and the invariants it found broken (empty when all
/// held).
pub fn section(bench: &Bench) -> (Section, Vec<String>) {
    let seconds = bench.plan.soak.as_secs();
    progress(&format!(
        "the soak: {SENDERS} senders and chaos for {seconds} s, then the drain"
    ));
    let seed = Random::seed();
    let (rows, broken) = match run(bench, seed) {
        Ok(verdict) => (verdict.rows, verdict.broken),
        Err(e) => {
            let why = format!("{e:#}");
            (
                vec![Row::new("soak", "agent-comms", Err(why.clone()))],
                vec![format!("the soak could not run: {why}")],
            )
        }
    };
    for line in &broken {
        eprintln!("soak: BROKEN: {line}");
    }
    let section = Section {
        title: TITLE.to_owned(),
        intro: format!(
            "{SENDERS} concurrent senders into one interactive runtime (the fake claude) for \
             {seconds} s while serves, providers and senders are SIGKILLed at random, the \
             serve's terminal is resized, and clients attach, resize and detach (or vanish); \
             then the runtime drains and the invariants are checked. Seed {seed}."
        ),
        rows,
        method: method(bench),
    };
    (section, broken)
}

fn run(bench: &Bench, seed: u64) -> anyhow::Result<Verdict> {
    let repo = bench.repo();
    let project = Project::new(bench, "soak")?;
    project.configure(bench)?;
    let log = FakeLog::new(bench, "soak-claude")?;
    let mut chaos = Chaos::start(bench, &project, &repo, &log, TURN_MS, Random::new(seed))?;
    let start = Instant::now();
    let soak = bench.plan.soak;
    let kills_end = start + soak * 2 / 3;
    let end = start + soak;
    let stop = AtomicBool::new(false);
    let sent = std::thread::scope(|scope| {
        let senders = senders::start(scope, &stop, bench, &project, SENDERS, seed);
        let mut stepped = Ok(());
        while stepped.is_ok() && Instant::now() < end {
            stepped = chaos.step(Instant::now() < kills_end);
        }
        progress("the soak: chaos over; stopping the senders");
        let sent = senders.stop();
        stepped.map(|()| sent)
    })?;
    chaos.settle()?;
    progress("the soak: draining");
    let drain_start = Instant::now();
    let drained = invariants::drain(bench, &project, DRAIN_STALL, &mut chaos);
    let drain = drain_start.elapsed();
    let idle = chaos
        .sample()
        .context("the last serve, idle after the drain")?;
    let tally: Tally = chaos.finish();
    invariants::check(invariants::Inputs {
        bench,
        project: &project,
        log: &log,
        sent,
        tally,
        drained,
        drain,
        idle,
    })
}

fn method(bench: &Bench) -> Vec<String> {
    let seconds = bench.plan.soak.as_secs();
    vec![
        format!(
            "**runtime**: `--actor bob runtime interactive-serve --id bob -- claude` (the fake of \
             `tests/fakes`, `FAKE_BUSY_MS={TURN_MS}`) in a terminal the benchmark opens, in a \
             project of its own under `target/`, with private `AGENT_COMMS_RUNTIME_DIR` and \
             `AGENT_COMMS_HOME`. A serve that ends (killed, or its provider killed) is started \
             again after a random pause of up to 2 s, as a person would; the new one replaces \
             the stale record."
        ),
        format!(
            "**senders**: {SENDERS} threads, each running `--actor sender-N send --to bob --json \
             TEXT` (one in four with `--wait 30`) after a random pause of 2–16 s; one send in \
             eight is SIGKILLed 0–{KILL_WITHIN_MS} ms after it started. Only the ids a send printed count."
        ),
        format!(
            "**chaos**: every 0.5–3 s one of: SIGKILL the serve, SIGKILL its provider (both only \
             in the first two thirds of the {seconds} s), resize the serve's terminal, attach a \
             client (`session attach bob` in a PTY of a random size, at most 3), resize one, \
             detach one with its key, or SIGKILL one. Random sizes are 10–60 rows × 40–200 \
             columns."
        ),
        "**drain**: after the chaos, with the serve running and no client attached, \
         `message list --json` is polled until no message is PENDING, DELIVERING or UNAVAILABLE \
         (stuck: no change for 120 s)."
            .to_owned(),
        "**no message lost**: every printed id is DELIVERED (`message show IDS… --json`), and \
         a submission the fake logged names it (the provider is sent the notification naming \
         the message, not its body)."
            .to_owned(),
        "**none delivered twice concurrently**: per message, its `delivery_attempts` do not \
         overlap in time and at most one is DELIVERED; each submission the fake logged that \
         names it falls inside one of its attempts, and no attempt has two. A message \
         announced again after a kill (its earlier attempt ABANDONED) is counted, not a failure."
            .to_owned(),
        "**no fd or memory growth**: the last serve's open fds (`/proc/PID/fd`) and RSS once it \
         is warm (online and its first submission, no client attached yet) against after the \
         drain, idle with no client attached. Serves restarted earlier are other processes; \
         the last one is started at the latest two thirds in, and lives through the rest."
            .to_owned(),
        "Every process the soak started is ended by pid; a provider that outlived its killed \
         serve is counted and ended."
            .to_owned(),
    ]
}

/// A count row.
fn count(what: &str, system: &str, n: usize) -> Row {
    Row::new(what, system, Ok(one(Quantity::Count(n as f64))))
}

/// A row whose target is an invariant: met or missed.
fn invariant(what: &str, system: &str, n: usize, target: &str, held: bool) -> Row {
    let mut row = count(what, system, n);
    row.target = judge(target, Some(held));
    row
}
