//! Fuzz target `acp_policy`: the logic and its properties are
//! `agent_comms_fuzz::acp_policy` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::acp_policy(data));
