// People in the loop from any depth (docs/subagents.md) through eve's own
// client (npm eve@0.80.1): the demo's `ask researcher fetch <topic>`
// delegates to its researcher, whose fetch_paper needs a person's
// approval. The request is proxied on the root session's stream (the
// child's request id, the root's callId and the call's taskId), the client
// answers it through the root session (with respond, or a typed "approve"
// sent as a message), and the child's reply arrives in the root turn.
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

const types = (evs) => evs.map((e) => e.type);

describe("a subagent's approval through the root, with eve's client", { timeout: 300_000 }, () => {
  test("the proxied approval is answered through the root session", async () => {
    const { response, session } = await client.sessions.create({ message: "ask researcher fetch tidal power" });
    const parked = await response.result();
    assert.equal(parked.inputRequests.length, 1, types(parked.events).join(" "));
    const [req] = parked.inputRequests;
    assert.equal(req.kind, "tool-approval");
    assert.equal(req.action.toolName, "fetch_paper");
    assert.equal(req.prompt, "Let the researcher fetch a paper on tidal power?");
    const task = parked.events.find((e) => e.type === "task.started");
    const proxied = parked.events.find((e) => e.type === "input.requested");
    assert.equal(proxied.data.callId, task.data.callId);
    assert.equal(proxied.data.taskId, task.data.taskId);

    const done = await (await session.respond([{ requestId: req.requestId, optionId: "approve" }])).result();
    const settled = done.events.filter((e) => e.type === "approval.settled");
    assert.equal(settled.length, 1, types(done.events).join(" "));
    assert.equal(settled[0].data.requestId, req.requestId);
    assert.equal(settled[0].data.outcome, "approved");
    const resolved = done.events.filter((e) => e.type === "input.resolved");
    assert.deepEqual(resolved.map((e) => e.data.resolutions.map((r) => [r.requestId, r.outcome])), [[[req.requestId, "approved"]]]);
    assert.match(done.message ?? "", /^The researcher says: Fetched: the paper on tidal power \(12 pages\)\. To follow up, say: tell researcher-\w{6} <message>$/);
    assert.equal(done.inputRequests.length, 0);

    // The child asked and decided it on its own stream; its tool ran once.
    const started = [...parked.events, ...done.events].find((e) => e.type === "agent.started");
    const seen = [];
    for await (const e of session.agent(started).stream({ startIndex: 0, follow: false })) seen.push(e);
    assert.equal(seen.filter((e) => e.type === "input.requested").length, 1, types(seen).join(" "));
    assert.equal(seen.filter((e) => e.type === "approval.settled").length, 1, types(seen).join(" "));
    const results = seen.filter((e) => e.type === "action.result" && JSON.stringify(e.data).includes("12 pages"));
    assert.equal(results.length, 1, types(seen).join(" "));
  });

  test("a typed approve answers the proxied approval, as on a text channel", async () => {
    const { response, session } = await client.sessions.create({ message: "ask researcher fetch wind farms" });
    const parked = await response.result();
    assert.equal(parked.inputRequests.length, 1, types(parked.events).join(" "));
    const [req] = parked.inputRequests;
    const done = await (await session.send("approve")).result();
    const received = done.events.filter((e) => e.type === "message.received").map((e) => [e.data.turnId, e.data.message]);
    assert.deepEqual(received, [["turn_0", "approve"]], types(done.events).join(" "));
    assert.deepEqual(done.events.filter((e) => e.type === "approval.settled").map((e) => [e.data.requestId, e.data.outcome]), [[req.requestId, "approved"]]);
    assert.match(done.message ?? "", /^The researcher says: Fetched: the paper on wind farms \(12 pages\)\./);
    assert.equal(done.inputRequests.length, 0);
    assert.equal(done.events.filter((e) => e.type === "turn.started").length, 0, "the message is no turn of its own");
  });
});
