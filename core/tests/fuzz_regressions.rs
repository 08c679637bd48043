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
    let failed = agent_comms_testing::fuzz::failing_inputs(&root, targets::TARGETS);
    assert!(failed.is_empty(), "fuzz inputs that fail: {failed:#?}");
}

/// A target without its inputs replayed would let a fixed crash come back
/// unseen: each of `fuzz/fuzz_targets/` and of `fuzz/regressions/` is one of
/// core's targets, replayed above, or one of the web server's, which the
/// root package's `tests/fuzz_regressions.rs` replays.
#[test]
fn every_fuzz_target_is_replayed() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut known: Vec<&str> = targets::TARGETS.iter().map(|(name, _)| *name).collect();
    known.extend(targets::WEB_TARGETS);
    known.sort();
    for (dir, ext) in [("fuzz_targets", ".rs"), ("regressions", "")] {
        let mut names: Vec<String> = std::fs::read_dir(fuzz.join(dir))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .map(|name| name.strip_suffix(ext).unwrap_or(&name).to_owned())
            .collect();
        names.sort();
        assert_eq!(names, known, "fuzz/{dir}");
    }
}

#[test]
fn the_split_prefix_cuts_the_stream_as_it_says() {
    assert_eq!(targets::split_input(b""), vec![&b""[..]]);
    assert_eq!(targets::split_input(b"\x00abc"), vec![&b"abc"[..]]);
    let pieces = targets::split_input(b"\x02\x00\x01abcdef");
    assert_eq!(pieces, [&b"a"[..], b"bc", b"d", b"ef"]);
}
