//! Ctrl-C during a synchronous `k run`: interrupt the cell, not just `k`.
//!
//! SIGINT is blocked in every thread while the run waits, and one thread
//! takes it with sigwait and asks the supervisor (on a second connection) to
//! interrupt the cell (on Windows a console control handler does the asking;
//! see `os::on_interrupt`). The waiting request then returns `interrupted`
//! as its reply, so the user sees the same JSON a script would.

use agent_comms_core::client::Client;
use agent_comms_core::os::{on_interrupt, InterruptGuard};
use agent_comms_core::session::SessionName;
use agent_comms_core::socket::protocol::Request;

/// While alive, Ctrl-C interrupts the session's cell.
pub type CtrlCInterrupts = InterruptGuard;

pub fn on_ctrl_c(session: SessionName) -> Option<CtrlCInterrupts> {
    on_interrupt(move || {
        if let Ok((mut client, _)) = Client::for_session(&session) {
            let _ = client.request(Request::CellInterrupt);
        }
    })
}
