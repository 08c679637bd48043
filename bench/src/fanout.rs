//! The fan-out section (issue 14): one agent turn streamed to 1, 10 and 100
//! clients attached to an ACP runtime over its bridge socket, and a client
//! that reads nothing beside 10 that do.
//!
//! Why it is measured this way:
//!
//! - **Per-update latency** is from the agent's stdout to a client having
//!   the line. The fake agent (`tests/fakes/acp_agent.py`, prompt token
//!   `CHUNKS=N`) writes its wall clock, in ns, into each chunk just before
//!   the write; each client reads the wall clock as its read returns the
//!   line. One machine, one clock, sub-ms resolution, and everything in
//!   between is ours: the pipe, the supervisor's read, the tap, the
//!   bridge's fan-out and the socket. (The transcript's `ts` would start
//!   only after the supervisor's read, and is whole ms.)
//! - **The chunks are paced** (`CHUNK_MS`), faster than a model streams but
//!   not as one burst: a burst measures how long a queue takes to drain,
//!   not what each update costs. The slow-client turn is long enough for
//!   the non-reader to pass the bridge's backlog limit, and its baseline
//!   (the same turn, the same 10 readers, no slow one) is measured in the
//!   same run.
//! - **Clients are raw ACP connections** in this process, one thread each
//!   (`initialize`, `session/resume`: join without replay, then read), as
//!   independent as separate programs would be; they share the machine's
//!   cores with the supervisor, as clients on the same machine would.
//! - **The peer** is the runtime's other way to watch a session: N
//!   `agent-comms acp log ID --follow --json` processes (the runtime
//!   endpoint's follow), timed the same way. acp-multiplex, the outside
//!   multiplexer, cannot be built here (the method says why), so it is not
//!   in the table.
//! - **The supervisor's CPU** is user + system time from
//!   `/proc/<pid>/stat` over the turn; its memory is VmRSS after the turn
//!   and VmHWM (the peak) from `/proc/<pid>/status`. Each scenario gets a
//!   fresh runtime, so the peaks are the scenario's own.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_comms_core::acp::bridge::MAX_BACKLOG;
use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};

use crate::acp::Supervisor;
use crate::bench::Bench;
use crate::progress;
use crate::report::{judge, Row, Section};
use crate::runtimes::Project;
use crate::stats::{latencies, one, size, Quantity, Summary};

const TITLE: &str = "ACP fan-out: one turn to many attached clients (issue 14)";
const ID: &str = "fanout";
const FAKE_AGENT: &str = "tests/fakes/acp_agent.py";
/// How many clients read the turn.
const CLIENTS: [usize; 3] = [1, 10, 100];
/// Readers beside the slow client.
const BESIDE_SLOW: usize = 10;
/// Issue 14's goal: p99 added per update, with 100 clients.
const GOAL_P99_MS: f64 = 10.0;
/// Between two chunks of a measured turn: 200 updates a second at most.
const CHUNK_MS: u64 = 5;
/// Between two chunks of the slow-client turn.
const SLOW_CHUNK_MS: u64 = 1;
/// The slow-client turn: twice the bridge's backlog limit, so that the
/// non-reader passes it even with the socket buffers full.
const SLOW_CHUNKS: u64 = 2 * MAX_BACKLOG;
/// How long a client waits for a line before it gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

pub fn section(bench: &Bench) -> Section {
    let chunks = bench.plan.fanout_chunks;
    let mut rows = Vec::new();
    let mut bridge_runs = Vec::new();
    for n in CLIENTS {
        progress(&format!("fan-out: one turn to {n} bridge clients"));
        bridge_runs.push((n, scenario(bench, Watchers::Bridge(n), chunks, CHUNK_MS)));
    }
    let mut follow_runs = Vec::new();
    for n in CLIENTS {
        progress(&format!(
            "fan-out: one turn to {n} `acp log --follow` processes"
        ));
        follow_runs.push((n, scenario(bench, Watchers::Follow(n), chunks, CHUNK_MS)));
    }
    for ((n, bridge), (_, follow)) in bridge_runs.iter().zip(&follow_runs) {
        rows.push(latency_row(*n, bridge, true));
        rows.push(latency_row(*n, follow, false));
    }
    for ((n, bridge), (_, follow)) in bridge_runs.iter().zip(&follow_runs) {
        rows.extend(cost_rows(*n, "bridge clients", bridge));
        rows.extend(cost_rows(*n, "`acp log --follow` processes", follow));
    }
    progress("fan-out: the slow client's turn, without it");
    let alone = scenario(
        bench,
        Watchers::Bridge(BESIDE_SLOW),
        SLOW_CHUNKS as usize,
        SLOW_CHUNK_MS,
    );
    progress("fan-out: the slow client's turn, with it");
    let slow = scenario(
        bench,
        Watchers::WithSlow(BESIDE_SLOW),
        SLOW_CHUNKS as usize,
        SLOW_CHUNK_MS,
    );
    progress("fan-out: a turn twice as long, with the slow client");
    let longer = scenario(
        bench,
        Watchers::WithSlow(BESIDE_SLOW),
        2 * SLOW_CHUNKS as usize,
        SLOW_CHUNK_MS,
    );
    rows.extend(slow_rows(&alone, &slow, &longer));
    Section {
        title: TITLE.to_owned(),
        intro: "An ACP runtime (`runtime acp-serve`, the fake agent) streams one turn of \
                paced `agent_message_chunk` updates to clients attached over its bridge \
                socket (what `acp attach` connects to); beside it, in the same run, the same \
                turn to as many `acp log --follow` processes. Then one client that reads \
                nothing, beside 10 that do."
            .to_owned(),
        rows,
        method: method(chunks),
    }
}

// ---------------------------------------------------------------------------
// A scenario: a fresh runtime, its watchers, one measured turn

/// Who watches the turn.
#[derive(Clone, Copy)]
enum Watchers {
    /// N raw ACP clients on the bridge socket.
    Bridge(usize),
    /// N `agent-comms acp log ID --follow --json` processes.
    Follow(usize),
    /// N bridge clients and one that never reads after joining.
    WithSlow(usize),
}

/// What one scenario measured.
struct Measured {
    /// Every chunk's latency, at every watcher.
    latencies: Vec<Duration>,
    /// The supervisor's user + system CPU over the turn.
    cpu: Duration,
    /// MB after the turn, and the peak.
    rss: f64,
    peak_rss: f64,
    /// What became of the slow client, if there was one.
    slow: Option<SlowFate>,
}

/// The supervisor's notes on the slow client leaving.
struct SlowFate {
    /// Its note while it still held its connection (after the turn), and
    /// when (ms after the turn began): the drop the bridge promises.
    while_held: Option<(String, f64)>,
    /// Its note once it had closed its connection, when none came before.
    after_close: Option<String>,
}

type Scenario = Result<Measured, String>;

fn scenario(bench: &Bench, watchers: Watchers, chunks: usize, gap_ms: u64) -> Scenario {
    run_scenario(bench, watchers, chunks, gap_ms).map_err(|e| format!("{e:#}"))
}

fn run_scenario(
    bench: &Bench,
    watchers: Watchers,
    chunks: usize,
    gap_ms: u64,
) -> anyhow::Result<Measured> {
    let project = Project::new(bench, "fanout")?;
    let runtime = Runtime::start(bench, &project)?;
    // A first turn nobody measures: the agent and the supervisor warmed up,
    // and history that the joins below skip (resume replays nothing).
    runtime.deliver(bench, &project, "warm-up CHUNKS=10")?;
    let (count, follow) = match watchers {
        Watchers::Bridge(n) | Watchers::WithSlow(n) => (n, false),
        Watchers::Follow(n) => (n, true),
    };
    let mut readers = Vec::with_capacity(count);
    for _ in 0..count {
        readers.push(if follow {
            Reader::follow(&project, bench, chunks)?
        } else {
            Reader::bridge(&runtime, chunks)?
        });
    }
    let slow = match watchers {
        Watchers::WithSlow(_) => Some(SlowClient::join(&runtime, &project, bench)?),
        _ => None,
    };
    let cpu_before = cpu_time(runtime.pid)?;
    let began = wall_ms();
    let prompt = format!("fan-out turn CHUNKS={chunks} CHUNK_MS={gap_ms}");
    runtime.deliver(bench, &project, &prompt)?;
    let mut latencies = Vec::with_capacity(count * chunks);
    for reader in readers {
        latencies.extend(reader.finish()?);
    }
    let cpu = cpu_time(runtime.pid)?.saturating_sub(cpu_before);
    let rss = crate::procs::rss_mb(runtime.pid)?;
    let peak_rss = crate::procs::status_mb(runtime.pid, "VmHWM")?;
    let slow = match slow {
        Some(slow) => Some(slow.fate(&project, bench, began)?),
        None => None,
    };
    Ok(Measured {
        latencies,
        cpu,
        rss,
        peak_rss,
        slow,
    })
}

/// `runtime acp-serve` of the fake agent, ended by pid when dropped.
struct Runtime {
    pid: u32,
    bridge: PathBuf,
    session: String,
    cwd: PathBuf,
    _supervisor: Supervisor,
}

impl Runtime {
    fn start(bench: &Bench, project: &Project) -> anyhow::Result<Self> {
        let cwd = project.path().to_owned();
        let agent = bench.repo().join(FAKE_AGENT);
        let (started, supervisor) = crate::acp::serve(bench, project, ID, &agent, |cmd| {
            cmd.current_dir(&cwd);
        })?;
        let field = |key: &str| crate::acp::started_field(&started, key);
        Ok(Self {
            pid: supervisor.0,
            _supervisor: supervisor,
            bridge: field("bridge")?.into(),
            session: field("session_id")?,
            cwd,
        })
    }

    /// `runtime deliver`: returns when the turn has ended.
    fn deliver(&self, bench: &Bench, project: &Project, text: &str) -> anyhow::Result<()> {
        let args = ["runtime", "deliver", "--id", ID, "--json", text];
        let (_, out) = project.run(bench, &args)?;
        let evidence: Value =
            serde_json::from_str(out.trim()).context("deliver printed no JSON")?;
        ensure!(
            evidence["stop_reason"] == "end_turn",
            "the turn did not end normally: {evidence}"
        );
        Ok(())
    }
}

/// The transcript's notes (`acp log ID --json`).
fn notes(project: &Project, bench: &Bench) -> anyhow::Result<Vec<Value>> {
    let (_, out) = project.run(bench, &["acp", "log", ID, "--json"])?;
    Ok(out
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["dir"] == "note")
        .collect())
}

/// The note `SEAT left: …`, and its time (Unix ms), once it is written;
/// None if it is not within `wait`.
fn left_note(
    project: &Project,
    bench: &Bench,
    seat: &str,
    wait: Duration,
) -> anyhow::Result<Option<(String, f64)>> {
    let prefix = format!("{seat} left: ");
    let deadline = Instant::now() + wait;
    loop {
        let note = notes(project, bench)?
            .into_iter()
            .find(|e| e["text"].as_str().is_some_and(|t| t.starts_with(&prefix)));
        if let Some(note) = note {
            let at = note["ts"]
                .as_str()
                .and_then(iso_ms)
                .context("a transcript note without its time")?;
            let text = note["text"].as_str().unwrap_or_default().to_owned();
            return Ok(Some((text, at)));
        }
        if Instant::now() > deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------------
// Watchers

/// A thread reading one watcher's lines: the latency of every measured
/// chunk, until the last one.
struct Reader {
    thread: JoinHandle<anyhow::Result<Vec<Duration>>>,
    /// A follower's process, held to be ended after the read.
    _follower: Option<Follower>,
}

/// An `acp log --follow` process, ended by pid when dropped.
struct Follower(Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Reader {
    /// A raw ACP client on the bridge: joined when this returns.
    fn bridge(runtime: &Runtime, chunks: usize) -> anyhow::Result<Self> {
        let stream = join_bridge(runtime)?;
        let lines = BufReader::new(stream);
        Ok(Self {
            thread: std::thread::spawn(move || read_chunks(lines, chunks)),
            _follower: None,
        })
    }

    /// `acp log ID --follow --json`: following when this returns (it has
    /// printed the transcript so far, up to the warm-up's stop reason).
    fn follow(project: &Project, bench: &Bench, chunks: usize) -> anyhow::Result<Self> {
        let mut cmd = project.agent_comms(bench);
        cmd.args(["acp", "log", ID, "--follow", "--json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = Follower(cmd.spawn().context("cannot run agent-comms acp log")?);
        let stdout = child.0.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout);
        let (ready, is_ready) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut line = String::new();
            loop {
                line.clear();
                if lines.read_line(&mut line)? == 0 {
                    bail!("`acp log --follow` ended before the warm-up's end");
                }
                if line.contains("stopReason") {
                    break;
                }
            }
            let _ = ready.send(());
            read_chunks(lines, chunks)
        });
        if is_ready.recv_timeout(READ_TIMEOUT).is_err() {
            drop(child);
            return match thread.join() {
                Ok(Err(e)) => Err(e),
                _ => bail!("`acp log --follow` printed no history"),
            };
        }
        Ok(Self {
            thread,
            _follower: Some(child),
        })
    }

    /// The latencies read; a follower's process is ended after.
    fn finish(self) -> anyhow::Result<Vec<Duration>> {
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("a reader panicked"))?
    }
}

/// A bridge connection that has joined the session without replay:
/// `initialize`, then `session/resume`, each answered before the next (as
/// clients do: the bridge refuses a request before `initialize` is done).
fn join_bridge(runtime: &Runtime) -> anyhow::Result<UnixStream> {
    let mut stream = UnixStream::connect(&runtime.bridge)
        .with_context(|| format!("cannot connect to {}", runtime.bridge.display()))?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/resume",
               "params": {"sessionId": runtime.session, "cwd": runtime.cwd}}),
    ];
    for request in &requests {
        stream.write_all(format!("{request}\n").as_bytes())?;
        let answer = answer_to(&mut stream, &request["id"])?;
        ensure!(
            answer.get("result").is_some(),
            "{} was refused: {answer}",
            request["method"]
        );
    }
    Ok(stream)
}

/// Reads until the answer to request `id`; byte by byte, so that nothing
/// after it is read ahead of the caller's own reader.
fn answer_to(stream: &mut UnixStream, id: &Value) -> anyhow::Result<Value> {
    let mut line = Vec::new();
    let mut byte = [0u8];
    loop {
        if stream.read(&mut byte)? == 0 {
            bail!(
                "the bridge closed the connection: {}",
                String::from_utf8_lossy(&line)
            );
        }
        if byte[0] != b'\n' {
            line.push(byte[0]);
            continue;
        }
        let msg: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
        line.clear();
        if msg["id"] == *id && msg.get("method").is_none() {
            return Ok(msg);
        }
    }
}

/// Reads lines until the chunk numbered `chunks - 1`: each chunk's time
/// from its send to this read. Every chunk must come, once, in order.
fn read_chunks(mut lines: impl BufRead, chunks: usize) -> anyhow::Result<Vec<Duration>> {
    let mut got = Vec::with_capacity(chunks);
    let mut line = String::new();
    while got.len() < chunks {
        line.clear();
        if lines.read_line(&mut line)? == 0 {
            bail!("the stream ended after {} of {chunks} chunks", got.len());
        }
        let read_ns = wall_ns();
        let Some((index, sent_ns)) = chunk_of(&line) else {
            continue;
        };
        ensure!(
            index == got.len(),
            "chunk {index} came where chunk {} was due",
            got.len()
        );
        got.push(Duration::from_nanos(read_ns.saturating_sub(sent_ns)));
    }
    Ok(got)
}

/// `chunk I sent_ns=T` in a line: (I, T).
fn chunk_of(line: &str) -> Option<(usize, u64)> {
    let at = line.find("\"chunk ")?;
    let rest = &line[at + 7..];
    let (index, rest) = rest.split_once(" sent_ns=")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((index.parse().ok()?, digits.parse().ok()?))
}

/// A client that joins, then reads nothing, holding its connection.
struct SlowClient {
    connection: UnixStream,
    /// Its seat's name in the transcript's notes (`client-N`).
    seat: String,
}

/// How long the supervisor's note on the slow client may take.
const NOTE_WAIT: Duration = Duration::from_secs(3);

impl SlowClient {
    fn join(runtime: &Runtime, project: &Project, bench: &Bench) -> anyhow::Result<Self> {
        let connection = join_bridge(runtime)?;
        // It attached last: the last `client-N attached (…)` note.
        let seat = notes(project, bench)?
            .iter()
            .rev()
            .find_map(|e| e["text"].as_str()?.split_once(" attached ("))
            .map(|(seat, _)| seat.to_owned())
            .context("no note of the slow client's attaching")?;
        Ok(Self { connection, seat })
    }

    /// Its drop, looked for while it still holds its connection, then, if
    /// none, what the supervisor says once it closes it.
    fn fate(self, project: &Project, bench: &Bench, began: f64) -> anyhow::Result<SlowFate> {
        let held = left_note(project, bench, &self.seat, NOTE_WAIT)?;
        let seat = self.seat.clone();
        drop(self.connection);
        let after_close = match held {
            Some(_) => None,
            None => left_note(project, bench, &seat, NOTE_WAIT)?.map(|(note, _)| note),
        };
        Ok(SlowFate {
            while_held: held.map(|(note, at)| (note, at - began)),
            after_close,
        })
    }
}

// ---------------------------------------------------------------------------
// /proc and clocks

/// User + system CPU time of `pid` (all its threads), from `/proc/<pid>/stat`.
fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("process {pid} is gone"))?;
    // After the command's name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("an unreadable /proc stat")?
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of the whole line.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        fields
            .get(i)
            .and_then(|f| f.parse().ok())
            .context("no utime/stime in /proc stat")
    };
    // SAFETY: sysconf has no preconditions.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok(Duration::from_secs_f64(
        (ticks(11)? + ticks(12)?) as f64 / per_sec,
    ))
}

fn wall_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn wall_ms() -> f64 {
    wall_ns() as f64 / 1e6
}

/// Unix ms of the transcript's `2026-12-01T15:52:27.123Z`.
fn iso_ms(iso: &str) -> Option<f64> {
    agent_comms_core::time::unix_millis_from_iso(iso).map(|ms| ms as f64)
}

// ---------------------------------------------------------------------------
// Rows

fn latency_row(n: usize, run: &Scenario, bridge: bool) -> Row {
    let measurement = format!("one update, the agent's stdout → each of {n} watchers");
    let system = if bridge {
        "bridge clients (raw ACP on the bridge socket, what `acp attach` uses)"
    } else {
        "`agent-comms acp log --follow --json` processes (the runtime endpoint's follow)"
    };
    let result = run.as_ref().map(|m| latencies(&m.latencies));
    let mut row = Row::new(&measurement, system, result.map_err(Clone::clone));
    if bridge && n == 100 {
        row.target = judge(
            &format!("p99 under {GOAL_P99_MS} ms"),
            row.result
                .as_ref()
                .ok()
                .and_then(|s| s.p99)
                .map(|p| p.value() < GOAL_P99_MS),
        );
    }
    row
}

fn cost_rows(n: usize, who: &str, run: &Scenario) -> Vec<Row> {
    let system = format!("{n} {who}");
    let of = |f: &dyn Fn(&Measured) -> Summary| run.as_ref().map(f).map_err(Clone::clone);
    vec![
        Row::new(
            "the supervisor's CPU time (user + system) over the turn",
            &system,
            of(&|m| one(Quantity::Millis(m.cpu.as_secs_f64() * 1000.0))),
        ),
        Row::new(
            "the supervisor's RSS after the turn",
            &system,
            of(&|m| size(m.rss)),
        ),
    ]
}

fn slow_rows(alone: &Scenario, slow: &Scenario, longer: &Scenario) -> Vec<Row> {
    let of = |run: &Scenario, f: &dyn Fn(&Measured) -> Summary| {
        run.as_ref().map(f).map_err(Clone::clone)
    };
    let readers = format!("one update, the agent's stdout → each of {BESIDE_SLOW} readers");
    let without = format!("{BESIDE_SLOW} bridge clients, no slow one ({SLOW_CHUNKS} chunks)");
    let with =
        format!("{BESIDE_SLOW} bridge clients and one that reads nothing ({SLOW_CHUNKS} chunks)");
    let with_longer = format!(
        "{BESIDE_SLOW} bridge clients and one that reads nothing ({} chunks)",
        2 * SLOW_CHUNKS
    );
    let peak = "the supervisor's peak RSS (VmHWM)";
    let mut peak_longer = Row::new(peak, &with_longer, of(longer, &|m| size(m.peak_rss)));
    peak_longer.target = judge(
        &format!("bounded: within {BOUND_MB} MB of the turn half as long"),
        of(slow, &|m| size(m.peak_rss))
            .ok()
            .zip(peak_longer.result.as_ref().ok())
            .map(|(short, long)| long.median.value() - short.median.value() < BOUND_MB),
    );
    let mut rows = vec![
        Row::new(&readers, &without, of(alone, &|m| latencies(&m.latencies))),
        Row::new(&readers, &with, of(slow, &|m| latencies(&m.latencies))),
        Row::new(peak, &without, of(alone, &|m| size(m.peak_rss))),
        Row::new(peak, &with, of(slow, &|m| size(m.peak_rss))),
        peak_longer,
    ];
    rows.push(dropped_row(&with, slow));
    rows.push(dropped_row(&with_longer, longer));
    rows
}

/// From the turn's start to the slow client's drop, while it still holds
/// its connection; what happened instead, if it was not dropped.
fn dropped_row(system: &str, run: &Scenario) -> Row {
    let fate = run.as_ref().map_err(Clone::clone).and_then(|m| {
        m.slow
            .as_ref()
            .ok_or_else(|| "no slow client in this run".to_owned())
    });
    let result = fate.and_then(|fate| match (&fate.while_held, &fate.after_close) {
        (Some((_, ms)), _) => Ok(one(Quantity::Millis(*ms))),
        (None, Some(note)) => Err(format!(
            "not dropped while it held its connection (no note on it in the {} s after the turn); \
             once it closed it: `{note}`",
            NOTE_WAIT.as_secs()
        )),
        (None, None) => {
            Err("no note on it leaving, even after it closed its connection".to_owned())
        }
    });
    let system = match run
        .as_ref()
        .ok()
        .and_then(|m| m.slow.as_ref()?.while_held.as_ref())
    {
        Some((note, _)) => format!("{system}; the note: `{note}`"),
        None => system.to_owned(),
    };
    let met = result.as_ref().map(|_| true).or_else(|why| {
        if why.starts_with("not dropped") || why.starts_with("no note") {
            Ok(false)
        } else {
            Err(())
        }
    });
    let mut row = Row::new(
        "the client that reads nothing: from the turn's start to the supervisor's note on its drop",
        &system,
        result,
    );
    row.target = judge("dropped, with a reason, while connected", met.ok());
    row
}

/// How much more memory a turn twice as long may cost with the slow client
/// attached: its queue is capped at [`MAX_BACKLOG`] lines, so ideally none;
/// this leaves room for the transcript's growth and the allocator.
const BOUND_MB: f64 = 4.0;

fn method(chunks: usize) -> Vec<String> {
    vec![
        format!(
            "**turn**: a fresh `--actor {ID} runtime acp-serve --id {ID} --json -- {FAKE_AGENT}` \
             per row group, one untimed warm-up turn, then the watchers join, then \
             `runtime deliver --id {ID} --json 'fan-out turn CHUNKS={chunks} CHUNK_MS={CHUNK_MS}'`: \
             the fake streams {chunks} `agent_message_chunk` updates {CHUNK_MS} ms apart, each \
             `chunk I sent_ns=T` with T its wall clock (Unix ns) just before the write. Each \
             watcher's latency is its wall clock as its read returns the line, minus T; every \
             watcher must get every chunk once and in order, or the row fails."
        ),
        "**bridge clients**: a Unix-socket connection each to the runtime's bridge (the \
         `bridge` path `acp-serve --json` prints), sending `initialize` and `session/resume` \
         (join without replay) and reading, one thread each, in the benchmark's process."
            .to_owned(),
        "**`acp log --follow`**: `agent-comms acp log ID --follow --json` processes, each \
         counted as following once it has printed the warm-up turn's stop reason; the same \
         latency, to the line on its stdout pipe. acp-multiplex (github.com/ElleNajt/acp-multiplex, \
         a proxy that fans one ACP agent out to clients on a Unix socket) would be the \
         outside peer, but it cannot be built here: it is Go source needing Go 1.25 (Debian \
         has 1.19, and no newer Go is installed), its module path `acp-multiplex` is not one \
         the Go module proxy serves, and npm has no such package; so it is not measured."
            .to_owned(),
        "**CPU and memory**: the supervisor (`supervisor_pid`) alone, not the agent: \
         utime + stime from `/proc/<pid>/stat` just before the delivery and after every \
         watcher had the last chunk; VmRSS then, and VmHWM, from `/proc/<pid>/status`."
            .to_owned(),
        format!(
            "**slow client**: {BESIDE_SLOW} readers and one connection that joins the same \
             way and then reads nothing, holding its connection open, for a turn of \
             {SLOW_CHUNKS} chunks {SLOW_CHUNK_MS} ms apart (twice the bridge's limit of \
             {MAX_BACKLOG} queued lines), next to the same turn with the {BESIDE_SLOW} readers \
             alone, and a turn twice as long with the slow one: each in a fresh runtime. Its \
             drop is the supervisor's note `client-N left: …` in the transcript (`acp log ID \
             --json`), looked for for {} s after the turn while the slow client still holds its \
             connection; its time is the note's `ts` (whole ms) from the wall clock read \
             before the delivery. Without such a note the row says what the supervisor noted \
             once the client closed its connection.",
            NOTE_WAIT.as_secs()
        ),
    ]
}
