//! The real-provider part of the benchmark's ACP section (issue 13): for
//! each REAL provider, deliveries into its ACP runtime (`runtime acp-serve`)
//! and into its interactive runtime (`runtime interactive-serve`, the PTY
//! path), each timed from the `runtime deliver` call to the model's request
//! arriving at the mock model server (its log's `received_at`), offline, in
//! the world of `tests/support/real`.
//!
//! It lives here rather than in the bench crate because that world (the
//! network namespace, the seeded HOMEs, the answering terminals) is the
//! tests'. `agent-comms-bench --section acp` runs it as
//!
//! ```sh
//! AGENT_COMMS_REAL_PROVIDERS=<bin dir> AGENT_COMMS_BENCH_SAMPLES=<file> \
//!     AGENT_COMMS_BENCH_DELIVERIES=N \
//!     cargo test --release --test acp_latency_real -- --include-ignored --test-threads=1
//! ```
//!
//! and reads the samples, one JSON line per provider and runtime kind:
//! `{"provider", "runtime": "acp"|"interactive", "ms": [...]}`, or
//! `"error"` in place of `ms`. Its tests are `#[ignore]`d: it measures, it
//! does not judge, so `cargo test` and CI leave it out (run alone, without
//! `AGENT_COMMS_BENCH_SAMPLES`, a test fails saying so).
//!
//! Both kinds see the same deliveries: one untimed first, then N timed, each
//! a new text whose request must reach the mock (a delivery whose request
//! never arrives fails the series), and the next only once the turn is over.

mod support;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::real::sampler::ms;
use support::real::world::World;
use support::real::{now_ms, Cli, START, TURN};

/// Where the samples go; the benchmark sets it.
const SAMPLES: &str = "AGENT_COMMS_BENCH_SAMPLES";
/// How many deliveries are timed per runtime kind.
const DELIVERIES: &str = "AGENT_COMMS_BENCH_DELIVERIES";
const PTY_ID: &str = "bench-pty";
const ACP_ID: &str = "bench-acp";

fn samples_file(test: &str) -> PathBuf {
    match std::env::var_os(SAMPLES).filter(|p| !p.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => panic!("{test} is run by agent-comms-bench --section acp, which sets {SAMPLES}"),
    }
}

fn deliveries() -> usize {
    std::env::var(DELIVERIES)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
}

/// One untimed delivery, then `n` timed: from the call to the request
/// holding the text at the mock. `settle` waits for the turn to end.
fn series(
    w: &World,
    id: &str,
    kind: &str,
    n: usize,
    settle: impl Fn() -> Result<(), String>,
) -> Result<Vec<f64>, String> {
    let mut samples = Vec::new();
    for i in 0..=n {
        let text = format!("bench {kind} delivery {i} REPLY=ok");
        let called = now_ms();
        w.deliver(id, &text, TURN.as_secs())
            .map_err(|e| format!("delivery {i}: {e}"))?;
        let request = w.wait_request(&text, TURN).ok_or_else(|| {
            format!(
                "delivery {i}: the mock never got a request holding {text:?}:\n{}",
                w.requests_summary()
            )
        })?;
        settle()?;
        if i > 0 {
            samples.push(ms(&request["received_at"]) - called);
        }
    }
    Ok(samples)
}

fn interactive(w: &World, n: usize) -> Result<Vec<f64>, String> {
    let mut served = w.serve(PTY_ID, &[], &[]);
    w.wait_activity(PTY_ID, "idle", START, "start-up");
    let samples = series(w, PTY_ID, "interactive", n, || {
        w.wait_activity(PTY_ID, "idle", TURN, "after the turn");
        Ok(())
    });
    served.tty.end();
    samples
}

fn acp(w: &World, n: usize) -> Result<Vec<f64>, String> {
    w.acp_serve(ACP_ID, &[])?;
    // `runtime deliver` into an ACP runtime returns once the turn ended.
    let samples = series(w, ACP_ID, "acp", n, || Ok(()));
    let _ = w.ac(&["session", "kill", ACP_ID], Duration::from_secs(20));
    samples
}

fn measure(cli: Cli, test: &str) {
    let out = samples_file(test);
    let w = World::new(cli, test);
    let n = deliveries();
    let mut lines = Vec::new();
    for (kind, result) in [("interactive", interactive(&w, n)), ("acp", acp(&w, n))] {
        let mut line = json!({"provider": cli.program(), "runtime": kind});
        match result {
            Ok(samples) => line["ms"] = json!(samples),
            Err(e) => line["error"] = Value::String(e),
        }
        lines.push(line);
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", out.display()));
    for line in lines {
        writeln!(file, "{line}").expect("write a sample line");
    }
    w.finish(vec![]);
}

#[test]
#[ignore = "a measurement: agent-comms-bench --section acp runs it (with the real CLIs)"]
fn opencode_acp_and_interactive_delivery_latency() {
    measure(Cli::Opencode, "opencode_latency");
}

#[test]
#[ignore = "a measurement: agent-comms-bench --section acp runs it (with the real CLIs)"]
fn claude_acp_and_interactive_delivery_latency() {
    measure(Cli::Claude, "claude_latency");
}

#[test]
#[ignore = "a measurement: agent-comms-bench --section acp runs it (with the real CLIs)"]
fn codex_acp_and_interactive_delivery_latency() {
    measure(Cli::Codex, "codex_latency");
}
