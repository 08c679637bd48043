fn main() {
    agent_comms::cli::completions::answer_if_asked(agent_comms::cli::completions::Program::K);
    std::process::exit(agent_comms::cli::k::main());
}
