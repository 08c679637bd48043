//! Every input kept under `fuzz/regressions/TARGET/` for the web server's
//! fuzz targets (fuzz/src/web.rs, included here as is) replayed through the
//! target's own checks, on stable, in every `cargo test` — as
//! core/tests/fuzz_regressions.rs does for core's targets. These need the
//! web crate, which core cannot depend on; this package has both.

// The targets name `futures`, which core has; this package has its parts.
extern crate futures_util as futures;

#[path = "../fuzz/src/web.rs"]
mod targets;

use std::path::PathBuf;

#[test]
fn every_kept_web_fuzz_input_passes_its_target() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let failed = agent_comms_testing::fuzz::failing_inputs(&root, targets::TARGETS);
    assert!(failed.is_empty(), "fuzz inputs that fail: {failed:#?}");
}

/// fuzz/src/lib.rs names these targets for core's replay to know they are
/// replayed here (core/tests/fuzz_regressions.rs checks that every target is
/// replayed by one of the two).
#[test]
fn core_knows_the_web_targets_are_replayed_here() {
    let lib = include_str!("../fuzz/src/lib.rs");
    let listed = lib
        .lines()
        .find_map(|l| l.strip_prefix("pub const WEB_TARGETS: &[&str] = &["))
        .and_then(|l| l.strip_suffix("];"))
        .expect("fuzz/src/lib.rs lists WEB_TARGETS on one line");
    let names: Vec<String> = targets::TARGETS
        .iter()
        .map(|(name, _)| format!("{name:?}"))
        .collect();
    assert_eq!(listed, names.join(", "));
}
