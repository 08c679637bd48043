//! The MCP server: the tools of the chosen set, and what they share (who
//! the actor is, which sessions this server started, which one it runs
//! in).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_comms_core::ids::Id;
use agent_comms_core::session::SessionName;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CreateTaskResult, GetTaskParams,
    GetTaskResult, UpdateTaskParams,
};
use rmcp::model::{
    Implementation, ListResourcesResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler};
use tokio_util::sync::CancellationToken;

use crate::reply::{blocking, ToolError};
use crate::resources::{cell_uri, Subscriptions, INBOX_URI};
use crate::tools::cells::cell_sessions;
use crate::ToolSet;

/// How the server was started.
#[derive(Debug, Clone)]
pub struct Options {
    pub tools: ToolSet,
    /// Who the agent using the server is: the sender of its messages and
    /// the owner of its inbox.
    pub actor: Option<Id>,
    /// The `agent-comms` executable, which supervises the sessions that
    /// `cell_new` starts.
    pub supervisor: PathBuf,
    /// The session this server runs inside (`AGENT_COMMS_SESSION`): never
    /// killed or typed into from here.
    pub inside: Option<SessionName>,
}

pub(crate) struct Shared {
    pub actor: Option<Id>,
    pub supervisor: PathBuf,
    tools: ToolSet,
    inside: Option<SessionName>,
    started: Mutex<HashSet<SessionName>>,
}

impl Shared {
    pub fn actor(&self, what: &str) -> Result<Id, ToolError> {
        self.actor.clone().ok_or_else(|| {
            ToolError::new(format!(
                "this server has no actor to {what} as; start it with --actor ID (or AGENT_COMMS_ACTOR)"
            ))
        })
    }

    /// Whether reading a cell's result must leave it for its owner: a
    /// read-only server changes nothing, not even which results are
    /// still to be picked up.
    pub fn keeps_results(&self) -> bool {
        self.tools == ToolSet::Readonly
    }

    pub fn started_here(&self, name: &SessionName) {
        self.lock().insert(name.clone());
    }

    pub fn is_started_here(&self, name: &SessionName) -> bool {
        self.lock().contains(name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<SessionName>> {
        // The set is only inserted into: a panic elsewhere leaves it whole.
        self.started.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn not_inside(&self, session: &SessionName, verb: &str) -> Result<(), ToolError> {
        if self.inside.as_ref() == Some(session) {
            return Err(ToolError::new(format!(
                "session '{session}' is the one this server runs in; it will not {verb} its own session"
            )));
        }
        Ok(())
    }

    /// Interrupting or killing: never the server's own session; in the
    /// default set, only sessions it started.
    pub fn may_stop(&self, session: &SessionName, verb: &str) -> Result<(), ToolError> {
        self.not_inside(session, verb)?;
        if self.tools < ToolSet::All && !self.is_started_here(session) {
            return Err(ToolError::new(format!(
                "session '{session}' was not started by this server; the default tool set may {verb} only its own (start the server with --tools all)"
            )));
        }
        Ok(())
    }
}

/// Told to every client at start-up: when to use which tool.
const INSTRUCTIONS: &str = "agent-comms: persistent REPLs (cells), the terminals of other \
programs and agents (sessions), and messages between agents. cell_new starts a REPL; cell_run \
runs code in it and returns the output, keeping variables between calls. Waits block in the \
server: use cell_wait, session_wait_for and message_wait instead of calling a tool repeatedly. \
Errors say what to call instead.";

/// The tools that may block for long, run as tasks for clients of MCP's
/// task extension: the call returns at once with a task, which the client
/// polls (`tasks/get`) and may cancel (`tasks/cancel`, which interrupts a
/// cell as cancelling the call would).
const LONG_TOOLS: &[&str] = &[
    "cell_run",
    "cell_wait",
    "session_wait_for",
    "message_wait",
    "acp_prompt",
];

#[derive(Clone)]
pub struct Server {
    pub(crate) shared: Arc<Shared>,
    subscriptions: Arc<Subscriptions>,
    tasks: TaskManager,
    tool_router: ToolRouter<Self>,
}

impl Server {
    pub fn new(options: Options) -> Self {
        let mut router =
            Self::cell_tools() + Self::session_tools() + Self::message_tools() + Self::acp_tools();
        if options.tools == ToolSet::Readonly {
            // The set is what the tools declare of themselves: a tool that
            // changes anything says so, and is left out.
            let changing: Vec<String> = router
                .list_all()
                .into_iter()
                .filter(|t| t.annotations.as_ref().and_then(|a| a.read_only_hint) != Some(true))
                .map(|t| t.name.to_string())
                .collect();
            for name in changing {
                router.remove_route(&name);
            }
        }
        for route in router.map.values_mut() {
            let tool = &mut route.attr;
            crate::schema::drop_undefined_formats(Arc::make_mut(&mut tool.input_schema));
            if let Some(output) = &mut tool.output_schema {
                crate::schema::drop_undefined_formats(Arc::make_mut(output));
            }
        }
        Self {
            shared: Arc::new(Shared {
                actor: options.actor,
                supervisor: options.supervisor,
                tools: options.tools,
                inside: options.inside,
                started: Mutex::default(),
            }),
            subscriptions: Arc::default(),
            tasks: TaskManager::new(),
            tool_router: router,
        }
    }

    /// Runs one tool call in a task of its own: a tool that panics answers
    /// with an error instead of taking the server, and every other call,
    /// down with it.
    async fn call_guarded(
        self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        let call = tokio::spawn(async move {
            let call = ToolCallContext::new(&self, request, context);
            self.tool_router.call(call).await
        });
        match call.await {
            Ok(answered) => answered,
            Err(e) => {
                tracing::error!("tool {tool} failed: {e}");
                Err(ErrorData::internal_error(
                    format!(
                        "tool {tool} failed inside the server ({e}); the server goes on serving"
                    ),
                    None,
                ))
            }
        }
    }

    /// The tools this server lists, as a client sees them.
    pub fn tools(&self) -> Vec<rmcp::model::Tool> {
        self.tool_router.list_all()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tasks()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "agent-comms",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let as_task = LONG_TOOLS.contains(&request.name.as_ref())
            && self.tool_router.has_route(&request.name)
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        if !as_task {
            return self.clone().call_guarded(request, context).await;
        }
        let server = self.clone();
        let task = self.tasks.spawn(TaskOptions::new(), move |task| {
            Box::pin(async move {
                // The call's own token ends with the request it came in,
                // which is answered at once; the task's cancel takes its place.
                let mut context = context;
                let cancel = CancellationToken::new();
                context.ct = cancel.clone();
                let call = server.call_guarded(request, context);
                tokio::pin!(call);
                let answered = tokio::select! {
                    answered = &mut call => answered,
                    () = task.cancelled() => {
                        cancel.cancel();
                        call.await
                    }
                };
                if task.is_cancel_requested() {
                    return Err(TaskExit::Cancelled);
                }
                match answered? {
                    CallToolResponse::Complete(result) => Ok(result),
                    _ => Err(TaskExit::Error(ErrorData::internal_error(
                        "a tool answered with a task",
                        None,
                    ))),
                }
            })
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let shared = self.shared.clone();
        let cells = blocking(move || cell_sessions(&shared))
            .await
            .map_err(|e| ErrorData::internal_error(e.0, None))?;
        let mut listed = Vec::new();
        if self.shared.actor.is_some() {
            listed.push(
                Resource::new(INBOX_URI, "inbox")
                    .with_description("The messages to me, unread first; updated when one arrives or is delivered")
                    .with_mime_type("application/json"),
            );
        }
        for cell in cells {
            listed.push(
                Resource::new(
                    cell_uri(&cell.session),
                    format!("cell session {}", cell.session),
                )
                .with_description("The session's cell state; updated when a cell ends")
                .with_mime_type("application/json"),
            );
        }
        Ok(ListResourcesResult::with_all_items(listed))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let shared = self.shared.clone();
        let uri = request.uri;
        let contents = blocking(move || crate::resources::read(&shared, &uri))
            .await
            .map_err(|e| ErrorData::resource_not_found(e.0, None))?;
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    // `resources/subscribe` is what clients of protocol versions up to
    // 2025-11-25 send (every agent CLI today); rmcp marks it legacy.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions
            .subscribe(self.shared.clone(), request.uri, context.peer)
            .map_err(|e| ErrorData::resource_not_found(e.0, None))
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.unsubscribe(&request.uri);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// Every `format` string anywhere in `v`.
    fn formats(v: &Value, found: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(f)) = map.get("format") {
                    found.push(f.clone());
                }
                map.values().for_each(|v| formats(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| formats(v, found)),
            _ => {}
        }
    }

    #[test]
    fn listed_schemas_carry_only_defined_formats() {
        let server = Server::new(Options {
            tools: ToolSet::All,
            actor: None,
            supervisor: PathBuf::from("/bin/agent-comms"),
            inside: None,
        });
        let mut found = Vec::new();
        for tool in server.tools() {
            formats(&serde_json::to_value(&tool).unwrap(), &mut found);
        }
        assert!(
            found
                .iter()
                .all(|f| crate::schema::DEFINED_FORMATS.contains(&f.as_str())),
            "{found:?}"
        );
    }
}
