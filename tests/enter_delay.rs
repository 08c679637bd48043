//! The Enter-delay experiment (issue 16): for each real CLI — Claude Code
//! 2.1.197, Codex 0.171.0, opencode 1.18.33, offline against the mock model
//! — how short the pause between a verified echo and Enter may be before
//! the CLI no longer takes that Enter as the submission (it drops it, or
//! takes it as part of the paste).
//!
//! A benchmark, not a CI test: each CLI gets `AGENT_COMMS_ENTER_TRIALS`
//! deliveries (default 200) at each delay, a served runtime restarted with
//! a project profile that sets `enter_delay_ms` for every delay. A trial
//! counts as taken at once when its evidence says one Enter press did it,
//! and as lost when the delivery failed; every trial's text must reach the
//! model exactly once either way. The table goes to stdout and to
//! `target/tmp/enter-delay/<cli>.md`; its numbers belong in
//! docs/providers.md.
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test enter_delay -- --ignored --nocapture --test-threads=3
//! ```

mod support;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use support::real::world::World;
use support::real::{Cli, START, TURN};

/// The runtime each experiment serves.
const ID: &str = "alice";

/// The delays tried, in ms: none, a little, the pinned profiles' values.
const DELAYS_MS: [u64; 4] = [0, 10, 30, 100];

fn trials() -> usize {
    std::env::var("AGENT_COMMS_ENTER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// What one delay did.
struct Outcome {
    delay_ms: u64,
    trials: usize,
    /// Submitted by the first Enter.
    at_once: usize,
    /// Submitted, but only by an Enter pressed again.
    pressed_again: usize,
    /// Not submitted: the delivery failed (and took its text back).
    lost: usize,
    /// Texts that reached the model other than once.
    not_once: usize,
    /// Call → submitted, median.
    median_ms: f64,
}

/// The built-in profile of `cli` with `enter_delay_ms` set to `delay`, as
/// a project profile (which overrides the built-in one).
fn profile_with_delay(cli: Cli, delay: u64) -> String {
    let file = format!("{}.toml", cli.adapter());
    let (_, text) = agent_comms_adapters::BUILTIN
        .iter()
        .find(|(f, _)| *f == file)
        .expect("a built-in profile");
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("enter_delay_ms") {
            writeln!(out, "enter_delay_ms = {delay}").unwrap();
        } else {
            writeln!(out, "{line}").unwrap();
        }
    }
    out
}

fn measure(w: &World, cli: Cli, delay: u64, n: usize) -> Outcome {
    let providers = w.env.project.join(".agent-comms/providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::write(
        providers.join(format!("{}.toml", cli.adapter())),
        profile_with_delay(cli, delay),
    )
    .unwrap();
    let mut served = w.serve(ID, &[], &[]);
    w.wait_activity(ID, "idle", START, "start-up");
    let mut outcome = Outcome {
        delay_ms: delay,
        trials: n,
        at_once: 0,
        pressed_again: 0,
        lost: 0,
        not_once: 0,
        median_ms: f64::NAN,
    };
    let mut took = Vec::new();
    let mut texts = Vec::new();
    for i in 0..n {
        let text = format!("enter delay {delay} trial {i}");
        let called = Instant::now();
        match w.deliver(ID, &text, 60) {
            Ok(ev) if ev["enter_presses"] == 1 => {
                outcome.at_once += 1;
                took.push(called.elapsed().as_secs_f64() * 1000.0);
            }
            Ok(_) => outcome.pressed_again += 1,
            Err(e) => {
                eprintln!("[{}] {delay} ms, trial {i}: {e}", cli.program());
                outcome.lost += 1;
            }
        }
        texts.push(text);
    }
    w.wait_activity(ID, "idle", TURN, "after the last trial");
    outcome.not_once = texts.iter().filter(|t| w.turns_with(t) != 1).count();
    took.sort_by(f64::total_cmp);
    if !took.is_empty() {
        outcome.median_ms = took[took.len() / 2];
    }
    let (ok, out, err) = w.ac(&["session", "kill", ID], Duration::from_secs(20));
    assert!(ok, "session kill: {out}{err}");
    served.tty.wait_exit();
    outcome
}

fn experiment(cli: Cli, test: &str) {
    let Some(w) = World::new(cli, test) else {
        return;
    };
    let n = trials();
    let outcomes: Vec<Outcome> = DELAYS_MS.iter().map(|&d| measure(&w, cli, d, n)).collect();
    let mut table = format!(
        "{} (paste), {n} trials per delay\n\n\
         | Enter delay | submitted by the first Enter | only by another | lost | not exactly once at the model | call → submitted, median (after the previous turn) |\n\
         |---:|---:|---:|---:|---:|---:|\n",
        cli.program()
    );
    for o in &outcomes {
        writeln!(
            table,
            "| {} ms | {} of {} | {} | {} | {} | {:.0} ms |",
            o.delay_ms, o.at_once, o.trials, o.pressed_again, o.lost, o.not_once, o.median_ms
        )
        .unwrap();
    }
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/enter-delay");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{}.md", cli.program())), &table).unwrap();
    w.finish(vec![]);
}

#[test]
#[ignore = "an experiment of several minutes per CLI with the real CLIs: run it with --ignored (see the module docs)"]
fn enter_delay_claude() {
    experiment(Cli::Claude, "enter_delay_claude");
}

#[test]
#[ignore = "an experiment of several minutes per CLI with the real CLIs: run it with --ignored (see the module docs)"]
fn enter_delay_codex() {
    experiment(Cli::Codex, "enter_delay_codex");
}

#[test]
#[ignore = "an experiment of several minutes per CLI with the real CLIs: run it with --ignored (see the module docs)"]
fn enter_delay_opencode() {
    experiment(Cli::Opencode, "enter_delay_opencode");
}
