// The console in a real browser (Debian's chromium, headless, driven by
// playwright-core) against the stack e2e/console_test.go starts: the demo
// agent on a real Temporal dev server behind an API server with keys.
// Every wait is bounded and on page or session state; any browser console
// error fails the case that caused it (unless the case expects that very
// refusal, e.g. a 401 for a wrong key).
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs/promises";
import path from "node:path";
import { chromium } from "playwright-core";

const BASE = process.env.EVE_CONSOLE_URL;
const KEYS = JSON.parse(process.env.EVE_CONSOLE_KEYS || "{}");
const JOBS = process.env.EVE_JOBS_DIR;
const SHOTS = process.env.EVE_SCREENSHOTS;
// Every bounded wait, ms: a bound for a loaded one-core machine (what the
// page waits for takes a second or two here), not a pace.
const WAIT = 60000;

let browser;
let errors = [];
let allowed = [];

before(async () => {
  assert.ok(BASE, "EVE_CONSOLE_URL: run through e2e/console_test.go (make test)");
  browser = await chromium.launch({ executablePath: process.env.EVE_CHROMIUM || "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"] });
});
after(async () => { await browser?.close(); });
afterEach(() => {
  const bad = errors.filter((e) => !allowed.some((re) => re.test(e)));
  errors = []; allowed = [];
  assert.deepEqual(bad, [], "browser console errors");
});

// page opens a fresh browser context (its own sessionStorage) at the console.
async function open(viewport = { width: 1100, height: 820 }) {
  const ctx = await browser.newContext({ viewport });
  ctx.setDefaultTimeout(WAIT); // every action and wait that names no bound of its own
  const page = await ctx.newPage();
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("pageerror", (e) => errors.push("pageerror: " + e.message));
  await page.goto(BASE + "/console/");
  return page;
}

async function signIn(page, who) {
  await page.getByLabel("API key").fill(KEYS[who]);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator('[data-page="inbox"][data-state="loaded"]').waitFor({ timeout: WAIT });
}

// shot writes <EVE_SCREENSHOTS>/<name>.png (build/console, or docs/console
// under `make screenshots`), after checking that every control
// on the page has an accessible name (a label, aria-label or title).
async function shot(page, name) {
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button")]
    .filter((el) => el.offsetParent !== null)
    .filter((el) => !(el.labels?.length || el.getAttribute("aria-label") || el.title || (el.tagName === "BUTTON" && el.textContent.trim())))
    .map((el) => el.outerHTML.slice(0, 120)));
  assert.deepEqual(unlabelled, [], `controls without a label on ${name}`);
  await page.screenshot({ path: path.join(SHOTS, name + ".png"), fullPage: true });
}

// ---- the API, as the app and the job would call it ----

async function call(who, method, p, body) {
  const res = await fetch(BASE + p, { method, headers: { Authorization: "Bearer " + KEYS[who], "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// until reads the session's stream until an event matches (bounded).
async function until(who, sid, pred, what) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), WAIT);
  const seen = [];
  try {
    let res;
    // 503: the session's worker did not answer the stream's first read in
    // time (a loaded machine); read again, within the same bound.
    while ((res = await fetch(`${BASE}/eve/v1/session/${sid}/stream?startIndex=0`, { headers: { Authorization: "Bearer " + KEYS[who] }, signal: ctl.signal })).status === 503) await res.text();
    if (res.status !== 200) assert.fail(`stream of ${sid}: ${res.status} ${await res.text()}`);
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        seen.push(ev.type);
        if (pred(ev)) return ev;
      }
    }
  } catch (e) {
    if (!ctl.signal.aborted) throw e;
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
  assert.fail(`session ${sid}: no ${what} within ${WAIT} ms; events: ${seen.join(" ")}`);
}
// eventually retries read until it returns something, for at most WAIT ms
// (for state outside the page and the stream, such as a spooled file).
async function eventually(read, what) {
  const end = Date.now() + WAIT;
  for (;;) {
    const v = await read();
    if (v) return v;
    if (Date.now() > end) assert.fail(`no ${what} within ${WAIT} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const reply = (who, sid) => until(who, sid, (e) => e.type === "message.completed", "reply").then((e) => e.data.message);

async function park(who, message) {
  const acc = await call(who, "POST", "/eve/v1/session", { message });
  await until(who, acc.sessionId, (e) => e.type === "input.requested", "input.requested");
  return acc.sessionId;
}
const card = (page, sid) => page.locator(`article.item[data-id^="${sid}:"]`);

// ---- cases ----

test("signing in with a wrong key is refused", async () => {
  allowed = [/401/]; // the refused GET /eve/v1/info, which the browser logs
  const page = await open();
  await page.getByLabel("API key").fill("not-a-key");
  await page.getByLabel("API key").press("Enter"); // the keyboard submits the form
  await page.getByText(/The key was refused \(401/).waitFor({ timeout: WAIT });
  assert.equal(await page.locator("#nav").isHidden(), true);
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  await shot(page, "signin");
  await page.context().close();
});

test("approve from the inbox", async () => {
  const sid = await park("alice", "refund ch_1 for 5");
  const opened = Date.now();
  const page = await open();
  await signIn(page, "alice");
  const c = card(page, sid);
  await c.waitFor({ timeout: WAIT });
  await c.getByText("Refund $5.00 for charge ch_1?").waitFor();
  assert.match(await c.locator(".fields").innerText(), /chargeId\s+ch_1/);
  // The countdown is checked against the deadline the API gave for this
  // request, read around the moment the page painted it (never wall time
  // since an unknown moment): a repaint happens between opened and read.
  const item = (await inboxItems("alice")).find((i) => i.id.startsWith(sid + ":"));
  assert.ok(item?.deadline, "the inbox item has a deadline");
  assert.equal(await c.locator("time.deadline").getAttribute("datetime"), item.deadline);
  assertCountdown(await c.locator("time.deadline").innerText(), item.deadline, opened, Date.now());
  await shot(page, "inbox");
  await c.getByRole("button", { name: "Approve" }).click();
  await c.waitFor({ state: "detached", timeout: WAIT });
  assert.match(await reply("alice", sid), /^Refund of ch_1: 5/);
  // No key in storage beyond this tab's session, and none in the URL.
  assert.ok(!page.url().includes(KEYS.alice));
  await page.context().close();
});

test("deny with a note, which the model reads", async () => {
  const sid = await park("alice", "refund ch_2 for 7");
  const page = await open();
  await signIn(page, "alice");
  const c = card(page, sid);
  await c.waitFor({ timeout: WAIT });
  await c.getByLabel("Note").fill("already refunded by phone");
  await c.getByRole("button", { name: "Deny" }).click();
  await c.waitFor({ state: "detached", timeout: WAIT });
  const resolved = await until("alice", sid, (e) => e.type === "input.resolved", "input.resolved");
  assert.equal(resolved.data.resolutions[0].outcome, "denied");
  assert.equal(resolved.data.resolutions[0].response?.text, "already refunded by phone", JSON.stringify(resolved.data));
  assert.match(await reply("alice", sid), /already refunded by phone/);
  await page.context().close();
});

test("answer a question by option and by free text", async () => {
  const byOption = await park("alice", "ask me something");
  const byText = await park("alice", "ask me again");
  const page = await open();
  await signIn(page, "alice");
  const a = card(page, byOption);
  await a.waitFor({ timeout: WAIT });
  // By keyboard: Tab to the option from the card's first option, Enter.
  await a.getByRole("button", { name: "red" }).focus();
  await page.keyboard.press("Tab");
  assert.equal(await page.evaluate(() => document.activeElement.textContent), "blue");
  await page.keyboard.press("Enter");
  await a.waitFor({ state: "detached", timeout: WAIT });
  assert.equal(await reply("alice", byOption), "You said blue.");
  const b = card(page, byText);
  await b.waitFor({ timeout: WAIT });
  await b.getByLabel("Or answer in your own words").fill("green");
  await b.getByLabel("Or answer in your own words").press("Enter");
  await b.waitFor({ state: "detached", timeout: WAIT });
  assert.equal(await reply("alice", byText), "You said green.");
  await page.context().close();
});

test("the inbox updates live as requests arrive and settle", async () => {
  const page = await open();
  await signIn(page, "alice");
  // Opened after the page loaded: the inbox events stream brings it.
  const sid = await park("alice", "refund ch_5 for 3");
  const c = card(page, sid);
  await c.waitFor({ timeout: WAIT });
  // Settled elsewhere (the API): it leaves the page by itself.
  const [item] = (await call("alice", "GET", `/eve/v1/inbox?session=${sid}`)).items;
  await call("alice", "POST", `/eve/v1/inbox/${encodeURIComponent(item.id)}`, { optionId: "approve" });
  await c.waitFor({ state: "detached", timeout: WAIT });
  await page.context().close();
});

test("watch a streamed reply arrive live, on a phone-sized screen too", async () => {
  const page = await open();
  await signIn(page, "alice");
  await page.getByRole("link", { name: "Sessions" }).click();
  await page.locator('[data-page="sessions"][data-state="loaded"]').waitFor({ timeout: WAIT });
  await page.getByLabel("First message").fill("compare Paris and Oslo");
  await page.getByRole("button", { name: "Start" }).click();
  await page.locator('[data-page="session"][data-state="loaded"]').waitFor({ timeout: WAIT });
  const answer = page.locator('.msg.assistant[data-completed="true"]');
  await answer.waitFor({ timeout: WAIT });
  assert.match(await answer.innerText(), /Paris: .*Oslo: /s);
  // Built from the streamed deltas (message.appended) before it completed.
  assert.ok(Number(await answer.getAttribute("data-deltas")) >= 1, "the reply was not streamed");
  assert.equal(await page.locator('.call[data-call]').count(), 2);
  assert.match(await page.locator(".call").first().innerText(), /get_weather[\s\S]*result \(completed\)/);
  const link = page.getByRole("link", { name: /workflow in Temporal UI/ }).first();
  assert.match(await link.getAttribute("href"), /^http:\/\/localhost:8233\/namespaces\/default\/workflows\/ses_[^/]+%2Fturn_/);
  await shot(page, "session");
  // Compact, from the page: the transcript records it.
  await page.getByRole("button", { name: "Compact" }).click();
  await page.locator(".turn-line", { hasText: "context compacted" }).waitFor({ timeout: WAIT });
  await page.getByRole("link", { name: "← all sessions" }).click();
  await page.locator('[data-page="sessions"][data-state="loaded"] table').waitFor({ timeout: WAIT });
  await page.context().close();

  const phone = await open({ width: 390, height: 844 });
  await signIn(phone, "alice");
  await park("alice", "refund ch_6 for 12");
  await phone.locator("article.item").first().waitFor({ timeout: WAIT });
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the inbox is ${overflow}px wider than a phone screen`);
  await shot(phone, "inbox-phone");
  await phone.context().close();
});

test("an approval answered inline in the session's transcript", async () => {
  const sid = await park("alice", "refund ch_7 for 2");
  const page = await open();
  await signIn(page, "alice");
  await page.goto(`${BASE}/console/#/session/${sid}`);
  const req = page.locator(".inline-request");
  await req.waitFor({ timeout: WAIT });
  await req.getByRole("button", { name: "Approve" }).click();
  await req.locator('[data-outcome="approved"]').waitFor({ timeout: WAIT });
  await page.locator('.msg.assistant[data-completed="true"]').waitFor({ timeout: WAIT });
  await page.context().close();
});

test("a workflow tool's call links to its child workflow in the Temporal UI", async () => {
  const acc = await call("alice", "POST", "/eve/v1/session", { message: "provision db" });
  const started = await until("alice", acc.sessionId, (e) => e.type === "task.started", "task.started");
  const page = await open();
  await signIn(page, "alice");
  await page.goto(`${BASE}/console/#/session/${acc.sessionId}`);
  const c = page.locator(`.call[data-call="${started.data.callId}"]`);
  const link = c.getByRole("link", { name: /child workflow in Temporal UI/ });
  await link.waitFor({ timeout: WAIT });
  // The child's workflow id is the task id, <session>/<turn>/tool/<call>.
  assert.equal(started.data.taskId, `${acc.sessionId}/${started.data.turnId}/tool/${started.data.callId}`);
  assert.equal(await link.getAttribute("href"), "http://localhost:8233/namespaces/default/workflows/" + encodeURIComponent(started.data.taskId));
  await c.getByText("result (completed)").waitFor({ timeout: WAIT });
  // One call, one link (a delegated job's task id is its action id: none).
  assert.equal(await page.locator(".child-link").count(), 1);
  await page.context().close();
});

test("a session that delegated shows its subagent in the tree and opens the child's transcript", async () => {
  const acc = await call("alice", "POST", "/eve/v1/session", { message: "ask researcher tidal power" });
  const started = await until("alice", acc.sessionId, (e) => e.type === "agent.started", "agent.started");
  const child = started.data.sessionId;
  assert.equal(started.data.name, "researcher");
  const page = await open();
  await signIn(page, "alice");
  await page.goto(`${BASE}/console/#/session/${acc.sessionId}`);
  const tree = page.getByRole("tree", { name: "Subagents" });
  const node = tree.locator(`li[role="treeitem"][data-session="${child}"]`);
  await node.waitFor({ timeout: WAIT });
  assert.equal(await tree.getByRole("treeitem").count(), 1);
  assert.equal(await node.getAttribute("data-agent"), "researcher");
  assert.equal(await node.getAttribute("data-depth"), "1");
  // The child's own stream says its turn ended: the node reads idle.
  await tree.locator(`li[data-session="${child}"][data-status="idle"]`).waitFor({ timeout: WAIT });
  // The root's reply carries the child's.
  await page.locator('.msg.assistant[data-completed="true"]', { hasText: "The researcher says: 3 sources on tidal power agree it is promising." }).waitFor({ timeout: WAIT });

  await node.getByRole("link", { name: "researcher" }).click();
  await page.waitForURL((u) => u.hash.startsWith(`#/session/${encodeURIComponent(child)}?`), { timeout: WAIT });
  const up = page.locator(".parent-link");
  await up.waitFor({ timeout: WAIT });
  assert.equal(await up.getByRole("link").textContent(), acc.sessionId);
  // The child's transcript: eve's subagent prompt with the caller's
  // message, and its reply from its own tool.
  await page.locator(".msg.user", { hasText: "tidal power" }).waitFor({ timeout: WAIT });
  await page.locator('.msg.assistant[data-completed="true"]', { hasText: "3 sources on tidal power agree it is promising" }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator(".msg.assistant", { hasText: "The researcher says" }).count(), 0, "the child's transcript is its own");
  await page.context().close();
});

test("a session's tasks, with progress, and cancel a working one", async () => {
  const acc = await call("alice", "POST", "/eve/v1/session", { message: "deploy api" });
  const started = await until("alice", acc.sessionId, (e) => e.type === "task.started", "task.started");
  const taskId = started.data.taskId;
  const page = await open();
  await signIn(page, "alice");
  await page.goto(`${BASE}/console/#/session/${acc.sessionId}`);
  const row = page.locator(`.tasks-panel tr[data-task="${taskId}"]`);
  await page.locator(`.tasks-panel tr[data-task="${taskId}"][data-status="working"]`).waitFor({ timeout: WAIT });
  // The tool's progress, from its heartbeat, shows while it works.
  await row.locator(".progress", { hasText: "deploying api" }).waitFor({ timeout: WAIT });
  await shot(page, "tasks");
  await row.getByRole("button", { name: `Cancel task ${taskId}` }).click();
  await page.locator(`.tasks-panel tr[data-task="${taskId}"][data-status="cancelled"]`).waitFor({ timeout: WAIT });
  await row.getByText("cancelled (task_cancel)").waitFor({ timeout: WAIT });
  const settled = await until("alice", acc.sessionId, (e) => e.type === "task.settled", "task.settled");
  assert.equal(settled.data.status, "cancelled");
  assert.equal(settled.data.cancel.reason, "task_cancel");
  // The model read that the task was stopped, and the turn ended.
  await until("alice", acc.sessionId, (e) => e.type === "turn.completed", "turn.completed");
  await page.locator(".msg.assistant", { hasText: "was stopped from outside this conversation" }).waitFor({ timeout: WAIT });
  // Bob may not cancel alice's tasks, nor list them.
  await assert.rejects(call("bob", "GET", `/eve/v1/session/${acc.sessionId}/tasks`), /403/);
  await page.context().close();
});

test("cancel a delegated job", async () => {
  const acc = await call("alice", "POST", "/eve/v1/session", { message: "run the sales report" });
  await until("alice", acc.sessionId, (e) => e.type === "task.started", "task.started");
  // The job file is spooled by the call's activity: wait for it (bounded).
  const file = await eventually(async () => (await fs.readdir(JOBS)).find((f) => f.endsWith(".json")), "the spooled job");
  const job = JSON.parse(await fs.readFile(path.join(JOBS, file), "utf8"));
  const beat = async () => {
    const res = await fetch(job.action.completion.url + "/heartbeat", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ details: { progress: 40 } }) });
    return res.json();
  };
  assert.equal((await beat()).cancelRequested, false);

  const opened = Date.now();
  const page = await open();
  await signIn(page, "alice");
  await page.getByRole("link", { name: "Delegated jobs" }).click();
  const row = page.locator(`tr[data-id="${job.action.id}"]`);
  await row.waitFor({ timeout: WAIT });
  assert.match(await row.innerText(), /run_report[\s\S]* left[\s\S]*ago[\s\S]*"progress":40/);
  const listed = (await call("alice", "GET", "/eve/v1/jobs?session=" + acc.sessionId)).items.find((j) => j.actionId === job.action.id);
  assert.ok(listed?.deadline, "the job has a deadline");
  assertCountdown(await row.locator("time.deadline").innerText(), listed.deadline, opened, Date.now());
  await shot(page, "jobs");
  await row.getByRole("button", { name: /^Cancel run_report job/ }).click();
  await row.waitFor({ state: "detached", timeout: WAIT });
  await until("alice", acc.sessionId, (e) => e.type === "turn.cancelled", "turn.cancelled");
  assert.equal((await beat()).cancelRequested, true);
  await page.context().close();
});

// assertCountdown checks a countdown's text ("59m 12s left", "1h 0m left",
// "40s left") against its deadline: the page painted it at some moment
// between from and to (ms), so it shows at most the seconds left at from
// and at least those left at to, rounded down as the console rounds.
function assertCountdown(text, deadline, from, to) {
  const m = /^(?:(\d+)d )?(?:(\d+)h )?(?:(\d+)m )?(?:(\d+)s )?left$/.exec(text);
  assert.ok(m, `a countdown: ${JSON.stringify(text)}`);
  const [d, h, min, s] = m.slice(1).map((x) => Number(x || 0));
  const shown = d * 86400 + h * 3600 + min * 60 + s;
  const at = new Date(deadline).getTime();
  const most = Math.floor((at - from) / 1000), least = Math.floor((at - to) / 1000);
  // The text drops the smaller units of a large countdown ("1h 0m" hides
  // the seconds, "1d 2h" the minutes): compare at the text's precision.
  const unit = d > 0 ? 3600 : h > 0 ? 60 : 1;
  assert.ok(shown <= most && shown + unit - 1 >= least,
    `countdown ${JSON.stringify(text)} (${shown}s) outside [${least}s, ${most}s] for deadline ${deadline}`);
}

// All of a principal's open requests via the API, every page.
async function inboxItems(who) {
  const items = [];
  for (let cursor = "", n = 0; n < 100; n++) {
    const p = await call(who, "GET", "/eve/v1/inbox" + (cursor ? "?cursor=" + cursor : ""));
    items.push(...p.items);
    if (!(cursor = p.nextCursor)) break;
  }
  return items;
}
const inboxAll = async (who) => (await inboxItems(who)).map((i) => i.id).sort();

test("the inbox pages with the API's cursor", async () => {
  const sids = [];
  for (const m of ["refund ch_11 for 1", "refund ch_12 for 2", "refund ch_13 for 3"]) sids.push(await park("alice", m));
  // Visibility lists requests eventually: wait until it lists these three
  // (beside any other open request of alice's), then page through that.
  const want = await eventually(async () => {
    const ids = await inboxAll("alice");
    return sids.every((sid) => ids.some((id) => id.startsWith(sid + ":"))) && ids;
  }, "the three open requests in the inbox");
  const page = await open();
  await signIn(page, "alice");
  await page.goto(`${BASE}/console/#/inbox?limit=2`);
  const seen = [];
  let pages = 0;
  for (;;) {
    await page.locator('[data-page="inbox"][data-state="loaded"]').waitFor({ timeout: WAIT });
    pages++;
    await page.getByText(`page ${pages}`, { exact: true }).waitFor({ timeout: WAIT });
    const ids = await page.locator("article.item").evaluateAll((els) => els.map((e) => e.dataset.id));
    assert.ok(ids.length <= 2, `page ${pages} holds ${ids.length} requests`);
    seen.push(...ids);
    const next = page.getByRole("button", { name: "Next page →" });
    if (await next.count() === 0 || await next.isDisabled()) break;
    await page.evaluate(() => { document.querySelector(".page").dataset.state = "loading"; });
    await next.click();
    assert.ok(pages < 20, "the pages do not end");
  }
  assert.ok(pages >= 2, `${pages} page(s)`);
  assert.deepEqual(seen.sort(), want);
  await page.context().close();
});

test("edit with a schema error, then a valid edit", async (t) => {
  // issue_credit asks above 1000 in the caller's tenant, and its approvals
  // are editable (demo.IssueCredit).
  const sid = await park("alice", "credit acme 1500");
  const page1 = await eventually(async () => { const p = await call("alice", "GET", `/eve/v1/inbox?session=${sid}`); return p.items.length && p; }, "the request in the inbox");
  const item = page1.items[0];
  if (!item.editable) {
    await call("alice", "POST", `/eve/v1/inbox/${encodeURIComponent(item.id)}`, { optionId: "cancel" });
    t.skip("issue_credit is not editable on this server (approve with edits: issue 26, item 2)");
    return;
  }
  const page = await open();
  await signIn(page, "alice");
  const c = card(page, sid);
  await c.waitFor({ timeout: WAIT });
  await c.getByRole("button", { name: "Edit input…" }).click();
  const amount = c.locator('[data-field="amount"] input');
  const amountError = c.locator('[data-field="amount"] .field-error');
  // Caught in the page: not a number.
  await amount.fill("abc");
  await c.getByRole("button", { name: "Approve with these changes" }).click();
  await amountError.getByText("amount must be a number").waitFor({ timeout: WAIT });
  assert.equal(await amount.getAttribute("aria-invalid"), "true");
  // Caught by the server's schema: 422 beside the field, still pending.
  allowed = [/422/];
  await amount.fill("-5");
  await c.getByRole("button", { name: "Approve with these changes" }).click();
  await c.getByText(/The server refused the edit \(422 invalid_input\): see amount above/).waitFor({ timeout: WAIT });
  assert.match(await amountError.innerText(), /amount/);
  assert.equal((await call("alice", "GET", `/eve/v1/inbox?session=${sid}`)).items.length, 1);
  await shot(page, "inbox-edit");
  // An edit the tenant policy denies is refused too, and stays pending.
  allowed = [/422/, /400/, /403/];
  await amount.fill("1200");
  await c.locator('[data-field="tenantId"] input').fill("globex");
  await c.getByRole("button", { name: "Approve with these changes" }).click();
  await c.getByText(/The server refused the edit \(\d+ rejected\)/).waitFor({ timeout: WAIT });
  await c.locator('[data-field="tenantId"] input').fill("acme");
  await c.getByRole("button", { name: "Approve with these changes" }).click();
  await c.waitFor({ state: "detached", timeout: WAIT });
  assert.match(await reply("alice", sid), /^Credit for acme: 1200/);
  // The transcript shows who edited the call, what ran and what the model asked.
  await page.goto(`${BASE}/console/#/session/${sid}`);
  const edited = page.locator('[data-edited="true"]');
  await edited.waitFor({ timeout: WAIT });
  assert.match(await edited.innerText(), /edited by alice: .*"amount":1200.* instead of .*"amount":1500/);
  await page.context().close();
});

test("the decision record, filtered and downloaded as JSON lines", async (t) => {
  const since = new Date(Date.now() - 3600e3).toISOString();
  const probe = await fetch(`${BASE}/eve/v1/decisions?since=${since}`, { headers: { Authorization: "Bearer " + KEYS.alice } });
  await probe.text();
  if (probe.status === 404) {
    t.skip("this server has no GET /eve/v1/decisions yet (the decision record: issue 26, item 4)");
    return;
  }
  const page = await open();
  await signIn(page, "alice");
  await page.getByRole("link", { name: "Decisions" }).click();
  await page.locator('[data-page="decisions"][data-state="loaded"] tbody tr').first().waitFor({ timeout: WAIT });
  await page.getByLabel("Outcome").selectOption("denied");
  await page.evaluate(() => { document.querySelector(".page").dataset.state = "loading"; });
  await page.getByRole("button", { name: "Show" }).click();
  await page.locator('[data-page="decisions"][data-state="loaded"]').waitFor({ timeout: WAIT });
  const outcomes = await page.locator("tbody tr td:nth-child(3) .badge").allInnerTexts();
  assert.ok(outcomes.length > 0 && outcomes.every((o) => o === "denied"), `outcomes ${outcomes}`);
  await shot(page, "decisions");
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: WAIT }), page.getByRole("button", { name: "Download JSON lines" }).click()]);
  const lines = (await fs.readFile(await download.path(), "utf8")).split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(lines.length, outcomes.length);
  assert.ok(lines.every((d) => d.outcome === "denied" && d.sessionId && d.requester?.id === "alice"));
  await page.context().close();
});

test("a second principal does not see the first one's requests", async () => {
  const sid = await park("alice", "refund ch_9 for 9");
  const alice = await open();
  await signIn(alice, "alice");
  await card(alice, sid).waitFor({ timeout: WAIT });
  await alice.getByRole("link", { name: "Sessions" }).click();
  await alice.locator(`[data-page="sessions"][data-state="loaded"] tr[data-id="${sid}"]`).waitFor({ timeout: WAIT });
  await shot(alice, "sessions");
  await alice.context().close();

  const bob = await open();
  await signIn(bob, "bob");
  // Bob's own request shows up; alice's never does.
  const mine = await park("bob", "refund ch_10 for 1");
  await card(bob, mine).waitFor({ timeout: WAIT });
  assert.equal(await card(bob, sid).count(), 0);
  assert.equal(await bob.locator(`article.item[data-id^="${sid}"]`).count(), 0);
  await bob.getByRole("link", { name: "Sessions" }).click();
  await bob.locator('[data-page="sessions"][data-state="loaded"]').waitFor({ timeout: WAIT });
  await bob.locator(`tr[data-id="${mine}"]`).waitFor({ timeout: WAIT });
  assert.equal(await bob.locator(`tr[data-id="${sid}"]`).count(), 0);
  // Alice's session itself is refused to him.
  allowed = [/403/];
  await bob.goto(`${BASE}/console/#/session/${sid}`);
  await bob.getByText(/may not stream session/).waitFor({ timeout: WAIT });
  await bob.context().close();
});
