// The web page of `agent-comms acp serve-web` in headless Chromium, driven
// by playwright-core (tests/web.rs runs this; .ci/run installs both).
//
// The runtime runs the fake ACP agent in FAKE_ACP_MODE=permission, with a
// policy whose rule for edits is "ask", and one turn already in its
// transcript (delivered before any page was open). Environment:
//   WEB_URL, WEB_READ_ONLY_URL  the URLs serve-web printed
//   EARLIER_PROMPT              the text of the turn already there
//   CHROMIUM                    the browser (default /usr/bin/chromium)
//   SCREENSHOT                  where to save a picture of the page (optional)
// Exits 0 when every check passed; says which failed otherwise.
"use strict";

const http = require("node:http");
const { chromium } = require("playwright-core");

const url = new URL(process.env.WEB_URL);
const readOnlyUrl = process.env.WEB_READ_ONLY_URL;
const earlier = process.env.EARLIER_PROMPT;
const WAIT = 20000;
let passed = 0;

function check(what, ok, detail) {
  if (!ok) throw new Error(`${what}${detail ? ": " + detail : ""}`);
  passed++;
  console.log(`ok - ${what}`);
}

// A page of another origin that knows the token and tries the WebSocket
// anyway: what a malicious site open in the same browser could do.
function foreignSite(target) {
  const page = `<!doctype html><script>
    const ws = new WebSocket(${JSON.stringify(target)});
    ws.onopen = () => { document.title = "opened"; };
    ws.onclose = () => { if (document.title !== "opened") document.title = "refused"; };
  </script>`;
  const server = http.createServer((_, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end(page);
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// What the fake agent never sends, with the WebSocket answered here
// instead of by the bridge: a thought, a tool call and its update, a plan,
// a permission answered by another client, and markup in agent text,
// which must stay text.
async function rendering(context) {
  const page = await context.newPage();
  await page.routeWebSocket(/\/acp/, (ws) => {
    const send = (msg) => ws.send(JSON.stringify(Object.assign({ jsonrpc: "2.0" }, msg)));
    const update = (u) => send({ method: "session/update", params: { sessionId: "s1", update: u } });
    ws.onMessage((raw) => {
      const msg = JSON.parse(raw);
      const reply = (result) => send({ id: msg.id, result });
      if (msg.method === "initialize") reply({ protocolVersion: 1, agentInfo: { name: "mock-agent", version: "9" } });
      if (msg.method === "session/list") reply({ sessions: [{ sessionId: "s1", cwd: "/" }] });
      if (msg.method !== "session/load") return;
      update({ sessionUpdate: "agent_thought_chunk", content: { type: "text", text: "thinking <i>hard</i>" } });
      update({ sessionUpdate: "tool_call", toolCallId: "t1", title: "Run <img src=x onerror=alert(1)>", kind: "execute", status: "pending" });
      update({
        sessionUpdate: "tool_call_update", toolCallId: "t1", status: "completed",
        content: [{ type: "content", content: { type: "text", text: "ok: 3 tests passed" } }],
      });
      update({ sessionUpdate: "plan", entries: [{ content: "read the code", status: "completed" }, { content: "fix it", status: "pending" }] });
      send({
        id: "ask-1", method: "session/request_permission",
        params: { sessionId: "s1", toolCall: { toolCallId: "t2", title: "Edit a.txt" }, options: [{ optionId: "allow", name: "Allow", kind: "allow_once" }] },
      });
      send({ method: "_agent_comms/permission_resolved", params: { sessionId: "s1", toolCallId: "t2", optionId: "allow", by: "client-7" } });
      reply(null);
    });
  });
  await page.goto(url.href);
  await page.locator("#status[data-state=live]").waitFor({ timeout: WAIT });
  check("a thought is shown as text", (await page.locator(".entry.thought").innerText()).includes("thinking <i>hard</i>"));
  const tool = page.locator(".entry.tool");
  check("a tool call and its update are one card", (await tool.count()) === 1);
  check("the tool call's status follows its updates", (await tool.locator(".status").innerText()) === "completed");
  check("the tool call's title is text", (await tool.innerText()).includes("Run <img src=x onerror=alert(1)>"));
  check("the tool call's output is shown", (await tool.innerText()).includes("ok: 3 tests passed"));
  check("no markup from the agent became elements", (await page.locator("main i, main img").count()) === 0);
  const steps = page.locator(".entry.plan li");
  check("the plan's steps are listed", (await steps.allInnerTexts()).join("|") === "read the code|fix it");
  check("a done step is marked", (await steps.first().getAttribute("data-status")) === "completed");
  const card = page.locator(".entry.permission");
  check("a permission answered elsewhere says by whom", (await card.locator(".status").innerText()) === "answered by client-7: allow");
  check("and its buttons are disabled", await card.locator("button").first().isDisabled());
  if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT.replace(/\.png$/, "-rendering.png") });
  await page.close();
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    // Root in CI: Chromium's sandbox needs an unprivileged user.
    args: ["--no-sandbox"],
  });
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 760 } });

    // Without the token, or with a wrong one, the page is refused.
    const probe = await context.newPage();
    const bare = await probe.goto(`${url.origin}/`);
    check("the page without a token is refused with 401", bare.status() === 401, String(bare.status()));
    check("the refusal says what to do", (await bare.text()).includes("token"));
    const wrong = await probe.goto(`${url.origin}/?token=${"0".repeat(32)}`);
    check("the page with a wrong token is refused with 401", wrong.status() === 401, String(wrong.status()));

    // Another site's page, with the right token, cannot open the WebSocket.
    const ws = `ws://${url.host}/acp${url.search}`;
    const site = await foreignSite(ws);
    await probe.goto(`http://localhost:${site.address().port}/`);
    await probe.waitForFunction(() => document.title !== "", null, { timeout: WAIT });
    check("another origin's WebSocket is refused", (await probe.title()) === "refused", await probe.title());
    site.close();

    // The controller's page: the transcript so far, then live.
    const page = await context.newPage();
    await page.goto(url.href);
    await page.locator("#status[data-state=live]").waitFor({ timeout: WAIT });
    check("the page goes live", true);
    const user = page.locator(".entry.user");
    await user.filter({ hasText: earlier }).first().waitFor({ timeout: WAIT });
    check("the earlier prompt is replayed", true);
    await page.locator(".entry.agent", { hasText: "working on: " + earlier.slice(0, 20) }).first().waitFor({ timeout: WAIT });
    check("the earlier reply is replayed", true);
    check("the controller may type", await page.locator("#prompt").isEnabled());
    // A second controller, to be asked the same permission.
    const other = await context.newPage();
    await other.goto(url.href);
    await other.locator("#status[data-state=live]").waitFor({ timeout: WAIT });

    // A prompt: the reply streams in, a permission is asked and answered.
    const text = "hello from the browser <b>not bold</b>";
    await page.locator("#prompt").fill(text);
    await page.locator("#send").click();
    const reply = page.locator(".entry.agent").last();
    await reply.filter({ hasText: "working on: hello from the browser" }).waitFor({ timeout: WAIT });
    const card = page.locator(".entry.permission").last();
    await card.waitFor({ timeout: WAIT });
    check("the reply's first chunk is shown while the turn runs", !(await reply.innerText()).includes("done"));
    check("the permission asks about the edit", (await card.innerText()).includes("Edit notes.txt"));
    const options = await card.locator("button").allInnerTexts();
    check("the permission's options are buttons", options.join("|") === "Always allow|Allow|Reject", options.join("|"));
    check("agent text is text, not HTML", (await page.locator(".entry.user b").count()) === 0);
    if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT.replace(/\.png$/, "-asking.png") });
    await card.getByRole("button", { name: "Allow", exact: true }).click();
    await reply.filter({ hasText: "permission: allow" }).waitFor({ timeout: WAIT });
    await reply.filter({ hasText: "done." }).waitFor({ timeout: WAIT });
    check("the answer reached the agent and the reply streamed on", true);
    await page.locator(".entry.notice", { hasText: "turn ended: end_turn" }).waitFor({ timeout: WAIT });
    check("the turn's end is shown", true);
    check("the answered permission's buttons are disabled", await card.locator("button").first().isDisabled());
    const otherCard = other.locator(".entry.permission").last();
    await otherCard.locator(".status", { hasText: "answered" }).waitFor({ timeout: WAIT });
    check("the other controller was asked too and is told it was answered", await otherCard.locator("button").first().isDisabled());
    await other.close();

    // An observer sees the same session, the browser's prompt included,
    // and cannot type.
    const watcher = await context.newPage();
    await watcher.goto(readOnlyUrl);
    await watcher.locator("#status[data-state=live]").waitFor({ timeout: WAIT });
    await watcher.locator(".entry.user", { hasText: "hello from the browser" }).last().waitFor({ timeout: WAIT });
    check("an observer sees the controller's prompt", true);
    check("an observer cannot type", await watcher.locator("#prompt").isDisabled());
    check("an observer's role is shown", (await watcher.locator("#role").innerText()).includes("read only"));

    if (process.env.SCREENSHOT) await page.screenshot({ path: process.env.SCREENSHOT });

    await rendering(context);
  } finally {
    await browser.close();
  }
}

main().then(
  () => console.log(`${passed} passed, 0 failed`),
  (e) => {
    console.log(`not ok - ${e.message}`);
    console.log(`${passed} passed, 1 failed`);
    process.exit(1);
  },
);
