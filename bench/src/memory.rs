//! The idle-memory section (issues 2 and 33): what idle sessions cost the
//! machine, as `cargo build --release` makes the supervisors, next to one
//! tmux server holding the same sessions.
//!
//! The measure is PSS, not RSS: RSS counts every page a process maps, also
//! those it shares (the executable, libc), once per process, so ten
//! supervisors' RSS summed counts the executable ten times; PSS divides
//! each page among the processes that map it, so summed over the
//! supervisors it is what the sessions together cost.

use std::collections::BTreeSet;

use crate::bench::Bench;
use crate::report::{judge, Row, Section};
use crate::stats;
use crate::{progress, supervised, tmux};

/// How many idle sessions the rows hold at once.
const IDLE_COUNTS: [usize; 3] = [1, 10, 50];
/// The target (issue 33): at most this much PSS a session, at
/// [`TARGET_COUNT`] sessions.
const PER_SESSION_MB: f64 = 2.5;
const TARGET_COUNT: usize = 10;
/// The target for fifty sessions together (issue 2).
const FIFTY_MB: f64 = 200.0;

const OURS: &str = "agent-comms (`cargo build --release`)";

pub fn section(bench: &Bench) -> Section {
    let mut images = BTreeSet::new();
    let rows = IDLE_COUNTS
        .iter()
        .flat_map(|&count| rows_of(bench, count, &mut images))
        .collect();
    let images = if images.is_empty() {
        "none (no session started)".to_owned()
    } else {
        images
            .iter()
            .map(|image| format!("`{image}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Section {
        title: "Idle sessions: memory (issues 2 and 33)".to_owned(),
        intro: "What idle sessions cost the machine: the PSS of their supervisors, as \
                `cargo build --release` makes them, next to one tmux 3.x server holding the \
                same sessions."
            .to_owned(),
        rows,
        method: vec![format!(
            "1, {TARGET_COUNT} and 50 `bash --norc` sessions started one after another, each \
             waited for until its prompt was drawn, then read together {} s after the last \
             prompt, nobody attached: `Pss` from `/proc/<pid>/smaps_rollup` of each supervisor \
             (one process per session) and of the one tmux server holding the same sessions. \
             The shells are alike on both sides and not counted. PSS divides each page by the \
             number of processes mapping it, so summed over the supervisors, the executable \
             pages they share count once: the sum is what the sessions together cost the \
             machine (RSS, which counts shared pages once per process, would count the \
             executable in every supervisor). The supervisors ran {images} (`/proc/<pid>/exe`): \
             `target/release/agent-comms` starts a session whose adapter loads no plugin under \
             the `agent-comms-supervisor` beside it. Where a supervisor's memory goes: \
             [architecture.md](architecture.md#what-an-idle-supervisor-holds).",
            supervised::IDLE.as_secs(),
        )],
    }
}

fn rows_of(bench: &Bench, count: usize, images: &mut BTreeSet<String>) -> Vec<Row> {
    let sessions = match count {
        1 => "1 idle `bash` session".to_owned(),
        n => format!("{n} idle `bash` sessions"),
    };
    progress(&format!("memory of {sessions}"));
    let error = |e: anyhow::Error| format!("{e:#}");
    let ours = supervised::idle_memory(bench, count).map_err(error);
    let server = tmux::idle_memory(bench, count, supervised::IDLE).map_err(error);
    if let Ok(ours) = &ours {
        images.extend(ours.iter().map(|idle| {
            idle.image
                .file_name()
                .unwrap_or(idle.image.as_os_str())
                .to_string_lossy()
                .into_owned()
        }));
    }
    let what = format!("{sessions}: memory");
    let pss: Result<Vec<f64>, String> = ours
        .as_ref()
        .map(|all| all.iter().map(|idle| idle.pss).collect())
        .map_err(Clone::clone);

    let mut rows = vec![Row::new(
        &what,
        &format!("{OURS}: PSS of a supervisor"),
        pss.as_ref().map(|v| stats::sizes(v)).map_err(Clone::clone),
    )];
    if count > 1 {
        let summed = pss.as_ref().map(|v| v.iter().sum::<f64>());
        let mut total = Row::new(
            &what,
            &format!("{OURS}: the {count} supervisors' PSS, summed"),
            summed.map(stats::size).map_err(Clone::clone),
        );
        let met = |limit: f64| summed.as_ref().ok().map(|sum| *sum <= limit);
        if count == TARGET_COUNT {
            let limit = PER_SESSION_MB * count as f64;
            total.target = judge(
                &format!("at most {PER_SESSION_MB} MB a session ({limit:.0} MB)"),
                met(limit),
            );
        }
        if count == 50 {
            total.target = judge(&format!("at most {FIFTY_MB:.0} MB"), met(FIFTY_MB));
        }
        rows.push(total);
    }
    rows.push(Row::new(
        &what,
        "tmux: PSS of the server",
        server.clone().map(stats::size),
    ));
    if count > 1 {
        rows.push(Row::new(
            &what,
            &format!("tmux: PSS of the server ÷ {count}, a session"),
            server.map(|pss| stats::size(pss / count as f64)),
        ));
    }
    rows
}
