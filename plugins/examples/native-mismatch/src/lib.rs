//! Fault test: a plugin built for native interface 2.0.0.
//!
//! It compiles the interface's own source under this package, whose version
//! (2.0.0) becomes the interface version it declares; the host, which speaks
//! interface 1, must refuse it with `PluginError::Version`.

#[allow(
    dead_code,
    reason = "a copy of the whole interface; the stub uses part of it"
)]
#[path = "../../../native-api/src/interface.rs"]
mod interface;
mod stub;
