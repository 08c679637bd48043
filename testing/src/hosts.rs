//! Machines simulated as Linux network namespaces ([`Host`]), each
//! reaching the PostgreSQL server of [`crate::postgres`] over a veth link
//! of its own, which a test can cut ([`Host::cut`]) to partition that host
//! from the database while everything else goes on.
//!
//! Needs root (`ip netns add`, `ip link add`); [`available`] says why not
//! when it cannot work, for the test to report.
//!
//! # Names and addresses
//!
//! - the namespace is `ac-<pid>-<index>`: a live pid is unique, so
//!   concurrent test processes never share one;
//! - each link gets a block `b` of [`SUBNET`] (16384 blocks of 4
//!   addresses): the network `10.231.(b / 64).(b % 64 * 4)/30`, with `.1`
//!   on the end that stays in the root namespace (the host's
//!   [`db_address`](Host::db_address), where the server listens too) and
//!   `.2` on the end inside the namespace (named `veth0` there). The search
//!   for a block starts at `(pid * 8 + index) mod 16384` and takes the
//!   first whose interface name, `acb<b>h`, is free: creating an interface
//!   whose name exists fails, so the kernel itself guarantees that no two
//!   links — of this process or another — share a block. The ends' MAC
//!   addresses derive from the block too: `02:ac:<b>:00:0<1 or 2>`.
//!
//! # A cut as a partition
//!
//! [`Host::cut`] sets the root end down. For that to look like a real
//! partition — packets vanish, connections stall until their timeouts —
//! rather than an error at once, two things are set up with the link:
//!
//! - inside the namespace, the root end's MAC is a permanent neighbour:
//!   otherwise an address lookup (ARP) fails during the cut and connecting
//!   fails at once with "no route to host", and keeps failing for a while
//!   after [`Host::restore`];
//! - in the root namespace, a blackhole route for the block, of the lowest
//!   priority: while the link is down its own route is gone, and the
//!   server's packets to the host would otherwise leave by the default
//!   route.
//!
//! Nothing is touched that this module did not create: only the namespace,
//! the link and the blackhole route a [`Host`] made, deleted by its `Drop`.
//!
//! Processes the test starts inside a namespace are its own to end (by
//! pid): deleting a namespace only unnames it, and it lives on while a
//! process is in it — with no link any more, since the veth is deleted.

use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::unistd::geteuid;

/// The subnet every host link is made in (`pg_hba.conf` admits it).
pub const SUBNET: &str = "10.231.0.0/16";
/// /30 blocks in [`SUBNET`].
const BLOCKS: u32 = 1 << 14;
/// The name of a link's end inside its namespace.
const INSIDE: &str = "veth0";
/// The priority of the blackhole route, below every other route's.
const LAST: &str = "4294967295";

/// Ok when hosts can be made here: we are root and `ip netns` works; else
/// what is missing.
pub fn available() -> Result<(), String> {
    if !geteuid().is_root() {
        return Err("making network namespaces needs root".into());
    }
    ip("netns list").map(drop)
}

/// One simulated machine: a network namespace with a link to the server.
pub struct Host {
    namespace: String,
    /// The root end of the link (its peer goes with it).
    link: String,
    block: u32,
}

impl Host {
    /// Namespace `ac-<pid>-<index>` with its link, both ends up, and `lo`
    /// up inside. `index` tells apart the hosts of one test process.
    pub fn new(index: u32) -> Result<Host, String> {
        available()?;
        let namespace = format!("ac-{}-{index}", std::process::id());
        ip(&format!("netns add {namespace}"))?;
        let (link, block) = match make_link(&namespace, index) {
            Ok(made) => made,
            Err(why) => {
                let _ = ip(&format!("netns del {namespace}"));
                return Err(why);
            }
        };
        // From here on, Drop undoes what was made, should a step fail.
        let host = Host {
            namespace,
            link,
            block,
        };
        let (ns, link, network) = (&host.namespace, &host.link, host.network());
        let (root_end, root_mac) = (address(block, 1), mac(block, 1));
        let inside_end = address(block, 2);
        ip(&format!("route replace blackhole {network} metric {LAST}"))?;
        ip(&format!("addr add {root_end}/30 dev {link}"))?;
        ip(&format!("link set {link} up"))?;
        ip(&format!("-n {ns} addr add {inside_end}/30 dev {INSIDE}"))?;
        ip(&format!(
            "-n {ns} neigh replace {root_end} lladdr {root_mac} dev {INSIDE} nud permanent"
        ))?;
        ip(&format!("-n {ns} link set {INSIDE} up"))?;
        ip(&format!("-n {ns} link set lo up"))?;
        Ok(host)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.namespace
    }

    /// The block's network, `10.231.X.Y/30`.
    fn network(&self) -> String {
        format!("{}/30", address(self.block, 0))
    }

    /// The address at which this host reaches the PostgreSQL server: the
    /// root namespace's end of its link.
    pub fn db_address(&self) -> String {
        address(self.block, 1).to_string()
    }

    /// `program` run inside the namespace, as `ip netns exec NS program`;
    /// add its arguments to the command. `ip` execs the program (no fork),
    /// so the pid of the spawned child is the program's own.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(ip_program());
        cmd.args(["netns", "exec", &self.namespace]).arg(program);
        cmd
    }

    /// Cuts the link to the database (its root end down): packets are lost
    /// both ways, so connections stall rather than being refused. Panics if
    /// `ip` fails: a test that cannot partition must not go on as if it had.
    #[track_caller]
    pub fn cut(&self) {
        self.set_link("down");
    }

    /// Mends what [`Host::cut`] cut.
    #[track_caller]
    pub fn restore(&self) {
        self.set_link("up");
    }

    #[track_caller]
    fn set_link(&self, state: &str) {
        if let Err(why) = ip(&format!("link set {} {state}", self.link)) {
            panic!("cannot set host {}'s link {state}: {why}", self.namespace);
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let undo = [
            // Deleting one end of a veth pair deletes both.
            format!("link del {}", self.link),
            format!("route del blackhole {} metric {LAST}", self.network()),
            format!("netns del {}", self.namespace),
        ];
        for command in undo {
            if let Err(why) = ip(&command) {
                eprintln!("host {}: {why}", self.namespace);
            }
        }
    }
}

/// Makes the veth pair of the namespace on the first free block (see the
/// module doc), its inside end created in the namespace directly; returns
/// the root end's name and the block.
fn make_link(namespace: &str, index: u32) -> Result<(String, u32), String> {
    let start = std::process::id().wrapping_mul(8).wrapping_add(index) % BLOCKS;
    for block in (0..BLOCKS).map(|i| (start + i) % BLOCKS) {
        let link = format!("acb{block}h");
        let (root_mac, inside_mac) = (mac(block, 1), mac(block, 2));
        let peer = format!("peer name {INSIDE} address {inside_mac} netns {namespace}");
        match ip(&format!(
            "link add {link} address {root_mac} type veth {peer}"
        )) {
            Ok(_) => return Ok((link, block)),
            Err(why) if why.contains("File exists") => continue,
            Err(why) => return Err(why),
        }
    }
    Err(format!("every link block of {SUBNET} is taken"))
}

/// The MAC address of end `n` (1 or 2) of link block `block`.
fn mac(block: u32, n: u32) -> String {
    format!("02:ac:{:02x}:{:02x}:00:{n:02x}", block >> 8, block & 0xff)
}

/// Address `n` (0 to 3) of link block `block`.
fn address(block: u32, n: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 231, (block / 64) as u8, (block % 64 * 4 + n) as u8)
}

/// `ip ARGS`, the arguments split at spaces (none of ours holds one): its
/// standard output, or why it failed.
fn ip(args: &str) -> Result<String, String> {
    let out = Command::new(ip_program())
        .args(args.split(' '))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {args}` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `ip` of iproute2, also where /usr/sbin is not on PATH.
fn ip_program() -> &'static str {
    ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .unwrap_or("ip")
}
