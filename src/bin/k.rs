fn main() {
    std::process::exit(agent_comms::cli::k::main());
}
