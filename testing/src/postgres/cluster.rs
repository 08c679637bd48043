//! The cluster on disk: where the PostgreSQL programs are, which user runs
//! them, and `initdb` into a fresh temporary directory.

use std::fs;
use std::io;
use std::os::unix::fs::chown;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::unistd::{geteuid, User};
use tempfile::TempDir;

use super::{ADMIN, ADMIN_PASSWORD};
use crate::hosts::SUBNET;

/// The directory of `postgres`, `initdb`, `psql` …: `pg_config --bindir`
/// when it has them, else the highest version under
/// `/usr/lib/postgresql/*/bin`.
pub(super) fn bin_dir() -> Result<PathBuf, String> {
    let has_server = |dir: &Path| dir.join("postgres").is_file() && dir.join("initdb").is_file();
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && has_server(&dir) {
            return Ok(dir);
        }
    }
    let versions = fs::read_dir("/usr/lib/postgresql").into_iter().flatten();
    versions
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name().to_str()?.parse::<u32>().ok()?, e.path())))
        .map(|(version, path)| (version, path.join("bin")))
        .filter(|(_, bin)| has_server(bin))
        .max()
        .map(|(_, bin)| bin)
        .ok_or_else(|| "PostgreSQL server binaries not found (apt-get install postgresql)".into())
}

/// The unprivileged user `initdb` and the postmaster run as when the tests
/// are root (PostgreSQL refuses to run as root).
#[derive(Clone, Copy, Debug)]
pub(super) struct Owner {
    uid: libc::uid_t,
    gid: libc::gid_t,
}

impl Owner {
    /// `None` when we are not root: everything then runs as we do.
    pub(super) fn for_this_process() -> Result<Option<Owner>, String> {
        if !geteuid().is_root() {
            return Ok(None);
        }
        for name in ["postgres", "nobody"] {
            if let Ok(Some(user)) = User::from_name(name) {
                return Ok(Some(Owner {
                    uid: user.uid.as_raw(),
                    gid: user.gid.as_raw(),
                }));
            }
        }
        Err("PostgreSQL refuses to run as root, and no `postgres` or `nobody` user exists".into())
    }

    fn chown(self, path: &Path) -> Result<(), String> {
        chown(path, Some(self.uid), Some(self.gid))
            .map_err(|e| format!("cannot chown {}: {e}", path.display()))
    }
}

/// Makes `cmd`, once spawned, run as `owner` (when set) and receive
/// `signal` when the thread that spawns it ends; the spawn fails if our
/// process is already gone by then. See the module doc of `postgres`.
pub(super) fn bind_to_spawner(cmd: &mut Command, owner: Option<Owner>, signal: libc::c_int) {
    let spawner = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs between fork and exec and calls only
    // async-signal-safe functions; it allocates nothing (errors are raw OS
    // errors).
    unsafe {
        cmd.pre_exec(move || {
            if let Some(Owner { uid, gid }) = owner {
                if libc::setgroups(1, &gid) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0
                {
                    return Err(io::Error::last_os_error());
                }
            }
            // After the change of user, which clears the death signal.
            if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Our parent died before the death signal was set: none will come.
            if libc::getppid() != spawner {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    };
}

/// A fresh temporary directory (`/tmp/ac-pg-*`) holding a new cluster in
/// `data/` (superuser [`ADMIN`] with its password; SCRAM-SHA-256 over TCP
/// from 127.0.0.1 and [`SUBNET`], trust on the local socket) and the
/// socket directory `sock/`, all owned by `owner`.
pub(super) fn init(bin: &Path, owner: Option<Owner>) -> Result<TempDir, String> {
    let io_err = |what: &str, e: io::Error| format!("cannot {what}: {e}");
    let dir = tempfile::Builder::new()
        .prefix("ac-pg-")
        .tempdir()
        .map_err(|e| io_err("create a temporary directory", e))?;
    let sock = dir.path().join("sock");
    fs::create_dir(&sock).map_err(|e| io_err("create the socket directory", e))?;
    let pwfile = dir.path().join("pwfile");
    fs::write(&pwfile, ADMIN_PASSWORD).map_err(|e| io_err("write the password file", e))?;
    if let Some(owner) = owner {
        for path in [dir.path(), &sock, &pwfile] {
            owner.chown(path)?;
        }
    }

    let data = dir.path().join("data");
    let mut cmd = Command::new(bin.join("initdb"));
    cmd.arg("-D")
        .arg(&data)
        .args(["--auth-host=scram-sha-256", "--auth-local=trust"])
        .args(["-U", ADMIN, "-E", "UTF8", "--locale=C", "--no-sync"])
        .arg(format!("--pwfile={}", pwfile.display()))
        .current_dir(dir.path())
        .stdin(Stdio::null());
    bind_to_spawner(&mut cmd, owner, libc::SIGKILL);
    let out = cmd
        .output()
        .map_err(|e| io_err(&format!("run {}", bin.join("initdb").display()), e))?;
    let _ = fs::remove_file(&pwfile);
    if !out.status.success() {
        return Err(format!(
            "initdb failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }

    tls(dir.path(), &data, owner)?;

    let hba = data.join("pg_hba.conf");
    let mut rules = fs::read_to_string(&hba).map_err(|e| io_err("read pg_hba.conf", e))?;
    rules.push_str(&format!(
        "# The hosts of agent_comms_testing::hosts\nhost all all {SUBNET} scram-sha-256\n"
    ));
    fs::write(&hba, rules).map_err(|e| io_err("write pg_hba.conf", e))?;
    Ok(dir)
}

/// The server's TLS certificate, for `localhost` and 127.0.0.1, signed by
/// a CA made for this cluster alone: `data/server.crt` and `server.key`
/// (the postmaster's, 0600), and the CA a client trusts in `ca.crt`.
/// Made with rcgen, so no `openssl` program is needed.
fn tls(dir: &Path, data: &Path, owner: Option<Owner>) -> Result<(), String> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let bad = |e: rcgen::Error| format!("cannot make the test server's certificate: {e}");
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(bad)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "agent-comms test CA");
    let ca_key = KeyPair::generate().map_err(bad)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(bad)?;
    let issuer = Issuer::new(ca, ca_key);
    let server = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .map_err(bad)?;
    let server_key = KeyPair::generate().map_err(bad)?;
    let server_cert = server.signed_by(&server_key, &issuer).map_err(bad)?;
    let write = |path: &Path, text: String, mode: u32| -> Result<(), String> {
        use std::os::unix::fs::PermissionsExt;
        fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
    };
    write(&dir.join("ca.crt"), ca_cert.pem(), 0o644)?;
    write(&data.join("server.crt"), server_cert.pem(), 0o644)?;
    write(&data.join("server.key"), server_key.serialize_pem(), 0o600)?;
    if let Some(owner) = owner {
        for name in ["server.crt", "server.key"] {
            owner.chown(&data.join(name))?;
        }
    }
    Ok(())
}
