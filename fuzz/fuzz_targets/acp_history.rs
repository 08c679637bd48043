//! Fuzz target `acp_history`: the logic and its properties are
//! `agent_comms_fuzz::acp_history` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::acp_history(data));
