//! Fuzz target `socket_codec`: the logic and its properties are
//! `agent_comms_fuzz::socket_codec` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::socket_codec(data));
