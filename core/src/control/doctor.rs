//! `doctor`: what is wrong with the control plane, and the command that
//! fixes each thing. It reads; it never repairs by itself, because each
//! repair (reconfiguring a runtime, redelivering a message) is a decision a
//! person should see being made.

use serde::Serialize;

use super::registration::{effective_status, heartbeat_stale, repair_command, INTERACTIVE};
use super::ControlError;
use crate::adapter::command::on_path;
use crate::adapter::profile::Kind;
use crate::adapter::{version, Entry};
use crate::socket::is_dialable;
use crate::store::{RuntimeStatus, Store};
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
pub fn examine(
    store: &dyn Store,
    host: &str,
    now: u64,
    profile_problems: &[String],
) -> Result<Vec<Finding>, ControlError> {
    let mut findings = Vec::new();
    let runtimes = store.runtimes()?;
    for r in &runtimes {
        if r.kind != INTERACTIVE || r.connector != INTERACTIVE || r.max_concurrent != 1 {
            findings.push(Finding {
                code: "RUNTIME_MISMATCH",
                severity: Severity::Error,
                subject: format!("runtime {}", r.id),
                message: format!(
                    "kind {}, connector {}, max-concurrent {}: interactive-serve refuses it",
                    r.kind, r.connector, r.max_concurrent
                ),
                repair: Some(repair_command(&r.agent, &r.id)),
            });
        }
        let foreign = r.host.as_deref().is_some_and(|h| h != host);
        if foreign {
            findings.push(Finding {
                code: "FOREIGN_HOST",
                severity: Severity::Warning,
                subject: format!("runtime {}", r.id),
                message: format!(
                    "registered on host {}; messages to agent {} are UNAVAILABLE from here",
                    r.host.as_deref().unwrap_or("?"),
                    r.agent
                ),
                repair: Some(repair_command(&r.agent, &r.id)),
            });
            continue;
        }
        if r.status != RuntimeStatus::Online {
            continue;
        }
        let dialable = r
            .endpoint
            .as_deref()
            .is_some_and(|e| is_dialable(e.as_ref()));
        if !dialable {
            findings.push(Finding {
                code: "ENDPOINT_NOT_DIALABLE",
                severity: Severity::Error,
                subject: format!("runtime {}", r.id),
                message: format!(
                    "ONLINE, but its endpoint {} does not answer: the supervisor is gone",
                    r.endpoint.as_deref().unwrap_or("(none)")
                ),
                repair: Some(format!(
                    "agent-comms --actor {} runtime interactive-serve --id {} -- <provider command>",
                    r.agent, r.id
                )),
            });
        } else if heartbeat_stale(r, now) {
            let last = r
                .last_heartbeat
                .map_or_else(|| "never".into(), iso_from_unix_millis);
            findings.push(Finding {
                code: "HEARTBEAT_STALE",
                severity: Severity::Warning,
                subject: format!("runtime {}", r.id),
                message: format!("its endpoint answers but its last heartbeat was {last}; the supervisor may be stuck"),
                repair: None,
            });
        }
    }
    let mut agents: Vec<&str> = runtimes.iter().map(|r| r.agent.as_str()).collect();
    agents.sort_unstable();
    agents.dedup();
    for agent in agents {
        let online: Vec<&str> = runtimes
            .iter()
            .filter(|r| r.agent == agent && effective_status(r, now).0 == RuntimeStatus::Online)
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
    for a in store.stale_attempts(now)? {
        findings.push(Finding {
            code: "STALE_DELIVERY_ATTEMPT",
            severity: Severity::Warning,
            subject: format!("invocation {}", a.invocation),
            message: format!(
                "attempt {} by runtime {} lost its lease at {} (its runtime stopped mid-delivery); it goes back to the queue when the runtime restarts",
                a.id,
                a.runtime,
                iso_from_unix_millis(a.lease_until)
            ),
            repair: Some(format!("agent-comms message redeliver --id {}", a.invocation)),
        });
    }
    for problem in profile_problems {
        findings.push(Finding {
            code: "INVALID_PROFILE",
            severity: Severity::Error,
            subject: "adapters".into(),
            message: problem.clone(),
            repair: Some("agent-comms adapters check".into()),
        });
    }
    Ok(findings)
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
