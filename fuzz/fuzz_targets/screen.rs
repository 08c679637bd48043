//! Fuzz target `screen`: the logic and its properties are
//! `agent_comms_fuzz::screen` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::screen(data));
