//! `k` starts once per cell, so its start-up is most of a `k run`. Linked
//! as a position-dependent executable on Linux, it needs none of the ~14,000
//! relative relocations a PIE of it carries: the loader neither writes them
//! nor copies the ~70 pages they sit in, which took `k --version` from about
//! the cost of a hello-world plus 0.3 ms down to that of a hello-world (the
//! numbers are in docs/benchmarks.md). The price is a fixed address for
//! `k`'s own image (its libraries, heap and stack stay randomized); `k` is a
//! short-lived client of the user's own sessions. The other binaries stay
//! PIE.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=k=-no-pie");
    }
}
