//! What the plugin tests share: where the built plugins are, and small
//! constructors for screens and argument vectors.
#![allow(dead_code)] // each test binary uses its own part of this

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_comms_core::adapter::ScreenView;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The shared library cargo built for the workspace crate `name`: the
/// plugins are dev-dependencies of this crate, so cargo builds them into
/// `deps/` next to the test binary before it runs.
pub fn native_library(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let file = format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        name.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    );
    exe.parent().unwrap().join(file)
}

/// A component `scripts/build-plugins` leaves in target/wasm; a missing one
/// fails with that advice rather than skipping.
pub fn wasm_component(crate_name: &str) -> PathBuf {
    let path = repo().join(format!(
        "target/wasm/wasm32-wasip2/release/{crate_name}.wasm"
    ));
    assert!(
        path.is_file(),
        "{} is missing: run scripts/build-plugins (needs: rustup target add wasm32-wasip2)",
        path.display()
    );
    path
}

/// The compile cache the Wasm tests share.
pub fn wasm_cache() -> PathBuf {
    repo().join("target/wasm/test-cache")
}

/// A deadline for tests that are not about the deadline: on a loaded
/// machine a trivial call can take longer than the default wall-clock 50 ms.
pub const PATIENT: Duration = Duration::from_secs(20);

pub fn argv(line: &str) -> Vec<String> {
    line.split(' ').map(String::from).collect()
}

pub fn screen(text: &str) -> Vec<String> {
    text.lines().map(String::from).collect()
}

/// A view of `lines` with the cursor on the last row.
pub fn view(lines: &[String]) -> ScreenView<'_> {
    ScreenView {
        lines,
        title: "",
        osc: &[],
        cursor_row: lines.len().saturating_sub(1) as u16,
        foreground: "",
    }
}
