//! Links `agent-comms` and `k` at a fixed address (not as
//! position-independent executables) on GNU/Linux.
//!
//! Both start often: every detached supervisor is `agent-comms`
//! re-executed, and `k` starts once per cell. As PIEs, the dynamic loader
//! applies their relative relocations at each start — about 59 000 for
//! `agent-comms` (it reads all of `.rela.dyn`, 1.4 MB, and writes every
//! page of `.data.rel.ro` and `.got`, 0.96 MB, which become private copies
//! in every supervisor) and 14 000 for `k` (~70 pages). Linked at a fixed
//! address those pointers are final in the file: a supervisor's private
//! memory goes 1.5 → 0.57 MB and a `k run`'s page faults 191 → 122
//! (docs/architecture.md, docs/benchmarks.md).
//!
//! The price: these two images are not placed at a random address (their
//! libraries, heap and stacks still are), as Go's binaries are not by
//! default. docs/security.md weighs it; `AGENT_COMMS_PIE=1` at build time
//! keeps them PIEs. `km` and the other binaries stay PIEs.
//!
//! scripts/install links `agent-comms` and `agent-comms-supervisor` once
//! more with their hot code and constants placed together; it passes
//! those link arguments to the final link alone (`cargo rustc`), not
//! through here: a build script's new output would rebuild the library,
//! and the symbols its link found may come back named otherwise.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AGENT_COMMS_PIE");
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if gnu_linux && var("AGENT_COMMS_PIE") != "1" {
        for bin in ["agent-comms", "agent-comms-supervisor", "k"] {
            println!("cargo:rustc-link-arg-bin={bin}=-no-pie");
        }
    }
}
