//! Every input kept under `fuzz/regressions/TARGET/` — the seed corpus of
//! each fuzz target and every crash input found and fixed — replayed
//! through the target's own checks, on stable, in every `cargo test`.
//!
//! The checks are the fuzz targets' (fuzz/src/lib.rs, included here as is),
//! so a fix stays tested without libFuzzer or nightly. docs/security.md#fuzzing
//! says how the fuzzers run.

#[path = "../../fuzz/src/lib.rs"]
mod targets;

use std::path::PathBuf;

#[test]
fn every_kept_fuzz_input_passes_its_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions");
    let mut failed = Vec::new();
    for (name, target) in targets::TARGETS {
        let dir = root.join(name);
        let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| entry.unwrap().path())
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "{} holds no inputs", dir.display());
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            if std::panic::catch_unwind(|| target(&data)).is_err() {
                failed.push(input.display().to_string());
            }
        }
    }
    assert!(failed.is_empty(), "fuzz inputs that fail: {failed:#?}");
}

#[test]
fn the_split_prefix_cuts_the_stream_as_it_says() {
    assert_eq!(targets::split_input(b""), vec![&b""[..]]);
    assert_eq!(targets::split_input(b"\x00abc"), vec![&b"abc"[..]]);
    let pieces = targets::split_input(b"\x02\x00\x01abcdef");
    assert_eq!(pieces, [&b"a"[..], b"bc", b"d", b"ef"]);
}
