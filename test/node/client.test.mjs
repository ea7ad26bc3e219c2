// eve's own client (ClientSession from "eve/client", npm eve@0.80.1) against
// `eve serve` + eve's worker + a Temporal dev server.
import "./polyfill.mjs";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, ClientError } from "eve/client";
import { bounded, cleanupBinaries, startStack, waitUntil, within } from "./stack.mjs";

/** @type {import("./stack.mjs").Stack} */
let stack;
/** @type {Client} */
let client;

before(async () => {
  stack = await startStack({ leaseSeconds: 1 });
  client = new Client({ host: stack.url });
}, { timeout: 300_000 });

after(async () => {
  await stack?.stop();
  cleanupBinaries();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const types = (events) => events.map((e) => e.type);

function assertUniqueIds(events) {
  const ids = events.map((e) => e.meta.id);
  assert.equal(new Set(ids).size, ids.length, `duplicate event ids: ${ids.join(" ")}`);
  for (const e of events) assert.match(e.meta.id, /^evt_[0-9A-Z]{26}$/);
}

// The suite's bound is for a loaded one-core machine (it takes well under
// a minute here).
describe("eve client against eve serve", { timeout: 600_000 }, () => {
  test("health and info pass the client's strict schemas", async () => {
    const health = await client.health();
    assert.equal(health.ok, true);
    assert.equal(health.status, "ready");
    const info = await client.info();
    assert.equal(info.version, 5);
    assert.equal(info.kind, "eve-agent-info");
    assert.ok(info.tools.static.some((t) => t.name === "get_weather"));
    // The demo's subagents, in eve's shape (the strict schema checks total):
    // the researcher the model delegates to, and the code-only reviewer
    // publish_notes asks (no tools of its own).
    assert.deepEqual(info.subagents.local.map((s) => [s.name, s.nodeId, s.parentNodeId, s.summary.tools]),
      [["researcher", "subagents/researcher", "__root__", 2], ["reviewer", "subagents/reviewer", "__root__", 0]]);
    assert.equal(info.subagents.total, 2);
  });

  test("a plain text turn", async () => {
    const { response, session } = await client.sessions.create({ message: "hello" });
    const result = await response.result();
    assert.match(result.message ?? "", /eve demo agent/);
    assert.equal(result.status, "waiting");
    assert.deepEqual(types(result.events), [
      "session.started", "turn.started", "message.received", "step.started",
      "message.appended", "message.completed", "step.completed", "turn.completed", "session.waiting",
    ]);
    assertUniqueIds(result.events);
    // A second turn through send(): the response filters on its delivery id.
    const second = await (await session.send("hello again")).result();
    assert.equal(second.events[0].type, "turn.started");
    assert.equal(second.events.at(-1).type, "session.waiting");
    const dlv = second.events[0].meta.deliveryIds?.[0];
    assert.match(dlv ?? "", /^dlv_/);
    for (const e of second.events.slice(0, -1)) assert.deepEqual(e.meta.deliveryIds, [dlv]);
    assert.match(second.message ?? "", /eve demo agent/);
  });

  test("a tool call with its result", async () => {
    const { session } = await client.sessions.create();
    const result = await (await session.send("what's the weather in Paris")).result();
    const requested = result.events.find((e) => e.type === "actions.requested");
    const done = result.events.find((e) => e.type === "action.result");
    assert.equal(requested.data.actions[0].toolName, "get_weather");
    assert.deepEqual(requested.data.actions[0].input, { city: "Paris" });
    assert.equal(done.data.status, "completed");
    assert.equal(done.data.result.callId, requested.data.actions[0].callId);
    assert.equal(done.data.result.output.city, "Paris");
    assert.match(result.message ?? "", /in Paris\.$/);
  });

  test("snapshot replays the stream with identical ids", async () => {
    const { response, session } = await client.sessions.create({ message: "compare Paris and Oslo" });
    const live = await response.result();
    const snap1 = await session.snapshot();
    const snap2 = await client.sessions.attach(session.state.sessionId).snapshot();
    assert.deepEqual(snap1.events.map((e) => e.meta.id), live.events.map((e) => e.meta.id));
    assert.deepEqual(snap2.events, snap1.events);
    assert.equal(snap1.session.streamIndex, live.events.length);
  });

  test("the stream reconnects after each lease and loses nothing", async () => {
    const { response, session } = await client.sessions.create({ message: "what's the weather in Rome" });
    await response.result();
    const id = session.state.sessionId;
    const follower = client.sessions.attach(id);
    const ac = new AbortController();
    const seen = [];
    let waits = 0;
    const following = (async () => {
      for await (const e of follower.stream({ startIndex: 0, signal: ac.signal })) {
        seen.push(e);
        if (e.type === "session.waiting" && ++waits === 3) break;
      }
    })();
    await sleep(2500); // the 1 s lease ends twice while the session idles
    await (await session.send("what's the weather in Oslo")).result();
    await sleep(1500);
    await (await session.send("what's the weather in Lima")).result();
    let timer;
    const stuck = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`follower stuck after ${seen.length} events`)), 60_000); });
    await Promise.race([following, stuck]).finally(() => clearTimeout(timer));
    ac.abort();
    const snap = await session.snapshot();
    assert.deepEqual(seen.map((e) => e.meta.id), snap.events.map((e) => e.meta.id));
    assertUniqueIds(seen);
  });

  test("a response that waits across leases", async () => {
    // The turn parks on an approval; the answer comes after two leases ended.
    const { session } = await client.sessions.create();
    const parked = await (await session.send("refund ch_77 for 7")).result();
    assert.equal(parked.inputRequests.length, 1);
    assert.equal(parked.events.at(-1).type, "turn.waiting");
    const [req] = parked.inputRequests;
    assert.equal(req.kind, "tool-approval");
    assert.equal(req.action.toolName, "refund_charge");
    await sleep(2500);
    const done = await (await session.respond([{ requestId: req.requestId, optionId: "approve" }])).result();
    assert.deepEqual(types(done.events).slice(0, 2), ["approval.settled", "input.resolved"]);
    assert.equal(done.events[0].data.outcome, "approved");
    assert.equal(done.message, "Refund of ch_77: 7");
    assert.equal(done.inputRequests.length, 0);
  });

  test("a client-tool question", async () => {
    const { response, session } = await client.sessions.create({ message: "choose a plan" });
    const parked = await response.result();
    const [q] = parked.inputRequests;
    assert.equal(q.kind, "question");
    assert.deepEqual(q.options.map((o) => o.id), ["basic", "pro"]);
    const done = await (await session.respond([{ requestId: q.requestId, optionId: "pro" }])).result();
    assert.equal(done.message, "You picked pro.");
  });

  test("cancel a parked turn, then clear, compact and reset", async () => {
    const { session } = await client.sessions.create();
    const parked = await (await session.send("refund ch_5 5")).result();
    assert.equal(parked.inputRequests.length, 1);
    const res = await session.cancel();
    assert.deepEqual(res, { sessionId: session.state.sessionId, status: "accepted" });
    let last;
    const snap = await waitUntil(async () => {
      last = await session.snapshot();
      return last.events.at(-1)?.type === "session.waiting" && last;
    }, { everyMs: 50 });
    assert.ok(snap, `the cancelled turn never ended: ${types(last.events).join(" ")}`);
    assert.deepEqual(types(snap.events).slice(-3), ["action.result", "turn.cancelled", "session.waiting"]);
    assert.deepEqual(await session.cancel(), { status: "no_active_turn" });
    assert.deepEqual(await session.clear(), { sessionId: session.state.sessionId, status: "accepted" });
    assert.deepEqual(await session.compact(), { sessionId: session.state.sessionId, status: "accepted" });
    assert.deepEqual(await session.reset({ reason: "done" }), { previousSessionId: session.state.sessionId, status: "reset" });
  });

  test("a terminated session: its snapshot still reads what it recorded, a send is 410", async () => {
    const { response, session } = await client.sessions.create({ message: "what's the weather in Oslo" });
    await response.result();
    const before = await session.snapshot();
    stack.terminate(session.state.sessionId, "operator: the test ends it");
    const after = await session.snapshot();
    assert.deepEqual(after.events.map((e) => e.meta.id), before.events.map((e) => e.meta.id));
    assert.deepEqual(types(after.events).slice(-2), ["turn.completed", "session.waiting"]);
    await assert.rejects(session.send("are you there?"), (err) => err instanceof ClientError && err.status === 410 && err.code === "session_ended" && /operator: the test ends it/.test(err.message));
  });

  test("errors carry the protocol's code", async () => {
    const missing = client.sessions.attach("ses_does_not_exist");
    await assert.rejects(missing.send("hi"), (err) => err instanceof ClientError && err.status === 404 && err.code === "session_not_found");
    const { session } = await client.sessions.create();
    await assert.rejects(
      session.respond([{ requestId: "apr_unknown", optionId: "approve" }]),
      (err) => err instanceof ClientError && err.status === 400 && err.code === "unknown_request",
    );
  });

  test("bearer keys", async () => {
    const keyed = await stack.serve({ key: "sk_node_test_key" });
    try {
      const anon = new Client({ host: keyed.url });
      await assert.rejects(anon.sessions.create({ message: "hi" }), (err) => err instanceof ClientError && err.status === 401 && err.code === "unauthorized");
      const authed = new Client({ host: keyed.url, auth: { bearer: "sk_node_test_key" } });
      const { response } = await authed.sessions.create({ message: "what's the weather in Oslo" });
      const result = await response.result();
      assert.match(result.message ?? "", /in Oslo\.$/);
      assert.equal((await authed.health()).ok, true);
    } finally {
      await keyed.stop();
    }
  });
});

describe("messages in the order the session accepted them", { timeout: 300_000 }, () => {
  // A session reads its messages in the order it accepted them, and each
  // send's result() is the reply of the turn that read its message
  // (docs/http-api.md, "Order, and the turn an answer names"). The sends below are each answered
  // (202) before the next is made; no result() is awaited before the last.
  const weather = (city, pad = "") => `${pad}what's the weather in ${city}`;
  const cities = ["Paris", "Oslo", "Rome", "Lima", "Tokyo", "Quito", "Accra", "Hanoi", "Perth"];

  /** message.received in stream order, and each turn's last final reply. */
  function reads(events) {
    const received = events.filter((e) => e.type === "message.received");
    const replies = new Map();
    for (const e of events) {
      if (e.type === "message.completed" && e.data.finishReason !== "tool-calls") replies.set(e.data.turnId, e.data.message);
    }
    return { received, replies };
  }

  // A session and its events as the tests read them, each within a bound:
  // a server that stops answering fails the test, not its describe.
  const created = () => within(client.sessions.create(), 60_000, "a session's create");
  const eventsOf = async (session) => (await within(session.snapshot(), 60_000, `the snapshot of ${session.state.sessionId}`)).events;

  /** The session's stream, an event a line (its type, turn and delivery ids): what a hang left. */
  async function streamOf(session) {
    const { events } = await session.snapshot();
    return events.map((e, i) => `  ${i} ${e.type} ${e.data?.turnId ?? ""} ${(e.meta.deliveryIds ?? []).join(",")}`).join("\n");
  }

  // Each wait is bounded, and past its bound fails with the session's
  // stream, so a hang says which send or result() stuck, and where.
  async function sendAll(session, texts, options) {
    const responses = [];
    const id = session.state.sessionId;
    const part = async (what, read) => {
      try {
        return await within(read(), 20_000, what);
      } catch (err) {
        return `(${what} could not be read: ${err.message})`;
      }
    };
    const state = async () =>
      `session ${id}, ${responses.length} of ${texts.length} sends answered; its stream:\n${await part("its stream", () => streamOf(session))}\nits workflows:\n${await part("its workflows", () => stack.workflows(id))}`;
    for (const text of texts) responses.push(await bounded(session.send(text, options), 60_000, `send ${responses.length + 1}`, state));
    return await bounded(Promise.all(responses.map((r) => r.result())), 120_000, "the sends' result()", state);
  }

  test("five queued sends: each result() is its own message's reply, in order", async () => {
    const { session } = await created();
    const texts = cities.slice(0, 5).map((c) => weather(c));
    const results = await sendAll(session, texts, { turnPolicy: "queue" });
    results.forEach((r, i) => assert.match(r.message ?? "", new RegExp(`in ${cities[i]}\\.$`), `result ${i + 1}`));
    const { received } = reads(await eventsOf(session));
    assert.deepEqual(received.map((e) => e.data.message), texts);
    assert.deepEqual(received.map((e) => e.data.turnId), ["turn_0", "turn_1", "turn_2", "turn_3", "turn_4"]);
  });

  test("five steering sends: read in the order accepted, each result() the reply of the turn that read it", async () => {
    const { session } = await created();
    const texts = cities.slice(0, 5).map((c) => weather(c));
    const results = await sendAll(session, texts);
    const { received, replies } = reads(await eventsOf(session));
    assert.deepEqual(received.map((e) => e.data.message), texts);
    received.forEach((e, i) => assert.equal(results[i].message, replies.get(e.data.turnId), `message ${i + 1}, read by ${e.data.turnId}`));
  });

  test("nine steering sends, 200 KB ones among them, read in order in 20 of 20 runs", async () => {
    const pad = "x".repeat(200 * 1024) + " ";
    for (let run = 0; run < 20; run++) {
      const { session } = await created();
      const texts = cities.map((c, i) => weather(c, (i + run) % 3 === 1 ? pad : ""));
      const results = await sendAll(session, texts);
      const { received, replies } = reads(await eventsOf(session));
      assert.deepEqual(received.map((e) => e.data.message.slice(-40)), texts.map((t) => t.slice(-40)), `run ${run + 1}`);
      received.forEach((e, i) => assert.equal(results[i].message, replies.get(e.data.turnId), `run ${run + 1}, message ${i + 1}, read by ${e.data.turnId}`));
    }
  });
});
