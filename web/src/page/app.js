// A plain ACP client over this server's WebSocket (/acp): initialize,
// session/list, session/load (the transcript so far is replayed as
// session/update notifications), then live. Agent text only ever becomes
// text nodes (textContent), never HTML.
"use strict";

const role = document.body.dataset.role;
const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const transcript = $("transcript");
const promptBox = $("prompt");
const sendButton = $("send");
const cancelButton = $("cancel");

let ws;
let nextId = 1;
const waiting = new Map(); // our request id -> {resolve, reject}
let sessionId = null;
let last = null; // the entry a streamed chunk is appended to: {kind, body}
const tools = new Map(); // toolCallId -> tool card
const asks = new Map(); // the bridge's request id (as JSON) -> permission card
let running = false;

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Follows the end of the transcript unless the reader scrolled up.
function add(node) {
  const atEnd = transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 40;
  transcript.append(node);
  if (atEnd) transcript.scrollTop = transcript.scrollHeight;
  return node;
}

function notice(text, error) {
  last = null;
  add(el("div", "entry notice" + (error ? " error" : ""), text));
}

function setStatus(state, text) {
  const s = $("status");
  s.dataset.state = state;
  s.textContent = text;
}

function send(message) {
  ws.send(JSON.stringify(Object.assign({ jsonrpc: "2.0" }, message)));
}

function request(method, params) {
  const id = nextId++;
  send({ id, method, params });
  return new Promise((resolve, reject) => waiting.set(id, { resolve, reject }));
}

function text(content) {
  if (!content) return "";
  if (content.type === "text") return content.text || "";
  if (content.type === "resource_link") return `[${content.name || content.uri}]`;
  if (content.type === "resource") return `[${(content.resource && content.resource.uri) || "resource"}]`;
  return `[${content.type}]`;
}

// Consecutive chunks of one kind (user, agent, thought) read as one message.
function chunk(kind, label, content) {
  if (!last || last.kind !== kind) {
    const entry = el("div", "entry " + kind);
    entry.append(el("span", "who", label));
    const body = el("span", "body");
    entry.append(body);
    add(entry);
    last = { kind, body };
  }
  last.body.append(document.createTextNode(text(content)));
  if (transcript.scrollHeight - transcript.scrollTop - transcript.clientHeight < 120) {
    transcript.scrollTop = transcript.scrollHeight;
  }
}

function toolText(content) {
  return (content || [])
    .map((c) => {
      if (c.type === "content") return text(c.content);
      if (c.type === "diff") return `diff ${c.path}`;
      if (c.type === "terminal") return `terminal ${c.terminalId}`;
      return "";
    })
    .filter(Boolean)
    .join("\n");
}

function tool(update) {
  let card = tools.get(update.toolCallId);
  if (!card) {
    last = null;
    const entry = el("div", "entry tool");
    entry.dataset.toolCallId = update.toolCallId;
    card = {
      title: el("span", "title"),
      kind: el("span", "muted"),
      status: el("span", "status"),
      output: el("div", "output"),
    };
    const head = el("div");
    head.append(card.status, " ", card.title, " ", card.kind);
    entry.append(el("span", "who", "tool call"), head, card.output);
    add(entry);
    tools.set(update.toolCallId, card);
  }
  if (update.title) card.title.textContent = update.title;
  if (update.kind) card.kind.textContent = `(${update.kind})`;
  if (update.status) {
    card.status.textContent = update.status.replace("_", " ");
    card.status.dataset.status = update.status;
  }
  const out = toolText(update.content);
  if (out) card.output.textContent = out;
}

function plan(entries) {
  last = null;
  const entry = el("div", "entry plan");
  entry.append(el("span", "who", "plan"));
  const list = el("ol");
  for (const item of entries || []) {
    const li = el("li", null, item.content);
    li.dataset.status = item.status || "";
    list.append(li);
  }
  entry.append(list);
  add(entry);
}

function update(u) {
  switch (u.sessionUpdate) {
    case "user_message_chunk": return chunk("user", "prompt", u.content);
    case "agent_message_chunk": return chunk("agent", "agent", u.content);
    case "agent_thought_chunk": return chunk("thought", "thinking", u.content);
    case "tool_call":
    case "tool_call_update": return tool(u);
    case "plan": return plan(u.entries);
    default: return; // modes, commands, usage: not shown
  }
}

// session/request_permission from the bridge: a card with the options as
// buttons; the first controller to answer wins.
function permission(id, params) {
  last = null;
  const key = JSON.stringify(id);
  const entry = el("div", "entry permission");
  const call = params.toolCall || {};
  entry.append(el("span", "who", "permission asked"));
  entry.append(el("div", "title", call.title || call.toolCallId || "a tool call"));
  const status = el("div", "status", "waiting for an answer");
  status.dataset.status = "pending";
  const options = el("div", "options");
  for (const option of params.options || []) {
    const button = el("button", null, option.name || option.optionId);
    button.type = "button";
    button.dataset.optionId = option.optionId;
    button.disabled = role !== "controller";
    button.addEventListener("click", () => {
      send({ id, result: { outcome: { outcome: "selected", optionId: option.optionId } } });
      resolved(key, `answered: ${option.name || option.optionId}`);
    });
    options.append(button);
  }
  entry.append(options, status);
  add(entry);
  asks.set(key, { entry, status, options, toolCallId: call.toolCallId });
}

function resolved(key, why) {
  const card = asks.get(key);
  if (!card) return;
  asks.delete(key);
  card.status.textContent = why;
  card.status.dataset.status = "selected";
  for (const b of card.options.querySelectorAll("button")) b.disabled = true;
}

function fromBridge(msg) {
  if (msg.id !== undefined && msg.method === undefined) {
    const w = waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(msg.error);
    else w.resolve(msg.result);
    return;
  }
  switch (msg.method) {
    case "session/update":
      return update(msg.params.update || {});
    case "session/request_permission":
      return permission(msg.id, msg.params || {});
    case "$/cancel_request":
      return resolved(JSON.stringify(msg.params.requestId), "answered elsewhere");
    case "_agent_comms/permission_resolved": {
      const p = msg.params || {};
      for (const [key, card] of asks) {
        if (card.toolCallId === p.toolCallId) resolved(key, `answered by ${p.by || "another client"}: ${p.optionId}`);
      }
      return;
    }
    default:
      if (msg.id !== undefined) {
        send({ id: msg.id, error: { code: -32601, message: `the web page does not serve ${msg.method}` } });
      }
  }
}

function setRunning(on) {
  running = on;
  const controller = role === "controller" && sessionId !== null;
  sendButton.disabled = !controller || on;
  promptBox.disabled = !controller;
  cancelButton.disabled = !controller;
}

async function prompt(textValue) {
  setRunning(true);
  // The bridge shows a prompt to every client but its sender.
  last = null;
  chunk("user", "your prompt", { type: "text", text: textValue });
  try {
    const result = await request("session/prompt", {
      sessionId,
      prompt: [{ type: "text", text: textValue }],
    });
    notice(`turn ended: ${result.stopReason}`);
  } catch (e) {
    notice(`prompt refused: ${e.message} (${e.code})`, true);
  } finally {
    setRunning(false);
  }
}

async function start() {
  const init = await request("initialize", {
    protocolVersion: 1,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "agent-comms web page", version: "1" },
  });
  const agent = init.agentInfo || {};
  $("agent").textContent = [agent.title || agent.name, agent.version].filter(Boolean).join(" ");
  const list = await request("session/list", {});
  const session = (list.sessions || [])[0];
  if (!session) throw { message: "the runtime has no session" };
  sessionId = session.sessionId;
  $("session").textContent = `session ${sessionId}`;
  await request("session/load", { sessionId, cwd: session.cwd || "/", mcpServers: [] });
  setStatus("live", "live");
  setRunning(running);
}

function connect() {
  $("role").textContent = role === "controller" ? "controller" : "observer (read only)";
  if (role !== "controller") $("note").textContent = "Read-only: you see the session; prompts, cancels and permission answers are for controllers.";
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  ws = new WebSocket(`${scheme}//${location.host}/acp?token=${encodeURIComponent(token)}`);
  ws.addEventListener("open", () => {
    start().catch((e) => notice(`cannot join the session: ${e.message || e}`, true));
  });
  ws.addEventListener("message", (event) => {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return notice("the bridge sent something that is not JSON", true);
    }
    fromBridge(msg);
  });
  ws.addEventListener("close", (event) => {
    setStatus("closed", "disconnected");
    sessionId = null;
    setRunning(false);
    notice(`connection closed${event.reason ? ": " + event.reason : ""}; reload the page to join again`, true);
  });
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const value = promptBox.value.trim();
  if (!value || running || sessionId === null) return;
  promptBox.value = "";
  prompt(value);
});
promptBox.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
cancelButton.addEventListener("click", () => {
  if (sessionId !== null) send({ method: "session/cancel", params: { sessionId } });
});

connect();
