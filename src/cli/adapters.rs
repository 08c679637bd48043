//! `agent-comms adapters`: inspect, check and scaffold adapters.

use std::path::{Path, PathBuf};

use agent_comms_core::adapter::check::run_samples;
use agent_comms_core::adapter::{Entry, Profile};
use anyhow::{bail, Context};
use clap::{Subcommand, ValueEnum};
use serde_json::json;

#[derive(Subcommand)]
pub enum AdaptersCommand {
    /// Every adapter in effect (project > user > built-in), with problems.
    List {
        #[arg(long)]
        json: bool,
    },
    /// The resolved profile of one adapter, as TOML.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Validate a profile file (or a loaded adapter by name) and run its
    /// sample screens.
    Check {
        /// A profile file, or the name of a loaded adapter.
        target: String,
        #[arg(long)]
        json: bool,
    },
    /// Write a new adapter that passes `check` as generated.
    New {
        name: String,
        #[arg(long, value_enum, default_value_t = FormArg::Toml)]
        form: FormArg,
        /// Where to write it (default: the current directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FormArg {
    Toml,
    Native,
    Wasm,
}

pub fn run(cmd: AdaptersCommand) -> anyhow::Result<i32> {
    match cmd {
        AdaptersCommand::List { json } => list(json),
        AdaptersCommand::Show { name, json } => show(&name, json),
        AdaptersCommand::Check { target, json } => check(&target, json),
        AdaptersCommand::New { name, form, dir } => {
            let dir = match dir {
                Some(d) => d,
                None => std::env::current_dir()?,
            };
            let path = match form {
                FormArg::Toml => agent_comms_adapters::scaffold::toml_profile(&name, &dir)?,
                FormArg::Native => return Err(agent_comms_adapters::scaffold::ScaffoldError::Unavailable("native").into()),
                FormArg::Wasm => return Err(agent_comms_adapters::scaffold::ScaffoldError::Unavailable("wasm").into()),
            };
            println!("wrote {}", path.display());
            println!("next: edit it, then run: agent-comms adapters check {}", path.display());
            Ok(0)
        }
    }
}

fn entry_json(e: &Entry) -> serde_json::Value {
    json!({
        "name": e.profile.name,
        "form": e.form().as_str(),
        "kind": e.profile.kind,
        "version": e.profile.version,
        "checked": e.profile.checked,
        "source": e.source.display(),
        "source_kind": e.source.kind(),
        "commands": e.profile.commands,
        "overrides": e.overrides.iter().map(|s| s.display()).collect::<Vec<_>>(),
    })
}

fn list(json: bool) -> anyhow::Result<i32> {
    let registry = agent_comms_adapters::registry();
    if json {
        let out = json!({
            "adapters": registry.entries().iter().map(entry_json).collect::<Vec<_>>(),
            "errors": registry.diagnostics().iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            "conflicts": registry.conflicts().iter().map(|c| json!({
                "program": c.program, "used": c.winner, "also_claimed_by": c.others,
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
        return Ok(0);
    }
    println!("{:<14} {:<7} {:<6} {:<8} {:<10} {:<28} SOURCE", "NAME", "FORM", "KIND", "VERSION", "CHECKED", "COMMANDS");
    for e in registry.entries() {
        let kind = match e.profile.kind {
            agent_comms_core::adapter::profile::Kind::Agent => "agent",
            agent_comms_core::adapter::profile::Kind::Repl => "repl",
        };
        println!(
            "{:<14} {:<7} {:<6} {:<8} {:<10} {:<28} {}",
            e.profile.name,
            e.form().as_str(),
            kind,
            e.profile.version,
            e.profile.checked.as_deref().unwrap_or("-"),
            e.profile.commands.join(","),
            e.source.display()
        );
    }
    for c in registry.conflicts() {
        println!("note: '{}' is claimed by {} (used) and by {}", c.program, c.winner, c.others.join(", "));
    }
    for d in registry.diagnostics() {
        println!("error: {d} (skipped; fix it and run: agent-comms adapters check {})", d.file);
    }
    Ok(0)
}

fn show(name: &str, json: bool) -> anyhow::Result<i32> {
    let registry = agent_comms_adapters::registry();
    let Some(entry) = registry.get(name) else {
        bail!("no adapter named '{name}'; see them with: agent-comms adapters list");
    };
    if json {
        let mut value = entry_json(entry);
        value["profile"] = serde_json::to_value(&entry.profile)?;
        println!("{value}");
    } else {
        println!("# {} adapter '{}' from {}", entry.source.kind(), name, entry.source.display());
        for o in &entry.overrides {
            println!("# overrides {}", o.display());
        }
        print!("{}", toml::to_string_pretty(&entry.profile)?);
    }
    Ok(0)
}

fn check(target: &str, json: bool) -> anyhow::Result<i32> {
    let (shown, profile) = if Path::new(target).is_file() {
        let text = std::fs::read_to_string(target).with_context(|| format!("cannot read {target}"))?;
        match Profile::parse(target, &text) {
            Ok(p) => (target.to_owned(), p),
            Err(e) => {
                report_check(json, target, Err(e.to_string()), &[]);
                return Ok(1);
            }
        }
    } else {
        let registry = agent_comms_adapters::registry();
        match registry.get(target) {
            Some(e) => (e.source.display(), e.profile.clone()),
            None if target.ends_with(".toml") || target.contains('/') => bail!("no file {target}"),
            None => bail!("'{target}' is neither a file nor a loaded adapter; see: agent-comms adapters list"),
        }
    };
    let results = run_samples(&profile)?;
    let failed = results.iter().filter(|r| !r.passed()).count();
    report_check(json, &shown, Ok(&profile), &results);
    Ok(i32::from(failed > 0))
}

fn report_check(
    json: bool,
    shown: &str,
    profile: Result<&Profile, String>,
    results: &[agent_comms_core::adapter::check::SampleResult],
) {
    if json {
        let out = json!({
            "file": shown,
            "valid": profile.is_ok(),
            "error": profile.as_ref().err(),
            "samples": results.iter().map(|r| json!({
                "name": r.name, "expected": r.expected, "got": r.got, "passed": r.passed(),
            })).collect::<Vec<_>>(),
        });
        println!("{out}");
        return;
    }
    let profile = match profile {
        Ok(p) => p,
        Err(e) => {
            println!("invalid: {e}");
            return;
        }
    };
    println!("valid: {} {} ({})", profile.name, profile.version, shown);
    for r in results {
        let mark = if r.passed() { "ok  " } else { "FAIL" };
        println!("{mark} sample '{}': expected {}, got {}", r.name, r.expected.as_str(), r.got.as_str());
    }
    let failed = results.iter().filter(|r| !r.passed()).count();
    match (results.len(), failed) {
        (0, _) => println!("no samples: add [[samples]] with recorded screens to test the rules"),
        (n, 0) => println!("{n} samples passed"),
        (n, f) => println!("{f} of {n} samples failed"),
    }
}
