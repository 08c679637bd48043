fn main() {
    if let Some(code) = agent_comms::cli::supervisor_entry() {
        std::process::exit(code);
    }
    std::process::exit(agent_comms::cli::k::main());
}
