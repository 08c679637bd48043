//! Ctrl-C during a synchronous `k run`: interrupt the cell, not just `k`.
//!
//! While the run waits, the first Ctrl-C sends a `cell_interrupt` request to
//! the supervisor on a second connection (from the signal handler on Unix,
//! a console control handler on Windows; see `os::on_interrupt_send`). The
//! waiting request then returns `interrupted` as its reply, so the user sees
//! the same JSON a script would.

use std::path::Path;

use agent_comms_core::os::{on_interrupt_send, InterruptGuard};
use agent_comms_core::socket::codec::{encode, Frame, Message};
use agent_comms_core::socket::protocol::Request;

/// While alive, Ctrl-C interrupts the cell of the session at `socket`.
pub type CtrlCInterrupts = InterruptGuard;

pub fn on_ctrl_c(socket: &Path) -> Option<CtrlCInterrupts> {
    let request = encode(&Frame::new(1, Message::Request(Request::CellInterrupt)));
    on_interrupt_send(socket, request)
}
