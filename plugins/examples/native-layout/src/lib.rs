//! Fault test: a plugin that declares the host's interface version but
//! whose interface types are not the host's.
//!
//! It compiles its own copy of the interface source, as a plugin that copied
//! the definitions instead of depending on `agent-comms-plugin-api` would;
//! abi_stable's layout check sees types from another package, and the host
//! must refuse it with `PluginError::Layout`.

#[allow(
    dead_code,
    reason = "a copy of the whole interface; the stub uses part of it"
)]
#[path = "../../../native-api/src/interface.rs"]
mod interface;
#[path = "../../native-mismatch/src/stub.rs"]
mod stub;
