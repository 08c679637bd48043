//! The MCP section (issue 15): a cell run as an agent makes it through
//! `agent-comms mcp`, next to the two ways it has without the server — one
//! `k run` process per cell, and its shell tool spawning `bash -c` — all
//! in the same run, the three taking turns.
//!
//! The client is rmcp's own (the SDK's client side), started the way an
//! agent CLI starts a stdio server; each call is timed from sending
//! `tools/call` to holding its result, whose output is checked.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use crate::bench::Bench;
use crate::report::{judge, Row, Section};
use crate::stats::{self, push, Runs};
use crate::{procs, progress};

const TITLE: &str = "MCP server: `agent-comms mcp` (issue 15)";
const SESSION: &str = "mcp";
const CODE: &str = "echo hello";

type Client = RunningService<RoleClient, ()>;

/// The server, started as an agent's MCP configuration starts it.
async fn start(bench: &Bench) -> anyhow::Result<(Client, u32)> {
    let mut cmd = tokio::process::Command::from(bench.agent_comms());
    cmd.arg("mcp").stderr(Stdio::null());
    let transport = TokioChildProcess::new(cmd).context("cannot start agent-comms mcp")?;
    let pid = transport.id().context("agent-comms mcp has no pid")?;
    let client = ().serve(transport).await.context("MCP initialize failed")?;
    Ok((client, pid))
}

async fn call(client: &Client, tool: &'static str, args: Value) -> anyhow::Result<Value> {
    let Value::Object(args) = args else {
        unreachable!("arguments are objects")
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .with_context(|| format!("{tool} failed"))?;
    ensure!(
        result.is_error != Some(true),
        "{tool}: {:?}",
        result.content
    );
    result.structured_content.context("no structured result")
}

async fn cell_run(client: &Client) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let result = call(
        client,
        "cell_run",
        json!({"session": SESSION, "code": CODE}),
    )
    .await?;
    let took = start.elapsed();
    ensure!(result["output"] == "hello", "cell_run gave {result}");
    Ok(took)
}

/// A command to completion, timed; its stdout must contain `expect`.
fn timed(cmd: &mut Command, expect: &str) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let out = cmd.stdin(Stdio::null()).output()?;
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success() && stdout.contains(expect),
        "{cmd:?} printed {stdout:?}"
    );
    Ok(took)
}

pub fn section(bench: &Bench) -> Section {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return not_measured(&format!("no event loop: {e}")),
    };
    runtime.block_on(measure(bench))
}

fn not_measured(why: &str) -> Section {
    Section {
        title: TITLE.to_owned(),
        intro: format!("Not measured: {why}."),
        rows: Vec::new(),
        method: Vec::new(),
    }
}

async fn measure(bench: &Bench) -> Section {
    let plan = &bench.plan;
    progress("mcp: server start → tools listed");
    let mut starts: Runs = Ok(Vec::new());
    for _ in 0..plan.mcp_starts {
        let began = Instant::now();
        let listed = async {
            let (client, _) = start(bench).await?;
            let tools = client.list_all_tools().await?;
            ensure!(
                tools.iter().any(|t| t.name == "cell_run"),
                "no cell_run listed"
            );
            let took = began.elapsed();
            client.cancel().await?;
            Ok(took)
        };
        push(&mut starts, listed.await);
    }

    progress("mcp: cell_run next to k run and bash -c");
    let (client, pid) = match start(bench).await {
        Ok(c) => c,
        Err(e) => return not_measured(&format!("{e:#}")),
    };
    let set_up = async {
        call(
            &client,
            "cell_new",
            json!({"session": SESSION, "command": "bash --norc"}),
        )
        .await?;
        for _ in 0..plan.cell_warmup {
            cell_run(&client).await?;
        }
        anyhow::Ok(())
    };
    if let Err(e) = set_up.await {
        return not_measured(&format!("{e:#}"));
    }
    let idle_rss = procs::rss_mb(pid)
        .map(stats::size)
        .map_err(|e| format!("{e:#}"));
    let (mut mcp, mut k, mut bash): (Runs, Runs, Runs) =
        (Ok(Vec::new()), Ok(Vec::new()), Ok(Vec::new()));
    for _ in 0..plan.cell_runs {
        push(&mut mcp, cell_run(&client).await);
        push(
            &mut k,
            timed(bench.k().args(["run", SESSION, CODE]), "hello"),
        );
        let mut shell = Command::new("bash");
        bench.neutral_env(&mut shell);
        push(&mut bash, timed(shell.args(["-c", CODE]), "hello"));
    }
    if let Ok(record) = bench.record(SESSION) {
        bench.end_session(&record);
    }
    let _ = client.cancel().await;

    let what = format!("`cell_run` of `{CODE}`, warm bash");
    let [mcp, k, bash] = [mcp, k, bash].map(|r| r.map(|r| stats::latencies(&r)));
    let faster_than_k = match (&mcp, &k) {
        (Ok(m), Ok(k)) => Some(m.median.value() < 3.0 && m.median.value() < k.median.value()),
        _ => None,
    };
    let mut ours = Row::new(&what, "MCP tools/call (agent-comms mcp)", mcp);
    ours.target = judge("median under 3 ms and under `k run`'s", faster_than_k);
    let mut start_row = Row::new(
        "server start → tools listed",
        "agent-comms mcp",
        starts.map(|r| stats::latencies(&r)),
    );
    start_row.target = String::new();
    Section {
        title: TITLE.to_owned(),
        intro: "An agent's cell run through the MCP server, next to the same cell through one \
                `k run` process, and next to the round trip of a shell tool (`bash -c`, which \
                keeps no state)."
            .to_owned(),
        rows: vec![
            ours,
            Row::new(&what, "`k run` process", k),
            Row::new(&format!("`bash -c '{CODE}'`"), "a shell tool's spawn", bash),
            start_row,
            Row::new("idle RSS after the runs", "agent-comms mcp", idle_rss),
        ],
        method: vec![format!(
            "rmcp's client starts `agent-comms mcp` as a child on stdio (as an agent CLI does) \
             and calls `cell_run` on a bash session it started with `cell_new`, after {} untimed \
             cells; each sample is `tools/call` sent → result held, its output checked. The \
             `k run` and `bash -c` samples are one process each, spawn to exit, taking turns \
             with the MCP calls. **start**: spawn → `initialize` → `tools/list` answered, a new \
             server each time ({} samples).",
            plan.cell_warmup, plan.mcp_starts
        )],
    }
}
