//! Real things for tests, where a fake would only test the fake:
//!
//! - [`postgres`]: a private PostgreSQL server per test process, with a
//!   fresh database and role per test, and a restart on demand;
//! - [`hosts`]: machines simulated as Linux network namespaces, each
//!   reaching that server over a link of its own that a test can cut;
//! - [`fuzz`]: the fuzz targets' kept inputs replayed on stable.
//!
//! Linux only: both rest on Linux interfaces (`prctl`, pidfds, network
//! namespaces). Elsewhere the crate holds only [`fuzz`].

pub mod fuzz;
#[cfg(target_os = "linux")]
pub mod hosts;
#[cfg(target_os = "linux")]
pub mod postgres;
