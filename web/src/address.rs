//! Where the server may listen. On a loopback address only this machine's
//! users can reach it, and the token keeps out all but the owner. Anywhere
//! else the whole network can try tokens, so that takes two explicit
//! choices: `--allow-remote`, and `--token-file` (a file the owner chose
//! and keeps, instead of one that dies with the runtime) — and TLS is not
//! ours: put a reverse proxy or an SSH tunnel in front (docs/acp-web.md).

use std::net::SocketAddr;

/// An address the server may listen on.
#[derive(Debug, Clone, Copy)]
pub struct Listen {
    addr: SocketAddr,
}

impl Listen {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    #[error("--listen {0} is not a loopback address, so anyone on the network could reach it; listen on 127.0.0.1:PORT, or give both --allow-remote and --token-file FILE to serve there anyway")]
    Remote(SocketAddr),
}

/// `addr` if it may be listened on: loopback, or remote with both
/// `allow_remote` and a token file.
pub fn check(
    addr: SocketAddr,
    allow_remote: bool,
    token_file: bool,
) -> Result<Listen, AddressError> {
    if addr.ip().is_loopback() || (allow_remote && token_file) {
        Ok(Listen { addr })
    } else {
        Err(AddressError::Remote(addr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_allowed_and_the_network_needs_both_flags() {
        for addr in ["127.0.0.1:0", "[::1]:8080", "127.3.4.5:1"] {
            assert!(check(addr.parse().unwrap(), false, false).is_ok(), "{addr}");
        }
        let any: SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert!(check(any, false, false).is_err());
        assert!(check(any, true, false).is_err());
        assert!(check(any, false, true).is_err());
        assert!(check(any, true, true).is_ok());
    }
}
