//! Replays the inputs a fuzz target keeps (`fuzz/regressions/TARGET/`, its
//! seeds and every crash found and fixed) through the target's own checks,
//! on stable: core's targets and the web server's are replayed by two test
//! packages, each with the crates its targets need.

use std::path::{Path, PathBuf};

/// A fuzz target's checks over one input: they panic when one fails.
pub type Target = fn(&[u8]);

/// The inputs under `root/NAME/` of each target that panic in it. Panics
/// itself if a target keeps no inputs: a target never replayed would let a
/// fixed crash come back unseen.
pub fn failing_inputs(root: &Path, targets: &[(&str, Target)]) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, target) in targets {
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
    failed
}
