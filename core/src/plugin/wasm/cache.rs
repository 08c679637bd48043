//! Compiled components on disk, so a plugin compiles once, not per load.
//!
//! Compiling a small component takes tens of milliseconds; mapping a
//! compiled one back in takes a fraction of one. A compiled file is named
//! by a SHA-256 of the component's bytes and of everything about this
//! engine that compiled code depends on (target, settings, wasmtime
//! version), so a changed plugin or a new agent-comms never picks up a
//! stale file. Files are written whole and renamed into place, so a reader
//! never maps a half-written one.
//!
//! Loading compiled code trusts the file (it is machine code), which is why
//! the directory must be the user's and writable by nobody else (it is
//! created mode 0700; one that is not so is not used), and nothing but this
//! module writes there.

use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};
use wasmtime::component::Component;
use wasmtime::Engine;

use crate::os::DirBuilderExt;

/// How a load got its compiled component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Mapped from the cache: nothing was compiled.
    Hit,
    /// Compiled, and stored for the next load.
    Stored,
    /// Compiled; there is no cache directory, or it could not be written.
    Compiled,
}

/// The compiled `bytes`, from `dir` when it holds them, else compiled (and
/// stored there). Returns the file it used or wrote.
pub(super) fn load(
    engine: &Engine,
    bytes: &[u8],
    dir: Option<&Path>,
) -> wasmtime::Result<(Component, CacheOutcome, Option<PathBuf>)> {
    let dir = dir.filter(|dir| match private_dir(dir) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "not using the compile cache: {e}");
            false
        }
    });
    let Some(dir) = dir else {
        return Ok((Component::new(engine, bytes)?, CacheOutcome::Compiled, None));
    };
    let file = dir.join(format!("{}.cwasm", key(engine, bytes)));
    if file.is_file() {
        // SAFETY: the file was written by `store` below from a component
        // this engine compiled, in a directory private to the user; the key
        // covers the bytes and the engine's compilation settings.
        match unsafe { Component::deserialize_file(engine, &file) } {
            Ok(component) => return Ok((component, CacheOutcome::Hit, Some(file))),
            Err(e) => {
                tracing::debug!(file = %file.display(), "compiled plugin not reusable, recompiling: {e}")
            }
        }
    }
    let component = Component::new(engine, bytes)?;
    match store(&component, &file) {
        Ok(()) => Ok((component, CacheOutcome::Stored, Some(file))),
        Err(e) => {
            tracing::warn!(file = %file.display(), "cannot cache the compiled plugin: {e}");
            Ok((component, CacheOutcome::Compiled, None))
        }
    }
}

/// Creates `dir` (mode 0700) if missing, and refuses one that anyone but
/// the user could write to: its files are run as machine code.
fn private_dir(dir: &Path) -> Result<(), String> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| e.to_string())?;
    let meta = fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
    if meta.is_dir() && crate::os::only_user_writes(&meta)? {
        Ok(())
    } else {
        Err("not a directory that only you can write to".into())
    }
}

fn store(component: &Component, file: &Path) -> Result<(), String> {
    let compiled = component.serialize().map_err(|e| e.to_string())?;
    // Unique per writer: two loads of one plugin may race to store it.
    static WRITERS: AtomicU64 = AtomicU64::new(0);
    let writer = WRITERS.fetch_add(1, Ordering::Relaxed);
    let partial = file.with_extension(format!("partial-{}-{writer}", std::process::id()));
    fs::write(&partial, compiled)
        .and_then(|()| fs::rename(&partial, file))
        .map_err(|e| {
            let _ = fs::remove_file(&partial);
            e.to_string()
        })
}

/// SHA-256 over the engine's compatibility hash and the component's bytes.
fn key(engine: &Engine, bytes: &[u8]) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.update(bytes);
    hasher
        .0
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Feeds `Hash` impls into SHA-256 (std's hashers are not stable across
/// Rust releases, and 64 bits are too few to name files by).
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(
            digest[..8]
                .try_into()
                .expect("a SHA-256 digest has 32 bytes"),
        )
    }
}
