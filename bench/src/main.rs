//! `agent-comms-bench`: measures agent-comms side by side with a bare PTY,
//! tmux and agent-tty, and writes the tables of `docs/benchmarks.md`.
//!
//! Everything in a report comes from one run on one machine, so the numbers
//! in a row can be compared with the rows next to it; numbers from different
//! machines or runs cannot. Each section is a plain function from the
//! [`Bench`] context to a [`report::Section`]; a measurement that fails
//! becomes a row saying so, and the other rows are still measured.
//!
//! Targets are printed next to the results and judged (met or missed), never
//! asserted: a benchmark that fails on a slow machine tells nobody anything.

mod adapters;
mod bare;
mod bench;
mod cells;
mod delivery;
mod machine;
mod procs;
mod report;
mod runtimes;
mod sessions;
mod stats;
mod supervised;
mod tmux;
mod workload;

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

use crate::bench::{Bench, Plan};

#[derive(Parser)]
#[command(
    name = "agent-comms-bench",
    about = "Measure agent-comms side by side with a bare PTY, tmux and agent-tty",
    long_about = "Measure agent-comms side by side with a bare PTY, tmux and agent-tty.\n\n\
        Measures the binaries next to this executable (build them first with \
        `cargo build --release`), in a private temporary AGENT_COMMS_RUNTIME_DIR, \
        and ends every process it starts."
)]
struct Args {
    /// Write the report here (Markdown); without it the report goes to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Fewer iterations: a smoke run, not numbers to publish.
    #[arg(long)]
    quick: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    let bench = Bench::new(plan)?;
    let mut machine = machine::Machine::probe(&bench);
    let sections = [
        sessions::section(&bench),
        cells::section(&bench),
        adapters::section(&bench),
        delivery::section(&bench),
    ];
    machine.note_end_load();
    let markdown = report::render(&machine, &command_line(), &sections);
    match &args.out {
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(path, &markdown)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{markdown}"),
    }
    Ok(())
}

/// Tells the person waiting what is being measured now.
fn progress(what: &str) {
    eprintln!("measuring {what}…");
}

/// The command as a person would type it to reproduce this report.
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut line = String::from("cargo run --release -p agent-comms-bench");
    if !args.is_empty() {
        line.push_str(" -- ");
        line.push_str(&args.join(" "));
    }
    line
}
