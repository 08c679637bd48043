//! `mock-model-server`: the mock model server as a program, for scripts and
//! benchmarks that run the real CLIs against it.
//!
//! Its first line on standard output is `listening on http://HOST:PORT`
//! (flushed at once); it runs until SIGTERM or SIGINT, or until standard
//! input is closed when `--exit-on-stdin-eof` is given.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use agent_comms_mockmodel::{Config, MockServer, Pacing, CANNED_REPLY, DEFAULT_DELTAS};
use clap::Parser;

/// Serve canned, paced model replies (Anthropic Messages, OpenAI Responses
/// and Chat Completions, streamed) on a loopback address.
///
/// A prompt may hold `THINK=<seconds>`, `SLOW=<seconds>`, `DELTAS=<n>` and
/// `REPLY=<word>` to pace or change one reply.
///
/// `TOOL=<name>` with `ARGS64=<base64 of a JSON object>` or `ARGS=<a JSON
/// object without spaces>` makes the reply a call of that tool, when the
/// request offers it; the request carrying its result is answered `tool
/// result received: <the result's first 200 characters>`. Requests offering
/// no tools or asking for structured output are answered as usual.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Loopback address to listen on (other addresses are refused).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append each answered request to FILE as a JSON line.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// Default silent pause before the first piece of a reply, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    think: f64,
    /// Default time from the first piece of a reply to the last, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.0)]
    slow: f64,
    /// Default number of pieces a reply is streamed in.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_DELTAS)]
    deltas: usize,
    /// Default reply text.
    #[arg(long, value_name = "TEXT", default_value = CANNED_REPLY)]
    reply: String,
    /// Exit when standard input reaches end of file.
    #[arg(long)]
    exit_on_stdin_eof: bool,
}

fn secs(name: &str, value: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| format!("--{name} must be a number of seconds >= 0"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock-model-server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let config = Config {
        host: args.host,
        port: args.port,
        pacing: Pacing {
            think: secs("think", args.think)?,
            slow: secs("slow", args.slow)?,
            deltas: args.deltas.max(1),
        },
        reply: args.reply,
        log_file: args.log,
    };
    let server = MockServer::start(config)?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "listening on {}", server.base_url())?;
    out.flush()?;
    drop(out);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(wait_for_exit(args.exit_on_stdin_eof))?;
    drop(server);
    Ok(())
}

/// Resolves on SIGINT, SIGTERM or (if asked) end of standard input.
async fn wait_for_exit(on_stdin_eof: bool) -> std::io::Result<()> {
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    if on_stdin_eof {
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 4096];
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = eof_tx.send(());
        });
    }
    let stdin_eof = async move {
        match on_stdin_eof {
            true => drop(eof_rx.await),
            false => std::future::pending().await,
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
            () = stdin_eof => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            () = stdin_eof => Ok(()),
        }
    }
}
