//! The commands of a running ACP runtime's bridge: `agent-comms acp attach`
//! (standard input and output to it), and `acp serve-web` and `runtime
//! acp-serve --listen` (the bridge served to browsers by the
//! `agent-comms-web` crate; docs/acp-web.md). Here: finding the bridge,
//! choosing the token file, printing the URLs, and knowing when the runtime
//! has ended.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use agent_comms_core::client::Client;
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::protocol::{Event, Request, Response};
use agent_comms_web::{address, tokens, Config, Tokens, Urls};
use anyhow::{bail, Context};

use super::acp::RemoteArgs;

/// Refuses, before the runtime starts, a `--listen` address that may not
/// be used with `remote` or that is already taken (the background server
/// binds it again a moment later).
pub fn check_listen(listen: SocketAddr, remote: &RemoteArgs) -> anyhow::Result<()> {
    address::check(listen, remote.allow_remote, remote.token_file.is_some())?;
    if listen.port() != 0 {
        std::net::TcpListener::bind(listen)
            .with_context(|| format!("cannot listen on {listen} (--listen)"))?;
    }
    Ok(())
}

/// `acp serve-web ID --listen ADDR`: serves until the runtime ends.
pub fn serve_web(
    id: &str,
    listen: SocketAddr,
    remote: &RemoteArgs,
    json: bool,
) -> anyhow::Result<i32> {
    let listen = address::check(listen, remote.allow_remote, remote.token_file.is_some())?;
    let (bridge, endpoint) = bridge_of(id)?;
    // The owner's file is kept; the default one goes with this server.
    let (tokens, token_file, temporary) = match &remote.token_file {
        Some(file) => {
            let file = super::absolute(file.clone());
            (Tokens::load_or_create(&file)?, file, false)
        }
        None => {
            let file = tokens::default_path(&agent_comms_core::paths::runtime_root(), id);
            (Tokens::write_new(&file)?, file, true)
        }
    };
    let config = Config {
        listen,
        bridge,
        bridge_owner: agent_comms_core::paths::euid(),
        tokens,
    };
    let ready = |urls: &Urls| print_urls(id, urls, &token_file, json);
    let served = agent_comms_web::serve(config, ready, move || until_ended(endpoint));
    if temporary {
        let _ = std::fs::remove_file(&token_file);
    }
    served?;
    Ok(0)
}

fn print_urls(id: &str, urls: &Urls, token_file: &std::path::Path, json: bool) {
    use std::io::Write;
    if json {
        println!(
            "{}",
            agent_comms_core::display::json(urls).expect("the URLs serialize")
        );
    } else {
        println!("runtime {id} in a browser:");
        println!("  controller: {}", urls.url);
        println!("  read only:  {}", urls.read_only_url);
        println!(
            "(tokens in {}; serving until the runtime ends, Ctrl-C stops)",
            token_file.display()
        );
    }
    let _ = std::io::stdout().flush();
}

/// Blocks until the runtime whose endpoint `client` is has ended: it says
/// so on a follow stream, or its endpoint goes away.
fn until_ended(mut client: Client) {
    if client.send(Message::Request(Request::Follow)).is_err() {
        return;
    }
    while let Ok(frame) = client.read_frame() {
        match frame.message {
            Message::Event(Event::Exited(_)) => return,
            Message::Response(Response::Error { .. }) => return,
            _ => {}
        }
    }
}

/// `runtime acp-serve --listen`: `acp serve-web` started detached for the
/// runtime `id`, which just came online; it ends with the runtime. Returns
/// the URLs it printed.
pub fn launch(
    exe: &std::path::Path,
    id: &str,
    listen: SocketAddr,
    remote: &RemoteArgs,
) -> anyhow::Result<serde_json::Value> {
    let log_path = agent_comms_core::paths::runtime_root().join(format!("{id}.web.log"));
    let log = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut cmd = Command::new(exe);
    cmd.args(["acp", "serve-web", id, "--json", "--listen"])
        .arg(listen.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    if remote.allow_remote {
        cmd.arg("--allow-remote");
    }
    if let Some(file) = &remote.token_file {
        cmd.arg("--token-file").arg(super::absolute(file.clone()));
    }
    agent_comms_core::os::detach(&mut cmd);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let mut line = String::new();
    let stdout = child.stdout.take().expect("piped");
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.trim().is_empty() {
        let _ = child.wait();
        let why = std::fs::read_to_string(&log_path).unwrap_or_default();
        let why = why.lines().last().unwrap_or("it said nothing").to_owned();
        bail!("runtime {id} runs, but its web server did not start: {why}; end the runtime with: agent-comms session kill {id}, or serve it with: agent-comms acp serve-web {id} --listen ADDR");
    }
    // It keeps running, reparented once this command exits.
    let _ = child.try_wait();
    let mut web: serde_json::Value =
        serde_json::from_str(line.trim()).context("the web server's start line is not JSON")?;
    web["pid"] = child.id().into();
    Ok(web)
}

/// `acp attach`: standard input and output to the runtime's bridge.
pub fn attach(id: Option<&str>, socket: Option<PathBuf>, read_only: bool) -> anyhow::Result<i32> {
    use agent_comms_core::acp::bridge::attach;
    let (path, owner) = match (id, socket) {
        (_, Some(path)) => (super::absolute(path), None),
        (Some(id), None) => (bridge_of(id)?.0, Some(agent_comms_core::paths::euid())),
        (None, None) => bail!("give the runtime's id, or --socket PATH"),
    };
    let stream = attach::connect(&path, owner)
        .with_context(|| format!("cannot attach to {}", path.display()))?;
    attach::pipe(stream, std::io::stdin(), std::io::stdout(), read_only)
        .context("the connection to the bridge failed")?;
    Ok(0)
}

/// The bridge socket of the live ACP runtime `id`, and a connection to its
/// endpoint.
fn bridge_of(id: &str) -> anyhow::Result<(PathBuf, Client)> {
    let mut client = super::acp::live(id)?;
    let status = match client.request(Request::AcpStatus)? {
        Response::Acp(status) => status,
        Response::Error { message } => bail!("{message}"),
        other => bail!("unexpected reply to acp_status: {other:?}"),
    };
    let path = status
        .bridge
        .with_context(|| format!("runtime {id} has no bridge socket"))?;
    Ok((path, client))
}
