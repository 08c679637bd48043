//! The MCP server: the tools of the chosen set, and what they share (who
//! the actor is, which sessions this server started, which one it runs
//! in).

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_comms_core::ids::Id;
use agent_comms_core::session::SessionName;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool_handler, ServerHandler};

use crate::reply::ToolError;
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

#[derive(Clone)]
pub struct Server {
    pub(crate) shared: Arc<Shared>,
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
            tool_router: router,
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
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "agent-comms",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
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
