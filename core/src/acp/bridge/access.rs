//! Who may attach: the owner always, as a controller; others only as the
//! policy's `[clients]` lists them, by uid or by group, checked on every
//! connection from the peer's credentials (never from anything it says).
//! A uid or group listed both ways is a controller.

use super::Role;
use crate::acp::policy::Clients;

/// The peer as its credentials show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    /// Its primary group and the supplementary ones.
    pub gids: Vec<u32>,
}

/// The most `peer` may do, or why it may not attach.
pub fn admit(clients: &Clients, owner: u32, peer: &Credentials) -> Result<Role, String> {
    let in_groups = |listed: &[u32]| peer.gids.iter().any(|g| listed.contains(g));
    if peer.uid == owner
        || clients.controller_uids.contains(&peer.uid)
        || in_groups(&clients.controller_gids)
    {
        return Ok(Role::Controller);
    }
    if clients.observer_uids.contains(&peer.uid) || in_groups(&clients.observer_gids) {
        return Ok(Role::Observer);
    }
    Err(format!(
        "connection refused: uid {} may not attach to this runtime (its owner is uid {owner}; the policy's [clients] lists who else may)",
        peer.uid
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(uid: u32, gids: &[u32]) -> Credentials {
        Credentials {
            uid,
            gids: gids.to_vec(),
        }
    }

    #[test]
    fn the_owner_and_those_listed_only() {
        let clients = Clients {
            controller_uids: vec![1001],
            observer_uids: vec![1002],
            observer_gids: vec![50],
            controller_gids: vec![60],
            ..Clients::default()
        };
        assert_eq!(
            admit(&clients, 1000, &peer(1000, &[1000])),
            Ok(Role::Controller)
        );
        assert_eq!(
            admit(&clients, 1000, &peer(1001, &[1001])),
            Ok(Role::Controller)
        );
        assert_eq!(
            admit(&clients, 1000, &peer(1002, &[1002])),
            Ok(Role::Observer)
        );
        assert_eq!(
            admit(&clients, 1000, &peer(1003, &[7, 50])),
            Ok(Role::Observer)
        );
        assert_eq!(
            admit(&clients, 1000, &peer(1003, &[50, 60])),
            Ok(Role::Controller)
        );
        let refused = admit(&clients, 1000, &peer(1004, &[1004])).unwrap_err();
        assert!(refused.contains("uid 1004 may not attach"), "{refused}");
        assert!(admit(&Clients::default(), 1000, &peer(0, &[0])).is_err());
    }
}
