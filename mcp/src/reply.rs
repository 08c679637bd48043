//! What a tool answers: a typed result (`structuredContent`, described by
//! the tool's output schema) with a short text rendering for clients and
//! models that read only text, or a tool error.
//!
//! A user's mistake (an unknown session, a busy cell, a bad regex) is a
//! tool result with `isError` and one line saying what is wrong and what to
//! call instead: the model reads it and recovers. Protocol errors are left
//! for what is not the caller's to fix in its next call (arguments the
//! schema refuses, an unknown tool).

use rmcp::handler::server::tool::IntoCallToolResult;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use rmcp::ErrorData;
use schemars::JsonSchema;
use serde::Serialize;

pub struct Reply<T> {
    value: T,
    text: String,
}

impl<T> Reply<T> {
    pub fn new(value: T, text: impl Into<String>) -> Self {
        Self {
            value,
            text: text.into(),
        }
    }
}

impl<T: Serialize + JsonSchema + 'static> IntoCallToolResult for Reply<T> {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        let value = serde_json::to_value(self.value)
            .map_err(|e| ErrorData::internal_error(format!("result: {e}"), None))?;
        let mut result = CallToolResult::success(vec![ContentBlock::text(self.text)]);
        result.structured_content = Some(value);
        Ok(result.into())
    }
}

/// One line for the model: what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        // One line, whatever the source said (a supervisor's message, an
        // OS error): the model reads it as one statement.
        let message: String = message.into();
        Self(message.split_whitespace().collect::<Vec<_>>().join(" "))
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl IntoCallToolResult for ToolError {
    fn into_call_tool_result(self) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(self.0)]).into())
    }
}

pub type ToolResult<T> = Result<Reply<T>, ToolError>;

/// Runs blocking work (a supervisor round trip, a store transaction) off
/// the server's event loop, so a slow session never stalls other calls.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ToolError::new(format!("the tool's work failed: {e}")))?
}
