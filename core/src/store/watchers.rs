//! Wake-ups for the commands that follow messages (`invocation list
//! --follow`): whoever changes a message's state in the store tells them,
//! so they read the change at once instead of polling.
//!
//! A follower binds a datagram socket in the project's watch directory (in
//! the runtime root, keyed by the store's path, so two projects never wake
//! each other) *before* its first read of the store, then blocks on it.
//! [`super::SqliteStore`] itself sends one empty datagram to each socket
//! there after every committed change to a message (stored, leased,
//! delivered, failed, released, cancelled, queued again), so no writer —
//! `send` in a command, the inbox of a local runtime — can forget to. The
//! datagram carries nothing: the store stays the one record, and the
//! follower reads what changed from it. A socket whose follower is gone
//! refuses the datagram and is removed by the writer that found it.
//!
//! What no writer tells — a runtime on another host writing the same
//! store, an older build — a follower still sees through a slow periodic
//! read ([`Follower::wait`]'s timeout); on platforms without Unix datagram
//! sockets that read is all there is.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The directory a project's followers bind in.
fn watch_dir(store: &Path) -> PathBuf {
    // FNV-1a: stable across builds, unlike the std hasher, so every binary
    // of a project finds the same directory.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in store.as_os_str().as_encoded_bytes() {
        hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    crate::paths::runtime_root().join(format!("watch-{hash:016x}"))
}

/// Wakes every follower of the project whose store is at `store`. Best
/// effort and quick (one directory read, one datagram each): a follower
/// that missed it still reads the store on its own a little later.
pub fn tell(store: &Path) {
    platform::tell(&watch_dir(store));
}

/// A command following the project's messages.
pub struct Follower {
    inner: platform::Listener,
}

impl Follower {
    /// Starts listening for wake-ups; a change committed after this returns
    /// wakes [`Follower::wait`].
    pub fn listen(store: &Path) -> Result<Self, std::io::Error> {
        crate::paths::ensure_runtime_root().map_err(std::io::Error::other)?;
        Ok(Self {
            inner: platform::Listener::bind(&watch_dir(store))?,
        })
    }

    /// Blocks until a writer says something changed, or `at_most` passed.
    pub fn wait(&self, at_most: Duration) -> bool {
        self.inner.wait(at_most)
    }
}

impl super::Follow for Follower {
    fn wait(&self, at_most: Duration) -> bool {
        Follower::wait(self, at_most)
    }
}

#[cfg(unix)]
mod platform {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixDatagram;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    pub fn tell(dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let Ok(sender) = UnixDatagram::unbound() else {
            return;
        };
        let _ = sender.set_nonblocking(true);
        for entry in entries.flatten() {
            let path = entry.path();
            if let Err(e) = sender.send_to(&[], &path) {
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
                ) {
                    // Its follower is gone (killed before it could clean up).
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }

    pub struct Listener {
        socket: UnixDatagram,
        path: PathBuf,
    }

    impl Listener {
        pub fn bind(dir: &Path) -> std::io::Result<Self> {
            match std::fs::create_dir(dir) {
                Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            static NEXT: AtomicU32 = AtomicU32::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("{}-{n}.sock", std::process::id()));
            let _ = std::fs::remove_file(&path);
            let socket = UnixDatagram::bind(&path)?;
            Ok(Self { socket, path })
        }

        pub fn wait(&self, at_most: Duration) -> bool {
            let _ = self
                .socket
                .set_read_timeout(Some(at_most.max(Duration::from_millis(1))));
            let mut buf = [0u8; 16];
            if self.socket.recv(&mut buf).is_err() {
                return false;
            }
            // Several writers may have told at once: one read of the store
            // answers them all.
            let _ = self.socket.set_nonblocking(true);
            while self.socket.recv(&mut buf).is_ok() {}
            let _ = self.socket.set_nonblocking(false);
            true
        }
    }

    impl Drop for Listener {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(not(unix))]
mod platform {
    use std::path::Path;
    use std::time::Duration;

    pub fn tell(_dir: &Path) {}

    /// No datagram sockets here: the follower reads the store each time
    /// its wait runs out.
    pub struct Listener;

    impl Listener {
        pub fn bind(_dir: &Path) -> std::io::Result<Self> {
            Ok(Self)
        }

        pub fn wait(&self, at_most: Duration) -> bool {
            std::thread::sleep(at_most.min(Duration::from_millis(250)));
            false
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_woken_and_a_gone_one_is_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let watch = dir.path().join("watch");
        let follower = platform::Listener::bind(&watch).unwrap();
        platform::tell(&watch);
        let started = std::time::Instant::now();
        follower.wait(Duration::from_secs(5));
        assert!(started.elapsed() < Duration::from_secs(1));
        // A socket nobody reads any more (its follower was killed).
        let gone = watch.join("1-0.sock");
        drop(std::os::unix::net::UnixDatagram::bind(&gone).unwrap());
        platform::tell(&watch);
        assert!(!gone.exists());
        assert_eq!(std::fs::read_dir(&watch).unwrap().count(), 1);
    }
}
