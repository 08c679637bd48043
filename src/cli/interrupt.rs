//! Ctrl-C during a synchronous `k run`: interrupt the cell, not just `k`.
//!
//! SIGINT is blocked in every thread while the run waits, and one thread
//! takes it with sigwait and asks the supervisor (on a second connection) to
//! interrupt the cell. The waiting request then returns `interrupted` as its
//! reply, so the user sees the same JSON a script would.

use agent_comms_core::client::Client;
use agent_comms_core::session::SessionName;
use agent_comms_core::socket::protocol::Request;
use nix::sys::signal::{SigSet, Signal};

/// While alive, Ctrl-C interrupts the session's cell.
pub struct CtrlCInterrupts {
    set: SigSet,
}

pub fn on_ctrl_c(session: SessionName) -> Option<CtrlCInterrupts> {
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.thread_block().ok()?;
    std::thread::spawn(move || {
        if set.wait().is_ok() {
            if let Ok((mut client, _)) = Client::for_session(&session) {
                let _ = client.request(Request::CellInterrupt);
            }
        }
    });
    Some(CtrlCInterrupts { set })
}

impl Drop for CtrlCInterrupts {
    fn drop(&mut self) {
        let _ = self.set.thread_unblock();
    }
}
