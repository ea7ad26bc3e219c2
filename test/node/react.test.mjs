// eve's React hook (useEveAgent from npm eve@0.80.1's "eve/react") in a real
// browser: a page of React + the hook (react/app.jsx, bundled by rolldown
// into a temp dir), served from its own loopback origin and talking to
// `eve serve` directly, in Debian's chromium driven by playwright-core. The
// demo's `deploy web` starts a task: the model's text before its
// eve__task_wait is on screen while the turn waits, and the reply with the
// result follows in the same turn. `ask researcher fetch tidal power`: the
// researcher's approval, proxied to the root session, is shown from the
// hook's ledger, approved in the page with agent.respond, and the child's
// reply follows in the root turn. Every wait is bounded and on page state.
import "./polyfill.mjs";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "rolldown";
import { chromium } from "playwright-core";
import { cleanupBinaries, startStack } from "./stack.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.EVE_CHROMIUM || "/usr/bin/chromium";
// A bound for a loaded machine, not a pace: the turn takes about 4 s here.
const WAIT = 90_000;
const FIRST = "Started deploying web; I'll tell you when it is live.";
const FINAL = "web is live at https://web.demo.eve.dev";
const ASKING = "Asking the researcher about fetch tidal power.";
const REPLY = /^The researcher says: Fetched: the paper on tidal power \(12 pages\)\. To follow up, say: tell researcher-\w{6} <message>$/;

const haveChromium = existsSync(CHROMIUM);
if (!haveChromium && process.env.EVE_REQUIRE_CHROMIUM === "1") {
  throw new Error(`no chromium at ${CHROMIUM}: make chromium (or set EVE_CHROMIUM)`);
}

let stack, browser, site, outDir;

before(async () => {
  if (!haveChromium) return;
  outDir = mkdtempSync(path.join(tmpdir(), "eve-react-page-"));
  await build({
    input: path.join(here, "react", "app.jsx"),
    cwd: here,
    platform: "browser",
    logLevel: "warn",
    transform: { define: { "process.env.NODE_ENV": '"production"' } },
    output: { dir: outDir, format: "esm", entryFileNames: "app.js", codeSplitting: false },
  });
  const files = {
    "/": ["text/html", '<!doctype html><meta charset="utf-8"><title>useEveAgent</title><link rel="icon" href="data:,"><div id="root"></div><script type="module" src="/app.js"></script>'],
    "/app.js": ["text/javascript", readFileSync(path.join(outDir, "app.js"))],
  };
  site = createServer((req, res) => {
    const f = files[new URL(req.url, "http://x").pathname];
    if (!f) return res.writeHead(404).end();
    res.writeHead(200, { "Content-Type": f[0] }).end(f[1]);
  });
  await new Promise((resolve) => site.listen(0, "127.0.0.1", resolve));
  stack = await startStack({ leaseSeconds: 1 });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
}, { timeout: 300_000 });

after(async () => {
  await browser?.close();
  site?.close();
  await stack?.stop();
  cleanupBinaries();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

test("useEveAgent shows a turn's text before and after a task wait", { skip: !haveChromium && `no chromium at ${CHROMIUM}`, timeout: 300_000 }, async (t) => {
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${r.url()}`); });
  const origin = `http://127.0.0.1:${site.address().port}`;
  await page.goto(`${origin}/?host=${encodeURIComponent(stack.url)}`);
  await page.locator('main[data-status="ready"]').waitFor();

  await page.getByLabel("Message").fill("deploy web");
  const sent = Date.now();
  await page.getByRole("button", { name: "Send" }).click();
  const assistant = page.locator('li[data-role="assistant"] [data-part="text"]');
  await assistant.filter({ hasText: FIRST }).waitFor();
  const first = Date.now() - sent;
  await assistant.filter({ hasText: FINAL }).waitFor();
  t.diagnostic(`first text shown after ${first} ms, the reply after ${Date.now() - sent} ms`);
  await page.locator('main[data-status="ready"]').waitFor();

  // On screen at the end: the request, then both texts, in order.
  const shown = await page.locator('[data-part="text"]').allTextContents();
  assert.deepEqual(shown, ["deploy web", FIRST, FINAL]);

  // What the page showed along the way: the first text alone while the
  // turn was in flight and waiting on its task, then the reply.
  const renders = (await page.evaluate(() => window.renders)).map((s) => JSON.parse(s));
  const texts = (r) => r.texts.join("\n");
  const during = renders.findIndex((r) => texts(r).includes(FIRST) && !texts(r).includes(FINAL) && r.waited && r.status === "streaming");
  const done = renders.findIndex((r) => texts(r).includes(FINAL));
  assert.ok(during >= 0, `no render showed the first text during the wait:\n${renders.map((r) => JSON.stringify(r)).join("\n")}`);
  assert.ok(during < done, `renders out of order: ${during} ${done}`);
  assert.ok(renders.slice(done).every((r) => texts(r).includes(FIRST)), "the first text stayed on screen");

  // One turn: the two texts and turn.waiting{on:"tasks"} between them, one turnId.
  const events = await page.evaluate(() => window.events);
  const types = events.map((e) => e.type);
  assert.equal(types.filter((t) => t === "turn.started").length, 1, types.join(" "));
  assert.equal(types.filter((t) => t === "turn.completed").length, 1, types.join(" "));
  const turnId = events.find((e) => e.type === "turn.started").data.turnId;
  const completed = events.map((e, i) => [e, i]).filter(([e]) => e.type === "message.completed");
  assert.deepEqual(completed.map(([e]) => e.data.message), [FIRST, FINAL]);
  const wait = types.indexOf("turn.waiting");
  assert.ok(completed[0][1] < wait && wait < completed[1][1], types.join(" "));
  assert.equal(events[wait].data.on, "tasks");
  for (const e of events.filter((e) => e.data?.turnId !== undefined && e.type.startsWith("turn."))) assert.equal(e.data.turnId, turnId, e.type);
  assert.deepEqual(errors, [], "browser console errors");
  await page.close();
});

// People in the loop from a subagent (docs/subagents.md), in the browser:
// the demo's `ask researcher fetch <topic>` delegates to its researcher,
// whose fetch_paper needs approval. The request is proxied onto the root
// session's stream; the hook's ledger (openConversationInputs) shows it,
// the page answers with agent.respond, and the child's reply arrives in
// the root turn.
test("useEveAgent shows a subagent's proxied approval and the answer", { skip: !haveChromium && `no chromium at ${CHROMIUM}`, timeout: 300_000 }, async (t) => {
  const page = await browser.newPage();
  page.setDefaultTimeout(WAIT);
  const errors = [];
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  page.on("response", (r) => { if (r.status() >= 400) errors.push(`${r.status()} ${r.request().method()} ${r.url()}`); });
  const origin = `http://127.0.0.1:${site.address().port}`;
  await page.goto(`${origin}/?host=${encodeURIComponent(stack.url)}`);
  await page.locator('main[data-status="ready"]').waitFor();

  await page.getByLabel("Message").fill("ask researcher fetch tidal power");
  const sent = Date.now();
  await page.getByRole("button", { name: "Send" }).click();
  const request = page.locator('fieldset[data-kind="tool-approval"]');
  await request.waitFor();
  t.diagnostic(`approval shown after ${Date.now() - sent} ms`);
  assert.equal(await request.count(), 1);
  assert.equal(await request.locator('[data-part="prompt"]').textContent(), "Let the researcher fetch a paper on tidal power?");
  assert.equal(await request.locator('[data-part="tool"]').textContent(), "fetch_paper");
  assert.equal(await request.locator("legend").textContent(), "Approval required");
  // The turn is parked on the person, open, with no reply yet.
  assert.equal(await page.locator("main").getAttribute("data-status"), "streaming");
  // The root's text before it delegated is on screen, the reply is not.
  const assistant = page.locator('li[data-role="assistant"] [data-part="text"]');
  assert.deepEqual(await assistant.allTextContents(), [ASKING]);

  // The request is the child's (its id comes from the researcher's
  // stream), proxied onto the root's: the root stream's input.requested
  // carries the root's delegating callId.
  const requestId = await request.getAttribute("data-request");
  const events = await page.evaluate(() => window.events);
  const asked = events.filter((e) => e.type === "input.requested");
  assert.equal(asked.length, 1, events.map((e) => e.type).join(" "));
  assert.deepEqual(asked[0].data.requests.map((r) => r.requestId), [requestId], JSON.stringify(asked[0].data));
  const task = events.find((e) => e.type === "task.started");
  assert.ok(task, events.map((e) => e.type).join(" "));
  assert.equal(asked[0].data.callId, task.data.callId);
  // The open turn waits on the person, as eve's stream says it does.
  const waiting = events.slice(events.indexOf(asked[0])).filter((e) => e.type === "turn.waiting");
  assert.deepEqual(waiting.map((e) => e.data.on), ["input"], events.map((e) => e.type).join(" "));

  const answered = Date.now();
  await request.locator('button[data-option="approve"]').click();
  const reply = assistant.filter({ hasText: REPLY });
  await reply.waitFor();
  t.diagnostic(`reply shown ${Date.now() - answered} ms after the approval`);
  await page.locator('main[data-status="ready"]').waitFor();
  await page.locator("fieldset[data-request]").waitFor({ state: "detached" });

  // On screen at the end: the request and the reply, no open request.
  const shown = await page.locator('[data-part="text"]').allTextContents();
  assert.equal(shown.length, 3, shown.join("\n"));
  assert.deepEqual(shown.slice(0, 2), ["ask researcher fetch tidal power", ASKING]);
  assert.match(shown[2], REPLY);

  // The stream settled the request once, approved, within one root turn.
  const all = await page.evaluate(() => window.events);
  const types = all.map((e) => e.type);
  const settled = all.filter((e) => e.type === "approval.settled");
  assert.deepEqual(settled.map((e) => [e.data.requestId, e.data.outcome]), [[requestId, "approved"]], types.join(" "));
  const resolved = all.filter((e) => e.type === "input.resolved");
  assert.deepEqual(resolved.map((e) => e.data.resolutions.map((r) => [r.requestId, r.outcome])), [[[requestId, "approved"]]], types.join(" "));
  assert.equal(types.filter((t) => t === "turn.started").length, 1, types.join(" "));
  assert.equal(types.filter((t) => t === "turn.completed").length, 1, types.join(" "));
  assert.deepEqual(errors, [], "browser console errors");
  await page.close();
});
