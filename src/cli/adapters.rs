//! `agent-comms adapters`: inspect, check and scaffold adapters.

use std::path::{Path, PathBuf};

use agent_comms_core::adapter::check::{run_plugin_samples, run_samples, PluginSampleResult};
use agent_comms_core::adapter::{Entry, NotUsable, Profile};
use agent_comms_core::display::one_line as line;
use agent_comms_core::plugin::{PluginError, PluginInfo};
use agent_comms_core::regular_file::{read_text, MAX_PROFILE_BYTES};
use anyhow::{bail, Context};
use clap::{Subcommand, ValueEnum};
use serde_json::json;

#[derive(Subcommand)]
pub enum AdaptersCommand {
    /// Every adapter in effect (project > user > built-in), with problems.
    #[command(after_help = "Examples:
  agent-comms adapters list
  agent-comms adapters list --json | jq -r '.adapters[].name'")]
    List {
        /// Print {"adapters": [{"name", "form", "kind", "version",
        /// "checked", "source", "commands", …}], "errors", "conflicts",
        /// "untrusted"} ("untrusted": the project's profiles not used until
        /// trusted, as `agent-comms trust --json` lists them).
        #[arg(long)]
        json: bool,
    },
    /// The resolved profile of one adapter, as TOML.
    #[command(after_help = "Examples:
  agent-comms adapters show claude-code
  agent-comms adapters show bash --json | jq .profile")]
    Show {
        /// The adapter's name (see `agent-comms adapters list`).
        name: String,
        /// Print the list entry with its "profile" as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a profile file (or a loaded adapter by name) and run its
    /// sample screens.
    #[command(after_help = "Examples:
  agent-comms adapters check claude-code
  agent-comms adapters check ./my-repl.toml --json

Exit status: 0 valid and every sample read as expected, 1 invalid or a sample failed.")]
    Check {
        /// A profile file, or the name of a loaded adapter.
        target: String,
        /// Print {"file", "valid", "error", "samples": [{"name",
        /// "expected", "got", "passed"}]}.
        #[arg(long)]
        json: bool,
    },
    /// Write a new adapter that passes `check` as generated.
    #[command(after_help = "Examples:
  agent-comms adapters new my-repl
  agent-comms adapters new my-repl --form wasm --dir plugins")]
    New {
        /// The adapter's name (letters, digits, '-').
        name: String,
        /// What to write: a TOML profile, a native plugin crate, or a Wasm
        /// plugin crate.
        #[arg(long, value_enum, default_value_t = FormArg::Toml)]
        form: FormArg,
        /// Where to write it (default: the current directory).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FormArg {
    /// A TOML profile: rules that read the screen.
    Toml,
    /// A Rust crate built as a native plugin (cdylib).
    Native,
    /// A Rust crate built as a Wasm plugin (sandboxed).
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
                FormArg::Native => return new_native(&name, &dir),
                FormArg::Wasm => return new_wasm(&name, &dir),
            };
            println!("wrote {}", path.display());
            println!(
                "next: edit it, then run: agent-comms adapters check {}",
                path.display()
            );
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
        "plugin": e.plugin_path(),
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
            "untrusted": registry.untrusted().iter().map(super::trust::untrusted_json).collect::<Vec<_>>(),
        });
        println!("{}", agent_comms_core::display::json(&out)?);
        return Ok(0);
    }
    println!(
        "{:<14} {:<7} {:<6} {:<8} {:<10} {:<28} SOURCE",
        "NAME", "FORM", "KIND", "VERSION", "CHECKED", "COMMANDS"
    );
    for e in registry.entries() {
        let kind = match e.profile.kind {
            agent_comms_core::adapter::profile::Kind::Agent => "agent",
            agent_comms_core::adapter::profile::Kind::Repl => "repl",
        };
        println!(
            "{:<14} {:<7} {:<6} {:<8} {:<10} {:<28} {}",
            line(&e.profile.name),
            e.form().as_str(),
            kind,
            line(&e.profile.version),
            line(e.profile.checked.as_deref().unwrap_or("-")),
            line(&e.profile.commands.join(",")),
            line(&e.source.display().to_string())
        );
    }
    for c in registry.conflicts() {
        println!(
            "note: '{}' is claimed by {} (used) and by {}",
            line(&c.program),
            line(&c.winner),
            line(&c.others.join(", "))
        );
    }
    for d in registry.diagnostics() {
        println!(
            "error: {d} (skipped; fix it and run: agent-comms adapters check {})",
            d.file
        );
    }
    for u in registry.untrusted() {
        println!(
            "untrusted: {} (the project's adapter '{}', not used; review it and trust it with: agent-comms trust)",
            line(&u.file.path.display().to_string()),
            line(&u.profile.name)
        );
    }
    Ok(0)
}

fn show(name: &str, json: bool) -> anyhow::Result<i32> {
    let registry = agent_comms_adapters::registry();
    let entry = match registry.named(name) {
        Ok(entry) => entry,
        // Showing one is how a person reviews it before trusting it.
        Err(NotUsable::Untrusted { .. }) => {
            let u = registry
                .untrusted()
                .iter()
                .find(|u| u.profile.name == name)
                .expect("named() found it");
            if json {
                let mut value = super::trust::untrusted_json(u);
                value["profile"] = serde_json::to_value(&u.profile)?;
                println!("{}", agent_comms_core::display::json(&value)?);
            } else {
                println!(
                    "# untrusted project adapter '{}' from {} (not used; trust it with: agent-comms trust)",
                    line(name),
                    line(&u.file.path.display().to_string())
                );
                print!("{}", toml::to_string_pretty(&u.profile)?);
            }
            return Ok(0);
        }
        Err(e) => return Err(e.into()),
    };
    if json {
        let mut value = entry_json(entry);
        value["profile"] = serde_json::to_value(&entry.profile)?;
        println!("{}", agent_comms_core::display::json(&value)?);
    } else {
        println!(
            "# {} adapter '{}' from {}",
            entry.source.kind(),
            name,
            entry.source.display()
        );
        for o in &entry.overrides {
            println!("# overrides {}", o.display());
        }
        print!("{}", toml::to_string_pretty(&entry.profile)?);
    }
    Ok(0)
}

fn check(target: &str, json: bool) -> anyhow::Result<i32> {
    let (shown, profile, plugin_path) = if Path::new(target).is_file() {
        let text = read_text(Path::new(target), MAX_PROFILE_BYTES, "a profile")
            .with_context(|| target.to_owned())?;
        match Profile::parse(target, &text) {
            Ok(p) => {
                let dir = Path::new(target).parent().unwrap_or(Path::new("."));
                let plugin = p.plugin.as_ref().map(|plugin| dir.join(plugin));
                (target.to_owned(), p, plugin)
            }
            Err(e) => {
                report_check(json, target, Err(e.to_string()), &[], None);
                return Ok(1);
            }
        }
    } else {
        let registry = agent_comms_adapters::registry();
        match registry.named(target) {
            Ok(e) => (e.source.display(), e.profile.clone(), e.plugin_path()),
            Err(_) if target.ends_with(".toml") || target.contains('/') => {
                bail!("no file {target}")
            }
            Err(e @ NotUsable::Untrusted { .. }) => return Err(e.into()),
            Err(NotUsable::Unknown(_)) => bail!(
                "'{target}' is neither a file nor a loaded adapter; see: agent-comms adapters list"
            ),
        }
    };
    let results = run_samples(&profile)?;
    let plugin = plugin_path.and_then(|path| check_plugin(path, &profile));
    let failed =
        results.iter().any(|r| !r.passed()) || plugin.as_ref().is_some_and(|p| !p.passed());
    report_check(json, &shown, Ok(&profile), &results, plugin.as_ref());
    Ok(i32::from(failed))
}

/// A profile's plugin, loaded and run over the profile's samples.
struct PluginCheck {
    path: PathBuf,
    form: &'static str,
    outcome: Result<LoadedCheck, PluginError>,
}

struct LoadedCheck {
    info: PluginInfo,
    load: &'static str,
    samples: Vec<PluginSampleResult>,
}

impl PluginCheck {
    fn passed(&self) -> bool {
        self.outcome
            .as_ref()
            .is_ok_and(|c| c.samples.iter().all(PluginSampleResult::passed))
    }
}

/// Loads the plugin at `path` and runs the samples through it, for the
/// plugin forms this build can load.
fn check_plugin(path: PathBuf, profile: &Profile) -> Option<PluginCheck> {
    // The form as `Entry::form` has it: `.wasm` is a component, anything
    // else a native library.
    let form = if path.extension().is_some_and(|e| e == "wasm") {
        "wasm"
    } else {
        "native"
    };
    let (path, outcome) = match agent_comms_core::plugin::load::load(&path, profile) {
        Ok(mut loaded) => {
            let samples = run_plugin_samples(profile, loaded.plugin.as_mut());
            let check = LoadedCheck {
                info: loaded.plugin.info().clone(),
                load: loaded.how,
                samples,
            };
            (loaded.path, Ok(check))
        }
        Err((path, e)) => (path, Err(e)),
    };
    Some(PluginCheck {
        path,
        form,
        outcome,
    })
}

fn report_check(
    json: bool,
    shown: &str,
    profile: Result<&Profile, String>,
    results: &[agent_comms_core::adapter::check::SampleResult],
    plugin: Option<&PluginCheck>,
) {
    if json {
        let out = json!({
            "file": shown,
            "valid": profile.is_ok(),
            "error": profile.as_ref().err(),
            "samples": results.iter().map(|r| json!({
                "name": r.name, "expected": r.expected, "got": r.got, "passed": r.passed(),
            })).collect::<Vec<_>>(),
            "plugin": plugin.map(plugin_json),
        });
        println!(
            "{}",
            agent_comms_core::display::json(&out).expect("JSON values serialise")
        );
        return;
    }
    let profile = match profile {
        Ok(p) => p,
        Err(e) => {
            println!("invalid: {e}");
            return;
        }
    };
    println!(
        "valid: {} {} ({shown})",
        line(&profile.name),
        line(&profile.version)
    );
    for r in results {
        let mark = if r.passed() { "ok  " } else { "FAIL" };
        println!(
            "{mark} sample '{}': expected {}, got {}",
            line(&r.name),
            r.expected.as_str(),
            r.got.as_str()
        );
    }
    let failed = results.iter().filter(|r| !r.passed()).count();
    match (results.len(), failed) {
        (0, _) if plugin.is_some() && !profile.samples.is_empty() => {
            println!("no [detect] rules: the samples ran through the plugin only")
        }
        (0, _) => println!("no samples: add [[samples]] with recorded screens to test the rules"),
        (n, 0) => println!("{n} samples passed"),
        (n, f) => println!("{f} of {n} samples failed"),
    }
    if let Some(plugin) = plugin {
        report_plugin(plugin);
    }
}

fn report_plugin(plugin: &PluginCheck) {
    let checked = match &plugin.outcome {
        Ok(c) => c,
        Err(e) => {
            println!("FAIL plugin: {e}");
            return;
        }
    };
    let info = &checked.info;
    println!(
        "plugin: {} {} ({}, {}; {})",
        line(&info.name),
        line(&info.version),
        plugin.form,
        plugin.path.display(),
        checked.load
    );
    for r in &checked.samples {
        let mark = if r.passed() { "ok  " } else { "FAIL" };
        match &r.got {
            Ok(got) => println!(
                "{mark} sample '{}': expected {}, plugin got {}",
                line(&r.name),
                r.expected.as_str(),
                got.as_str()
            ),
            Err(e) => println!(
                "{mark} sample '{}': expected {}, plugin failed: {}",
                line(&r.name),
                r.expected.as_str(),
                line(&e.to_string())
            ),
        }
    }
    let failed = checked.samples.iter().filter(|r| !r.passed()).count();
    match (checked.samples.len(), failed) {
        (0, _) => {}
        (n, 0) => println!("{n} samples passed through the plugin"),
        (n, f) => println!("{f} of {n} samples failed through the plugin"),
    }
}

fn plugin_json(plugin: &PluginCheck) -> serde_json::Value {
    let mut out = json!({
        "path": plugin.path,
        "form": plugin.form,
        "loaded": plugin.outcome.is_ok(),
        "passed": plugin.passed(),
    });
    match &plugin.outcome {
        Ok(c) => {
            out["info"] = json!(c.info);
            out["load"] = json!(c.load);
            out["samples"] = c
                .samples
                .iter()
                .map(|r| {
                    json!({
                        "name": r.name,
                        "expected": r.expected,
                        "got": r.got.as_ref().ok(),
                        "error": r.got.as_ref().err().map(ToString::to_string),
                        "passed": r.passed(),
                    })
                })
                .collect();
        }
        Err(e) => out["error"] = json!(e.to_string()),
    }
    out
}

/// `adapters new --form native`: a `cdylib` crate and its profile.
fn new_native(name: &str, dir: &Path) -> anyhow::Result<i32> {
    let root = agent_comms_adapters::scaffold::native_crate(name, dir)?;
    let profile = root.join(format!("{name}.toml"));
    println!(
        "wrote {} (Cargo.toml, src/lib.rs, {name}.toml)",
        root.display()
    );
    println!("next: edit src/lib.rs and the samples in {name}.toml, then run:");
    println!("  cd {} && cargo build", root.display());
    println!("  agent-comms adapters check {}", profile.display());
    Ok(0)
}

/// `adapters new --form wasm`: a guest crate and its profile.
fn new_wasm(name: &str, dir: &Path) -> anyhow::Result<i32> {
    let root = agent_comms_adapters::scaffold::wasm_crate(name, dir)?;
    let profile = root.join(format!("{name}.toml"));
    println!(
        "wrote {} (Cargo.toml, src/lib.rs, {name}.toml)",
        root.display()
    );
    println!("next: edit src/lib.rs and the samples in {name}.toml, then run:");
    println!(
        "  cd {} && cargo build --target wasm32-wasip2 --release",
        root.display()
    );
    println!("  agent-comms adapters check {}", profile.display());
    Ok(0)
}
