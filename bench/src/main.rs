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

mod acp;
mod adapters;
mod bare;
mod bench;
mod cells;
mod delivery;
mod fanout;
mod hostile;
mod hosts;
mod machine;
mod mcp;
mod memory;
mod procs;
mod report;
mod runtimes;
mod sessions;
mod soak;
mod stats;
mod supervised;
mod tmux;
mod workload;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, ValueEnum};

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
    /// Measure only this section (repeat for more). With --out naming an
    /// existing report, the section replaces its namesake there and says
    /// it was measured alone; the other sections are kept.
    #[arg(long = "section", value_enum, value_name = "NAME")]
    sections: Vec<SectionName>,
    /// How long the soak's chaos lasts, in seconds (default 600; 60 with
    /// --quick). The soak runs only when named: `--section soak`.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    soak_seconds: Option<u64>,
}

/// The report's sections, in its order.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum SectionName {
    Sessions,
    Memory,
    Cells,
    Adapters,
    Delivery,
    Acp,
    Fanout,
    Hostile,
    Mcp,
    Hosts,
    /// Not in the default run: it lasts 10 minutes (the drain after), which
    /// a run of every section should not pay each time; name it.
    Soak,
}

impl SectionName {
    /// The sections a run without `--section` measures.
    fn by_default() -> Vec<Self> {
        Self::value_variants()
            .iter()
            .copied()
            .filter(|s| *s != Self::Soak)
            .collect()
    }

    /// Measures this section; what it found broken goes to `broken` (only
    /// the soak and the hostile section check invariants that fail the
    /// command).
    fn measure(self, bench: &Bench, broken: &mut Vec<String>) -> report::Section {
        match self {
            Self::Sessions => sessions::section(bench),
            Self::Memory => memory::section(bench),
            Self::Cells => cells::section(bench),
            Self::Adapters => adapters::section(bench),
            Self::Delivery => delivery::section(bench),
            Self::Acp => acp::section(bench),
            Self::Fanout => fanout::section(bench),
            Self::Hostile => {
                let (section, found) = hostile::section(bench);
                broken.extend(found);
                section
            }
            Self::Mcp => mcp::section(bench),
            Self::Hosts => hosts::section(bench),
            Self::Soak => {
                let (section, found) = soak::section(bench);
                broken.extend(found);
                section
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    if let Some(seconds) = args.soak_seconds {
        plan.soak = std::time::Duration::from_secs(seconds);
    }
    let bench = Bench::new(plan)?;
    let mut machine = machine::Machine::probe(&bench);
    let chosen = if args.sections.is_empty() {
        SectionName::by_default()
    } else {
        args.sections.clone()
    };
    let mut broken = Vec::new();
    let sections: Vec<report::Section> = chosen
        .iter()
        .map(|s| s.measure(&bench, &mut broken))
        .collect();
    machine.note_end_load();
    let existing = args
        .out
        .as_ref()
        .filter(|_| !args.sections.is_empty())
        .and_then(|path| std::fs::read_to_string(path).ok());
    let markdown = match existing {
        Some(report) => report::splice(
            &report,
            &report::provenance(&machine, &command_line()),
            &sections,
        ),
        None => report::render(&machine, &command_line(), &sections),
    };
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
    if !broken.is_empty() {
        drop(bench);
        anyhow::bail!(
            "{} invariant(s) broken (above, and in the report)",
            broken.len()
        );
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
