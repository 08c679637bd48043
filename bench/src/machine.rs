//! What the report was measured on: the hardware, the kernel, the date, and
//! the versions of the programs compared. Read from `/proc` and the
//! programs themselves; a fact that cannot be found says "unknown".

use std::process::Command;

use crate::bench::Bench;

pub struct Machine {
    /// UTC, ISO 8601.
    pub date: String,
    facts: Vec<(&'static str, String)>,
}

impl Machine {
    pub fn probe(bench: &Bench) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|v| v.split_once(':'))
            .map(|(_, model)| model.trim().to_owned());
        let nproc = std::thread::available_parallelism()
            .map(|n| n.to_string())
            .ok();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|k| format!("Linux {}", k.trim()));
        let memory = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            let kb: f64 = m
                .lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .ok()?;
            Some(format!("{:.1} GiB", kb / (1024.0 * 1024.0)))
        });
        let workspace = bench.repo().display().to_string();
        let agent_comms =
            first_line(bench.agent_comms().arg("--version")).map(|v| {
                match first_line(
                    Command::new("git").args(["-C", &workspace, "describe", "--always", "--dirty"]),
                ) {
                    Some(commit) => format!("{v} (commit {commit})"),
                    None => v,
                }
            });
        let facts = vec![
            ("nproc", nproc),
            ("CPU", cpu),
            ("memory", memory),
            ("kernel", kernel),
            ("agent-comms", agent_comms),
            ("tmux", first_line(Command::new("tmux").arg("-V"))),
            ("bash", first_line(Command::new("bash").arg("--version"))),
            ("load average at start", load_average()),
        ];
        Self {
            date: agent_comms_core::time::now_iso(),
            facts: facts
                .into_iter()
                .map(|(k, v)| (k, v.unwrap_or_else(|| "unknown".to_owned())))
                .collect(),
        }
    }

    /// Notes the load once the measurements are done: other work on the
    /// machine during the run shows here.
    pub fn note_end_load(&mut self) {
        let load = load_average().unwrap_or_else(|| "unknown".to_owned());
        self.facts.push(("load average at end", load));
    }

    pub fn facts(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.facts.iter().map(|(k, v)| (*k, v.as_str()))
    }
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let fields: Vec<&str> = text.split_whitespace().take(3).collect();
    Some(format!("{} (1, 5, 15 min)", fields.join(" ")))
}

/// The first line a command prints, if it succeeds.
pub fn first_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
}
