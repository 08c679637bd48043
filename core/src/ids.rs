//! Random identifiers: session tokens, cell ids, invocation ids, endpoint
//! ids, the host id.

/// `bytes` random bytes from the system's random source, as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    if getrandom::fill(&mut buf).is_err() {
        // Never expected; fall back to time and pid, still unique enough per session.
        let seed = crate::time::unix_millis() ^ u64::from(std::process::id()) << 32;
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (seed >> ((i % 8) * 8)) as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
