//! A session's supervisor and nothing else: what `agent-comms` runs for a
//! session whose adapter loads no plugin, when this image is installed
//! next to it (`supervisor::launch::supervisor_image`). scripts/install
//! links it statically on GNU/Linux, its hot code and constants together,
//! so that an idle session holds about half the memory a supervisor of the
//! dynamically linked `agent-comms` does (docs/architecture.md); it cannot
//! load native plugins, which need the dynamic loader.
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
