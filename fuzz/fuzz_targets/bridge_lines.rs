//! Fuzz target `bridge_lines`: the logic and its properties are
//! `agent_comms_fuzz::bridge_lines` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::bridge_lines(data));
