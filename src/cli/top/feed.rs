//! What `top` shows, as it arrives: one thread per live session holds a
//! `status` stream (the supervisor pushes its state when it changes), and
//! the store is read again when one of those says something happened.
//!
//! A message to an agent with no live runtime wakes no supervisor: for
//! those the store's own wake-ups (`store::watchers`, which every commit
//! of a message change sends, as `invocation list --follow` uses them) ask
//! for the read, and [`STORE_FALLBACK`] bounds how late a change no writer
//! announced (another host's) shows. One thing is looked at on a timer,
//! because nothing pushes it: the runtime directory (a session started
//! after `top` has no stream to say so; a directory listing per
//! [`DISCOVER`] is the cost).

use std::sync::mpsc::Sender;
use std::time::Duration;

use agent_comms_core::client::Client;
use agent_comms_core::control::{open_existing_store, store_path};
use agent_comms_core::paths::runtime_root;
use agent_comms_core::session::{Registry, SessionRecord};
use agent_comms_core::socket::codec::Message;
use agent_comms_core::socket::is_dialable;
use agent_comms_core::socket::protocol::{Event, Request, Response, SessionStatus};
use agent_comms_core::store::watchers::Follower;
use agent_comms_core::store::Follow;
use agent_comms_core::store::{Invocation, InvocationFilter, RuntimeRecord};

pub const DISCOVER: Duration = Duration::from_secs(1);
pub const STORE_FALLBACK: Duration = Duration::from_secs(5);

/// One thing that changed.
pub enum Update {
    Status(String, SessionStatus),
    /// The stream ended: the session is gone (or never answered).
    Gone(String),
    /// Something happened that the store may show.
    StoreChanged,
}

/// The live session records now.
pub fn live_sessions() -> Vec<SessionRecord> {
    Registry::new(runtime_root(), is_dialable)
        .live(&mut |_| {})
        .unwrap_or_default()
}

/// Starts the thread that follows `record`'s state.
pub fn watch(record: SessionRecord, to: Sender<Update>) {
    std::thread::spawn(move || {
        let name = record.name.to_string();
        let _ = follow_status(&record, &name, &to);
        let _ = to.send(Update::Gone(name));
    });
}

/// Starts the thread that asks for a store read whenever a writer says
/// the store changed, and at least every [`STORE_FALLBACK`].
pub fn follow_store(to: Sender<Update>) {
    std::thread::spawn(move || {
        // A project without a store yet is followed where its file will
        // be: the first writer creates it, and wakes this.
        let follower: Option<Box<dyn Follow>> = match open_existing_store() {
            Ok(Some(store)) => store.follow(None).ok(),
            Ok(None) => Follower::listen(&store_path())
                .ok()
                .map(|f| Box::new(f) as Box<dyn Follow>),
            Err(_) => None,
        };
        loop {
            match &follower {
                Some(follower) => {
                    follower.wait(STORE_FALLBACK);
                }
                None => std::thread::sleep(STORE_FALLBACK),
            }
            if to.send(Update::StoreChanged).is_err() {
                return;
            }
        }
    });
}

/// The `status` stream until it ends; every event also asks for a store
/// read (a delivery, a nudge, a turn that ended all change what it holds).
fn follow_status(record: &SessionRecord, name: &str, to: &Sender<Update>) -> Option<()> {
    let mut client = Client::connect(&record.socket).ok()?;
    client.send(Message::Request(Request::Status)).ok()?;
    loop {
        match client.read_frame().ok()?.message {
            Message::Event(Event::Status(status)) => {
                to.send(Update::Status(name.to_owned(), status)).ok()?;
                to.send(Update::StoreChanged).ok()?;
            }
            Message::Response(Response::Ok) => {}
            _ => return None,
        }
    }
}

/// What the store holds for the board.
#[derive(Default)]
pub struct Stored {
    pub runtimes: Vec<RuntimeRecord>,
    pub messages: Vec<Invocation>,
}

/// The store's runtimes and messages; nothing while there is no store (a
/// dashboard does not create one).
pub fn read_store() -> Stored {
    let Ok(Some(store)) = open_existing_store() else {
        return Stored::default();
    };
    let store = store.as_ref();
    let all = InvocationFilter::default();
    Stored {
        runtimes: store.runtimes().unwrap_or_default(),
        messages: store.invocations(&all).unwrap_or_default(),
    }
}
