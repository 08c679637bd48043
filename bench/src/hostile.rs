//! The hostile-neighbour section (issue 32): the floods that once took a
//! runtime down, each run against a live ACP runtime while a controller
//! works, beside the same controller with no flood, in the same run.
//!
//! Why it is measured this way:
//!
//! - **The controller** is a raw ACP connection on the bridge socket (what
//!   `acp attach` uses) that has joined the session and prompts, one turn
//!   at a time; each sample is from writing `session/prompt` to reading its
//!   response (every update of the turn comes before it). The agent is the
//!   fake (`tests/fakes/acp_agent.py`), which answers at once: what is
//!   timed is ours.
//! - **Each flood** runs on threads of this process from before the first
//!   prompt to after the last, as fast as it can: a neighbour on the same
//!   2 cores takes CPU whatever we do, so the figure to watch is how much
//!   more than its CPU share the flood costs the controller. They run as
//!   the owner's uid (the benchmark cannot be another user), so the per-uid
//!   bound is the one they meet; another uid meets the same bound and the
//!   others' total beside it.
//! - **The transcript** starts with 20 MB of past entries, as a runtime
//!   that served for weeks has: the join flood replays it.
//! - **The supervisor's cost**: its peak RSS (VmHWM) over the scenario
//!   (each scenario has a runtime of its own), the most descriptors it held
//!   (`/proc/<pid>/fd`, sampled every 50 ms), and how much the transcript
//!   grew.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agent_comms_core::acp::bridge::bounds::{
    LINES_BURST, LINES_PER_SECOND, MAX_PER_UID, REFUSALS_NOTED_EVERY, REFUSED_BURST,
    REFUSED_PER_SECOND, REPLAY_BURST_BYTES, REPLAY_BYTES_PER_SECOND,
};
use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};

use crate::acp::Supervisor;
use crate::bench::Bench;
use crate::progress;
use crate::report::{judge, Row, Section};
use crate::runtimes::Project;
use crate::stats::{latencies, one, size, Quantity, Summary};

const TITLE: &str =
    "Hostile neighbours: floods against a live runtime while a controller works (issue 32)";
const ID: &str = "hostile";
const FAKE_AGENT: &str = "tests/fakes/acp_agent.py";
/// The goal: the controller's median under a flood within 2x of
/// without.
const GOAL_FACTOR: f64 = 2.0;
/// The past a long-lived runtime's transcript holds.
const PAST_ENTRIES: usize = 20_000;
const PAST_ENTRY_BYTES: usize = 1000;
/// How long a flood runs (or, with none, the runtime waits) before the
/// prompts timed under it.
const SUSTAINED: Duration = Duration::from_secs(2);
/// How long any one read may take before the benchmark gives up.
const READ_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flood {
    None,
    /// An observer sends `session/cancel` after `session/cancel`: each is
    /// refused.
    ObserverCancels,
    /// Connections past the per-uid bound, each refused.
    RefusedConnections,
    /// Connections that never say anything, held as long as allowed.
    IdleConnections,
    /// Clients joining with the whole history, over and over.
    Joins,
    /// Connections each sending a long line that never ends.
    TrickledLines,
}

impl Flood {
    const ALL: [Flood; 6] = [
        Flood::None,
        Flood::ObserverCancels,
        Flood::RefusedConnections,
        Flood::IdleConnections,
        Flood::Joins,
        Flood::TrickledLines,
    ];

    fn what(self) -> &'static str {
        match self {
            Flood::None => "no flood",
            Flood::ObserverCancels => "an observer's refused `session/cancel`s, back to back",
            Flood::RefusedConnections => {
                "refused connections (past the per-uid bound), back to back"
            }
            Flood::IdleConnections => "up to 1,000 connections that never send a byte",
            Flood::Joins => "4 clients joining with the full 20 MB history, over and over",
            Flood::TrickledLines => "20 connections each sending a 4 MiB line that never ends",
        }
    }

    /// What one unit of the flood is called, for its volume row.
    fn unit(self) -> &'static str {
        match self {
            Flood::None => "",
            Flood::ObserverCancels => "cancels sent",
            Flood::RefusedConnections => "connections refused",
            Flood::IdleConnections => "connections opened",
            Flood::Joins => "joins answered",
            Flood::TrickledLines => "MiB of unfinished lines sent",
        }
    }
}

struct Measured {
    /// The controller's prompts on the same runtime just before the flood.
    before: Vec<Duration>,
    latencies: Vec<Duration>,
    peak_rss: f64,
    peak_fds: usize,
    growth_mb: f64,
    volume: u64,
}

type Scenario = Result<Measured, String>;

/// The section, and the floods under which the controller could not work
/// (the runtime went down, or a prompt failed): an invariant that fails
/// the command, so that CI's quick run of this section means something.
pub fn section(bench: &Bench) -> (Section, Vec<String>) {
    let prompts = bench.plan.hostile_prompts;
    let runs: Vec<(Flood, Scenario)> = Flood::ALL
        .iter()
        .map(|&flood| {
            progress(&format!("hostile neighbours: {}", flood.what()));
            let run = scenario(bench, flood, prompts).map_err(|e| format!("{e:#}"));
            (flood, run)
        })
        .collect();
    let mut rows = Vec::new();
    let mut broken = Vec::new();
    for (flood, run) in &runs {
        rows.extend(rows_of(*flood, run));
        if let Err(e) = run {
            broken.push(format!("under {}: {e}", flood.what()));
        }
    }
    let section = Section {
        title: TITLE.into(),
        intro: format!(
            "A controller prompts a live ACP runtime (`runtime acp-serve`, the fake agent) {prompts} times while each flood of issue 32 runs against the same runtime, and {prompts} times on that runtime just before its flood began; beside them, in the same run, a runtime with no flood. The supervisor's peak memory, descriptors and transcript growth show what each flood costs it."
        ),
        rows,
        method: method(prompts),
    };
    (section, broken)
}

fn rows_of(flood: Flood, run: &Scenario) -> Vec<Row> {
    let system = flood.what();
    let of = |f: &dyn Fn(&Measured) -> Summary| run.as_ref().map(f).map_err(Clone::clone);
    let mut latency = Row::new(
        "the controller's `session/prompt` → its response",
        system,
        of(&|m| latencies(&m.latencies)),
    );
    if let (Ok(m), true) = (run, flood != Flood::None) {
        // Judged against the same runtime just before its flood: between
        // two runtimes of one run the median moves by more than the
        // floods' cost on this 2-core VM (0.7 to 1.8 ms in four runs).
        let before = latencies(&m.before).median;
        let within = latencies(&m.latencies).median.value() <= GOAL_FACTOR * before.value();
        latency.target = judge(
            &format!("median within 2x of the {before} just before the flood"),
            Some(within),
        );
    }
    let mut rows = vec![
        latency,
        Row::new(
            "the supervisor's peak RSS (VmHWM)",
            system,
            of(&|m| size(m.peak_rss)),
        ),
        Row::new(
            "the most descriptors the supervisor held",
            system,
            of(&|m| one(Quantity::Count(m.peak_fds as f64))),
        ),
        Row::new(
            "the transcript's growth",
            system,
            of(&|m| size(m.growth_mb)),
        ),
    ];
    if flood != Flood::None {
        rows.push(Row::new(
            &format!("the flood's volume: {}", flood.unit()),
            system,
            of(&|m| one(Quantity::Count(m.volume as f64))),
        ));
    }
    rows
}

fn scenario(bench: &Bench, flood: Flood, prompts: usize) -> anyhow::Result<Measured> {
    let project = Project::new(bench, "hostile")?;
    let transcript = seed_past(project.path())?;
    let cwd = project.path().to_owned();
    let agent = bench.repo().join(FAKE_AGENT);
    let (started, supervisor) = crate::acp::serve(bench, &project, ID, &agent, |cmd| {
        cmd.current_dir(&cwd);
    })?;
    let field = |key: &str| crate::acp::started_field(&started, key);
    let runtime = Runtime {
        pid: supervisor.0,
        bridge: Bridge {
            path: field("bridge")?.into(),
            session: field("session_id")?,
            cwd,
        },
        _supervisor: supervisor,
    };
    let mut controller = Controller::join(&runtime.bridge)?;
    controller.prompt("warm-up")?;
    let before_flood = (0..prompts)
        .map(|i| controller.prompt(&format!("before {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let before = std::fs::metadata(&transcript)?.len();
    let stop = Arc::new(AtomicBool::new(false));
    let volume = Arc::new(AtomicU64::new(0));
    let fds = FdSampler::start(runtime.pid, stop.clone());
    let flooders = start(flood, &runtime.bridge, &stop, &volume)?;
    // The flood under way, and past its first burst, before the first
    // sample: an attack is sustained.
    while flood != Flood::None && volume.load(Ordering::Relaxed) == 0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Every runtime alike, flood or not: the controller's own line pace
    // (bounds::LINES_BURST) refilled before the timed prompts.
    std::thread::sleep(SUSTAINED);
    let mut samples = Vec::with_capacity(prompts);
    for i in 0..prompts {
        samples.push(controller.prompt(&format!("prompt {i}"))?);
    }
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        let _ = flooder.join();
    }
    let peak_fds = fds.join().unwrap_or(0);
    let peak_rss = crate::procs::status_mb(runtime.pid, "VmHWM")?;
    let after = std::fs::metadata(&transcript)?.len();
    Ok(Measured {
        before: before_flood,
        latencies: samples,
        peak_rss,
        peak_fds,
        growth_mb: after.saturating_sub(before) as f64 / 1e6,
        volume: volume.load(Ordering::Relaxed),
    })
}

/// Writes the past of a long-lived runtime into the project's transcript
/// (the runtime goes on from it); its path.
fn seed_past(project: &Path) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = project.join(".agent-comms/acp");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    let path = dir.join(format!("{ID}.jsonl"));
    let mut file = std::io::BufWriter::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)?,
    );
    let filler = "x".repeat(PAST_ENTRY_BYTES);
    for seq in 0..PAST_ENTRIES {
        let entry =
            json!({"seq": seq, "ts": "2026-01-01T00:00:00.000Z", "dir": "note", "text": filler});
        writeln!(file, "{entry}")?;
    }
    file.flush()?;
    Ok(path)
}

struct Runtime {
    pid: u32,
    bridge: Bridge,
    _supervisor: Supervisor,
}

/// The runtime's bridge socket, and the session to join there.
#[derive(Clone)]
struct Bridge {
    path: PathBuf,
    session: String,
    cwd: PathBuf,
}

impl Bridge {
    fn connect(&self) -> anyhow::Result<UnixStream> {
        let stream = UnixStream::connect(&self.path)
            .with_context(|| format!("cannot connect to {}", self.path.display()))?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        Ok(stream)
    }

    /// A connection that said `initialize` and nothing more: it holds a
    /// place, and is sent no session's updates.
    fn initialized(&self) -> anyhow::Result<BufReader<UnixStream>> {
        let mut stream = BufReader::new(self.connect()?);
        call(
            &mut stream,
            1,
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )?;
        Ok(stream)
    }

    /// A connection that said `initialize` and joined the session: with
    /// the whole history (`session/load`) when `full`, else none
    /// (`session/resume`); an observer when `observe`.
    fn joined(&self, observe: bool, full: bool) -> anyhow::Result<BufReader<UnixStream>> {
        let mut stream = self.initialized()?;
        if observe {
            let observe = json!({"jsonrpc": "2.0", "method": "_agent_comms/observe", "params": {}});
            writeln!(stream.get_mut(), "{observe}")?;
        }
        let (method, params) = if full {
            (
                "session/load",
                json!({"sessionId": self.session, "cwd": self.cwd, "mcpServers": []}),
            )
        } else {
            (
                "session/resume",
                json!({"sessionId": self.session, "cwd": self.cwd}),
            )
        };
        call(&mut stream, 2, method, params)?;
        Ok(stream)
    }
}

/// Sends request `id` and reads until its answer, which must be a result.
fn call(
    stream: &mut BufReader<UnixStream>,
    id: u64,
    method: &str,
    params: Value,
) -> anyhow::Result<Value> {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    writeln!(stream.get_mut(), "{request}")?;
    let mut line = String::new();
    loop {
        line.clear();
        if stream.read_line(&mut line)? == 0 {
            bail!("the bridge closed the connection during {method}");
        }
        let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if msg["id"] == json!(id) && msg.get("method").is_none() {
            ensure!(msg.get("result").is_some(), "{method} was refused: {msg}");
            return Ok(msg);
        }
    }
}

struct Controller {
    stream: BufReader<UnixStream>,
    session: String,
    next: u64,
}

impl Controller {
    fn join(bridge: &Bridge) -> anyhow::Result<Self> {
        Ok(Self {
            stream: bridge.joined(false, false)?,
            session: bridge.session.clone(),
            next: 10,
        })
    }

    /// One turn: from writing the prompt to reading its response.
    fn prompt(&mut self, text: &str) -> anyhow::Result<Duration> {
        self.next += 1;
        let params = json!({"sessionId": self.session, "prompt": [{"type": "text", "text": text}]});
        let began = Instant::now();
        let response = call(&mut self.stream, self.next, "session/prompt", params)?;
        let took = began.elapsed();
        ensure!(
            response["result"]["stopReason"] == "end_turn",
            "the turn did not end normally: {response}"
        );
        Ok(took)
    }
}

/// The flood's threads, counting into `volume` until `stop`.
fn start(
    flood: Flood,
    bridge: &Bridge,
    stop: &Arc<AtomicBool>,
    volume: &Arc<AtomicU64>,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let spawn = |threads: usize, work: fn(&Target, &AtomicU64) -> anyhow::Result<()>| {
        (0..threads)
            .map(|_| {
                let target = Target {
                    bridge: bridge.clone(),
                    stop: stop.clone(),
                };
                let volume = volume.clone();
                std::thread::spawn(move || {
                    while !target.stopped() {
                        // A connection the bridge let go is made again.
                        let _ = work(&target, &volume);
                    }
                })
            })
            .collect::<Vec<_>>()
    };
    Ok(match flood {
        Flood::None => Vec::new(),
        Flood::ObserverCancels => spawn(1, observer_cancels),
        Flood::RefusedConnections => {
            // The uid's other places taken (the controller holds one), so
            // that every further connection is refused. They join no
            // session: what is measured is the refusals, not 31 more
            // clients to send each update to.
            let held: Vec<_> = (0..MAX_PER_UID - 1)
                .map(|_| bridge.initialized())
                .collect::<Result<_, _>>()?;
            let mut threads = spawn(1, refused_connection);
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                drop(held);
            }));
            threads
        }
        Flood::IdleConnections => spawn(1, idle_connections),
        Flood::Joins => spawn(4, full_join),
        Flood::TrickledLines => spawn(20, trickled_line),
    })
}

struct Target {
    bridge: Bridge,
    stop: Arc<AtomicBool>,
}

impl Target {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

fn observer_cancels(target: &Target, volume: &AtomicU64) -> anyhow::Result<()> {
    let observer = target.bridge.joined(true, false)?;
    let mut writer = observer.get_ref().try_clone()?;
    // It reads what it is sent, as an editor would: it is never dropped
    // for falling behind, only refused.
    let mut reader = observer;
    let drain = std::thread::spawn(move || {
        let mut sink = [0u8; 64 * 1024];
        while reader.read(&mut sink).is_ok_and(|n| n > 0) {}
    });
    let cancel = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": target.bridge.session}});
    let batch = format!("{cancel}\n").repeat(100);
    while !target.stopped() {
        writer.write_all(batch.as_bytes())?;
        volume.fetch_add(100, Ordering::Relaxed);
    }
    let _ = writer.shutdown(std::net::Shutdown::Both);
    let _ = drain.join();
    Ok(())
}

fn refused_connection(target: &Target, volume: &AtomicU64) -> anyhow::Result<()> {
    let mut stream = target.bridge.connect()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    if answer.contains("connection refused") {
        volume.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

fn idle_connections(target: &Target, volume: &AtomicU64) -> anyhow::Result<()> {
    let mut held = Vec::new();
    while !target.stopped() {
        if held.len() < 1000 {
            if let Ok(stream) = UnixStream::connect(&target.bridge.path) {
                held.push(stream);
                volume.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        }
        // Let go of those the bridge closed (refused, or past the
        // initialize deadline), to open more.
        held.retain(|s| {
            let _ = s.set_nonblocking(true);
            let mut byte = [0u8; 1];
            !matches!((&*s).read(&mut byte), Ok(0))
        });
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

fn full_join(target: &Target, volume: &AtomicU64) -> anyhow::Result<()> {
    let joined = target.bridge.joined(false, true)?;
    volume.fetch_add(1, Ordering::Relaxed);
    drop(joined);
    Ok(())
}

fn trickled_line(target: &Target, volume: &AtomicU64) -> anyhow::Result<()> {
    let reader = target.bridge.initialized()?;
    let mut stream = reader.get_ref().try_clone()?;
    let piece = vec![b'x'; 64 * 1024];
    stream.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"")?;
    for _ in 0..64 {
        if target.stopped() {
            return Ok(());
        }
        stream.write_all(&piece)?;
    }
    volume.fetch_add(4, Ordering::Relaxed);
    // 4 MiB sent, the line never ends: held until the bridge lets go.
    let mut byte = [0u8; 1];
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    while !target.stopped() {
        match stream.read(&mut byte) {
            Ok(0) => break,
            _ => continue,
        }
    }
    Ok(())
}

/// Samples how many descriptors `pid` holds until `stop`; the most seen.
struct FdSampler(JoinHandle<usize>);

impl FdSampler {
    fn start(pid: u32, stop: Arc<AtomicBool>) -> Self {
        Self(std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(Ordering::Relaxed) {
                if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
                    most = most.max(dir.count());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            most
        }))
    }

    fn join(self) -> std::thread::Result<usize> {
        self.0.join()
    }
}

fn method(prompts: usize) -> Vec<String> {
    vec![
        format!("**the controller**: one raw ACP connection on the bridge socket (`initialize`, `session/resume`), then one untimed prompt, {prompts} timed ones before the flood starts and {prompts} while it runs, each from writing `session/prompt` to reading its response; the fake agent (`tests/fakes/acp_agent.py`, normal mode) answers each at once with one update. A fresh runtime per scenario, its transcript seeded with {PAST_ENTRIES} entries of {PAST_ENTRY_BYTES} bytes (about 20 MB) of past."),
        "**the floods** run on threads of the benchmark from 2 s before the first prompt timed under them (past their first burst: an attack is sustained) to after the last, as fast as they can, as the runtime's owner (the benchmark cannot be another user): an observer (`_agent_comms/observe`) writing `session/cancel`s in batches of 100 while it reads what it is sent, connecting again each time the bridge lets it go (after 32 refusals); connections past the per-uid bound (the uid's other 31 places held by connections that said `initialize` and joined nothing), each reading its refusal; up to 1,000 connections that never write (refused past the bound, let go at the `initialize` deadline, opened again); 4 threads joining with `session/load` (the whole history) over and over; 20 connections each writing 4 MiB of a line that never ends (let go at the line deadline).".into(),
        format!("**the supervisor**: VmHWM from `/proc/<pid>/status` after the scenario; descriptors counted in `/proc/<pid>/fd` every 50 ms; the transcript file's size after the last prompt minus before the first. Refusals cost a counter and a note at most every {} s, so a flood adds one or two notes. Past {REFUSED_BURST} refusals (then {REFUSED_PER_SECOND} a second) the bridge waits before its next accept, and a join's replay is read at {} MiB/s past a {} MiB burst: the volumes of those two floods are what these paces let through.", REFUSALS_NOTED_EVERY.as_secs(), REPLAY_BYTES_PER_SECOND >> 20, REPLAY_BURST_BYTES >> 20),
        "**the goal** (issue 32): under each flood, the controller's median within 2x of its median on the same runtime just before that flood began (a runtime's own before and after: between two runtimes the median moves by more than that on this VM). The baseline of the benchmark before issue 32 is in the issue: an observer's cancels dropped every controller within a second, 351k refused connections in 20 s added 75 MB of transcript and 80 MB of log, 20 joins took 2.1 GB, 1,100 idle connections held all 1,024 descriptors.".into(),
        format!("**the p99** of about 16 ms is the bridge's own pace of a client's lines ({LINES_BURST} at once, then {LINES_PER_SECOND} a second; `bounds.rs`): the controller sends its prompts back to back, faster than that, so those past the burst wait about 1/{LINES_PER_SECOND} s each, flood or not. Every runtime waits {} s before its timed prompts, which refills it.", SUSTAINED.as_secs()),
    ]
}
