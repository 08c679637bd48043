//! `doctor`: what is wrong with the control plane, and the command that
//! fixes each thing. It reads; it never repairs by itself, because each
//! repair (reconfiguring a runtime, redelivering a message) is a decision a
//! person should see being made.

use std::time::Duration;

use serde::Serialize;

use super::messages::Named;
use super::readable::{self, ScreenReading};
use super::registration::{effective_status, heartbeat_stale, repair_command, RuntimeKind};
use super::ControlError;
use crate::adapter::command::{on_path, on_search_path};
use crate::adapter::profile::{Kind, ProfileError};
use crate::adapter::{version, Entry};
use crate::ids::Id;
use crate::session::runtime_id;
use crate::session::{Liveness, Registry};
use crate::socket::is_dialable;
use crate::socket::ForeignEndpoint;
use crate::store::postgres::HostSeen;
use crate::store::{
    store_problems, Attempt, AttemptOutcome, Backend, Invocation, InvocationFilter,
    InvocationStatus, PgStore, PrivacyProblem, RuntimeRecord, RuntimeStatus, Store, StoreError,
    MAX_FAILED_ATTEMPTS,
};
use crate::time::iso_from_unix_millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Stable, for scripts: `RUNTIME_MISMATCH`, `FOREIGN_HOST`, ….
    pub code: &'static str,
    pub severity: Severity,
    /// What it is about (a runtime, an agent, an invocation, a profile).
    pub subject: String,
    pub message: String,
    /// The exact command that repairs it, when one does.
    pub repair: Option<String>,
}

/// Every finding about the store's runtimes and attempts; `profile_problems`
/// are the adapters' load errors (the adapter registry lives above core).
/// Live runtimes of this host are asked how their adapter reads the screen.
pub fn examine(
    store: &dyn Store,
    host: &str,
    now: u64,
    profile_problems: &[ProfileError],
) -> Result<Vec<Finding>, ControlError> {
    let runtimes = store.runtimes()?;
    let mut findings = Vec::new();
    for r in &runtimes {
        // Every other finding prints a repair command naming the runtime
        // and its agent: not for ids outside the rule.
        if let Some(invalid) = invalid_runtime(r) {
            findings.push(invalid);
            continue;
        }
        findings.extend(mismatch(r));
        if r.host.as_deref().is_some_and(|h| h != host) {
            if store.spans_hosts() {
                findings.extend(remote_runtime(r, host, now));
            } else {
                findings.extend(foreign_host(r, host));
            }
            continue;
        }
        if r.status == RuntimeStatus::Online {
            findings.extend(liveness(r, now));
        }
    }
    findings.extend(ambiguous_runtimes(&runtimes, now));
    findings.extend(stale_attempts(store, now)?);
    findings.extend(waiting_messages(store, &runtimes, now)?);
    findings.extend(invalid_profiles(profile_problems));
    if let Backend::Postgres(db) = store.backend() {
        findings.extend(shared_database(db, host)?);
    }
    Ok(findings)
}

/// A runtime another host serves through the shared store:
/// `RUNTIME_CLAIMED_TWICE` when a supervisor on this host serves the same
/// id too (both would take its agent's messages), `REMOTE_RUNTIME_SILENT`
/// when its host stopped heartbeating (crashed, cut off, asleep): its
/// messages wait, and the ones it had leased return to the queue when the
/// lease runs out.
fn remote_runtime(r: &RuntimeRecord, host: &str, now: u64) -> Option<Finding> {
    let other = r.host.as_deref().unwrap_or("?");
    let served_here = runtime_id(&r.id).ok().and_then(|id| {
        let registry = Registry::new(crate::paths::runtime_root(), is_dialable);
        match registry.check(&id)? {
            Liveness::Live(session) => Some(session.supervisor_pid),
            Liveness::Stale(_) => None,
        }
    });
    if let Some(pid) = served_here {
        return Some(Finding {
            code: "RUNTIME_CLAIMED_TWICE",
            severity: Severity::Error,
            subject: runtime_subject(r),
            message: format!(
                "the store says host {other} serves it, and a supervisor on this host ({host}, pid {pid}) serves it too: both take agent {}'s messages",
                r.agent
            ),
            repair: Some(format!(
                "stop one of them: agent-comms session kill {} (here), or the same on host {other}",
                r.id
            )),
        });
    }
    if r.status != RuntimeStatus::Online || !heartbeat_stale(r, now) {
        return None;
    }
    let last = r
        .last_heartbeat
        .map_or_else(|| "never".into(), iso_from_unix_millis);
    Some(Finding {
        code: "REMOTE_RUNTIME_SILENT",
        severity: Severity::Warning,
        subject: runtime_subject(r),
        message: format!(
            "its host {other} has not heartbeaten since {last} (down, cut off from the database, or asleep): messages to agent {} wait for it, and what it had leased returns to the queue",
            r.agent
        ),
        repair: Some(format!(
            "bring host {other} back, or serve the runtime elsewhere: {} (after agent-comms runtime rm {} on any host)",
            serve_command(r),
            r.id
        )),
    })
}

/// A clock further off the database's than this is reported: times a host
/// writes itself (delivery evidence) stop lining up with the database's.
pub const SKEW_WARN_MS: i64 = 2_000;

/// What the shared database says of the hosts using it: `CLOCK_SKEW` for
/// this host's clock (measured now) and any other's (as it last measured),
/// `HOST_SCHEMA_BEHIND` for a host whose build knows an older schema than
/// the database has (it is refused until upgraded).
fn shared_database(db: &PgStore, host: &str) -> Result<Vec<Finding>, ControlError> {
    let schema = db.schema_version()?;
    let mut hosts = db.hosts()?;
    if let Some(me) = hosts.iter_mut().find(|h| h.id == host) {
        me.skew_ms = db.skew_ms();
    }
    Ok(host_findings(&hosts, host, schema))
}

fn host_findings(hosts: &[HostSeen], host: &str, schema: i64) -> Vec<Finding> {
    let mut findings = Vec::new();
    for h in hosts {
        let who = if h.id == host {
            format!("this host ({}, {})", h.name, h.id)
        } else {
            format!("host {} ({})", h.name, h.id)
        };
        if h.skew_ms.abs() > SKEW_WARN_MS {
            let (by, way) = (
                h.skew_ms.abs(),
                if h.skew_ms > 0 { "ahead of" } else { "behind" },
            );
            findings.push(Finding {
                code: "CLOCK_SKEW",
                severity: Severity::Warning,
                subject: format!("host {}", h.id),
                message: format!(
                    "the clock of {who} is {by} ms {way} the database's; leases and heartbeats use the database's clock, but the delivery times it records are its own"
                ),
                repair: Some(format!("synchronise the clock of {who} (NTP: timedatectl set-ntp true)")),
            });
        }
        if h.schema < schema {
            findings.push(Finding {
                code: "HOST_SCHEMA_BEHIND",
                severity: Severity::Error,
                subject: format!("host {}", h.id),
                message: format!(
                    "{who} last ran agent-comms {}, which knows schema {}; the database is at schema {schema}, so that build is refused there",
                    h.version, h.schema
                ),
                repair: Some(format!("upgrade agent-comms on {who}")),
            });
        }
    }
    findings
}

fn runtime_subject(r: &RuntimeRecord) -> String {
    format!("runtime {}", r.id)
}

/// `INVALID_RUNTIME`: a runtime record whose id or agent is outside the
/// id rule (an older build stored it unchecked). Nothing is delivered to
/// it, and no command is printed with its ids in it.
fn invalid_runtime(r: &RuntimeRecord) -> Option<Finding> {
    let problem = match (runtime_id(&r.id), Id::agent(&r.agent)) {
        (Err(e), _) => e.to_string(),
        (_, Err(e)) => e.to_string(),
        _ => return None,
    };
    Some(Finding {
        code: "INVALID_RUNTIME",
        severity: Severity::Error,
        subject: format!("runtime {}", r.id),
        message: format!(
            "{problem}; no command can name it, and messages to its agent wait until a runtime with a valid id serves the agent"
        ),
        repair: None,
    })
}

/// `RUNTIME_MISMATCH`: a record no serve takes (interactive-serve and
/// acp-serve each want their own kind as kind and connector).
fn mismatch(r: &RuntimeRecord) -> Option<Finding> {
    let fits = RuntimeKind::of(r).is_some() && r.max_concurrent == 1;
    (!fits).then(|| Finding {
        code: "RUNTIME_MISMATCH",
        severity: Severity::Error,
        subject: runtime_subject(r),
        message: format!(
            "kind {}, connector {}, max-concurrent {}: interactive-serve and acp-serve refuse it",
            r.kind, r.connector, r.max_concurrent
        ),
        repair: Some(repair_command(&r.agent, &r.id, kind_or_interactive(r))),
    })
}

/// The kind a repair should give `r`: the one its kind names, if any.
fn kind_or_interactive(r: &RuntimeRecord) -> RuntimeKind {
    if r.kind == RuntimeKind::Acp.as_str() {
        RuntimeKind::Acp
    } else {
        RuntimeKind::Interactive
    }
}

/// The command that serves runtime `r` again, as the kind it was.
fn serve_command(r: &RuntimeRecord) -> String {
    match kind_or_interactive(r) {
        RuntimeKind::Acp => format!(
            "agent-comms --actor {} runtime acp-serve {} -- <ACP command>",
            r.agent, r.id
        ),
        RuntimeKind::Interactive => format!(
            "agent-comms --actor {} runtime interactive-serve {} -- <provider command>",
            r.agent, r.id
        ),
    }
}

/// `FOREIGN_HOST`: a runtime another host serves; nothing else about it
/// can be checked from here.
fn foreign_host(r: &RuntimeRecord, host: &str) -> Option<Finding> {
    let other = r.host.as_deref().filter(|h| *h != host)?;
    Some(Finding {
        code: "FOREIGN_HOST",
        severity: Severity::Warning,
        subject: runtime_subject(r),
        message: format!(
            "registered on host {other}; messages to agent {} are UNAVAILABLE from here",
            r.agent
        ),
        repair: Some(repair_command(&r.agent, &r.id, kind_or_interactive(r))),
    })
}

/// An ONLINE runtime of this host: `FOREIGN_ENDPOINT` when another user
/// serves its endpoint, `ENDPOINT_NOT_DIALABLE` when its supervisor is
/// gone, `HEARTBEAT_STALE` when it may be stuck, and else
/// `SCREEN_UNREADABLE` when its adapter cannot read the screen.
fn liveness(r: &RuntimeRecord, now: u64) -> Option<Finding> {
    let dialed = r
        .endpoint
        .as_deref()
        .map(|e| (e, crate::socket::connect(e.as_ref())));
    let endpoint = match dialed {
        Some((e, Ok(_))) => Some(e),
        Some((_, Err(err))) => match ForeignEndpoint::in_error(&err) {
            Some(foreign) => return Some(foreign_endpoint(r, foreign)),
            None => None,
        },
        None => None,
    };
    let Some(endpoint) = endpoint else {
        return Some(Finding {
            code: "ENDPOINT_NOT_DIALABLE",
            severity: Severity::Error,
            subject: runtime_subject(r),
            message: format!(
                "ONLINE, but its endpoint {} does not answer: the supervisor is gone",
                r.endpoint.as_deref().unwrap_or("(none)")
            ),
            repair: Some(format!(
                "serve it again: {}; or forget the record: agent-comms runtime rm {}",
                serve_command(r),
                r.id
            )),
        });
    };
    if heartbeat_stale(r, now) {
        let last = r
            .last_heartbeat
            .map_or_else(|| "never".into(), iso_from_unix_millis);
        return Some(Finding {
            code: "HEARTBEAT_STALE",
            severity: Severity::Warning,
            subject: runtime_subject(r),
            message: format!("its endpoint answers but its last heartbeat was {last}; the supervisor may be stuck"),
            repair: None,
        });
    }
    // Only a supervisor that heartbeats is asked: a stuck one would not
    // answer, and the client does not time out.
    readable::read(endpoint.as_ref())
        .ok()
        .filter(ScreenReading::unreadable)
        .map(|reading| screen_unreadable(r, &reading))
}

/// `FOREIGN_ENDPOINT`: the record names a socket another user serves (it
/// was written by someone who could write the store); nothing is sent
/// there, so nothing reaches the runtime either.
fn foreign_endpoint(r: &RuntimeRecord, foreign: &ForeignEndpoint) -> Finding {
    Finding {
        code: "FOREIGN_ENDPOINT",
        severity: Severity::Error,
        subject: runtime_subject(r),
        message: format!(
            "ONLINE, but its endpoint {} is served by {}, not by you ({}): nothing is sent to it; whoever wrote this record could write the store",
            foreign.path.display(),
            foreign.server,
            foreign.me
        ),
        repair: Some(format!(
            "check who may write the store (agent-comms store check), then serve the runtime again, which records its own endpoint: {}",
            serve_command(r)
        )),
    }
}

/// `STORE_NOT_PRIVATE`: the state directory or database at `db` is not
/// the user's alone. Nothing else is examined then: the store is refused.
pub fn store_findings(db: &std::path::Path) -> Vec<Finding> {
    store_problems(db).iter().map(privacy_finding).collect()
}

/// `STORE_NOT_PRIVATE` for one problem: the state directory, the database
/// or the project's settings that name the store.
pub fn privacy_finding(p: &PrivacyProblem) -> Finding {
    Finding {
        code: "STORE_NOT_PRIVATE",
        severity: Severity::Error,
        subject: "store".into(),
        message: p.what(),
        repair: Some(p.repair()),
    }
}

/// The finding for a shared database that cannot be used from here:
/// `STORE_UNREACHABLE` (the server is out of reach or refuses the login),
/// `SCHEMA_MISMATCH` (it is newer than this build), `STORE_NOT_PRIVATE`
/// (another role owns it); None for any other error.
pub fn database_finding(e: &StoreError) -> Option<Finding> {
    let (code, repair) = match e {
        StoreError::Unreachable { .. } => (
            "STORE_UNREACHABLE",
            "check that the database server runs and that this host reaches it (agent-comms store status); the sessions here keep running and reconnect by themselves",
        ),
        StoreError::Refused { .. } => (
            "STORE_UNREACHABLE",
            "fix the user or the password this host connects with",
        ),
        StoreError::Untrusted { .. } => (
            "STORE_UNREACHABLE",
            "name the CA that signed the server's certificate with sslrootcert=FILE in the URL",
        ),
        StoreError::DatabaseTooNew { .. } => ("SCHEMA_MISMATCH", "upgrade agent-comms on this host"),
        StoreError::NotOurs { .. } => ("STORE_NOT_PRIVATE", "connect as the role that owns the schema"),
        _ => return None,
    };
    Some(Finding {
        code,
        severity: Severity::Error,
        subject: "store".into(),
        message: e.to_string(),
        repair: Some(repair.into()),
    })
}

/// `SCREEN_UNREADABLE`: the adapter has read the screen as neither busy
/// nor idle for a while, so every delivery waits out its timeout.
fn screen_unreadable(r: &RuntimeRecord, reading: &ScreenReading) -> Finding {
    let secs = reading.unknown_for_ms.unwrap_or_default() / 1000;
    let mut message = format!(
        "the {} adapter cannot read its screen: neither busy nor idle for {secs} s, so no message is delivered until it can; the screen ends with:",
        reading.adapter
    );
    for row in &reading.bottom_rows {
        message.push_str("\n    |");
        if !row.is_empty() {
            message.push(' ');
            message.push_str(row);
        }
    }
    Finding {
        code: "SCREEN_UNREADABLE",
        severity: Severity::Warning,
        subject: runtime_subject(r),
        message,
        repair: Some(format!(
            "answer what the program asks in the runtime's terminal; if it shows a prompt the adapter should read, see the screen with `agent-comms session snapshot {}`, add it to the profile as a sample and check the rules with: agent-comms adapters check {}",
            r.id, reading.adapter
        )),
    }
}

/// `AMBIGUOUS_RUNTIMES`: an agent with more than one runtime online.
fn ambiguous_runtimes(runtimes: &[RuntimeRecord], now: u64) -> Vec<Finding> {
    let mut agents: Vec<&str> = runtimes.iter().map(|r| r.agent.as_str()).collect();
    agents.sort_unstable();
    agents.dedup();
    let mut findings = Vec::new();
    for agent in agents {
        let online: Vec<&str> = runtimes
            .iter()
            .filter(|r| r.agent == agent && effective_status(r, now).0 == RuntimeStatus::Online)
            .filter(|r| invalid_runtime(r).is_none())
            .map(|r| r.id.as_str())
            .collect();
        if online.len() > 1 {
            findings.push(Finding {
                code: "AMBIGUOUS_RUNTIMES",
                severity: Severity::Warning,
                subject: format!("agent {agent}"),
                message: format!(
                    "{} runtimes are online ({}); its messages go to whichever inbox takes them first",
                    online.len(),
                    online.join(", ")
                ),
                repair: Some(format!("agent-comms session kill {}", online[1])),
            });
        }
    }
    findings
}

/// `STALE_DELIVERY_ATTEMPT`: attempts whose runtime stopped mid-delivery.
fn stale_attempts(store: &dyn Store, now: u64) -> Result<Vec<Finding>, ControlError> {
    Ok(store
        .stale_attempts(now)?
        .into_iter()
        .map(|a| Finding {
            code: "STALE_DELIVERY_ATTEMPT",
            severity: Severity::Warning,
            subject: format!("invocation {}", a.invocation),
            message: format!(
                "attempt {} by runtime {} lost its lease at {} (its runtime stopped mid-delivery); it goes back to the queue when the runtime restarts",
                a.id,
                a.runtime,
                iso_from_unix_millis(a.lease_until)
            ),
            repair: Some(format!("agent-comms message redeliver {}", a.invocation)),
        })
        .collect())
}

/// Messages that hold their agent's queue: `INVALID_MESSAGE` for one whose
/// notification can never be composed (an id an older build stored
/// unchecked; the inbox fails it when it comes to it), `STUCK_MESSAGE` for
/// one whose delivery failed and is tried again, or that has waited longer
/// than [`STUCK_AFTER`] while its agent has a runtime online. Each holds
/// back every later message to its agent.
fn waiting_messages(
    store: &dyn Store,
    runtimes: &[RuntimeRecord],
    now: u64,
) -> Result<Vec<Finding>, ControlError> {
    let mut findings = Vec::new();
    for status in [InvocationStatus::Pending, InvocationStatus::Unavailable] {
        let filter = InvocationFilter {
            status: Some(status),
            ..Default::default()
        };
        for inv in store.invocations(&filter)? {
            let cancel = Id::message(&inv.id)
                .ok()
                .map(|id| format!("agent-comms message cancel {id}"));
            if let Err(e) = Named::new(&inv) {
                findings.push(Finding {
                    code: "INVALID_MESSAGE",
                    severity: Severity::Error,
                    subject: format!("message {}", inv.id),
                    message: format!(
                        "{status} but it can never be announced ({e}); it is failed, not typed, when agent {}'s runtime comes to it",
                        inv.to
                    ),
                    repair: cancel,
                });
                continue;
            }
            if status != InvocationStatus::Pending {
                continue;
            }
            if let Some(finding) = stuck(store, &inv, runtimes, now)? {
                findings.push(Finding {
                    repair: cancel,
                    ..finding
                });
            }
        }
    }
    Ok(findings)
}

/// A PENDING message that has waited longer than this while its agent has
/// a runtime online is stuck: an idle runtime takes a message in seconds.
pub const STUCK_AFTER: Duration = Duration::from_secs(600);

/// `STUCK_MESSAGE`, without its repair.
fn stuck(
    store: &dyn Store,
    inv: &Invocation,
    runtimes: &[RuntimeRecord],
    now: u64,
) -> Result<Option<Finding>, ControlError> {
    let holds = format!(
        "it holds back every later message to agent {} until it is delivered, given up after {MAX_FAILED_ATTEMPTS} failed attempts, or cancelled",
        inv.to
    );
    let attempts = store.attempts(&inv.id)?;
    let failed: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::Failed)
        .collect();
    let message = if let Some(last) = failed.last() {
        format!(
            "PENDING after {} failed delivery attempt(s) (the last: {}); {holds}",
            failed.len(),
            last.reason.as_deref().unwrap_or("no reason recorded")
        )
    } else {
        let waited = now.saturating_sub(inv.created);
        let online = runtimes
            .iter()
            .find(|r| r.agent == inv.to && effective_status(r, now).0 == RuntimeStatus::Online);
        match online {
            Some(r) if waited > STUCK_AFTER.as_millis() as u64 => format!(
                "PENDING for {} min while runtime {} is online; {holds}",
                waited / 60_000,
                r.id
            ),
            _ => return Ok(None),
        }
    };
    Ok(Some(Finding {
        code: "STUCK_MESSAGE",
        severity: Severity::Warning,
        subject: format!("message {}", inv.id),
        message,
        repair: None,
    }))
}

/// `INVALID_PROFILE`: adapter profiles that did not load, each with the
/// check of its own file (`adapters check` needs a target).
fn invalid_profiles(problems: &[ProfileError]) -> Vec<Finding> {
    problems
        .iter()
        .map(|problem| Finding {
            code: "INVALID_PROFILE",
            severity: Severity::Error,
            subject: "adapters".into(),
            message: problem.to_string(),
            repair: Some(format!(
                "fix or remove it, then run: agent-comms adapters check {}",
                crate::display::shell_word(&problem.file)
            )),
        })
        .collect()
}

/// `UNTRUSTED_PROJECT_FILE`: files the project brings that commands leave
/// out until the user trusts them (`what` each would do), and
/// `TRUST_LIST_UNUSABLE` when the list itself cannot be read.
pub fn trust_findings(
    untrusted: &[(std::path::PathBuf, String)],
    list: Option<&crate::trust::TrustError>,
) -> Vec<Finding> {
    let mut findings: Vec<Finding> = untrusted
        .iter()
        .map(|(path, what)| Finding {
            code: "UNTRUSTED_PROJECT_FILE",
            severity: Severity::Warning,
            subject: path.display().to_string(),
            message: format!("{what}; it is not used until you trust it"),
            repair: Some("review it and trust it with: agent-comms trust".into()),
        })
        .collect();
    findings.extend(list.map(|e| Finding {
        code: "TRUST_LIST_UNUSABLE",
        severity: Severity::Error,
        subject: "trust".into(),
        message: e.to_string(),
        repair: None,
    }));
    findings
}

/// Agent adapters whose CLI is installed at a version outside the one(s)
/// they were checked against: their detection may misread its screens.
pub fn version_findings(entries: &[Entry]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for entry in entries.iter().filter(|e| e.profile.kind == Kind::Agent) {
        let Some(checked) = entry.profile.checked.as_deref() else {
            continue;
        };
        let Some(program) = entry.profile.commands.iter().find(|c| !c.ends_with('*')) else {
            continue;
        };
        let Some(path) = on_path(program) else {
            continue;
        };
        let Some(installed) = version::installed(&path) else {
            continue;
        };
        if version::within(&installed, checked) == Some(false) {
            findings.push(Finding {
                code: "PROVIDER_VERSION",
                severity: Severity::Warning,
                subject: format!("adapter {}", entry.profile.name),
                message: format!(
                    "{} is {installed}; the adapter was checked against {checked}, so busy and idle may be misread",
                    path.display()
                ),
                repair: Some(format!(
                    "install a checked version, or check the adapter with this one: agent-comms adapters check {}",
                    entry.profile.name
                )),
            });
        }
    }
    findings
}

/// For each adapter that an ACP runtime of this host runs (its record's
/// `provider`), whether the adapter's `[acp]` command is there to run:
/// `ACP_COMMAND_MISSING` when it does not resolve on PATH, and
/// `ACP_VERSION_UNCHECKED` when it reports a version outside the one(s) its
/// `[acp]` was checked against (the quirks it declares may have changed).
/// Adapters no ACP runtime uses are not examined: most users of a provider
/// never install its ACP agent.
pub fn acp_findings(entries: &[Entry], runtimes: &[RuntimeRecord], host: &str) -> Vec<Finding> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    acp_findings_on(entries, runtimes, host, &path)
}

/// [`acp_findings`] with the search path `path`.
fn acp_findings_on(
    entries: &[Entry],
    runtimes: &[RuntimeRecord],
    host: &str,
    path: &std::ffi::OsStr,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for entry in entries {
        let Some(acp) = &entry.profile.acp else {
            continue;
        };
        let ids: Vec<&str> = runtimes
            .iter()
            .filter(|r| {
                r.kind == RuntimeKind::Acp.as_str() && r.host.as_deref().is_none_or(|h| h == host)
            })
            .filter(|r| r.provider.as_deref() == Some(entry.profile.name.as_str()))
            .filter(|r| invalid_runtime(r).is_none())
            .map(|r| r.id.as_str())
            .collect();
        let (Some(first), Some(program)) = (ids.first(), acp.command.first()) else {
            continue;
        };
        let name = &entry.profile.name;
        let checked = acp.checked.as_deref();
        let used_by = format!("ACP runtime {}", ids.join(", "));
        let Some(found) = on_search_path(program, path) else {
            let version = checked.map_or_else(String::new, |c| format!(" (checked: {c})"));
            findings.push(Finding {
                code: "ACP_COMMAND_MISSING",
                severity: Severity::Error,
                subject: format!("adapter {name}"),
                message: format!(
                    "{used_by} runs its agent with `{}`, but `{program}` is not on PATH here, so it cannot start",
                    acp.command.join(" ")
                ),
                repair: Some(format!(
                    "install the agent{version} so that `{program}` is on PATH, or give the runtime its command: agent-comms runtime acp-serve {first} -- <ACP command>"
                )),
            });
            continue;
        };
        let Some(checked) = checked.filter(|_| !acp.version_args.is_empty()) else {
            continue;
        };
        let Some(reported) = version::reported(&found, &acp.version_args) else {
            continue;
        };
        if version::within(&reported, checked) == Some(false) {
            findings.push(Finding {
                code: "ACP_VERSION_UNCHECKED",
                severity: Severity::Warning,
                subject: format!("adapter {name}"),
                message: format!(
                    "{} is {reported}; the adapter's [acp] was checked against {checked}, so the quirks it declares may have changed ({used_by} uses it)",
                    found.display()
                ),
                repair: Some(format!(
                    "install a checked version, or check the agent at this one and update [acp] checked in the profile (agent-comms adapters show {name})"
                )),
            });
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::registration::{configure, Configure};
    use crate::session::SessionName;
    use crate::store::{NewInvocation, SqliteStore};

    fn configured(store: &SqliteStore, id: &str) -> RuntimeRecord {
        let id = SessionName::parse(id).unwrap();
        let change = Configure {
            id: &id,
            agent: Some("bob"),
            kind: None,
            connector: None,
            max_concurrent: None,
        };
        configure(store, "host1", &change, 1).unwrap()
    }

    /// A runtime record an older build stored with ids outside the rule is
    /// reported once, and no repair command quotes its ids.
    #[test]
    fn a_runtime_with_invalid_ids_is_reported_without_a_command() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).unwrap();
        let r = configured(&store, "bob");
        let bad = RuntimeRecord {
            agent: "bob; rm -rf ~".into(),
            kind: "OTHER".into(),
            ..r
        };
        store.save_runtime(&bad).unwrap();
        let findings = examine(&store, "host1", 2, &[]).unwrap();
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].code, "INVALID_RUNTIME");
        assert!(findings[0]
            .message
            .contains("invalid agent id 'bob; rm -rf ~'"));
        assert_eq!(findings[0].repair, None);
    }

    /// A message that has waited longer than STUCK_AFTER while its agent's
    /// runtime is online is stuck even without a failed attempt; younger,
    /// or with the runtime offline, it is not.
    #[test]
    fn a_message_waiting_long_while_its_runtime_is_online_is_stuck() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).unwrap();
        let r = configured(&store, "bob");
        let inv = store
            .insert_invocation(&NewInvocation {
                from: "alice",
                to: "bob",
                body: "hi",
                status: InvocationStatus::Pending,
                reason: None,
                now: 1,
            })
            .unwrap();
        let stuck_codes = |now: u64| -> Vec<&'static str> {
            examine(&store, "host1", now, &[])
                .unwrap()
                .into_iter()
                .filter(|f| f.subject == format!("message {}", inv.id))
                .map(|f| f.code)
                .collect()
        };
        let late = 1 + STUCK_AFTER.as_millis() as u64 + 1;
        assert!(
            stuck_codes(late).is_empty(),
            "offline: nobody could take it"
        );
        let online = RuntimeRecord {
            status: RuntimeStatus::Online,
            last_heartbeat: Some(late),
            ..r
        };
        store.save_runtime(&online).unwrap();
        assert!(stuck_codes(late - 2).is_empty(), "not waited long enough");
        assert_eq!(stuck_codes(late), ["STUCK_MESSAGE"]);
    }

    /// An adapter with `[acp]` whose command is `tool-acp`, checked
    /// against 1.0; `tool-acp VERSION_ARGS…` runs as `echo`, so what it
    /// reports is what the profile's version_args say.
    fn acp_adapter(version_args: &str) -> Vec<Entry> {
        let text = format!(
            "schema = 1\nname = \"tool\"\nversion = \"1\"\nkind = \"agent\"\ncommands = [\"tool\"]\n[acp]\ncommand = [\"tool-acp\"]\nchecked = \">=1.0, <1.1\"\nversion_args = [{version_args}]\n"
        );
        let text: &'static str = Box::leak(text.into_boxed_str());
        crate::adapter::AdapterRegistry::load(&[("tool.toml", text)], None, None)
            .entries()
            .to_vec()
    }

    fn acp_runtime(store: &SqliteStore, kind: &str) -> RuntimeRecord {
        RuntimeRecord {
            kind: kind.into(),
            provider: Some("tool".into()),
            ..configured(store, "bob")
        }
    }

    /// A PATH directory where `tool-acp` is `echo`.
    fn path_with_tool_acp() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let echo = on_path("echo").expect("echo on PATH");
        std::os::unix::fs::symlink(echo, dir.path().join("tool-acp")).unwrap();
        dir
    }

    #[cfg(unix)]
    #[test]
    fn an_acp_runtime_whose_agent_command_is_not_on_path_is_reported_with_its_repair() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).unwrap();
        let entries = acp_adapter("\"1.0.3\"");
        let empty = tempfile::tempdir().unwrap();
        let acp = acp_runtime(&store, RuntimeKind::Acp.as_str());
        let findings = acp_findings_on(
            &entries,
            std::slice::from_ref(&acp),
            "host1",
            empty.path().as_os_str(),
        );
        assert_eq!(findings.len(), 1, "{findings:?}");
        let f = &findings[0];
        assert_eq!(
            (f.code, f.subject.as_str()),
            ("ACP_COMMAND_MISSING", "adapter tool")
        );
        assert!(
            f.message
                .contains("ACP runtime bob runs its agent with `tool-acp`"),
            "{}",
            f.message
        );
        assert_eq!(
            f.repair.as_deref(),
            Some("install the agent (checked: >=1.0, <1.1) so that `tool-acp` is on PATH, or give the runtime its command: agent-comms runtime acp-serve bob -- <ACP command>")
        );

        let on_path = path_with_tool_acp();
        let path = on_path.path().as_os_str();
        assert!(
            acp_findings_on(&entries, std::slice::from_ref(&acp), "host1", path).is_empty(),
            "1.0.3 is checked"
        );
        let interactive = acp_runtime(&store, RuntimeKind::Interactive.as_str());
        assert!(
            acp_findings_on(&entries, &[interactive], "host1", empty.path().as_os_str()).is_empty(),
            "no ACP runtime uses the adapter"
        );
        let elsewhere = RuntimeRecord {
            host: Some("host2".into()),
            ..acp
        };
        assert!(
            acp_findings_on(&entries, &[elsewhere], "host1", empty.path().as_os_str()).is_empty(),
            "another host's PATH is not this one's"
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_acp_agent_outside_its_checked_versions_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open_in(dir.path()).unwrap();
        let on_path = path_with_tool_acp();
        let path = on_path.path().as_os_str();
        let acp = acp_runtime(&store, RuntimeKind::Acp.as_str());
        let findings = acp_findings_on(
            &acp_adapter("\"tool-acp\", \"1.1.0\""),
            std::slice::from_ref(&acp),
            "host1",
            path,
        );
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].code, "ACP_VERSION_UNCHECKED");
        assert!(findings[0].message.ends_with("tool-acp is 1.1.0; the adapter's [acp] was checked against >=1.0, <1.1, so the quirks it declares may have changed (ACP runtime bob uses it)"), "{}", findings[0].message);
        assert!(
            acp_findings_on(&acp_adapter(""), &[acp], "host1", path).is_empty(),
            "without version_args the version is not checked"
        );
    }

    #[test]
    fn hosts_sharing_a_database_are_told_of_skewed_clocks_and_old_builds() {
        let seen = |id: &str, skew_ms: i64, schema: i64| HostSeen {
            id: id.into(),
            name: format!("box-{id}"),
            version: "0.1.0".into(),
            schema,
            skew_ms,
            seen: 1,
        };
        let hosts = [
            seen("me", 150, 1),
            seen("ahead", SKEW_WARN_MS + 1, 1),
            seen("behind", -9_000, 1),
            seen("old", 0, 0),
        ];
        let found = host_findings(&hosts, "me", 1);
        let codes: Vec<(&str, &str)> = found.iter().map(|f| (f.code, f.subject.as_str())).collect();
        assert_eq!(
            codes,
            [
                ("CLOCK_SKEW", "host ahead"),
                ("CLOCK_SKEW", "host behind"),
                ("HOST_SCHEMA_BEHIND", "host old"),
            ]
        );
        assert!(
            found[1].message.contains("9000 ms behind"),
            "{}",
            found[1].message
        );
        assert!(
            found[2].message.contains("knows schema 0"),
            "{}",
            found[2].message
        );
    }
}
