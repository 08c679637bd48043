//! Hosts as network namespaces: each reaches the server over its own link,
//! and loses it while the link is cut.

#![cfg(target_os = "linux")]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_comms_testing::hosts::{self, Host};
use agent_comms_testing::postgres::{self, Database, Server};

/// `select 1` from inside `host`, with a connect timeout of 3 s: whether it
/// worked, and what psql said.
fn reach(server: &Server, host: &Host, db: &Database) -> Result<String, String> {
    let url = format!("{}?connect_timeout=3", db.url(&host.db_address()));
    let out = host
        .command(server.bin("psql"))
        .args(["-X", "-At", "-d", &url, "-c", "select inet_client_addr()"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run psql in {}: {e}", host.name()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Whether any interface of the root namespace has `address`.
fn address_in_use(address: &str) -> bool {
    let out = Command::new("ip")
        .args(["-o", "addr", "show", "to", address])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

#[test]
fn hosts_reach_the_server_until_cut() {
    if let Err(why) = hosts::available() {
        panic!("this test makes network namespaces and cannot here: {why}");
    }
    let server = postgres::server().unwrap();
    let db = server.fresh_database().unwrap();
    let (one, two) = (Host::new(0).unwrap(), Host::new(1).unwrap());
    assert_ne!(one.db_address(), two.db_address());

    // Each comes from its own address, the other end of its link.
    let from_one = reach(server, &one, &db).unwrap();
    let from_two = reach(server, &two, &db).unwrap();
    assert_ne!(from_one, from_two);

    one.cut();
    let started = Instant::now();
    let cut = reach(server, &one, &db).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{cut}");
    assert!(cut.contains("timeout"), "{cut}");
    assert_eq!(reach(server, &two, &db).unwrap(), from_two);

    one.restore();
    assert_eq!(reach(server, &one, &db).unwrap(), from_one);

    let (name, address) = (one.name().to_owned(), one.db_address());
    drop(one);
    let namespaces = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let listed = String::from_utf8_lossy(&namespaces.stdout);
    assert!(
        !listed.lines().any(|l| l.split(' ').next() == Some(&name)),
        "{name} is still listed: {listed}"
    );
    assert!(
        !address_in_use(&address),
        "{address} is still on an interface"
    );
}
