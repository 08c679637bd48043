//! `agent-comms doctor`: findings with codes and exact repairs.

use agent_comms_core::control::doctor::{examine, version_findings, Severity};
use agent_comms_core::control::{host::host_id, open_store};
use agent_comms_core::display;
use agent_comms_core::time::unix_millis;

pub fn run(json: bool) -> anyhow::Result<i32> {
    let store = open_store()?;
    let registry = agent_comms_adapters::registry();
    let problems: Vec<String> = registry
        .diagnostics()
        .iter()
        .map(|d| d.to_string())
        .collect();
    let mut findings = examine(&store, &host_id()?, unix_millis(), &problems)?;
    findings.extend(version_findings(registry.entries()));
    if json {
        println!("{}", serde_json::to_string(&findings)?);
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
