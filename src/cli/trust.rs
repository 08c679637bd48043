//! `agent-comms trust`: review what the project brings, and trust it.
//!
//! What is listed is what the commands leave out today: the project's
//! profiles (with the plugins they load) and settings, each as it is now
//! with what it would do. Trusting records each file's path and SHA-256 as
//! read for this listing, so what is trusted is exactly what was shown.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use agent_comms_core::adapter::{AdapterRegistry, Untrusted};
use agent_comms_core::control::state_dir;
use agent_comms_core::display::one_line as line;
use agent_comms_core::store::location::project_settings;
use agent_comms_core::trust::{ProjectFile, TrustList};
use anyhow::Context;
use clap::Args;
use serde_json::json;

#[derive(Args)]
#[command(after_help = "Examples:
  agent-comms trust            # review, then answer y to trust
  agent-comms trust --yes      # trust what is there now, as it is
  agent-comms trust --json     # list only: {\"project\", \"trust_list\", \"untrusted\": [...]}
  agent-comms trust --forget   # this project's files are untrusted again

A project's profiles (.agent-comms/providers/*.toml), the plugins they load
and its settings (.agent-comms/config.toml, when it names a store) come with
whatever was cloned: until trusted, commands use the built-in and your own
adapters and the project's SQLite store, and say so in one line. Trust is
kept in $AGENT_COMMS_HOME/trust.json by path and content: a changed file is
untrusted again.

Exit status: 0 nothing is left untrusted, 1 files are left untrusted (not
confirmed, or unreadable).")]
pub struct TrustArgs {
    /// Trust every file listed, without asking.
    #[arg(long, conflicts_with = "forget")]
    yes: bool,
    /// Print the listing (and with --yes what was trusted) as JSON.
    #[arg(long)]
    json: bool,
    /// Forget the trust given to this project's files.
    #[arg(long)]
    forget: bool,
}

/// One file to review: what it is and what it would do.
struct Pending<'a> {
    file: &'a ProjectFile,
    kind: &'static str,
    effects: Vec<String>,
}

pub fn run(args: TrustArgs) -> anyhow::Result<i32> {
    let mut list = TrustList::load()?;
    let state = project_state_dir();
    if args.forget {
        let forgotten = list.forget_under(&state);
        list.save()?;
        if args.json {
            println!(
                "{}",
                agent_comms_core::display::json(
                    &json!({"project": state.parent(), "forgotten": forgotten})
                )?
            );
        } else {
            println!(
                "forgot {forgotten} trusted file(s) of {}",
                line(&project_shown(&state))
            );
        }
        return Ok(0);
    }
    let registry = agent_comms_adapters::registry();
    let settings = project_settings(&state, &list)?;
    let pending = pending(&registry, settings.as_ref());
    if !args.json {
        print_listing(&state, &list, &pending);
    }
    if pending.is_empty() {
        if args.json {
            println!(
                "{}",
                agent_comms_core::display::json(&listing_json(&state, &list, &pending, &[]))?
            );
        }
        return Ok(0);
    }
    let confirmed = args.yes || (!args.json && ask(pending.len())?);
    let mut trusted = Vec::new();
    if confirmed {
        for p in &pending {
            if let Ok(sha256) = &p.file.sha256 {
                list.trust(&p.file.path, sha256);
                trusted.push(p.file.path.clone());
            }
        }
        list.save()?;
    }
    let left = pending.len() - trusted.len();
    if args.json {
        println!(
            "{}",
            agent_comms_core::display::json(&listing_json(&state, &list, &pending, &trusted))?
        );
    } else if confirmed {
        println!(
            "trusted {} file(s), recorded in {}",
            trusted.len(),
            line(&list.file().display().to_string())
        );
        if left > 0 {
            println!("{left} file(s) could not be read, so they stay untrusted");
        }
    } else {
        println!("nothing trusted; to trust them as they are: agent-comms trust --yes");
    }
    Ok(i32::from(left > 0))
}

/// The project's state directory, absolute: trust is kept by path.
fn project_state_dir() -> PathBuf {
    let dir = state_dir();
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

fn project_shown(state: &Path) -> String {
    state.parent().unwrap_or(state).display().to_string()
}

/// Every file of the project that commands leave out until trusted.
fn pending<'a>(
    registry: &'a AdapterRegistry,
    settings: Option<&'a (ProjectFile, Vec<String>)>,
) -> Vec<Pending<'a>> {
    let mut pending = Vec::new();
    for u in registry.untrusted() {
        let effects = profile_effects(registry, u);
        if !u.file.trusted {
            pending.push(Pending {
                file: &u.file,
                kind: "profile",
                effects: effects.clone(),
            });
        }
        if let Some(plugin) = u.plugin.as_ref().filter(|p| !p.trusted) {
            pending.push(Pending {
                file: plugin,
                kind: "plugin",
                effects: vec![format!(
                    "code the project's adapter {:?} loads",
                    u.profile.name
                )],
            });
        }
    }
    if let Some((file, effects)) = settings.filter(|(f, _)| !f.trusted) {
        pending.push(Pending {
            file,
            kind: "settings",
            effects: effects.clone(),
        });
    }
    pending
}

/// What an untrusted profile would do, with what it would replace.
fn profile_effects(registry: &AdapterRegistry, u: &Untrusted) -> Vec<String> {
    let mut effects = u.effects();
    if let Some(replaced) = registry.get(&u.profile.name) {
        effects.insert(
            1,
            format!(
                "replaces the {} adapter {:?} ({})",
                replaced.source.kind(),
                u.profile.name,
                replaced.source.display()
            ),
        );
    }
    effects
}

fn print_listing(state: &Path, list: &TrustList, pending: &[Pending<'_>]) {
    let project = line(&project_shown(state)).into_owned();
    if pending.is_empty() {
        let trusted = list.under(state).count();
        if trusted == 0 {
            println!("nothing to trust: {project} brings no profiles, plugins or settings");
        } else {
            println!(
                "nothing left to trust in {project}: its {trusted} file(s) are trusted as they are"
            );
        }
        return;
    }
    println!(
        "{project} brings {} file(s) not trusted yet:",
        pending.len()
    );
    for p in pending {
        println!();
        println!("  {} {}", p.kind, line(&p.file.path.display().to_string()));
        match &p.file.sha256 {
            Ok(sha256) => println!("    sha256 {sha256}"),
            Err(e) => println!("    cannot be trusted: {}", line(e)),
        }
        for effect in &p.effects {
            println!("    - {}", line(effect));
        }
    }
    println!();
}

/// Asks the person at the terminal; without one, nothing is confirmed.
fn ask(count: usize) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    print!("Trust these {count} file(s) as they are now? [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

fn listing_json(
    state: &Path,
    list: &TrustList,
    pending: &[Pending<'_>],
    trusted: &[PathBuf],
) -> serde_json::Value {
    json!({
        "project": state.parent(),
        "trust_list": list.file(),
        "untrusted": pending.iter().map(|p| json!({
            "path": p.file.path,
            "kind": p.kind,
            "sha256": p.file.sha256.as_ref().ok(),
            "error": p.file.sha256.as_ref().err(),
            "effects": p.effects,
        })).collect::<Vec<_>>(),
        "trusted": trusted,
    })
}

/// An untrusted project profile as `adapters list --json` shows it.
pub(super) fn untrusted_json(u: &Untrusted) -> serde_json::Value {
    json!({
        "name": u.profile.name,
        "source": u.file.path,
        "files": u.files().map(|f| &f.path).collect::<Vec<_>>(),
        "effects": u.effects(),
    })
}
