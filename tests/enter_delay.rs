//! The Enter-delay experiment (issue 16): for each real CLI — Claude Code
//! 2.1.197, Codex 0.171.0, opencode 1.18.33, offline against the mock model
//! — how short the pause between a verified echo and Enter may be before
//! the CLI no longer takes that Enter as the submission (it drops it, or
//! takes it as part of the paste). `AGENT_COMMS_ENTER_STYLE=typed` runs it
//! with the text typed instead of pasted (`style = "typed"`), which sets
//! `typed_enter_delay_ms`.
//!
//! A benchmark, not a CI test: each CLI gets `AGENT_COMMS_ENTER_TRIALS`
//! deliveries (default 200) at each delay, a served runtime restarted with
//! a project profile that sets `enter_delay_ms` for every delay. A trial
//! counts as taken at once when its evidence says one Enter press did it,
//! and as lost when the delivery failed; every trial's text must reach the
//! model exactly once either way. The table goes to stdout and to
//! `target/tmp/enter-delay/<cli>-<style>.md`; its numbers belong in
//! docs/providers.md.
//!
//! ```sh
//! cargo build -p agent-comms-mockmodel
//! AGENT_COMMS_REAL_PROVIDERS="$(scripts/install-providers)" \
//!     cargo test --test enter_delay -- --ignored --nocapture --test-threads=3
//! ```

mod support;

use std::fmt::Write as _;
use std::time::Duration;

use support::real::trials::Trials;
use support::real::world::World;
use support::real::{Cli, START};

/// The runtime each experiment serves.
const ID: &str = "alice";

/// The delays tried, in ms: none, a little, the pinned profiles' values.
const DELAYS_MS: [u64; 5] = [0, 10, 30, 100, 150];

/// How the text goes in: pasted (what the CLIs turn on) or typed.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    Paste,
    Typed,
}

impl Style {
    fn from_env() -> Self {
        match std::env::var("AGENT_COMMS_ENTER_STYLE").as_deref() {
            Ok("typed") => Style::Typed,
            Ok("paste") | Err(_) => Style::Paste,
            Ok(other) => panic!("AGENT_COMMS_ENTER_STYLE={other}: use paste or typed"),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Style::Paste => "paste",
            Style::Typed => "typed",
        }
    }
}

fn trials() -> usize {
    std::env::var("AGENT_COMMS_ENTER_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// The built-in profile of `cli` with the Enter delay of `style` set to
/// `delay` (typed: the style too), as a project profile (which overrides
/// the built-in one).
fn profile_with_delay(cli: Cli, delay: u64, style: Style) -> String {
    let file = format!("{}.toml", cli.adapter());
    let (_, text) = agent_comms_adapters::BUILTIN
        .iter()
        .find(|(f, _)| *f == file)
        .expect("a built-in profile");
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("typed_enter_delay_ms") {
            continue;
        } else if line.starts_with("enter_delay_ms") {
            writeln!(out, "enter_delay_ms = {delay}").unwrap();
            if style == Style::Typed {
                writeln!(out, "typed_enter_delay_ms = {delay}").unwrap();
            }
        } else if style == Style::Typed && line.starts_with("style = ") {
            writeln!(out, "style = \"typed\"").unwrap();
        } else {
            writeln!(out, "{line}").unwrap();
        }
    }
    out
}

/// [`Trials`] with the Enter delay `delay`, in a runtime served for them.
fn measure(w: &World, cli: Cli, delay: u64, style: Style, n: usize) -> Trials {
    let providers = w.env.project.join(".agent-comms/providers");
    std::fs::create_dir_all(&providers).unwrap();
    std::fs::write(
        providers.join(format!("{}.toml", cli.adapter())),
        profile_with_delay(cli, delay, style),
    )
    .unwrap();
    // A project profile is used once trusted, as it is now.
    let trusted = w.env.run(&["trust", "--yes"]);
    assert!(trusted.success(), "{trusted:#?}");
    let mut served = w.serve(ID, &[], &[]);
    w.wait_activity(ID, "idle", START, "start-up");
    let trials = Trials::run(w, ID, &format!("enter delay {delay}"), n);
    let went_in = trials.styles.iter().map(String::as_str).collect::<Vec<_>>();
    assert!(
        went_in.iter().all(|s| *s == style.name()),
        "[{}] {delay} ms: the texts went in as {went_in:?}, not {}",
        cli.program(),
        style.name()
    );
    for lost in &trials.lost {
        eprintln!("[{}] {delay} ms, {lost}", cli.program());
    }
    let (ok, out, err) = w.ac(&["session", "kill", ID], Duration::from_secs(20));
    assert!(ok, "session kill: {out}{err}");
    served.tty.wait_exit();
    trials
}

fn experiment(cli: Cli, test: &str) {
    let w = World::new(cli, test);
    let n = trials();
    let style = Style::from_env();
    let measured: Vec<(u64, Trials)> = DELAYS_MS
        .iter()
        .map(|&d| (d, measure(&w, cli, d, style, n)))
        .collect();
    let mut table = format!(
        "{} ({}), {n} trials per delay\n\n\
         | Enter delay | submitted by the first Enter | only by another | lost | not exactly once at the model | sent with the next one | call → submitted, median (after the previous turn) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
        cli.program(),
        style.name()
    );
    for (delay, t) in &measured {
        let at_model = t.at_model(&w);
        writeln!(
            table,
            "| {delay} ms | {} of {n} | {} | {} | {} | {} | {:.0} ms |",
            t.at_once,
            t.pressed_again,
            t.lost.len(),
            at_model.not_once.len(),
            at_model.sent_with_next.len(),
            t.median_ms()
        )
        .unwrap();
    }
    println!("{table}");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp/enter-delay");
    std::fs::create_dir_all(&dir).unwrap();
    let file = format!("{}-{}.md", cli.program(), style.name());
    std::fs::write(dir.join(file), &table).unwrap();
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
