//! Fuzz target `profile`: the logic and its properties are
//! `agent_comms_fuzz::profile` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::profile(data));
