//! Fuzz target `cast_text`: the logic and its properties are
//! `agent_comms_fuzz::cast_text` (fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_comms_fuzz::cast_text(data));
