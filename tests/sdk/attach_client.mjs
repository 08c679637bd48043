// An ACP client that none of our code wrote: the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in scripts/install-providers), driven
// the way an editor drives an agent. It spawns `agent-comms acp attach ID`
// as its agent command and speaks ACP to it over that child's stdin/stdout
// (the SDK's ndJsonStream), so the bridge is tested against the SDK's own
// framing, its schema checks of every message, and its request bookkeeping.
// tests/acp_sdk.rs runs it; it only reports what it saw, the test judges.
//
//   node attach_client.mjs SDK_DIR AGENT_COMMS RUNTIME_ID CWD PROMPT
//
// SDK_DIR is a node_modules directory holding @agentclientprotocol/sdk.
// It initializes, lists the sessions, loads the first one (collecting the
// replayed updates until the load's answer), prompts PROMPT, collects the
// turn's updates until the prompt's answer, and prints one JSON object:
// {initialize, sessions, beforeLoad (updates before the load: none
// expected), replay, stopReason, turn}. Any failure: a message
// on stderr and exit status 1.

import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [sdkDir, agentComms, runtimeId, cwd, promptText] = process.argv.slice(2);
if (promptText === undefined) {
  console.error("usage: attach_client.mjs SDK_DIR AGENT_COMMS RUNTIME_ID CWD PROMPT");
  process.exit(2);
}

// ES modules ignore NODE_PATH: resolve the SDK from its directory instead.
const entry = createRequire(join(sdkDir, "resolve-from-here.js")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(entry).href);

const agentProcess = spawn(agentComms, ["acp", "attach", runtimeId], {
  stdio: ["pipe", "pipe", "inherit"],
});
const exited = new Promise((resolve) => agentProcess.on("exit", (code, signal) => resolve({ code, signal })));

// Every session/update, in the order the SDK hands them over, tagged with
// the phase it came in.
let phase = "before-load";
const updates = [];

const app = acp
  .client({ name: "agent-comms-sdk-test" })
  .onNotification(acp.methods.client.session.update, (ctx) => {
    updates.push({ phase, params: ctx.params });
  })
  .onRequest(acp.methods.client.session.requestPermission, () => {
    throw new Error("the test's agent asks for no permission");
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(agentProcess.stdin), Readable.toWeb(agentProcess.stdout)),
);
const agent = connection.agent;

try {
  const init = await agent.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const list = await agent.request(acp.methods.agent.session.list, {});
  const sessionId = list.sessions[0]?.sessionId;
  if (!sessionId) throw new Error(`session/list named no session: ${JSON.stringify(list)}`);

  phase = "replay";
  await agent.request(acp.methods.agent.session.load, { sessionId, cwd, mcpServers: [] });
  phase = "turn";
  const answer = await agent.request(acp.methods.agent.session.prompt, {
    sessionId,
    prompt: [{ type: "text", text: promptText }],
  });

  const of = (p) => updates.filter((u) => u.phase === p).map((u) => u.params);
  process.stdout.write(
    JSON.stringify({
      initialize: { protocolVersion: init.protocolVersion, agentInfo: init.agentInfo ?? null },
      sessions: list.sessions.map((s) => s.sessionId),
      replay: of("replay"),
      stopReason: answer.stopReason,
      turn: of("turn"),
      beforeLoad: of("before-load").length,
    }) + "\n",
  );
} catch (e) {
  console.error(`attach_client: ${e?.stack ?? JSON.stringify(e)}`);
  process.exitCode = 1;
} finally {
  // An editor closing its agent: the attach process ends on EOF.
  connection.close();
  agentProcess.stdin.end();
  const { code, signal } = await exited;
  if (code !== 0) {
    console.error(`attach_client: agent-comms acp attach exited with ${code ?? signal}`);
    process.exitCode = 1;
  }
}
