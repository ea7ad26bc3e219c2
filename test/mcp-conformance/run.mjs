// Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned by package-lock.json) against `eve mcp --http`: it builds the
// fixture agent (./agent, the tools the suite names), starts a Temporal dev
// server (EVE_TEMPORAL_BIN, default ../../bin/temporal), the agent's worker
// and its `mcp --http`, then runs every server scenario at 2025-11-25 and at
// 2026-07-28, and the tasks extension's scenarios. expected-failures.yaml is
// the only place a failure is excused; a scenario that fails outside it, or
// passes while listed, fails the run.

import { spawn, spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, readFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const temporalBin = process.env.EVE_TEMPORAL_BIN || path.join(repoRoot, "bin", "temporal");
const goBin = process.env.GO || "go";
const cli = path.join(here, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js");
const expected = path.join(here, "expected-failures.yaml");

const versions = ["2025-11-25", "2026-07-28"];
// Extension scenarios are on no spec timeline: the suite runs them one by one.
const extensionScenarios = [
  "tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
  "tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-status-notifications",
  "tasks-required-task-error", "tasks-mrtr-composition",
];

// The ports freePort handed out: the kernel may offer a port again once its
// listener closed, and this needs several at once.
const givenPorts = new Set();

async function freePort() {
  for (;;) {
    const port = await anyPort();
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

function anyPort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function portOpen(port) {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => { s.destroy(); resolve(true); });
    s.once("error", () => resolve(false));
  });
}

async function waitPort(what, port, proc) {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.pid === undefined) throw new Error(`${what} did not start or exited (${proc.exitCode})`);
    if (await portOpen(port)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what} on port ${port}`);
}

// waitPollers waits until the worker polls the task queue for workflow and
// activity tasks (the Temporal CLI asks the server), so that the suite's
// first tool call does not spend its own time bound on a worker starting
// up on a loaded machine.
async function waitPollers(temporal, taskQueue, proc) {
  const deadline = Date.now() + 90_000;
  let last = "";
  while (Date.now() < deadline) {
    if (proc.exitCode !== null || proc.pid === undefined) throw new Error(`the worker did not start or exited (${proc.exitCode})`);
    const r = spawnSync(temporalBin, ["task-queue", "describe", "--task-queue", taskQueue, "--address", temporal, "-o", "json"], { encoding: "utf8" });
    last = `${r.stdout}${r.stderr}`;
    try {
      const kinds = new Set((JSON.parse(r.stdout).pollers || []).map((p) => p.taskQueueType));
      if (kinds.has("workflow") && kinds.has("activity")) return;
    } catch {
      // not answered yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for the worker to poll ${taskQueue}: ${last}`);
}

const procs = [];
const logs = [];
function start(name, bin, args, env = {}) {
  const p = spawn(bin, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  p.stdout.on("data", (d) => logs.push(`[${name}] ${d}`));
  p.stderr.on("data", (d) => logs.push(`[${name}] ${d}`));
  p.on("error", (err) => logs.push(`[${name}] ${err.message}\n`));
  procs.push(p);
  return p;
}

async function stopAll() {
  for (const p of procs.reverse()) {
    if (p.exitCode !== null || p.pid === undefined) continue;
    const exited = new Promise((r) => p.once("exit", r));
    p.kill("SIGTERM");
    const timer = setTimeout(() => p.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

// One conformance run; returns its exit code and the summary lines.
function runSuite(url, args) {
  const r = spawnSync(process.execPath, [cli, "server", "--url", url, "--expected-failures", expected, ...args], { encoding: "utf8", maxBuffer: 64 << 20 });
  const out = `${r.stdout}${r.stderr}`;
  const lines = out.split("\n").filter((l) => /passed, \d+ failed|Passed: \d+\/\d+|UNEXPECTED|Unexpected|stale|Stale|expected failure/i.test(l));
  return { code: r.status, out, lines };
}

const dir = mkdtempSync(path.join(tmpdir(), "eve-mcp-conformance-"));
let failed = 0;
let passed = 0;
try {
  const agent = path.join(dir, "agent");
  execFileSync(goBin, ["build", "-o", agent, "./test/mcp-conformance/agent"], { cwd: repoRoot, stdio: "inherit" });
  const tport = await freePort();
  const temporal = `127.0.0.1:${tport}`;
  const t = start("temporal", temporalBin, ["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", String(tport), "--log-level", "warn",
    "--db-filename", path.join(dir, "temporal.db")]);
  await waitPort("the Temporal dev server", tport, t);
  const env = { EVE_PAYLOAD_STORE: `file:${path.join(dir, "payloads")}`, EVE_API_KEY: "", EVE_TASK_QUEUE: `conformance-${process.pid}` };
  const w = start("worker", agent, ["worker", "--address", temporal, "--metrics-addr", "", "--log-level", "warn"], env);
  await waitPollers(temporal, env.EVE_TASK_QUEUE, w);
  const mport = await freePort();
  const m = start("mcp", agent, ["mcp", "--address", temporal, "--http", `127.0.0.1:${mport}`, "--bare-names", "--task-tool", "slow_compute=optional", "--task-tool", "failing_job=required", "--task-tool", "protocol_error_job=optional", "--task-tool", "test_tool_with_task=required", "--task-tool", "multi_input=required", "--log-level", "warn"], env);
  await waitPort("eve mcp --http", mport, m);
  const url = `http://127.0.0.1:${mport}/mcp`;
  // EVE_CONFORMANCE_SCENARIOS (comma-separated) runs only those scenarios,
  // at both versions or once for extension scenarios: for working on one.
  const only = (process.env.EVE_CONFORMANCE_SCENARIOS || "").split(",").filter(Boolean);
  const runs = only.length ? only.flatMap((s) => extensionScenarios.includes(s)
    ? [{ name: `extension ${s}`, args: ["--scenario", s] }]
    : versions.map((v) => ({ name: `${s} ${v}`, args: ["--scenario", s, "--spec-version", v] }))) : [
    ...versions.map((v) => ({ name: `spec ${v}`, args: ["--suite", "all", "--spec-version", v] })),
    ...extensionScenarios.map((s) => ({ name: `extension ${s}`, args: ["--scenario", s] })),
  ];
  for (const run of runs) {
    const r = runSuite(url, run.args);
    console.log(`=== ${run.name} (exit ${r.code})`);
    console.log(r.out.slice(r.out.indexOf("=== SUMMARY") >= 0 ? r.out.indexOf("=== SUMMARY") : Math.max(0, r.out.length - 4000)).trim());
    if (r.code === 0) passed++;
    else failed++;
  }
} catch (err) {
  console.error(`mcp conformance: ${err.message}\n--- logs ---\n${logs.join("")}`);
  failed++;
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
console.log(`conformance: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
