//! The private PostgreSQL server: fresh databases that their own roles can
//! use, a restart on the same port that keeps the data, and a server that
//! ends with the test process — whether it exits or is killed.

#![cfg(target_os = "linux")]

use std::fs;
use std::io::{BufRead, BufReader, Lines, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use agent_comms_testing::postgres::{self, Server};

/// `psql URL -c SQL`, unaligned and bare: its output, or why it failed.
fn psql(server: &Server, url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new(server.bin("psql"))
        .args(["-X", "-At", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .env("PGCONNECT_TIMEOUT", "5")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[test]
fn fresh_databases_connect_and_survive_a_restart() {
    let server = postgres::server().unwrap();
    let again = postgres::server().unwrap();
    assert!(
        std::ptr::eq(server, again),
        "a second call made a second server"
    );
    let (a, b) = (
        server.fresh_database().unwrap(),
        server.fresh_database().unwrap(),
    );
    assert_ne!(a.name(), b.name());
    assert_ne!(a.user(), b.user());
    for db in [&a, &b] {
        let who = psql(
            server,
            &db.url("127.0.0.1"),
            "select current_user || ' ' || current_database()",
        );
        assert_eq!(who.unwrap(), format!("{} {}", db.user(), db.name()));
    }
    // Passwords are checked over TCP, and a role has no other database.
    let wrong = a.url_without_password("127.0.0.1").replace('@', ":wrong@");
    let refused = psql(server, &wrong, "select 1").unwrap_err();
    assert!(
        refused.contains("password authentication failed"),
        "{refused}"
    );
    let elsewhere = a.url("127.0.0.1").replace(a.name(), b.name());
    let refused = psql(server, &elsewhere, "select 1").unwrap_err();
    assert!(refused.contains("permission denied"), "{refused}");

    let url = a.url("127.0.0.1");
    psql(
        server,
        &url,
        "create table kept (v text); insert into kept values ('before')",
    )
    .unwrap();
    let (port, pid) = (server.port(), server.pid());
    server.restart().unwrap();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), pid);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the old postmaster {pid} is still there"
    );
    assert_eq!(psql(server, &url, "select v from kept").unwrap(), "before");
}

/// Run by the tests below as a test process of its own: starts the server,
/// prints its pid and data directory, then ends (`exit`) or waits to be
/// killed (`wait`), as `AC_TESTING_CHILD` says.
#[test]
#[ignore = "run by the tests below, in a test process of its own"]
fn child_serves() {
    let server = postgres::server().unwrap();
    let data = fs::read_link(format!("/proc/{}/cwd", server.pid())).unwrap();
    println!("postmaster {} {}", server.pid(), data.display());
    if std::env::var("AC_TESTING_CHILD").as_deref() == Ok("wait") {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
    }
}

/// [`child_serves`] running in a test process of its own.
struct ServingChild {
    process: Child,
    /// The rest of its output, to read to the end (it must not write into
    /// a closed pipe).
    output: Lines<BufReader<ChildStdout>>,
    postmaster: u32,
    /// The server's temporary directory.
    dir: PathBuf,
}

/// Starts [`child_serves`] in `mode`, and reads what it prints.
fn serving_child(mode: &str) -> ServingChild {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "child_serves",
            "--exact",
            "--include-ignored",
            "--nocapture",
        ])
        .env("AC_TESTING_CHILD", mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut output = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = output
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("postmaster "))
        .expect("the child test prints its postmaster");
    let mut words = line.split(' ').skip(1);
    let postmaster = words.next().unwrap().parse().unwrap();
    let data = PathBuf::from(words.next().unwrap());
    ServingChild {
        process: child,
        output,
        postmaster,
        dir: data.parent().unwrap().to_owned(),
    }
}

/// Whether `pid` is running (a zombie is not).
fn running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while running(pid) {
        assert!(
            Instant::now() < deadline,
            "postmaster {pid} outlived its test process"
        );
        thread::sleep(Duration::from_millis(25));
    }
}

#[test]
fn an_exiting_test_process_stops_its_server_and_removes_its_files() {
    let mut child = serving_child("exit");
    child.output.by_ref().for_each(drop);
    assert!(child.process.wait().unwrap().success());
    let pid = child.postmaster;
    assert!(!running(pid), "postmaster {pid} outlived its test process");
    assert!(
        !child.dir.exists(),
        "{} was left behind",
        child.dir.display()
    );
}

#[test]
fn a_killed_test_process_still_stops_its_server() {
    let mut child = serving_child("wait");
    assert!(running(child.postmaster));
    child.process.kill().unwrap();
    child.process.wait().unwrap();
    wait_gone(child.postmaster);
    // Only the files stay behind (nothing ran to remove them).
    fs::remove_dir_all(&child.dir).unwrap();
}
