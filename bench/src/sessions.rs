//! The sessions section (issue 2): start-up, keystroke echo and throughput
//! of agent-comms next to a bare PTY and tmux (their idle memory is a
//! section of its own: `memory.rs`).
//!
//! Runs of different systems are interleaved where each run is a fresh
//! start (start-up, throughput), so that a machine getting busier or
//! quieter during the run shifts every system alike.

use crate::bench::Bench;
use crate::report::{both, judge, Row, Section};
use crate::stats::{self, push, Runs};
use crate::workload::THROUGHPUT_BYTES;
use crate::{bare, progress, supervised, tmux};

const AGENT_COMMS: &str = "agent-comms";
const BARE: &str = "bare PTY";
const SCRIPT: &str = "bare relay: `script` (util-linux)";
const TMUX: &str = "tmux";

pub fn section(bench: &Bench) -> Section {
    let mut rows = first_prompt(bench);
    rows.extend(echo(bench));
    rows.extend(throughput(bench));
    Section {
        title: "Sessions (issue 2)".to_owned(),
        intro: "agent-comms sessions next to a PTY the benchmark opens itself (nothing in \
                between: the floor) and tmux 3.x (what agent-tty and most scripts use)."
            .to_owned(),
        rows,
        method: method(bench),
    }
}

fn first_prompt(bench: &Bench) -> Vec<Row> {
    progress("first prompt");
    let runs = bench.plan.startups;
    let mut ours = Ok(Vec::new());
    let mut tmux_new = Ok(Vec::new());
    for run in 0..runs {
        push(&mut ours, supervised::first_prompt(bench, run));
        push(&mut tmux_new, tmux::first_prompt_new_server(bench, run));
    }
    let tmux_running = tmux::first_prompt_running_server(bench, runs).map_err(|e| format!("{e:#}"));
    let what = "new session → first prompt";
    vec![
        Row::new(what, AGENT_COMMS, ours.map(|s| stats::latencies(&s))),
        Row::new(
            what,
            "tmux, new server",
            tmux_new.map(|s| stats::latencies(&s)),
        ),
        Row::new(
            what,
            "tmux, running server",
            tmux_running.map(|s| stats::latencies(&s)),
        ),
    ]
}

fn echo(bench: &Bench) -> Vec<Row> {
    progress("keystroke echo");
    let bare = bare::echo(&bench.plan)
        .map_err(|e| format!("{e:#}"))
        .map(|s| stats::latencies(&s));
    let ours = supervised::echo(bench)
        .map_err(|e| format!("{e:#}"))
        .map(|s| stats::latencies(&s));
    let what = "keystroke echo round trip";
    let met = both(&ours, &bare).map(|(o, b)| o.median.value() - b.median.value() <= 1.0);
    let mut ours = Row::new(what, AGENT_COMMS, ours);
    ours.target = judge("median within 1 ms of the bare PTY's", met);
    vec![Row::new(what, BARE, bare), ours]
}

fn throughput(bench: &Bench) -> Vec<Row> {
    progress("throughput (200 MB per run; the slowest part)");
    let mut bare = Ok(Vec::new());
    let mut script = Ok(Vec::new());
    let mut watched = Ok(Vec::new());
    let mut unwatched = Ok(Vec::new());
    let mut tmux = Ok(Vec::new());
    let mut received = Vec::new();
    for run in 0..bench.plan.throughput_runs {
        push(&mut bare, bare::throughput());
        push(&mut script, bare::script_relay());
        let run_watched = supervised::throughput_watched(bench, run);
        if let Ok((_, bytes)) = &run_watched {
            received.push(*bytes);
        }
        push(&mut watched, run_watched.map(|(took, _)| took));
        push(&mut unwatched, supervised::throughput_unwatched(bench, run));
        push(&mut tmux, tmux::throughput(bench, run));
    }
    let megabytes = THROUGHPUT_BYTES as f64 / 1e6;
    let rate = |runs: Runs| runs.map(|r| stats::rates(megabytes, &r));
    let (bare, script, tmux) = (rate(bare), rate(script), rate(tmux));
    // The floor is the faster relay: the benchmark's own reader, or script.
    let floor = match (&bare, &script) {
        (Ok(b), Ok(s)) if s.median.value() > b.median.value() => script.clone(),
        (Err(_), Ok(_)) => script.clone(),
        _ => bare.clone(),
    };
    let what = "output throughput, 200 MB";
    let watched_label = match received.iter().min() {
        Some(least) => format!(
            "agent-comms, watch client attached (it received ≥ {:.0} MB)",
            *least as f64 / 1e6
        ),
        None => "agent-comms, watch client attached".to_owned(),
    };
    let ours = |system: &str, runs| {
        let result = rate(runs);
        let compared = both(&result, &floor).zip(tmux.as_ref().ok());
        let met = compared.map(|((o, f), t)| {
            o.median.value() >= f.median.value() / 2.0 && o.median.value() > t.median.value()
        });
        let of_floor = compared.map_or(String::new(), |((o, f), _)| {
            format!(
                " ({:.2}× the floor's rate)",
                o.median.value() / f.median.value()
            )
        });
        let mut row = Row::new(what, system, result);
        row.target = judge(
            &format!("≥ ½ of the floor's (the faster bare row) and above tmux's{of_floor}"),
            met,
        );
        row
    };
    vec![
        Row::new(what, BARE, bare.clone()),
        Row::new(what, SCRIPT, script.clone()),
        ours(&watched_label, watched),
        ours("agent-comms, no client", unwatched),
        Row::new(what, TMUX, tmux),
    ]
}

/// How each row is measured, printed under the table.
fn method(bench: &Bench) -> Vec<String> {
    use crate::workload::{echo_command, throughput_command, PROMPT};
    vec![
        format!(
            "**first prompt**: from spawning `agent-comms session new --env PS1='{PROMPT}' -- \
             bash --norc` until the prompt is in the session's output, read from a watch stream \
             (the client library's `Attach` in `Watch` mode, opened as soon as `new` returns; it \
             starts with a redraw, so an earlier prompt is not missed). tmux: `new-session -d` \
             of the same shell, then `capture-pane -p` polled every 1 ms until the prompt shows \
             (tmux cannot push it); once with a new server per session (as each agent-comms \
             session has its own supervisor) and once on a running server."
        ),
        format!(
            "**keystroke echo**: `sh -c` running `{}` in a PTY: one byte written, timed until \
             the same byte comes back; {} untimed keystrokes first. Bare PTY: written to and \
             read from the master directly. agent-comms: an `Input` frame on an interactive \
             attach stream, timed until an `Output` frame carries the echo.",
            echo_command(),
            bench.plan.echo_warmup
        ),
        format!(
            "**throughput**: `sh -c` running `{}` ({} MB of 41-byte lines; more arrive, as the \
             terminal adds a CR to each LF), timed from starting it until all of it was \
             consumed. Bare PTY: read from the master until end of file. `script`: \
             `script -q -e -c CMD /dev/null`, its stdout a pipe the benchmark drains (64 KiB \
             reads) and counts, timed until it exits. Both bare rows run beside a thread that \
             spins, so that no CPU idles (on a virtual machine an idle CPU wakes slowly; see \
             `bench/src/bare.rs`). The floor is the faster of the two. agent-comms (screen \
             model on): from spawning `session new` until the `Exited` event on a watch stream \
             (a watcher that falls behind is sent a redraw in place of the bytes it missed, \
             hence the MB it received), and, with no client, until the supervisor process is \
             gone (pidfd). tmux: a new session on a running server, the command followed by \
             `tmux wait-for -S`, timed until `wait-for` returns.",
            throughput_command(),
            THROUGHPUT_BYTES / 1_000_000
        ),
    ]
}
