// The store behind useEveAgent (EveAgentStore from "eve/client"), without
// React, against `eve serve` + eve's worker + a Temporal dev server.
import "./polyfill.mjs";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { EveAgentStore, conversationReducer, openConversationInputs } from "eve/client";
import { cleanupBinaries, startStack } from "./stack.mjs";

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

describe("useEveAgent's store against eve serve", { timeout: 120_000 }, () => {
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
});
