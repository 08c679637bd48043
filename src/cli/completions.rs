//! Shell completions for `agent-comms`, `k` and `km`, with the names that
//! exist right now: live sessions, the store's runtimes and agents, the
//! adapters.
//!
//! They use clap_complete's environment-activated engine (`CompleteEnv`):
//! the script a shell sources only registers a function that calls the
//! binary back with `AGENT_COMMS_COMPLETE=<shell>` and the words typed so
//! far, and the binary answers from the same clap definition it parses
//! with. Why that and not a static script plus a hidden `__complete`
//! subcommand of our own: it is maintained with clap itself (the static
//! generators cannot call back for values), one engine serves bash, zsh,
//! fish and PowerShell, and a command or flag added later completes with no
//! change here. It sits behind clap_complete's `unstable-dynamic` feature:
//! the protocol between script and binary may change between clap_complete
//! releases, which is why the docs tell users to source the script from the
//! binary at shell start rather than keep a copy (Cargo.lock pins the
//! version in between).
//!
//! Values come from the functions the commands themselves list with
//! (`Registry::live`, `Store::runtimes`, `Store::agents`, the adapter
//! registry). A missing store is not created for a Tab press: no store, no
//! names.

use std::ffi::OsString;
use std::io::Write;

use agent_comms_core::control::open_existing_store;
use agent_comms_core::paths::runtime_root;
use agent_comms_core::session::{Registry, SessionKind};
use agent_comms_core::socket::is_dialable;
use agent_comms_core::store::Store;
use clap::{Command, ValueEnum};
use clap_complete::engine::{ArgValueCandidates, CompletionCandidate};
use clap_complete::env::Shells;
use clap_complete::CompleteEnv;

/// The variable that turns a run of one of our binaries into a completion
/// request (clap_complete's default, `COMPLETE`, is too common a name).
pub const COMPLETE_VAR: &str = "AGENT_COMMS_COMPLETE";

#[derive(Clone, Copy, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
}

impl Shell {
    fn name(self) -> &'static str {
        match self {
            Self::Bash => "bash",
            Self::Zsh => "zsh",
            Self::Fish => "fish",
            Self::Powershell => "powershell",
        }
    }
}

/// The three binaries, each with the command its completions read.
#[derive(Clone, Copy)]
pub enum Program {
    AgentComms,
    K,
    Km,
}

impl Program {
    const ALL: [Program; 3] = [Self::AgentComms, Self::K, Self::Km];

    fn bin(self) -> &'static str {
        match self {
            Self::AgentComms => "agent-comms",
            Self::K => "k",
            Self::Km => "km",
        }
    }

    fn command(self) -> Command {
        match self {
            Self::AgentComms => with_names(super::agent_comms::command()),
            Self::K => with_cell_sessions(super::cells_grammar::k_command()),
            Self::Km => with_cell_sessions(super::cells_grammar::km_command()),
        }
    }
}

/// Answers a completion request and exits, when this run is one; returns
/// otherwise. Called first thing by each binary.
pub fn answer_if_asked(program: Program) {
    CompleteEnv::with_factory(move || program.command())
        .var(COMPLETE_VAR)
        .bin(program.bin())
        .complete();
}

/// `agent-comms completions SHELL`: the registration of all three binaries.
/// Each calls back the binary found where this one was run from (by the
/// same path when run by path, else by name on `PATH`).
pub fn run(shell: Shell) -> anyhow::Result<i32> {
    let shells = Shells::builtins();
    let completer = shells
        .completer(shell.name())
        .expect("every Shell is a clap_complete builtin");
    let invoked = std::env::args_os().next().unwrap_or_default();
    let mut out = Vec::new();
    for program in Program::ALL {
        let path = sibling(&invoked, program.bin());
        completer.write_registration(
            COMPLETE_VAR,
            program.bin(),
            program.bin(),
            &path.to_string_lossy(),
            &mut out,
        )?;
    }
    std::io::stdout().write_all(&out)?;
    Ok(0)
}

/// `bin` beside the program invoked as `invoked`: an absolute path when it
/// was run by a path, the bare name when found on `PATH`.
fn sibling(invoked: &OsString, bin: &str) -> std::path::PathBuf {
    let invoked = std::path::Path::new(invoked);
    match invoked.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => super::absolute(dir.join(bin)),
        None => bin.into(),
    }
}

/// `agent-comms`' command with value candidates on the arguments that name
/// things, chosen by where they are: a `name` under `session` (except the
/// commands that create one) is a live session, an `id` under `runtime` or
/// `acp` is a runtime, `--to`, `--from` and `--actor` are agents,
/// `--provider` is an adapter.
fn with_names(cmd: Command) -> Command {
    let cmd = cmd.mut_args(|a| match a.get_id().as_str() {
        "actor" => a.add(ArgValueCandidates::new(agents)),
        _ => a,
    });
    walk(cmd, None)
}

// `mut_args`, not `mut_arg`: the latter moves the argument to the end,
// which would reorder positionals (`session send NAME TEXT`).
fn walk(cmd: Command, top: Option<&str>) -> Command {
    let creates = matches!(cmd.get_name(), "new" | "run");
    let mut cmd = cmd.mut_args(|a| {
        let candidates = match (top, a.get_id().as_str()) {
            (Some("session"), "name") if !creates => ArgValueCandidates::new(all_sessions),
            (Some("runtime" | "acp"), "id") => ArgValueCandidates::new(runtimes),
            (_, "to" | "from") => ArgValueCandidates::new(agents),
            (_, "provider") => ArgValueCandidates::new(adapters),
            _ => return a,
        };
        a.add(candidates)
    });
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for sub in subs {
        let top = top.map_or(sub.clone(), str::to_owned);
        cmd = cmd.mut_subcommand(&sub, |s| walk(s, Some(&top)));
    }
    cmd
}

/// `k`'s and `km`'s `session` arguments complete live cell sessions.
fn with_cell_sessions(cmd: Command) -> Command {
    let mut cmd = cmd.mut_args(|a| match a.get_id().as_str() {
        "session" => a.add(ArgValueCandidates::new(cell_sessions)),
        _ => a,
    });
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for sub in subs {
        cmd = cmd.mut_subcommand(&sub, with_cell_sessions);
    }
    cmd
}

fn all_sessions() -> Vec<CompletionCandidate> {
    sessions(|_| true)
}

fn cell_sessions() -> Vec<CompletionCandidate> {
    sessions(|kind| kind == SessionKind::Cell)
}

/// Live sessions of the kinds `keep` accepts, their kind as the help.
fn sessions(keep: fn(SessionKind) -> bool) -> Vec<CompletionCandidate> {
    let registry = Registry::new(runtime_root(), is_dialable);
    registry
        .live(&mut |_| {})
        .unwrap_or_default()
        .into_iter()
        .filter(|r| keep(r.kind))
        .map(|r| CompletionCandidate::new(r.name.as_str()).help(Some(r.kind.as_str().into())))
        .collect()
}

fn runtimes() -> Vec<CompletionCandidate> {
    from_store(|store| {
        Ok(store
            .runtimes()?
            .into_iter()
            .map(|r| {
                let help = format!("{} runtime of {}", r.status.as_str(), r.agent);
                CompletionCandidate::new(r.id).help(Some(help.into()))
            })
            .collect())
    })
}

fn agents() -> Vec<CompletionCandidate> {
    from_store(|store| {
        Ok(store
            .agents()?
            .into_iter()
            .map(|a| CompletionCandidate::new(a.id))
            .collect())
    })
}

fn adapters() -> Vec<CompletionCandidate> {
    agent_comms_adapters::registry()
        .entries()
        .iter()
        .map(|e| CompletionCandidate::new(&e.profile.name))
        .collect()
}

/// What `read` finds in the project's store; nothing when there is no
/// store yet or it cannot be read (a completion has nowhere to say why).
fn from_store(
    read: impl FnOnce(
        &dyn Store,
    ) -> Result<Vec<CompletionCandidate>, agent_comms_core::store::StoreError>,
) -> Vec<CompletionCandidate> {
    let Ok(Some(store)) = open_existing_store() else {
        return Vec::new();
    };
    let store = store.as_ref();
    read(store).unwrap_or_default()
}
