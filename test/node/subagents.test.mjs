// Subagents (docs/subagents.md) through eve's own client (npm eve@0.80.1):
// the demo's `ask researcher <topic>` delegates to its declared subagent;
// the parent's stream announces the child with agent.started, the client
// follows it with session.agent(event).stream(), and the child's reply is
// the parent's final reply in the same turn. A later message continues the
// same child by its taskId.
import "./polyfill.mjs";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, isCurrentTurnBoundaryEvent } from "eve/client";
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

describe("subagents through eve's client", { timeout: 300_000 }, () => {
  test("agent.started is followed to the child's stream; the reply arrives in the root turn", async () => {
    const { response, session } = await client.sessions.create({ message: "ask researcher tidal power" });
    const result = await response.result();
    const types = result.events.map((e) => e.type);
    assert.equal(types.filter((t) => t === "turn.started").length, 1, types.join(" "));
    assert.match(result.message ?? "", /^The researcher says: 3 sources on tidal power agree it is promising\. To follow up, say: tell researcher-\w{6} <message>$/);

    const started = result.events.filter((e) => e.type === "agent.started");
    assert.equal(started.length, 1, types.join(" "));
    const task = result.events.find((e) => e.type === "task.started");
    assert.deepEqual(keys(started[0].data), ["callId", "name", "sessionId", "streamPath", "taskId", "turnId"]);
    assert.equal(started[0].data.name, "researcher");
    assert.equal(started[0].data.taskId, task.data.taskId);
    assert.equal(started[0].data.callId, task.data.callId);
    assert.equal(task.data.kind, "agent");
    assert.equal(started[0].data.streamPath, `/eve/v1/session/${started[0].data.sessionId}/stream`);

    // eve's client follows the child on its own stream, from its own cursor.
    const child = session.agent(started[0]);
    const seen = [];
    for await (const e of child.stream({ startIndex: 0 })) {
      seen.push(e);
      if (isCurrentTurnBoundaryEvent(e)) break;
    }
    const childTypes = seen.map((e) => e.type);
    assert.equal(childTypes[0], "session.started", childTypes.join(" "));
    assert.ok(childTypes.includes("turn.started"), childTypes.join(" "));
    const reply = seen.filter((e) => e.type === "message.completed").at(-1);
    assert.equal(reply.data.message, "3 sources on tidal power agree it is promising");

    // A later message continues the same child by its taskId.
    const taskId = task.data.taskId;
    const again = await (await session.send(`tell ${taskId} dig deeper`)).result();
    assert.equal(again.message, "The researcher says: On dig deeper: 2 more sources, both recent.");
    assert.equal(again.events.filter((e) => e.type === "agent.started").length, 0);
    const snap = await child.stream({ startIndex: 0, follow: false });
    const turns = [];
    for await (const e of snap) if (e.type === "turn.started") turns.push(e.data.turnId);
    assert.deepEqual(turns, ["turn_0", "turn_1"]);
  });

  test("outputSchema: result() reads typed data; a tool's code delegates to a code-only subagent", async () => {
    const outputSchema = {
      type: "object",
      properties: { topic: { type: "string" }, sources: { type: "integer" } },
      required: ["topic", "sources"],
    };
    const { response, session } = await client.sessions.create({ message: "summarize tidal power", outputSchema });
    const result = await response.result();
    assert.deepEqual(result.data, { topic: "tidal power", sources: 3 });
    const types = result.events.map((e) => e.type);
    const rc = result.events.find((e) => e.type === "result.completed");
    assert.ok(rc, types.join(" "));
    assert.ok(types.indexOf("result.completed") < types.indexOf("turn.completed"), types.join(" "));
    assert.deepEqual(rc.data.result, { topic: "tidal power", sources: 3 });

    // The schema is the turn's only. publish_notes asks the code-only
    // reviewer (no tool of the demo model's) for a typed review.
    const next = await (await session.send("publish tidal power is promising")).result();
    assert.equal(next.data, undefined);
    assert.equal(next.message, "published: true https://notes.example/tidal-power-is-promising");
    const refused = await (await session.send("publish TODO write them")).result();
    assert.equal(refused.message, "published: false the notes still have a TODO");
  });
});
