fn main() {
    agent_comms::cli::completions::answer_if_asked(agent_comms::cli::completions::Program::Km);
    std::process::exit(agent_comms::cli::km::main());
}
