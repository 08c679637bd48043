fn main() {
    if let Some(code) = agent_comms::cli::supervisor_entry() {
        std::process::exit(code);
    }
    agent_comms::cli::completions::answer_if_asked(
        agent_comms::cli::completions::Program::AgentComms,
    );
    std::process::exit(agent_comms::cli::agent_comms::main());
}
