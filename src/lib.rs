//! The command-line front ends: argument parsing and output formatting only.
//! Everything they do is a call into `agent-comms-core`.

pub mod cli;
