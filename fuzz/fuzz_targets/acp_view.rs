//! Fuzz target `acp_view`: the logic and its properties are
//! `agent_comms_fuzz::acp_view` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::acp_view(data));
