//! What code beside an ACP supervisor (its endpoint's connections, the
//! runtime's inbox) may do with the agent: send it a prompt with the
//! delivery discipline, cancel the running turn, read its state.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, NewSessionRequest, NewSessionResponse, PromptRequest,
    PromptResponse, SessionId, SetSessionModeRequest, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Agent;
use tokio::sync::{mpsc, watch, Notify};

use super::transcript::Tap;
use super::turns::{NoTurn, Running, Turns};
use crate::delivery::validate::{check_prompt, validate};
use crate::delivery::{DeliveryError, DeliveryOptions, Evidence};
use crate::socket::protocol::{AcpStatus, ExitInfo, InvocationOutcome};
use crate::supervisor::exited;
use crate::supervisor::handle::InboxLink;
use crate::time::unix_millis;

/// How long a cancelled turn may take to end before `cancel` says so.
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// The agent as `initialize` described it.
#[derive(Debug, Clone, Default)]
pub struct AgentInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    pub protocol_version: u16,
}

/// How one turn went: when it ran, and the prompt's response.
pub(super) struct TurnOutcome {
    pub running: Running,
    /// When the response came (Unix ms).
    pub ended: u64,
    pub response: Result<PromptResponse, agent_client_protocol::Error>,
}

#[derive(Clone)]
pub struct AcpHandle {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub connection: ConnectionTo<Agent>,
    pub session_id: SessionId,
    pub agent: AgentInfo,
    pub turns: Arc<Turns>,
    pub tap: Arc<Tap>,
    pub inbox: InboxLink,
    /// Set once the agent is gone.
    pub exit: watch::Receiver<Option<ExitInfo>>,
    /// Asks the supervisor to end the agent, with this grace.
    pub terminate: mpsc::UnboundedSender<Duration>,
}

impl AcpHandle {
    /// Sends `text` as one prompt, when no turn runs and it is this
    /// caller's turn (first come, first served; `try_only` fails at once),
    /// and waits for the turn to end. The evidence says when the prompt was
    /// sent, when the agent's first update came and how the turn ended.
    pub async fn prompt(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        validate(text)?;
        self.send_prompt(text, options).await
    }

    /// [`AcpHandle::prompt`] for the user's own first turn (`--prompt`),
    /// which may hold several lines.
    pub async fn first_prompt(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        check_prompt(text)?;
        self.send_prompt(text, options).await
    }

    async fn send_prompt(
        &self,
        text: &str,
        options: DeliveryOptions,
    ) -> Result<Evidence, DeliveryError> {
        let request = PromptRequest::new(
            self.inner.session_id.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        );
        let wait = Duration::from_millis(options.timeout_ms);
        let turn = self.run_turn(request, options.try_only, wait, None).await?;
        match turn.response {
            Ok(response) => {
                let stop_reason = super::wire_name(&response.stop_reason);
                Ok(Evidence {
                    echoed: turn.running.first_update.unwrap_or(turn.ended),
                    entered: turn.running.sent,
                    submitted: turn.ended,
                    enter_presses: 0,
                    style: "prompt".into(),
                    stop_reason: Some(stop_reason),
                })
            }
            // The connection died under the prompt (the agent exited, or
            // stopped reading and the write deadline ended the transport):
            // the session ended, which the inbox must see as such to keep
            // the message pending, not as the agent refusing it.
            Err(e) if self.gone(&e) => Err(DeliveryError::Ended),
            Err(e) => Err(DeliveryError::Refused(
                crate::display::one_line(&e.to_string()).into_owned(),
            )),
        }
    }

    /// Waits until a prompt could be sent now: no turn runs and it is this
    /// caller's turn (see [`Turns::ready`]).
    pub async fn ready(&self, options: DeliveryOptions) -> Result<(), DeliveryError> {
        let wait = Duration::from_millis(options.timeout_ms);
        let mut exit = self.inner.exit.clone();
        tokio::select! {
            ready = self.inner.turns.ready(options.try_only, wait) => ready.map_err(|e| no_turn(e, wait)),
            _ = exited(&mut exit) => Err(DeliveryError::Ended),
        }
    }

    /// Runs one turn with `request` as its prompt: when no turn runs and it
    /// is this caller's turn (first come, first served; `try_only` fails at
    /// once, else it waits at most `wait`), and until the prompt's response.
    /// A client's `$/cancel_request` (its `cancellation`) goes on to the
    /// agent.
    pub(super) async fn run_turn(
        &self,
        request: PromptRequest,
        try_only: bool,
        wait: Duration,
        cancellation: Option<agent_client_protocol::RequestCancellation>,
    ) -> Result<TurnOutcome, DeliveryError> {
        let inner = &self.inner;
        let mut exit = inner.exit.clone();
        let turn = tokio::select! {
            turn = inner.turns.begin(try_only, wait) => turn.map_err(|e| no_turn(e, wait))?,
            _ = exited(&mut exit) => return Err(DeliveryError::Ended),
        };
        let mut sent = inner.connection.send_request(request);
        if let Some(cancellation) = cancellation {
            sent = sent.forward_cancellation_from(cancellation);
        }
        let response = tokio::select! {
            r = sent.block_task() => r,
            _ = exited(&mut exit) => return Err(DeliveryError::Ended),
        };
        let ended = unix_millis();
        let running = turn.running();
        turn.finish(
            response
                .as_ref()
                .ok()
                .map(|r| super::wire_name(&r.stop_reason)),
        );
        Ok(TurnOutcome {
            running,
            ended,
            response,
        })
    }

    /// Whether `e`, a request's failure, means the agent is gone.
    pub(super) fn gone(&self, e: &agent_client_protocol::Error) -> bool {
        self.inner.exit.borrow().is_some()
            || self.inner.connection.is_incoming_closed()
            || agent_client_protocol::is_connection_terminated(e)
            || agent_client_protocol::is_incoming_transport_closed(e)
    }

    /// Sends `session/cancel` for the running turn and waits for it to end;
    /// returns its stop reason.
    pub async fn cancel(&self) -> Result<String, String> {
        let inner = &self.inner;
        if inner.turns.running().is_none() {
            return Err("no turn is running; there is nothing to cancel".into());
        }
        // Watched before the notification goes: the end cannot be missed.
        let ended = inner.turns.turn_end();
        self.send_cancel(&inner.session_id)?;
        match tokio::time::timeout(CANCEL_WAIT, ended).await {
            Ok(Some(reason)) => Ok(reason),
            Ok(None) => Err("the turn ended without a stop reason (the agent went away)".into()),
            Err(_) => Err(format!(
                "the agent did not end the turn within {} s of session/cancel",
                CANCEL_WAIT.as_secs()
            )),
        }
    }

    /// Sends `session/cancel` for `session`, without waiting for the turn
    /// to end.
    pub(super) fn send_cancel(&self, session: &SessionId) -> Result<(), String> {
        self.inner
            .connection
            .send_notification(CancelNotification::new(session.clone()))
            .map_err(|e| format!("cannot send session/cancel: {e}"))
    }

    /// Opens another session of the agent in `cwd` (for a client the
    /// policy gives a fresh one), in `mode` if the policy sets one. No MCP
    /// servers: a client adds nothing to what the agent can reach.
    pub(super) async fn open_session(
        &self,
        cwd: std::path::PathBuf,
        mode: Option<&str>,
    ) -> Result<NewSessionResponse, agent_client_protocol::Error> {
        let connection = &self.inner.connection;
        let opened = connection
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await?;
        if let Some(mode) = mode {
            connection
                .send_request(SetSessionModeRequest::new(
                    opened.session_id.clone(),
                    mode.to_owned(),
                ))
                .block_task()
                .await?;
        }
        Ok(opened)
    }

    pub fn status(&self) -> AcpStatus {
        let inner = &self.inner;
        AcpStatus {
            session_id: inner.session_id.to_string(),
            agent_name: inner.agent.name.clone(),
            agent_version: inner.agent.version.clone(),
            protocol_version: inner.agent.protocol_version,
            turn_started: inner.turns.running().map(|r| r.sent),
            turns: inner.turns.ended_count(),
            bridge: None,
            clients: Vec::new(),
        }
    }

    pub fn session_id(&self) -> String {
        self.inner.session_id.to_string()
    }

    pub fn tap(&self) -> &Arc<Tap> {
        &self.inner.tap
    }

    /// Changes each time a turn ends.
    pub(super) fn turns_ended(&self) -> watch::Receiver<(u64, Option<String>)> {
        self.inner.turns.watch_ended()
    }

    pub(super) fn inbox(&self) -> &InboxLink {
        &self.inner.inbox
    }

    /// Notified when a client says new messages wait (`send`, `redeliver`).
    pub fn nudges(&self) -> Arc<Notify> {
        self.inner.inbox.nudge.clone()
    }

    /// Tells clients waiting on this message how it ended.
    pub fn announce(&self, outcome: InvocationOutcome) {
        self.inner.inbox.announce(outcome);
    }

    /// The agent's exit, once it happened.
    pub fn exit(&self) -> watch::Receiver<Option<ExitInfo>> {
        self.inner.exit.clone()
    }

    /// Ends the agent (as `session kill` does); the supervisor then exits.
    pub fn terminate(&self, grace: Duration) {
        let _ = self.inner.terminate.send(grace);
    }
}

/// Why a turn could not begin, as a delivery's error.
fn no_turn(e: NoTurn, wait: Duration) -> DeliveryError {
    match e {
        NoTurn::Busy => DeliveryError::NotReady("a turn is running".into()),
        NoTurn::Timeout => DeliveryError::Timeout {
            secs: wait.as_secs(),
            waiting: "the running turn ended".into(),
        },
    }
}
