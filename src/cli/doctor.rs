//! `agent-comms doctor`: findings with codes and exact repairs.

use agent_comms_core::adapter::AdapterRegistry;
use agent_comms_core::control::doctor::{
    acp_findings, database_finding, examine, privacy_finding, store_findings, trust_findings,
    version_findings, Finding, Severity,
};
use agent_comms_core::control::{
    host::host_id, open_store, state_dir, store_location, store_path, ControlError,
};
use agent_comms_core::display;
use agent_comms_core::store::location::project_settings;
use agent_comms_core::store::{Location, StoreError};
use agent_comms_core::trust::TrustList;

pub fn run(json: bool) -> anyhow::Result<i32> {
    let registry = agent_comms_adapters::registry();
    // A store that is not the user's alone is refused by every command, so
    // it is the finding, and nothing in it is examined.
    let mut findings = match store_location() {
        Ok(Location::Sqlite(path)) => store_findings(&path),
        Ok(Location::Postgres(_)) => Vec::new(),
        // The settings naming the store are not the user's alone: nothing
        // they say is followed, and the directory holding them is checked
        // as the store's would be.
        Err(ControlError::Store(StoreError::NotPrivate(p))) => {
            let mut found = store_findings(&store_path());
            if found.is_empty() {
                found.push(privacy_finding(&p));
            }
            found
        }
        Err(e) => return Err(e.into()),
    };
    if findings.is_empty() {
        let host = host_id()?;
        match open_store() {
            Ok(store) => {
                let store = store.as_ref();
                findings = examine(store, &host, store.now(), registry.diagnostics())?;
                findings.extend(acp_findings(registry.entries(), &store.runtimes()?, &host));
            }
            Err(ControlError::Store(e)) => match database_finding(&e) {
                // The database, out of reach, is the finding; the rest of
                // the control plane cannot be read until it is back.
                Some(finding) => findings.push(finding),
                None => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
    }
    findings.extend(version_findings(registry.entries()));
    findings.extend(trust(&registry));
    if json {
        println!("{}", agent_comms_core::display::json(&findings)?);
    } else if findings.is_empty() {
        println!("no problems found");
    } else {
        for f in &findings {
            let level = match f.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            // Subjects and messages quote store rows and screens: escaped,
            // except the line breaks a finding lays out itself.
            println!(
                "{level} {} {}: {}",
                f.code,
                display::one_line(&f.subject),
                display::block(&f.message)
            );
            if let Some(repair) = &f.repair {
                println!("    repair: {}", display::one_line(repair));
            }
        }
    }
    // Findings are the answer, not a failure of the command; scripts read
    // the exit status as "anything to do?".
    Ok(if findings.iter().any(|f| f.severity == Severity::Error) {
        2
    } else {
        0
    })
}

/// The project's files left out until trusted, and a trust list that
/// cannot be used.
fn trust(registry: &AdapterRegistry) -> Vec<Finding> {
    let (list, problem) = match TrustList::load() {
        Ok(list) => (list, None),
        Err(e) => (TrustList::default(), Some(e)),
    };
    let mut untrusted = Vec::new();
    for u in registry.untrusted() {
        for file in u.files() {
            untrusted.push((
                file.path.clone(),
                format!("the project's adapter {:?}", u.profile.name),
            ));
        }
    }
    let dir = state_dir();
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    if let Ok(Some((file, effects))) = project_settings(&dir, &list) {
        if !file.trusted {
            untrusted.push((file.path, effects.join("; ")));
        }
    }
    trust_findings(&untrusted, problem.as_ref())
}
