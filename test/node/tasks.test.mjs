// Tasks (docs/tasks.md) through eve's own client (npm eve@0.80.1): the
// demo's `deploy web` starts a task, the model says so and waits with
// eve__task_wait, then replies with the result, all in one turn.
import "./polyfill.mjs";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "eve/client";
import { cleanupBinaries, startStack } from "./stack.mjs";

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

const keys = (o) => Object.keys(o).sort();

describe("tasks through eve's client", { timeout: 300_000 }, () => {
  test("result() reads past turn.waiting to the final reply; task events match eve's docs", async () => {
    const { response } = await client.sessions.create({ message: "deploy web" });
    const result = await response.result();
    assert.equal(result.message, "web is live at https://web.demo.eve.dev");
    assert.equal(result.status, "waiting");
    const evs = result.events;
    const types = evs.map((e) => e.type);
    // One turn: turn.waiting in the middle, turn.completed and session.waiting once, at the end.
    assert.equal(types.filter((t) => t === "turn.completed").length, 1);
    assert.equal(types.filter((t) => t === "session.waiting").length, 1);
    assert.equal(types.at(-1), "session.waiting");
    const waiting = evs.filter((e) => e.type === "turn.waiting");
    assert.ok(waiting.length >= 1, types.join(" "));
    assert.ok(types.indexOf("turn.waiting") < types.indexOf("turn.completed"));

    const started = evs.filter((e) => e.type === "task.started");
    const settled = evs.filter((e) => e.type === "task.settled");
    assert.equal(started.length, 1);
    assert.equal(settled.length, 1);
    const turnId = evs.find((e) => e.type === "turn.started").data.turnId;
    // task.started: taskId, callId, turnId, the tool name, and kind.
    assert.deepEqual(keys(started[0].data), ["callId", "kind", "name", "taskId", "turnId"]);
    assert.match(started[0].data.taskId, /^deploy-[0-9a-hjkmnp-tv-z]{6}$/);
    assert.equal(started[0].data.name, "deploy");
    assert.equal(started[0].data.kind, "tool");
    assert.equal(started[0].data.turnId, turnId);
    // task.settled: the same call, status, output.
    assert.deepEqual(keys(settled[0].data), ["callId", "kind", "name", "output", "status", "taskId", "turnId"]);
    for (const k of ["taskId", "callId", "turnId", "name", "kind"]) assert.equal(settled[0].data[k], started[0].data[k], k);
    assert.equal(settled[0].data.status, "completed");
    assert.deepEqual(settled[0].data.output, { service: "web", url: "https://web.demo.eve.dev" });
    // turn.waiting: turnId, sequence, on (and usage).
    for (const w of waiting) {
      assert.equal(w.data.turnId, turnId);
      assert.equal(w.data.on, "tasks");
      assert.equal(typeof w.data.sequence, "number");
    }
    // The receipt is the call's result; the wait is an ordinary tool call.
    const results = evs.filter((e) => e.type === "action.result").map((e) => e.data.result);
    assert.equal(results[0].toolName, "deploy");
    assert.equal(results[0].output, `Started task ${started[0].data.taskId}. Its result will arrive in a <task_result> message.`);
    assert.equal(results[1].toolName, "eve__task_wait");
    assert.equal(results[1].output, `${started[0].data.taskId} completed; its result follows.`);
    // The text before the wait completed as an ordinary message.
    const texts = evs.filter((e) => e.type === "message.completed").map((e) => e.data.message);
    assert.deepEqual(texts, ["Started deploying web; I'll tell you when it is live.", "web is live at https://web.demo.eve.dev"]);
  });
});
