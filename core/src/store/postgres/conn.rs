//! One connection to the database, kept on a thread of its own, and the
//! process's idle connections.
//!
//! Why a thread: the synchronous `postgres` client drives its connection
//! with a small runtime of its own and blocks on it, which tokio forbids on
//! a thread that is already running async tasks. The store is called from
//! commands, from blocking tasks and from supervisors alike, so every call
//! is handed to the connection's thread and the caller waits for the
//! answer — with a bound: a database that stops answering (a cut link, a
//! host asleep) fails the call with [`StoreError::Unreachable`] after
//! [`CALL_TIMEOUT`] instead of hanging the caller, and the next call starts
//! over on a new connection while the stuck one is left to time out on its
//! own (the TCP settings below end it within seconds).
//!
//! Why a pool: a store is opened per command, and per tool call in the MCP
//! server; connecting (TCP, SCRAM, TLS) costs milliseconds each time. A
//! dropped store gives its healthy connection back to [`IDLE`], and the
//! next store opened for the same database in this process takes it.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::thread;
use std::time::Duration;

use postgres::Client;

use super::target::Target;
use crate::store::StoreError;

/// The longest a caller waits for one call, connecting included.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest a connection attempt waits for the server.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(4);
/// Idle connections kept per database.
const IDLE_PER_DATABASE: usize = 4;

/// Settings every session starts with. A transaction left open by a client
/// that vanished (a partitioned host) holds its row locks until the server
/// notices; `idle_in_transaction_session_timeout` bounds that, and
/// `lock_timeout` turns a wait on such a lock into an error the caller
/// reports instead of a hang.
const SESSION_SETTINGS: &str = "SET application_name = 'agent-comms'; \
     SET idle_in_transaction_session_timeout = '15s'; \
     SET lock_timeout = '5s'; \
     SET statement_timeout = '8s'; \
     SET search_path = agent_comms";

type Job = Box<dyn FnOnce(&mut Option<Client>) + Send>;

/// A connection's thread, fed jobs one at a time.
struct Worker {
    jobs: mpsc::Sender<Job>,
}

/// Idle workers by database (the target's key).
static IDLE: OnceLock<Mutex<HashMap<String, Vec<Worker>>>> = OnceLock::new();

fn idle() -> &'static Mutex<HashMap<String, Vec<Worker>>> {
    IDLE.get_or_init(Default::default)
}

/// A store's connection.
pub(crate) struct Conn {
    target: Target,
    worker: Mutex<Option<Worker>>,
}

impl Conn {
    /// A connection to `target`: an idle one of this process if there is
    /// one, else a new one made on first use.
    pub fn new(target: Target) -> Conn {
        let pooled = idle()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&target.key())
            .and_then(Vec::pop);
        Conn {
            target,
            worker: Mutex::new(pooled),
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs `f` with the client on the connection's thread, connecting
    /// first if need be; waits at most [`CALL_TIMEOUT`].
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let target = self.target.clone();
        let job: Job = Box::new(move |client| {
            let result = connected(client, &target).and_then(f);
            if client.as_ref().is_some_and(Client::is_closed) {
                *client = None;
            }
            let _ = reply.send(result);
        });
        let mut worker = self.worker.lock().unwrap_or_else(|p| p.into_inner());
        let sent = match worker.as_ref() {
            Some(w) => w.jobs.send(job).map_err(|e| e.0),
            None => Err(job),
        };
        if let Err(job) = sent {
            let fresh = Worker::spawn();
            fresh
                .jobs
                .send(job)
                .expect("a new worker takes its first job");
            *worker = Some(fresh);
        }
        match answer.recv_timeout(CALL_TIMEOUT) {
            Ok(result) => result,
            Err(_) => {
                // Stuck on a dead link: leave that thread to its TCP
                // timeouts and start the next call on a new connection.
                *worker = None;
                Err(self
                    .target
                    .unreachable(format!("no answer within {} s", CALL_TIMEOUT.as_secs())))
            }
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let Some(worker) = self.worker.get_mut().ok().and_then(Option::take) else {
            return;
        };
        let mut idle = idle().lock().unwrap_or_else(|p| p.into_inner());
        let kept = idle.entry(self.target.key()).or_default();
        if kept.len() < IDLE_PER_DATABASE {
            kept.push(worker);
        }
    }
}

impl Worker {
    fn spawn() -> Worker {
        let (jobs, queue) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("agent-comms-store".into())
            .spawn(move || {
                let mut client = None;
                for job in queue {
                    job(&mut client);
                }
            })
            .expect("spawn the store's connection thread");
        Worker { jobs }
    }
}

/// The open client, connecting (and setting the session up) when there is
/// none or the last one broke.
fn connected<'c>(
    client: &'c mut Option<Client>,
    target: &Target,
) -> Result<&'c mut Client, StoreError> {
    if client.as_ref().is_none_or(Client::is_closed) {
        *client = None;
        let mut fresh = target.connect()?;
        fresh
            .batch_execute(SESSION_SETTINGS)
            .map_err(|e| target.error(e))?;
        *client = Some(fresh);
    }
    Ok(client.as_mut().expect("connected just now"))
}
