//! ACP's client role: the connection to the agent through the
//! `agent-client-protocol` crate, and the answers to what the agent asks.
//!
//! Every request the agent sends is answered by the policy, which was fixed
//! before start: permissions by option kind, files only under the served
//! roots, terminals not at all unless served. An agent request the policy
//! does not allow is answered with a JSON-RPC error (never a silent
//! success), including one for a capability that was never declared, and
//! each answer is noted in the transcript. Methods nobody handles get the
//! crate's "method not found"; all of it passes the tap.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, CreateTerminalRequest, FileSystemCapabilities, Implementation,
    InitializeRequest, InitializeResponse, KillTerminalRequest, PermissionOptionKind,
    ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, TerminalOutputRequest, WaitForTerminalExitRequest, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo};
use tokio::sync::oneshot;

use super::bridge::asks::{Asks, Resolution};
use super::policy::{choose_option, Answer, OptionKind, Policy};
use super::transcript::Tap;
use super::turns::Turns;

/// The largest file served to `fs/read_text_file`.
const MAX_READ: u64 = 16 * 1024 * 1024;
/// The JSON-RPC error code of a request the policy refuses (in the
/// implementation-defined server-error range).
const REFUSED: i32 = -32001;

/// What the answers need: the policy, where the session runs, the tap for
/// notes and the turn state for updates.
pub struct Context {
    pub policy: Policy,
    pub cwd: PathBuf,
    pub tap: Arc<Tap>,
    pub turns: Arc<Turns>,
    /// Where `ask` puts a permission request: the attached controllers.
    pub asks: Arc<Asks>,
}

/// A handler that refuses every `$request` (`$method`): what the policy
/// never serves. (Terminals are not served yet: the supervisor refuses a
/// policy that asks for them.)
macro_rules! refusing {
    ($ctx:expr, $request:ty, $method:literal) => {{
        let ctx = $ctx.clone();
        async move |_: $request, responder: Responder<_>, _cx| refuse(&ctx, $method, responder)
    }};
}

/// Runs the connection over `transport` until `stop` fires or the agent
/// goes away. The connection is handed out through `ready` once it runs.
pub async fn run(
    ctx: Arc<Context>,
    transport: impl ConnectTo<Client> + 'static,
    ready: oneshot::Sender<ConnectionTo<Agent>>,
    stop: oneshot::Receiver<()>,
) -> Result<(), agent_client_protocol::Error> {
    let (c1, c2, c3, c4) = (ctx.clone(), ctx.clone(), ctx.clone(), ctx.clone());
    Client
        .v1()
        .name("agent-comms")
        .on_receive_notification(
            async move |_update: SessionNotification, _cx| {
                c1.turns.saw_update();
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, cx: ConnectionTo<Agent>| {
                let ctx = c2.clone();
                // Asking people takes time: the connection goes on meanwhile.
                cx.spawn(async move { answer_permission(&ctx, request, responder).await })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                serve_read(&c3, request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                serve_write(&c4, request, responder).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            refusing!(ctx, CreateTerminalRequest, "terminal/create"),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            refusing!(ctx, TerminalOutputRequest, "terminal/output"),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            refusing!(ctx, WaitForTerminalExitRequest, "terminal/wait_for_exit"),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            refusing!(ctx, KillTerminalRequest, "terminal/kill"),
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            refusing!(ctx, ReleaseTerminalRequest, "terminal/release"),
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
            let _ = ready.send(cx);
            let _ = stop.await;
            Ok(())
        })
        .await
}

/// `initialize`, declaring exactly the capabilities the policy serves.
pub async fn initialize(
    cx: &ConnectionTo<Agent>,
    policy: &Policy,
) -> Result<InitializeResponse, agent_client_protocol::Error> {
    let fs = FileSystemCapabilities::new()
        .read_text_file(policy.serves_fs_read())
        .write_text_file(policy.serves_fs_write());
    let capabilities = ClientCapabilities::new()
        .fs(fs)
        .terminal(policy.serves_terminal());
    let request = InitializeRequest::new(ProtocolVersion::V1)
        .client_capabilities(capabilities)
        .client_info(Implementation::new(
            "agent-comms",
            env!("CARGO_PKG_VERSION"),
        ));
    cx.send_request(request).block_task().await
}

async fn answer_permission(
    ctx: &Context,
    request: RequestPermissionRequest,
    responder: Responder<RequestPermissionResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let fields = &request.tool_call.fields;
    let kind = fields.kind.as_ref().map(super::wire_name);
    let title = fields.title.clone().unwrap_or_default();
    let wanted = match ctx.policy.permission(kind.as_deref(), &title) {
        Answer::Option(kind) => kind,
        Answer::Ask { timeout, fallback } => match ctx.asks.ask(request.clone(), timeout).await {
            Resolution::Chosen { option_id, .. } => {
                return responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option_id)),
                ));
            }
            Resolution::Unanswered(why) => {
                ctx.tap.note(format!(
                    "asked about {title:?}, but {why}: the policy's fallback answers"
                ));
                fallback
            }
        },
    };
    let offered: Vec<(String, OptionKind)> = request
        .options
        .iter()
        .filter_map(|o| Some((o.option_id.to_string(), option_kind(&o.kind)?)))
        .collect();
    let outcome = match choose_option(&offered, wanted) {
        Some(id) => {
            ctx.tap.note(format!(
                "policy answered {} ({id}) to the permission request for {:?}",
                wanted.as_str(),
                title
            ));
            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.to_owned()))
        }
        None => {
            ctx.tap.note(format!(
                "policy wanted {} for {:?}, which the agent did not offer, nor anything narrower: answered cancelled",
                wanted.as_str(),
                title
            ));
            RequestPermissionOutcome::Cancelled
        }
    };
    responder.respond(RequestPermissionResponse::new(outcome))
}

async fn serve_read(
    ctx: &Context,
    request: ReadTextFileRequest,
    responder: Responder<ReadTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let method = "fs/read_text_file";
    if !ctx.policy.serves_fs_read() {
        return refuse(ctx, method, responder);
    }
    let path = match ctx.policy.fs_read(&ctx.cwd, &request.path) {
        Ok(path) => path,
        Err(refusal) => return refuse_because(ctx, method, &refusal.0, responder),
    };
    match read_bounded(&path).await {
        Ok(text) => {
            let text = lines_of(&text, request.line, request.limit);
            ctx.tap.note(format!("served {method} {}", path.display()));
            responder.respond(ReadTextFileResponse::new(text))
        }
        Err(e) => {
            let why = format!("cannot read {}: {e}", path.display());
            responder.respond_with_error(agent_client_protocol::Error::new(REFUSED, why))
        }
    }
}

async fn serve_write(
    ctx: &Context,
    request: WriteTextFileRequest,
    responder: Responder<WriteTextFileResponse>,
) -> Result<(), agent_client_protocol::Error> {
    let method = "fs/write_text_file";
    if !ctx.policy.serves_fs_write() {
        return refuse(ctx, method, responder);
    }
    let path = match ctx.policy.fs_write(&ctx.cwd, &request.path) {
        Ok(path) => path,
        Err(refusal) => return refuse_because(ctx, method, &refusal.0, responder),
    };
    match write_no_follow(&path, request.content.as_bytes()).await {
        Ok(()) => {
            ctx.tap.note(format!("served {method} {}", path.display()));
            responder.respond(WriteTextFileResponse::new())
        }
        Err(e) => {
            let why = format!("cannot write {}: {e}", path.display());
            responder.respond_with_error(agent_client_protocol::Error::new(REFUSED, why))
        }
    }
}

/// A request for something the policy does not serve at all.
fn refuse<T: agent_client_protocol::JsonRpcResponse>(
    ctx: &Context,
    method: &str,
    responder: Responder<T>,
) -> Result<(), agent_client_protocol::Error> {
    refuse_because(ctx, method, "the policy does not serve it", responder)
}

fn refuse_because<T: agent_client_protocol::JsonRpcResponse>(
    ctx: &Context,
    method: &str,
    why: &str,
    responder: Responder<T>,
) -> Result<(), agent_client_protocol::Error> {
    ctx.tap.note(format!("refused {method}: {why}"));
    let message = format!("refused by agent-comms: {why}");
    responder.respond_with_error(agent_client_protocol::Error::new(REFUSED, message))
}

/// Opens the path the policy checked without following a symlink at its
/// end: one swapped in after the check must not lead out of the roots.
fn no_follow(options: &mut tokio::fs::OpenOptions) -> &mut tokio::fs::OpenOptions {
    #[cfg(unix)]
    options.custom_flags(libc::O_NOFOLLOW);
    options
}

async fn write_no_follow(path: &std::path::Path, content: &[u8]) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    let mut file = no_follow(&mut options).open(path).await?;
    file.write_all(content).await?;
    file.flush().await
}

async fn read_bounded(path: &std::path::Path) -> std::io::Result<String> {
    use tokio::io::AsyncReadExt;
    let mut options = tokio::fs::OpenOptions::new();
    options.read(true);
    let file = no_follow(&mut options).open(path).await?;
    let mut bytes = Vec::new();
    file.take(MAX_READ + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > MAX_READ {
        return Err(std::io::Error::other(format!(
            "larger than the {MAX_READ}-byte limit"
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// `line` (1-based) and `limit` lines of `text`, as the request asks.
fn lines_of(text: &str, line: Option<u32>, limit: Option<u32>) -> String {
    if line.is_none() && limit.is_none() {
        return text.to_owned();
    }
    let skip = line.map_or(0, |l| l.saturating_sub(1) as usize);
    let take = limit.map_or(usize::MAX, |l| l as usize);
    text.split_inclusive('\n').skip(skip).take(take).collect()
}

fn option_kind(kind: &PermissionOptionKind) -> Option<OptionKind> {
    match super::wire_name(kind).as_str() {
        "allow_once" => Some(OptionKind::AllowOnce),
        "allow_always" => Some(OptionKind::AllowAlways),
        "reject_once" => Some(OptionKind::RejectOnce),
        "reject_always" => Some(OptionKind::RejectAlways),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_can_ask_for_some_lines() {
        let text = "a\nb\nc\n";
        assert_eq!(lines_of(text, None, None), text);
        assert_eq!(lines_of(text, Some(2), None), "b\nc\n");
        assert_eq!(lines_of(text, Some(1), Some(1)), "a\n");
        assert_eq!(lines_of(text, Some(9), Some(1)), "");
    }
}
