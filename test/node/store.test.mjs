// The store behind useEveAgent (EveAgentStore from "eve/client"), without
// React, against `eve serve` + eve's worker + a Temporal dev server.
import "./polyfill.mjs";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, EveAgentStore, conversationReducer, openConversationInputs, toolCallState } from "eve/client";
import { cleanupBinaries, startStack, waitUntil } from "./stack.mjs";

/** @type {import("./stack.mjs").Stack} */
let stack;

before(async () => {
  stack = await startStack({ leaseSeconds: 1 });
}, { timeout: 300_000 });

after(async () => {
  await stack?.stop();
  cleanupBinaries();
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const types = (events) => events.map((e) => e.type);

function newStore(extra = {}) {
  const errors = [];
  const store = new EveAgentStore({ host: stack.url, reducer: conversationReducer, ...extra });
  store.setCallbacks({ onError: (e) => errors.push(e) });
  return { store, errors };
}

function assertUniqueIds(events) {
  const ids = events.map((e) => e.meta.id);
  assert.equal(new Set(ids).size, ids.length, `duplicate event ids in the store: ${ids.join(" ")}`);
}

function lastAssistantText(events) {
  const done = events.filter((e) => e.type === "message.completed");
  return done.at(-1)?.data.message;
}

// The suite's bound is for a loaded one-core machine (it takes well under
// a minute here).
describe("useEveAgent's store against eve serve", { timeout: 600_000 }, () => {
  test("a plain text turn, a tool call, and a reconnect after the lease", async () => {
    const { store, errors } = newStore();
    await store.send({ message: "hello" });
    let snap = store.snapshot;
    assert.equal(snap.status, "ready", String(snap.error));
    assert.match(lastAssistantText(snap.events) ?? "", /eve demo agent/);
    assert.ok(snap.session?.sessionId.startsWith("ses_"));

    await store.send({ message: "what's the weather in Paris" });
    snap = store.snapshot;
    assert.equal(snap.status, "ready", String(snap.error));
    const result = snap.events.find((e) => e.type === "action.result");
    assert.equal(result?.data.result.output.city, "Paris");
    assert.match(lastAssistantText(snap.events) ?? "", /in Paris\.$/);

    // The store keeps its stream open while idle (followIdle); leases end
    // and it reconnects from its cursor without duplicating anything.
    await sleep(2500);
    await store.send({ message: "what's the weather in Oslo" });
    snap = store.snapshot;
    assert.equal(snap.status, "ready", String(snap.error));
    assert.match(lastAssistantText(snap.events) ?? "", /in Oslo\.$/);
    assertUniqueIds(snap.events);
    assert.equal(snap.events.filter((e) => e.type === "session.waiting").length, 3);
    assert.deepEqual(errors, []);

    // A fresh store resumes the session and replays the same events.
    const resumed = newStore({ initialSession: { sessionId: snap.session.sessionId, streamIndex: 0 } });
    await resumed.store.resume();
    const again = resumed.store.snapshot;
    assert.equal(again.status, "ready", String(again.error));
    assert.deepEqual(again.events.map((e) => e.meta.id), snap.events.map((e) => e.meta.id));
    resumed.store.reset();
    store.reset();
  });

  test("an approval answered through the store", async () => {
    const { store, errors } = newStore();
    await store.send({ message: "refund ch_8 for 8" });
    let snap = store.snapshot;
    const open = openConversationInputs(snap.conversation);
    assert.equal(open.length, 1, `open inputs: ${JSON.stringify(open)}`);
    const req = open[0].request ?? open[0];
    assert.equal(req.kind, "tool-approval");
    await store.send({ inputResponses: [{ requestId: req.requestId, optionId: "approve" }] });
    snap = store.snapshot;
    assert.equal(snap.status, "ready", String(snap.error));
    assert.equal(lastAssistantText(snap.events), "Refund of ch_8: 8");
    assert.equal(openConversationInputs(snap.conversation).length, 0);
    assertUniqueIds(snap.events);
    assert.deepEqual(errors, []);
    store.reset();
  });

  test("a four-eyes approval: the refusal's reason reaches the store, and the request stays answerable", async () => {
    // transfer_funds' response policy (demo.FourEyes) refuses the
    // requester's own approval; carol, an approver who may act for alice,
    // settles it.
    const keyed = await stack.serve({
      keys: {
        sk_node_alice_0123456789: { principalId: "alice", principalType: "user" },
        sk_node_carol_0123456789: { principalId: "carol", principalType: "service", canActFor: ["*"], attributes: { role: "approver" } },
      },
    });
    try {
      const errors = [];
      const store = new EveAgentStore({ host: keyed.url, auth: { bearer: "sk_node_alice_0123456789" }, reducer: conversationReducer });
      store.setCallbacks({ onError: (e) => errors.push(e) });
      await store.send({ message: "transfer 25 to bob" });
      let snap = store.snapshot;
      let open = openConversationInputs(snap.conversation);
      assert.equal(open.length, 1, `open inputs: ${JSON.stringify(open)}`);
      const req = open[0].request ?? open[0];
      assert.equal(req.prompt, "Transfer $25.00 to bob?");

      // alice approves her own transfer: the policy refuses it, and the
      // answer says so (400 rejected, naming the request and the reason).
      // eve's client throws it as a ClientError; the store reports it and
      // takes back its optimistic answer, so the request stays answerable.
      await store.send({ inputResponses: [{ requestId: req.requestId, optionId: "approve" }] });
      snap = store.snapshot;
      assert.equal(snap.status, "error");
      assert.equal(errors.length, 1, `errors: ${errors.map(String).join("; ")}`);
      assert.equal(errors[0].name, "ClientError");
      assert.equal(errors[0].status, 400);
      assert.equal(errors[0].code, "rejected");
      assert.equal(errors[0].message, `the answer to request ${req.requestId} was refused (rejected) and the request stays open: A second person must approve transfers.`);
      const body = JSON.parse(errors[0].body);
      assert.deepEqual(body.refused, [{ requestId: req.requestId, candidateId: `cnd_${req.requestId}.1`, outcome: "rejected", reason: "A second person must approve transfers." }]);
      open = openConversationInputs(snap.conversation);
      assert.equal(open.length, 1, `after the refusal: ${JSON.stringify(open)}`);
      assert.equal((open[0].request ?? open[0]).requestId, req.requestId);
      assert.equal(snap.conversation.inputs?.[req.requestId]?.status ?? "open", "open");
      // The stream records the same: a pending then a rejected candidate,
      // then turn.waiting (no session boundary).
      const carol = new Client({ host: keyed.url, auth: { bearer: "sk_node_carol_0123456789" } });
      const { events } = await carol.sessions.attach(snap.session.sessionId, { streamIndex: 0 }).snapshot();
      const cands = events.filter((e) => e.type === "approval.candidate");
      assert.deepEqual(cands.map((e) => e.data.outcome), ["pending", "rejected"]);
      assert.equal(cands[1].data.reason, "A second person must approve transfers.");
      assert.equal(cands[1].data.responderPrincipalId, "alice");
      assert.equal(events.at(-1).type, "turn.waiting");

      // carol approves through her own client; alice's store catches up.
      const session = carol.sessions.attach(snap.session.sessionId, { streamIndex: events.length });
      const done = await (await session.respond([{ requestId: req.requestId, optionId: "approve" }])).result();
      assert.equal(done.message, "Transfer to bob: 25 approved by carol", `carol: ${done.status} ${types(done.events ?? []).join(" ")}`);
      const settled = done.events.find((e) => e.type === "approval.settled");
      assert.equal(settled?.data.outcome, "approved");
      assert.equal(settled?.data.responderPrincipalId, "carol");
      await store.resume();
      await waitUntil(() => lastAssistantText(store.snapshot.events) === "Transfer to bob: 25 approved by carol");
      snap = store.snapshot;
      assert.notEqual(snap.status, "error", String(snap.error));
      assert.equal(lastAssistantText(snap.events), "Transfer to bob: 25 approved by carol");
      assert.equal(openConversationInputs(snap.conversation).length, 0);
      assertUniqueIds(snap.events);
      assert.equal(errors.length, 1);
      store.reset();
    } finally {
      await keyed.stop();
    }
  });

  test("input.requested's times (beyond eve): eve's reducer keeps them with the open request", () => {
    // The shape eve for Go records (docs/events.md): a request with a
    // deadline, its next reminder and its escalation.
    const at = "2026-12-02T00:20:00.000Z";
    const ev = (type, data, i) => ({ type, data, meta: { id: `evt_${i}`, at } });
    const step = { sequence: 0, stepIndex: 0, turnId: "turn_0" };
    const action = { callId: "call_1_0", input: { chargeId: "ch_1", amount: 500 }, kind: "tool-call", toolName: "refund_charge" };
    const times = { deadline: "2026-12-02T01:20:00Z", nextReminderAt: "2026-12-02T01:15:00Z", escalatesAt: "2026-12-02T00:50:00Z" };
    const request = {
      action, display: "confirmation", kind: "tool-approval", prompt: "Approve Refund?", requestId: "apr_call_1_0",
      options: [{ id: "approve", label: "Approve", style: "primary" }, { id: "cancel", label: "Cancel", style: "danger" }], ...times,
    };
    let state = conversationReducer.initial();
    for (const e of [
      ev("turn.started", { sequence: 0, turnId: "turn_0" }, 0),
      ev("actions.requested", { actions: [action], ...step }, 1),
      ev("input.requested", { requests: [request], ...step }, 2),
      ev("turn.waiting", { on: "input", sequence: 0, turnId: "turn_0" }, 3),
    ]) state = conversationReducer.reduce(state, e);
    const open = openConversationInputs(state);
    assert.equal(open.length, 1);
    const kept = open[0].request ?? open[0];
    assert.deepEqual({ deadline: kept.deadline, nextReminderAt: kept.nextReminderAt, escalatesAt: kept.escalatesAt }, times);
    assert.equal(toolCallState(state, "call_1_0")?.status, "awaiting-input");
  });

  test("an edited approval (beyond eve): eve's client sends it as given, and eve's reducer reads the edited resolution", async () => {
    // issue_credit's approval is editable: alice approves another amount.
    // eve's client passes inputResponses through, and the additive fields
    // of input.resolved (response.input, originalInput, editedBy) break
    // neither the client nor the reducer.
    const keyed = await stack.serve({
      keys: { sk_node_alice_0123456789: { principalId: "alice", principalType: "user", attributes: { tenantId: "acme" } } },
    });
    try {
      const auth = { bearer: "sk_node_alice_0123456789" };
      const errors = [];
      const store = new EveAgentStore({ host: keyed.url, auth, reducer: conversationReducer });
      store.setCallbacks({ onError: (e) => errors.push(e) });
      await store.send({ message: "credit acme 1500" });
      let snap = store.snapshot;
      const open = openConversationInputs(snap.conversation);
      assert.equal(open.length, 1, `open inputs: ${JSON.stringify(open)}`);
      const req = open[0].request ?? open[0];
      assert.equal(req.action.toolName, "issue_credit");

      const client = new Client({ host: keyed.url, auth });
      const edit = { requestId: req.requestId, optionId: "approve", input: { tenantId: "acme", amount: 1200 } };
      const done = await (await client.sessions.attach(snap.session.sessionId, { streamIndex: snap.events.length }).respond([edit])).result();
      assert.equal(done.message, "Credit for acme: 1200", `${done.status} ${types(done.events ?? []).join(" ")}`);
      const res = done.events.find((e) => e.type === "input.resolved")?.data.resolutions[0];
      assert.deepEqual(res?.response?.input, { tenantId: "acme", amount: 1200 });
      assert.deepEqual(res?.originalInput, { tenantId: "acme", amount: 1500 });
      assert.deepEqual(res?.editedBy, { id: "alice", type: "user" });

      await waitUntil(() => lastAssistantText(store.snapshot.events) === "Credit for acme: 1200");
      snap = store.snapshot;
      assert.notEqual(snap.status, "error", String(snap.error));
      assert.equal(lastAssistantText(snap.events), "Credit for acme: 1200");
      assert.equal(openConversationInputs(snap.conversation).length, 0);
      assertUniqueIds(snap.events);
      assert.deepEqual(errors, []);
      store.reset();
    } finally {
      await keyed.stop();
    }
  });

  test("a delegated call the turn's cancel stopped reads as cancelled, not failed, in eve's reducer", async () => {
    // run_report is delegated: the turn waits on its job (turn.waiting
    // {on: "tasks"}) inside task.started / task.settled, as eve's tasks.
    const { store, errors } = newStore();
    const sent = store.send({ message: "run the q4 report" });
    const waiting = () => store.snapshot.events.some((e) => e.type === "turn.waiting" && e.data.on === "tasks");
    await waitUntil(waiting);
    let snap = store.snapshot;
    const started = snap.events.find((e) => e.type === "task.started");
    assert.ok(started, `no task.started: ${snap.events.map((e) => e.type).join(" ")}`);
    assert.equal(started.data.name, "run_report");
    assert.equal(toolCallState(snap.conversation, started.data.callId)?.status, "running");

    const client = new Client({ host: stack.url });
    await client.sessions.attach(snap.session.sessionId).cancel();
    await sent;
    await waitUntil(() => store.snapshot.events.some((e) => e.type === "session.waiting"));
    snap = store.snapshot;
    const settled = snap.events.find((e) => e.type === "task.settled");
    assert.equal(settled?.data.status, "cancelled");
    assert.equal(settled?.data.cancel?.reason, "turn_cancelled");
    const state = toolCallState(snap.conversation, started.data.callId);
    assert.equal(state?.status, "cancelled", JSON.stringify(state));
    assert.ok(snap.events.some((e) => e.type === "turn.cancelled"));
    assert.deepEqual(errors, []);
    store.reset();
  });
});
