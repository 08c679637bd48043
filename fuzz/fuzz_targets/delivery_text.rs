//! Fuzz target `delivery_text`: the logic and its properties are
//! `agent_comms_fuzz::delivery_text` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::delivery_text(data));
