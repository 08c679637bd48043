//! Links the `agent-comms` binary at a fixed address (not as a
//! position-independent executable) on Linux.
//!
//! Every detached supervisor is this binary re-executed, so what its image
//! costs at start is paid once per session. As a PIE, the dynamic loader
//! applies about 59 000 relative relocations at each start: it reads all of
//! `.rela.dyn` (1.4 MB) and writes every page of `.data.rel.ro` and `.got`
//! (0.96 MB), which become private copies. Linked at a fixed address,
//! those pointers are final in the file: nothing is read or copied at start,
//! and the pages stay shared, clean file pages, read only when used
//! (docs/benchmarks.md, idle RSS). The cost is that this one image is not
//! placed at a random address (its libraries, heap and stacks still are).
//! `k` and `km` start no supervisors and stay PIEs.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target = |key: &str| std::env::var(key).unwrap_or_default();
    if target("CARGO_CFG_TARGET_OS") == "linux" && target("CARGO_CFG_TARGET_ENV") == "gnu" {
        println!("cargo:rustc-link-arg-bin=agent-comms=-no-pie");
    }
}
