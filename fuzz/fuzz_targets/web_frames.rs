//! Fuzz target `web_frames`: the logic and its properties are
//! `web::web_frames` (fuzz/src/web.rs, which needs the web crate).
#![no_main]

// Its list of targets is for the stable replay (tests/fuzz_regressions.rs).
#[allow(dead_code)]
#[path = "../src/web.rs"]
mod web;

libfuzzer_sys::fuzz_target!(|data: &[u8]| web::web_frames(data));
