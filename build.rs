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
//! `AGENT_COMMS_SYMBOL_ORDER=FILE` has lld place the functions FILE names,
//! in its order, at the start of `agent-comms`' code: scripts/install links
//! a second time with the functions a session's life runs
//! (link/hot-code.txt, mapped onto the first link's symbols by
//! `scripts/hot-code order`), so that an idle supervisor maps ~1 MB of
//! code instead of pieces of all 30 MB of it. Only lld reads such a file:
//! scripts/install sets it only where the first link was lld's.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AGENT_COMMS_PIE");
    println!("cargo:rerun-if-env-changed=AGENT_COMMS_SYMBOL_ORDER");
    let var = |key: &str| std::env::var(key).unwrap_or_default();
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    if gnu_linux && var("AGENT_COMMS_PIE") != "1" {
        for bin in ["agent-comms", "k"] {
            println!("cargo:rustc-link-arg-bin={bin}=-no-pie");
        }
    }
    let order = var("AGENT_COMMS_SYMBOL_ORDER");
    if !order.is_empty() {
        println!("cargo:rerun-if-changed={order}");
        println!("cargo:rustc-link-arg-bin=agent-comms=-Wl,--symbol-ordering-file={order}");
        // The list names functions that inlining or a change may have
        // removed: those are skipped, not warned about one by one.
        println!("cargo:rustc-link-arg-bin=agent-comms=-Wl,--no-warn-symbol-ordering");
    }
}
