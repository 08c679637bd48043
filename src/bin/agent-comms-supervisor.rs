//! A session's supervisor and nothing else: what `agent-comms` runs for a
//! session whose adapter loads no plugin, when this image is next to it
//! (`supervisor::launch::supervisor_image`), as `cargo build` and
//! scripts/install put it. Without the command line's code it has fewer
//! pointers for the loader to relocate, which every supervisor holds a
//! private copy of: ten idle sessions cost 2.35 MB of PSS each under it,
//! 3.0 MB under `agent-comms` (docs/architecture.md).
fn main() {
    match agent_comms::cli::supervisor_entry() {
        Some(code) => std::process::exit(code),
        None => {
            eprintln!(
                "agent-comms-supervisor runs sessions for agent-comms and is not run by hand; \
                 start a session with `agent-comms session new NAME -- COMMAND`"
            );
            std::process::exit(2);
        }
    }
}
