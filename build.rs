//! `k` starts once per cell, so its start-up is most of a `k run`. Linked
//! as a position-dependent executable on Linux, it needs none of the ~14,000
//! relative relocations a PIE of it carries: the loader neither writes them
//! nor copies the ~70 pages they sit in (a `k run` took 191 page faults as a
//! PIE, 122 without; `k --version` now starts like a Rust hello-world).
//! The price is a fixed address for `k`'s own image (its libraries, heap
//! and stack stay randomized); `k` is a short-lived client of the user's
//! own sessions. The other binaries stay PIE.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=k=-no-pie");
    }
}
