//! Fuzz target `protocol_json`: the logic and its properties are
//! `agent_comms_fuzz::protocol_json` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::protocol_json(data));
