//! MCP's task extension (SEP-2663) on `agent-comms mcp`, driven by the
//! official Rust SDK's client (rmcp), which declares the extension: the
//! Python SDK has no client side of it yet. A long tool call then answers at
//! once with a task; the client polls `tasks/get` (the extension's way of
//! waiting) and may `tasks/cancel` it, which interrupts the cell.

mod support;

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, GetTaskParams, Implementation, TaskPayload,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use support::env::TestEnv;
use support::{BIN, TIMEOUT};

type Client = RunningService<RoleClient, ClientConfig>;

async fn start(env: &TestEnv) -> Client {
    let mut cmd = tokio::process::Command::from(env.command_of(BIN, &["mcp"]));
    cmd.kill_on_drop(true);
    let transport = TokioChildProcess::new(cmd).expect("agent-comms mcp starts");
    ClientConfig::new(
        ClientCapabilities::builder().enable_tasks().build(),
        Implementation::new("agent-comms-tests", "1"),
    )
    .serve(transport)
    .await
    .expect("initialize")
}

fn params(tool: &'static str, args: Value) -> CallToolRequestParams {
    let Value::Object(args) = args else {
        unreachable!()
    };
    CallToolRequestParams::new(tool).with_arguments(args)
}

async fn call(client: &Client, tool: &'static str, args: Value) -> CallToolResponse {
    client.call_tool_once(params(tool, args)).await.expect(tool)
}

/// Polls the task, as the extension has clients do, until it settles.
async fn settled(client: &Client, task_id: &str) -> TaskPayload {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(task_id.to_owned()))
            .await
            .expect("tasks/get");
        if got.task.status().is_terminal() {
            return got.task.payload;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task_id} never settled"
        );
        let every = got.task.task.poll_interval_ms.unwrap_or(100);
        tokio::time::sleep(Duration::from_millis(every)).await;
    }
}

fn task_id(response: CallToolResponse) -> String {
    match response {
        CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("not run as a task: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_cell_runs_as_a_task_and_its_cancel_interrupts_the_cell() {
    let env = TestEnv::new();
    let client = start(&env).await;
    // A short tool is answered as usual, even to a client of tasks.
    let new = call(
        &client,
        "cell_new",
        json!({"session": "sh", "command": "bash --norc --noprofile"}),
    )
    .await;
    assert!(matches!(new, CallToolResponse::Complete(_)), "{new:?}");

    let id = task_id(
        call(
            &client,
            "cell_run",
            json!({"session": "sh", "code": "sleep 1; echo done"}),
        )
        .await,
    );
    let TaskPayload::Completed { result } = settled(&client, &id).await else {
        panic!("the cell's task did not complete");
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
    let cell = result.structured_content.unwrap();
    assert_eq!(cell["status"], "done", "{cell}");
    assert_eq!(cell["output"], "done");

    let id = task_id(
        call(
            &client,
            "cell_run",
            json!({"session": "sh", "code": "sleep 60", "timeout": 120}),
        )
        .await,
    );
    client
        .peer()
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .expect("tasks/cancel");
    assert!(matches!(
        settled(&client, &id).await,
        TaskPayload::Cancelled
    ));
    // Cancelled is interrupted: the REPL takes the next cell long before
    // `sleep 60` could have ended.
    let CallToolResponse::Complete(next) = call(&client, "cell_list", json!({})).await else {
        panic!("cell_list is not a task");
    };
    assert_eq!(
        next.structured_content.unwrap()["sessions"][0]["state"],
        "idle"
    );
    client.cancel().await.ok();
}
