//! The delivery section (issue 5): getting text into a provider's prompt
//! with proof, next to the tmux script people write for it; messages to a
//! served runtime; a long queue drained without loss; and the store.
//!
//! Why it is measured this way:
//!
//! - Into the fakes of `tests/fakes` (see [`crate::runtimes`]), each series
//!   checked against what the fake received: a series with a text missing,
//!   doubled, out of order or typed while busy is a failed row, not a fast
//!   one.
//! - Delivery waits until the program is idle, and the adapter reports idle
//!   only once its debounce has passed since the last busy screen; Enter is
//!   pressed the adapter's Enter delay after the echo. Those waits are the
//!   design, and they dominate. So two cases are timed apart: into a
//!   program idle at the call (`FAKE_BUSY_MS=0`: the fake never draws a
//!   busy screen, so there is nothing to wait out and the CLI call is the
//!   whole time from idle to submitted), and right after a turn, timed from
//!   the moment the fake went idle (its logged submission plus its busy
//!   time: its turn ends then and it redraws at once) to the submission the
//!   evidence reports, which includes the debounce.
//! - The peer is the tmux script people write: type the text, sleep, send
//!   Enter, poll `capture-pane` until the text is in the history. It checks
//!   for no idle and verifies nothing, which its row says; a text it lost
//!   is counted, with what the fake received.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_comms_core::control::messages::{named_ids, notification, Named};
use agent_comms_core::control::DEFAULT_BATCH;
use agent_comms_core::delivery::Evidence;
use agent_comms_core::store::{
    AttemptResult, Invocation, InvocationFilter, InvocationStatus, NewInvocation, Store,
};
use agent_comms_core::time::unix_millis;
use anyhow::{ensure, Context};

use crate::bench::Bench;
use crate::progress;
use crate::report::{judge, Row, Section};
use crate::runtimes::{
    timed, Fake, FakeLog, Project, Served, CLAUDE, CODEX, CODEX_PASTE, RECEIVER, SENDER,
};
use crate::stats::{self, latencies, push, Quantity};
use crate::supervised::Session;
use crate::tmux::TmuxServer;

const TITLE: &str = "Interactive runtimes: delivery (issue 5)";
/// The fake's busy time per turn in the series timed right after a turn
/// (the fakes' default).
const TURN_MS: u64 = 300;
/// The fake's busy time per message while a queue drains.
pub const DRAIN_TURN_MS: u64 = 20;
/// How long the tmux script polls for the text in the history before the
/// message counts as lost.
const SCRIPT_VERIFY: Duration = Duration::from_secs(2);
/// A script that lost this many messages in a row is not asked again.
const SCRIPT_GIVE_UP: usize = 5;
/// How long a draining queue may go without a delivery before it counts
/// as stuck.
const DRAIN_STALL: Duration = Duration::from_secs(60);

pub fn section(bench: &Bench) -> Section {
    let repo = bench.repo();
    let mut rows = Vec::new();
    for fake in [&CLAUDE, &CODEX_PASTE, &CODEX] {
        progress(&format!(
            "delivery into the fake {} ({})",
            fake.program, fake.style
        ));
        rows.extend(into_idle(bench, &repo, fake));
        rows.extend(after_a_turn(bench, &repo, fake));
    }
    progress("messages to a served runtime");
    rows.extend(messages(bench, &repo));
    progress(&format!(
        "{} queued messages draining (the slowest part)",
        bench.plan.queued
    ));
    rows.extend(drain(bench, &repo));
    progress("store operations");
    rows.extend(store(bench));
    Section {
        title: TITLE.to_owned(),
        intro: "Text typed into a provider's prompt with the delivery discipline (wait for idle, \
                type, verify the echo, Enter, verify the submission), into the fake providers of \
                `tests/fakes`, next to the tmux script that is the usual alternative; then \
                messages (`send`), a long queue, and the store under them."
            .to_owned(),
        rows,
        method: method(bench, &repo),
    }
}

// ---------------------------------------------------------------------------
// Delivery into a session, and the tmux script

/// Deliveries into an idle fake, interleaved with the tmux scripts' into
/// fakes of their own: agent-comms' CLI call, its own part after the echo,
/// and each script.
fn into_idle(bench: &Bench, repo: &Path, fake: &Fake) -> Vec<Row> {
    let what = format!(
        "deliver → submitted, idle fake {} ({})",
        fake.program, fake.input
    );
    let texts = texts(fake, bench.plan.deliveries);
    let target = Target::start(bench, repo, fake, "idle", 0).map_err(|e| format!("{e:#}"));
    let server = TmuxServer::private(bench, &format!("deliver-{}", fake.key()))
        .map_err(|e| format!("{e:#}"));
    let mut scripts: Vec<Result<Script, String>> = fake
        .script_pauses
        .iter()
        .map(|pause| {
            let server = server.as_ref().map_err(Clone::clone)?;
            Script::start(server, bench, repo, fake, *pause).map_err(|e| format!("{e:#}"))
        })
        .collect();
    let mut ours = target.as_ref().map(|_| Vec::new()).map_err(Clone::clone);
    for (i, text) in texts.iter().enumerate() {
        if let (Ok(target), Ok(_)) = (&target, &ours) {
            push(&mut ours, target.deliver(bench, text));
        }
        for script in scripts.iter_mut().flatten() {
            script.send(text, i > 0);
        }
    }
    let ours = ours.and_then(|mut delivered| {
        let target = target.as_ref().map_err(Clone::clone)?;
        target
            .log
            .received_in_order(&texts)
            .map_err(|e| format!("{e:#}"))?;
        delivered.remove(0);
        Ok(delivered)
    });
    let (_, enter_delay) = fake.waits(repo);
    let summary = |of: fn(&Delivered) -> Duration| {
        ours.as_ref()
            .map(|d| latencies(&d.iter().map(of).collect::<Vec<_>>()))
            .map_err(Clone::clone)
    };
    let mut call = Row::new(
        &what,
        "agent-comms `session deliver`: CLI call (idle at the call: `FAKE_BUSY_MS=0`)",
        summary(|d| d.took),
    );
    // Issue 16's goal is for Claude Code's paste.
    if fake.program == "claude" {
        call.target = median_at_most(&call, IDLE_GOAL_MS);
    }
    let mut rows = vec![
        call,
        Row::new(
            &what,
            &format!(
                "agent-comms, its own part after the echo: evidence `submitted − echoed` \
                 (the {enter_delay} Enter delay is in it)"
            ),
            summary(Delivered::after_echo),
        ),
    ];
    for script in &scripts {
        rows.push(match script {
            Ok(script) => script.row(&what, &texts),
            Err(e) => Row::new(&what, "tmux script", Err(e.clone())),
        });
    }
    rows
}

/// Deliveries each called as soon as the previous one returned, so each
/// waits out the turn the previous one started: the CLI call, and the time
/// from the fake going idle to the submission.
fn after_a_turn(bench: &Bench, repo: &Path, fake: &Fake) -> Vec<Row> {
    let what = format!(
        "deliver right after a {TURN_MS} ms turn, fake {} ({})",
        fake.program, fake.input
    );
    let texts = texts(fake, bench.plan.busy_deliveries);
    let measured = (|| {
        let target = Target::start(bench, repo, fake, "after-turn", TURN_MS)?;
        let delivered = texts
            .iter()
            .map(|text| target.deliver(bench, text))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let submits = target.log.received_in_order(&texts)?;
        // Delivery i waited for the turn of submission i - 1 to end.
        let from_idle = delivered[1..]
            .iter()
            .zip(&submits)
            .map(|(d, before)| {
                Duration::from_millis(d.evidence.submitted.saturating_sub(before.t + TURN_MS))
            })
            .collect::<Vec<_>>();
        let calls = delivered[1..].iter().map(|d| d.took).collect::<Vec<_>>();
        anyhow::Ok((calls, from_idle))
    })()
    .map_err(|e| format!("{e:#}"));
    let (_, enter_delay) = fake.waits(repo);
    let mut from_idle = Row::new(
        &what,
        &format!(
            "agent-comms, from the fake going idle to submitted (the turn's end read from {}; \
             the {enter_delay} Enter delay is in it)",
            fake.turn_end
        ),
        measured
            .as_ref()
            .map(|(_, from_idle)| latencies(from_idle))
            .map_err(Clone::clone),
    );
    // The goal is for the pasted deliveries the real CLIs take.
    if fake.style == "paste" {
        from_idle.target = median_at_most(&from_idle, AFTER_TURN_GOAL_MS);
    }
    vec![
        Row::new(
            &what,
            "agent-comms `session deliver`: CLI call, incl. waiting out the turn",
            measured
                .as_ref()
                .map(|(calls, _)| latencies(calls))
                .map_err(Clone::clone),
        ),
        from_idle,
    ]
}

/// Issue 16's goals: call → submitted into an idle Claude Code, and from a
/// turn's end (an authoritative signal) to the next submission, in ms.
const IDLE_GOAL_MS: f64 = 40.0;
const AFTER_TURN_GOAL_MS: f64 = 60.0;
/// And a queue of 1000 drained within this long.
const DRAIN_GOAL_S: f64 = 40.0;

fn median_at_most(row: &Row, ms: f64) -> String {
    let met = row.result.as_ref().ok().map(|s| s.median.value() <= ms);
    judge(&format!("median ≤ {ms} ms"), met)
}

/// `n` distinct texts, after one that warms up (untimed); each fits one
/// row of an 80-column screen.
fn texts(fake: &Fake, n: usize) -> Vec<String> {
    (0..=n)
        .map(|i| format!("bench message {i} for the fake {}", fake.program))
        .collect()
}

/// A fake in a detached agent-comms session.
struct Target<'a> {
    session: Session<'a>,
    log: FakeLog,
    style: &'static str,
}

impl<'a> Target<'a> {
    fn start(
        bench: &'a Bench,
        repo: &Path,
        fake: &Fake,
        name: &str,
        turn_ms: u64,
    ) -> anyhow::Result<Self> {
        let name = format!("{}-{name}", fake.key());
        let log = FakeLog::new(bench, &name)?;
        let turn_ms = turn_ms.to_string();
        let env = fake.env(&log, &turn_ms);
        let session = Session::start(bench, &name, &env, &[&fake.path(repo)?])?;
        Ok(Self {
            session,
            log,
            style: fake.style,
        })
    }

    /// `agent-comms session deliver NAME --json TEXT`.
    fn deliver(&self, bench: &Bench, text: &str) -> anyhow::Result<Delivered> {
        let mut cmd = bench.agent_comms();
        let name = self.session.record.name.as_str();
        cmd.args(["session", "deliver", name, "--json", text]);
        Delivered::by(&mut cmd, self.style)
    }
}

/// One timed delivery and the evidence it printed.
pub struct Delivered {
    pub took: Duration,
    pub evidence: Evidence,
}

impl Delivered {
    /// Times a `… deliver … --json TEXT` command and reads its evidence,
    /// which must report the input style `style`.
    pub fn by(cmd: &mut Command, style: &str) -> anyhow::Result<Self> {
        let (took, stdout) = timed(cmd)?;
        let evidence: Evidence = serde_json::from_str(stdout.trim())
            .with_context(|| format!("deliver printed no evidence: {stdout:?}"))?;
        ensure!(
            evidence.style == style,
            "delivered as {}, not {style}",
            evidence.style
        );
        Ok(Self { took, evidence })
    }

    fn after_echo(&self) -> Duration {
        Duration::from_millis(self.evidence.submitted.saturating_sub(self.evidence.echoed))
    }
}

/// The tmux script people write for this, into a fake of its own in a
/// session of a private tmux server.
struct Script<'s> {
    server: &'s TmuxServer,
    session: String,
    log: FakeLog,
    pause: Duration,
    prompt: char,
    samples: Vec<Duration>,
    sent: usize,
    lost: usize,
    /// Lost, but the text was on the screen (in the input line).
    lost_on_screen: usize,
    lost_in_a_row: usize,
    failed: Option<String>,
}

/// What became of one text a script sent.
enum Sent {
    /// In the history after this long.
    Shown(Duration),
    /// Not in the history in time; whether it was on the screen at all.
    Lost { on_screen: bool },
}

impl<'s> Script<'s> {
    fn start(
        server: &'s TmuxServer,
        bench: &Bench,
        repo: &Path,
        fake: &Fake,
        pause: Duration,
    ) -> anyhow::Result<Self> {
        let session = format!("{}-{}ms", fake.key(), pause.as_millis());
        let log = FakeLog::new(bench, &format!("tmux-{session}"))?;
        server.new_session(&session, &fake.env(&log, "0"), &[&fake.path(repo)?])?;
        server.wait_for_text(&session, fake.ready)?;
        Ok(Self {
            server,
            session,
            log,
            pause,
            prompt: fake.prompt,
            samples: Vec::new(),
            sent: 0,
            lost: 0,
            lost_on_screen: 0,
            lost_in_a_row: 0,
            failed: None,
        })
    }

    /// Sends `text` as the script does, timed if `timed`; a script that
    /// failed or gave up does nothing.
    fn send(&mut self, text: &str, timed: bool) {
        if self.failed.is_some() || self.lost_in_a_row >= SCRIPT_GIVE_UP {
            return;
        }
        self.sent += 1;
        match self.attempt(text) {
            Ok(Sent::Shown(took)) => {
                self.lost_in_a_row = 0;
                if timed {
                    self.samples.push(took);
                }
            }
            Ok(Sent::Lost { on_screen }) => {
                self.lost += 1;
                self.lost_on_screen += usize::from(on_screen);
                self.lost_in_a_row += 1;
            }
            Err(e) => self.failed = Some(format!("{e:#}")),
        }
    }

    /// `send-keys -l TEXT`, the pause, `send-keys Enter`, then
    /// `capture-pane` until the text is in the history. A text that never
    /// gets there is cleared from the input line with Ctrl-U, as a script
    /// that noticed would have to.
    fn attempt(&self, text: &str) -> anyhow::Result<Sent> {
        let session = self.session.as_str();
        let start = Instant::now();
        self.server.run(&["send-keys", "-t", session, "-l", text])?;
        std::thread::sleep(self.pause);
        self.server.run(&["send-keys", "-t", session, "Enter"])?;
        let shown = self.server.poll_pane(session, SCRIPT_VERIFY, |screen| {
            in_history(screen, text, self.prompt)
        })?;
        if shown {
            return Ok(Sent::Shown(start.elapsed()));
        }
        let screen = self.server.run(&["capture-pane", "-p", "-t", session])?;
        self.server.run(&["send-keys", "-t", session, "C-u"])?;
        Ok(Sent::Lost {
            on_screen: screen.contains(text),
        })
    }

    fn row(&self, what: &str, texts: &[String]) -> Row {
        let mut system = format!(
            "tmux script: `send-keys -l`, sleep {} s, `send-keys Enter`, poll `capture-pane` \
             until the text is in the history — no idle check, verifies nothing",
            self.pause.as_secs_f64()
        );
        let received = self
            .log
            .submits()
            .map_or(0, |s| s.iter().filter(|s| texts.contains(&s.text)).count());
        if self.lost > 0 || received != self.sent {
            system.push_str(&self.losses(received));
        }
        let result = match &self.failed {
            Some(e) => Err(e.clone()),
            None if self.samples.is_empty() => Err("no text was submitted".to_owned()),
            None => Ok(latencies(&self.samples)),
        };
        Row::new(what, &system, result)
    }

    /// What the row says about lost texts, given how many of the texts
    /// sent the fake received.
    fn losses(&self, received: usize) -> String {
        let newlines = self.log.count("newline-inserted");
        let mut said = format!(
            "; **{} of {} sent never reached the history** within {} s",
            self.lost,
            self.sent,
            SCRIPT_VERIFY.as_secs()
        );
        if self.lost_on_screen > 0 {
            said.push_str(&format!(
                " ({} stayed in the input line, where a script that looks for the text anywhere \
                 on the screen takes it as sent)",
                self.lost_on_screen
            ));
        }
        said.push_str(&format!(
            "; the fake received {received} of the {}",
            self.sent
        ));
        if newlines > 0 {
            said.push_str(&format!(" and took {newlines} Enters as newlines"));
        }
        if self.lost_in_a_row >= SCRIPT_GIVE_UP {
            said.push_str(&format!("; given up after {SCRIPT_GIVE_UP} in a row"));
        }
        said
    }
}

/// Whether `text` is in the history part of a fake's screen: on a row above
/// its input line, the last row that starts with its prompt.
fn in_history(screen: &str, text: &str, prompt: char) -> bool {
    let rows: Vec<&str> = screen.lines().collect();
    let input = rows
        .iter()
        .rposition(|r| r.trim_start().starts_with(prompt))
        .unwrap_or(rows.len());
    rows[..input].iter().any(|r| r.contains(text))
}

// ---------------------------------------------------------------------------
// Messages to a served runtime, and a queue

/// `send --wait` and `runtime deliver` into one idle served runtime, in turn.
fn messages(bench: &Bench, repo: &Path) -> Vec<Row> {
    let what = "message to an idle served runtime, fake claude (`FAKE_BUSY_MS=0`)";
    let measured = (|| {
        let project = Project::new(bench, "messages")?;
        let log = FakeLog::new(bench, "served-claude")?;
        let mut served = Served::start(bench, &project, repo, &CLAUDE, &log, 0)?;
        served.wait_online(&project)?;
        let store = project.store()?;
        let mut expected = Vec::new();
        let (mut sends, mut delivers) = (Vec::new(), Vec::new());
        for i in 0..=bench.plan.messages {
            let (took, id) = project.send(bench, &format!("bench message {i}"), true)?;
            let inv = delivered(&*store, &id)?;
            expected.push(notification(&[Named::new(&inv)?]));
            let text = format!("bench text {i} typed by runtime deliver");
            let mut cmd = project.agent_comms(bench);
            cmd.args(["runtime", "deliver", "--id", RECEIVER, "--json", &text]);
            let delivered = Delivered::by(&mut cmd, CLAUDE.style)?;
            expected.push(text);
            if i > 0 {
                sends.push(took);
                delivers.push(delivered.took);
            }
        }
        log.received_in_order(&expected)?;
        anyhow::Ok((sends, delivers))
    })()
    .map_err(|e| format!("{e:#}"));
    vec![
        Row::new(
            what,
            "agent-comms `send --wait` → DELIVERED: CLI call (stored, runtime nudged, the \
             notification typed and verified)",
            measured
                .as_ref()
                .map(|(sends, _)| latencies(sends))
                .map_err(Clone::clone),
        ),
        Row::new(
            what,
            "agent-comms `runtime deliver`: CLI call (the text itself; no message stored)",
            measured.map(|(_, delivers)| latencies(&delivers)),
        ),
    ]
}

/// A queue of messages sent while the runtime was offline, drained once it
/// is served: the whole, the rate, the pace, and whether any was lost.
fn drain(bench: &Bench, repo: &Path) -> Vec<Row> {
    let n = bench.plan.queued;
    let (debounce, enter_delay) = CLAUDE.waits(repo);
    let what = format!("{n} messages queued while offline, drained once served");
    let system = format!(
        "agent-comms inbox; fake claude, `FAKE_BUSY_MS={DRAIN_TURN_MS}`, built-in profile \
         (debounce {debounce}, Enter delay {enter_delay})"
    );
    let drained =
        Project::new(bench, "drain").and_then(|project| drained(bench, repo, &project, &project));
    queue_rows(n, &what, &system, drained, Some(DRAIN_GOAL_S))
}

/// The rows of a drained queue of `n` (see [`drained`]): from the start to
/// the last delivery (judged against `goal_s`, if any), the agent turns,
/// the rate and the pace.
pub fn queue_rows(
    n: usize,
    what: &str,
    system: &str,
    drained: anyhow::Result<Drained>,
    goal_s: Option<f64>,
) -> Vec<Row> {
    let drained = match drained {
        Ok(d) => d,
        Err(e) => return vec![Row::new(what, system, Err(format!("{e:#}")))],
    };
    let secs = drained.total.as_secs_f64();
    let mut total = Row::new(
        what,
        &format!("{system}: from starting `interactive-serve` to the last delivery"),
        Ok(stats::one(Quantity::Seconds(secs))),
    );
    total.target = drained.tally.verdict();
    if let Some(goal) = goal_s {
        let met = judge(&format!("≤ {goal} s"), Some(secs <= goal));
        total.target = format!("{}; {met}", total.target);
    }
    let mut turns = Row::new(
        what,
        &format!("{system}: agent turns used (notifications typed)"),
        Ok(stats::one(Quantity::Count(drained.tally.turns as f64))),
    );
    let most = n.div_ceil(DEFAULT_BATCH);
    turns.target = judge(
        &format!("≤ {most}: {DEFAULT_BATCH} messages a notification"),
        Some(drained.tally.turns <= most),
    );
    vec![
        total,
        turns,
        Row::new(
            what,
            &format!("{system}: rate"),
            Ok(stats::one(Quantity::MessagesPerSec(n as f64 / secs))),
        ),
        Row::new(
            what,
            &format!("{system}: from one delivery to the next"),
            Ok(latencies(&drained.intervals)),
        ),
    ]
}

pub struct Drained {
    total: Duration,
    intervals: Vec<Duration>,
    tally: Tally,
}

/// `runtime configure` in `recipient`, [`Plan::queued`](crate::bench::Plan)
/// `send`s from `sender` (the same project, or one on another host sharing
/// its database), then `interactive-serve` in `recipient`: until the fake
/// has received them all and the store has recorded them.
pub fn drained(
    bench: &Bench,
    repo: &Path,
    recipient: &Project,
    sender: &Project,
) -> anyhow::Result<Drained> {
    let n = bench.plan.queued;
    recipient.configure(bench)?;
    for i in 0..n {
        sender.send(bench, &format!("queued message {i}"), false)?;
    }
    let log = FakeLog::new(bench, &format!("drain-claude-{}", recipient.name()))?;
    let start = unix_millis();
    let mut served = Served::start(bench, recipient, repo, &CLAUDE, &log, DRAIN_TURN_MS)?;
    let store = recipient.store()?;
    let to_receiver = |status| InvocationFilter {
        status,
        to: Some(RECEIVER),
        ..Default::default()
    };
    served.wait_for_count("DELIVERED in the store", n, DRAIN_STALL, || {
        Ok(store
            .invocations(&to_receiver(Some(InvocationStatus::Delivered)))?
            .len())
    })?;
    drop(served);
    let queued = store.invocations(&to_receiver(None))?;
    let mut times: Vec<u64> = queued.iter().filter_map(|inv| inv.delivered).collect();
    times.sort_unstable();
    let last = *times.last().context("nothing was delivered")?;
    Ok(Drained {
        total: Duration::from_millis(last.saturating_sub(start)),
        intervals: times
            .windows(2)
            .map(|w| Duration::from_millis(w[1] - w[0]))
            .collect(),
        tally: Tally::count(bench, recipient, &queued, &log)?,
    })
}

/// Whether a drained queue lost anything: in the store, as `invocation list`
/// shows it, and in what the fake received — and how many agent turns
/// (notifications) it took.
struct Tally {
    queued: usize,
    /// DELIVERED, per `invocation list --status DELIVERED --json`.
    delivered: usize,
    /// Notifications the fake received: one agent turn each.
    turns: usize,
    /// Messages the notifications named, counting repeats.
    named: usize,
    /// Each queued message named once, in queue order, and nothing else.
    in_order: bool,
    while_busy: usize,
}

impl Tally {
    fn count(
        bench: &Bench,
        project: &Project,
        queued: &[Invocation],
        log: &FakeLog,
    ) -> anyhow::Result<Self> {
        let (_, listed) = project.list(bench, &["--status", "DELIVERED"])?;
        let submits = log.submits()?;
        let named: Vec<&str> = submits
            .iter()
            .flat_map(|s| named_ids(&s.text).unwrap_or_default())
            .collect();
        let expected: Vec<&str> = queued.iter().map(|inv| inv.id.as_str()).collect();
        Ok(Self {
            queued: queued.len(),
            delivered: listed.iter().filter(|v| v["to"] == RECEIVER).count(),
            turns: submits.len(),
            named: named.len(),
            in_order: named == expected,
            while_busy: submits.iter().filter(|s| s.while_busy).count(),
        })
    }

    fn verdict(&self) -> String {
        let n = self.queued;
        let met = self.delivered == n && self.in_order && self.while_busy == 0;
        judge(
            &format!(
                "none lost ({} of {n} DELIVERED in the store; the fake's log: {} notifications \
                 naming {} messages, {}, {} while busy)",
                self.delivered,
                self.turns,
                self.named,
                if self.in_order {
                    "each queued message once, in queue order"
                } else {
                    "not the queued messages in queue order"
                },
                self.while_busy
            ),
            Some(met),
        )
    }
}

// ---------------------------------------------------------------------------
// The store

/// Store operations: in process, then through the CLI (process start-up
/// included) on the store the in-process rows filled.
fn store(bench: &Bench) -> Vec<Row> {
    let (ops, calls) = (bench.plan.store_ops, bench.plan.store_calls);
    let in_process = "`SqliteStore` in process (WAL, synchronous=FULL, on disk)";
    let cli = "agent-comms CLI, process start-up included";
    let rows = [
        (
            format!("`Store::insert_invocation`, store growing from 0 to {ops}"),
            in_process,
        ),
        (
            format!("`Store::lease_next` + `finish_attempt` (delivered), {ops} queued"),
            in_process,
        ),
        (
            format!(
                "`invocation list --json`, {ops}–{} invocations in the store",
                ops + calls
            ),
            cli,
        ),
        (
            format!(
                "`--actor {SENDER} send --to {RECEIVER} TEXT`, no wait (runtime offline: stored \
                 and queued, no nudge)"
            ),
            cli,
        ),
        (
            "`--version`: process start-up alone, for reference".to_owned(),
            cli,
        ),
    ];
    let measured = store_samples(bench, ops, calls).map_err(|e| format!("{e:#}"));
    rows.into_iter()
        .enumerate()
        .map(|(i, (what, system))| {
            let result = measured
                .as_ref()
                .map(|samples| latencies(&samples[i]))
                .map_err(Clone::clone);
            Row::new(&what, system, result)
        })
        .collect()
}

/// The samples of [`store`]'s rows, in its order.
fn store_samples(bench: &Bench, ops: usize, calls: usize) -> anyhow::Result<[Vec<Duration>; 5]> {
    let project = Project::new(bench, "store")?;
    project.configure(bench)?;
    let (inserts, leases) = store_ops(&*project.store()?, ops)?;
    let (mut lists, mut sends, mut versions) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..calls {
        let (took, listed) = project.list(bench, &[])?;
        ensure!(
            listed.len() == ops + i,
            "listed {} invocations",
            listed.len()
        );
        lists.push(took);
        sends.push(
            project
                .send(bench, &format!("stored message {i}"), false)?
                .0,
        );
        versions.push(project.run(bench, &["--version"])?.0);
    }
    Ok([inserts, leases, lists, sends, versions])
}

/// `n` inserts, then `n` leases each finished as delivered, each timed
/// alone, on the store's clock. The project's runtime must be configured.
pub fn store_ops(store: &dyn Store, n: usize) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut inserts = Vec::with_capacity(n);
    for i in 0..n {
        let body = format!("stored message {i}");
        let new = NewInvocation {
            from: SENDER,
            to: RECEIVER,
            body: &body,
            status: InvocationStatus::Pending,
            reason: None,
            now: store.now(),
        };
        let start = Instant::now();
        store.insert_invocation(&new)?;
        inserts.push(start.elapsed());
    }
    let mut leases = Vec::with_capacity(n);
    for _ in 0..n {
        let now = store.now();
        let evidence = Evidence {
            echoed: now,
            entered: now,
            submitted: now,
            enter_presses: 1,
            style: "paste".into(),
            stop_reason: None,
        };
        let start = Instant::now();
        let (_, attempt) = store
            .lease_next(RECEIVER, RECEIVER, "bench", now, now + 6_000)?
            .context("nothing to lease")?;
        let done = store.finish_attempt(attempt.id, &AttemptResult::Delivered(evidence), now)?;
        leases.push(start.elapsed());
        ensure!(done, "attempt {} was no longer in progress", attempt.id);
    }
    Ok((inserts, leases))
}

// ---------------------------------------------------------------------------

/// How each row is measured, printed under the table.
fn method(bench: &Bench, repo: &Path) -> Vec<String> {
    let plan = &bench.plan;
    let waits = |fake: &Fake| {
        let (debounce, enter_delay) = fake.waits(repo);
        format!(
            "`{}` {}: debounce {debounce} for screen-only signals, Enter delay {enter_delay}",
            fake.profile, fake.style
        )
    };
    vec![
        format!(
            "The fakes are `tests/fakes/bin/claude` and `codex` (once as Codex runs, with \
             bracketed paste, and once with `FAKE_NO_BRACKETED=1`, typed), read by their \
             built-in profiles ({}; {}; {}). Every series starts with one untimed delivery, and \
             is checked against the fake's log: each text received once, in order, none while \
             busy; and the evidence's style (`paste` or `typed`).",
            waits(&CLAUDE),
            waits(&CODEX_PASTE),
            waits(&CODEX)
        ),
        format!(
            "**deliver → submitted, idle**: {} texts per system, the systems taking turns. \
             agent-comms: `session deliver NAME --json TEXT` into a detached session, timed from \
             spawn to exit. With `FAKE_BUSY_MS=0` the fake never draws a busy screen, so it is \
             idle at every call and the call is the whole time from idle to the verified \
             submission. tmux: the same fake in an 80×24 pane of a private server; the script \
             types the text with `send-keys -l`, sleeps, sends `Enter`, and polls `capture-pane` \
             (1 ms apart) until the text is on a row above the input line. It never checks that \
             the program is idle, nor the submission itself; a text not in the history after {} \
             s counts as lost (the line is then cleared with Ctrl-U), and a script that lost {} \
             in a row is not asked again.",
            plan.deliveries,
            SCRIPT_VERIFY.as_secs(),
            SCRIPT_GIVE_UP
        ),
        format!(
            "**right after a turn**: {} deliveries with `FAKE_BUSY_MS={TURN_MS}`, each called as \
             soon as the previous returned, so it waits for the turn the previous one started to \
             end. The fakes report that end as the real CLIs do (fake claude rewrites its \
             `sessions/<pid>.json` with `status: idle`, fake codex writes OSC 7501 \
             `state=done`), which the adapters take as authoritative: idle at once, where a \
             screen-only signal waits out the debounce. From idle: evidence `submitted` minus \
             (the previous submission's time in the fake's log + {TURN_MS} ms), when the fake's \
             turn ends and it redraws its idle screen. A tmux script would not wait: it types \
             into the busy program.",
            plan.busy_deliveries
        ),
        format!(
            "**messages**: `--actor {RECEIVER} runtime interactive-serve --id {RECEIVER} -- \
             claude` in a terminal the benchmark opens (nobody types in it), `FAKE_BUSY_MS=0`; \
             then {} times, in turn, `--actor {SENDER} send --to {RECEIVER} --wait 60 --json \
             TEXT` (checked DELIVERED in the store; the fake receives the notification naming \
             the message) and `runtime deliver --id {RECEIVER} --json TEXT`.",
            plan.messages
        ),
        format!(
            "**queue**: `runtime configure` registers the runtime without serving it, {} `send`s \
             queue messages to it, then `interactive-serve` starts with \
             `FAKE_BUSY_MS={DRAIN_TURN_MS}`. Total: from spawning it to the last `delivered` \
             time in the store; from one delivery to the next: consecutive `delivered` times. \
             Each delivery waits for the fake's turn, the debounce and the Enter delay, which \
             set the pace by design. Checked: `invocation list --status DELIVERED --json`, and \
             the fake's log against the messages' notifications.",
            plan.queued
        ),
        format!(
            "**store**: a project under `target/` (on disk: the store syncs each transaction). \
             In process: {} `insert_invocation`s, then as many `lease_next` + `finish_attempt` \
             with evidence, each timed alone. CLI: {} rounds of `invocation list --json` (its \
             length checked), `send` (no wait) and `--version`, each one process, timed from \
             spawn to exit.",
            plan.store_ops, plan.store_calls
        ),
    ]
}

/// Message `id` as the store has it, which `send --wait` just said was
/// delivered: checked, not taken on its word.
pub(crate) fn delivered(store: &dyn Store, id: &str) -> anyhow::Result<Invocation> {
    let inv = store
        .invocation(id)?
        .context("the sent message is not stored")?;
    ensure!(
        inv.status == InvocationStatus::Delivered,
        "`send --wait` returned, but message {id} is {}",
        inv.status
    );
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_above_the_input_line() {
        let claude = "❯ hello\n● reply to: hello\n────\n❯ typed\n────\n  ? for shortcuts\n";
        assert!(in_history(claude, "hello", '❯'));
        assert!(!in_history(claude, "typed", '❯'));
        let codex = "› first\n• reply to: first\n\n› second\n  \n  fake-model\n";
        assert!(in_history(codex, "first", '›'));
        assert!(!in_history(codex, "second", '›'));
    }
}
