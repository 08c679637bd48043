//! The server: a loopback listener on a thread and runtime of its own, and
//! the handle its owner keeps (the request log, shutdown on drop).

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::handle::{connection, State};
use crate::log::{LoggedRequest, RequestLog};
use crate::pacing::{Pacing, CANNED_REPLY};

/// How to run a [`MockServer`].
#[derive(Clone, Debug)]
pub struct Config {
    /// Address to listen on; must be a loopback address.
    pub host: IpAddr,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// Pacing for requests whose prompt does not say otherwise.
    pub pacing: Pacing,
    /// Reply text for requests whose prompt has no `REPLY=` token.
    pub reply: String,
    /// Append each answered request to this file as a JSON line.
    pub log_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            pacing: Pacing::default(),
            reply: CANNED_REPLY.to_string(),
            log_file: None,
        }
    }
}

impl Config {
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    pub fn with_pacing(mut self, pacing: Pacing) -> Self {
        self.pacing = pacing;
        self
    }

    pub fn with_log_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.log_file = Some(path.into());
        self
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("refusing to listen on {0}: the mock model server binds loopback addresses only")]
    NotLoopback(IpAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("cannot open the request log file: {0}")]
    LogFile(io::Error),
    #[error("cannot start the server thread: {0}")]
    Io(#[from] io::Error),
}

/// A wait that ran out of time, with the requests seen so far.
#[derive(Debug)]
pub struct WaitTimeout {
    pub requests: Vec<LoggedRequest>,
}

impl fmt::Display for WaitTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out with {} request(s) logged:",
            self.requests.len()
        )?;
        for r in &self.requests {
            let state = if r.is_finished() { "finished" } else { "open" };
            write!(f, " [{} {} {}]", r.method, r.path, state)?;
        }
        Ok(())
    }
}

impl std::error::Error for WaitTimeout {}

/// A running mock model server. Dropping it stops the server and joins
/// its thread.
pub struct MockServer {
    addr: SocketAddr,
    log: Arc<RequestLog>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Binds the listener (loopback only) and starts serving on a thread of
    /// its own.
    pub fn start(config: Config) -> Result<MockServer, StartError> {
        if !config.host.is_loopback() {
            return Err(StartError::NotLoopback(config.host));
        }
        let log = RequestLog::new(config.log_file.as_deref()).map_err(StartError::LogFile)?;
        let log = Arc::new(log);
        let want = SocketAddr::new(config.host, config.port);
        let bind = |source| StartError::Bind { addr: want, source };
        let std_listener = std::net::TcpListener::bind(want).map_err(bind)?;
        std_listener.set_nonblocking(true)?;
        let addr = std_listener.local_addr()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _in_runtime = rt.enter();
            TcpListener::from_std(std_listener)?
        };
        let state = Arc::new(State {
            config,
            log: log.clone(),
            next_reply: AtomicU64::new(1),
        });
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("mock-model-server".into())
            .spawn(move || {
                rt.block_on(accept(listener, state, stopped));
                // Dropping the runtime cancels the open connections.
                drop(rt);
            })?;
        Ok(MockServer {
            addr,
            log,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` (no trailing slash, no `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order (answered or not).
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.log.snapshot()
    }

    /// Waits until at least `n` requests have been answered (or abandoned
    /// by their clients); returns every request logged by then.
    pub fn wait_for_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<LoggedRequest>, WaitTimeout> {
        self.wait_until(timeout, |rs| {
            rs.iter().filter(|r| r.is_finished()).count() >= n
        })
    }

    /// Waits until at least `n` requests have arrived.
    pub fn wait_for_arrivals(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<LoggedRequest>, WaitTimeout> {
        self.wait_until(timeout, |rs| rs.len() >= n)
    }

    /// Waits until `cond` holds for the request log (checked at each change).
    pub fn wait_until(
        &self,
        timeout: Duration,
        cond: impl Fn(&[LoggedRequest]) -> bool,
    ) -> Result<Vec<LoggedRequest>, WaitTimeout> {
        self.log
            .wait(timeout, cond)
            .map_err(|requests| WaitTimeout { requests })
    }

    /// Stops the server and joins its thread (as dropping it does).
    pub fn shutdown(self) {}
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn accept(listener: TcpListener, state: Arc<State>, mut stopped: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(stream, state.clone()));
                }
                // Out of descriptors and the like: back off briefly.
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            },
        }
    }
}
