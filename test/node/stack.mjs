// Starts the stack the node tests drive: a Temporal dev server (./bin/temporal,
// in memory, on free ports), `eve serve` and eve's worker (cmd/worker, the demo
// agent), both built from this repository with `go build` into a temp dir.
//
// eve's client declares Node >= 24; on Node 20 Promise.withResolvers is
// missing, so polyfill.mjs must be imported before "eve/client".

import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, existsSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "..", "..");

// The ports freePort handed out: the kernel may offer a port again once its
// listener closed, and a stack needs several at once.
const givenPorts = new Set();

export async function freePort() {
  for (;;) {
    const port = await anyPort();
    if (!givenPorts.has(port)) {
      givenPorts.add(port);
      return port;
    }
  }
}

async function anyPort() {
  return await new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitFor(what, fn, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

/**
 * Polls fn until it returns something truthy, for at most timeoutMs (a
 * bound for a loaded machine, not a pace), and returns its last value:
 * falsy when the bound passed, for the caller's assertions to say what
 * they see.
 */
export async function waitUntil(fn, { timeoutMs = 60_000, everyMs = 25 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > deadline) return v;
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The rejection of a wait that ran out of time (within). */
class Late extends Error {}

/** p, or a rejection (Late) naming what once ms have passed. */
export async function within(p, ms, what) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Late(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Awaits p for at most ms (a bound for a loaded machine, not a pace). Past
 * it, fails with what explain() says of the state it waited on, so a hang
 * in CI says where it stuck instead of timing its test out. That is read
 * within a bound of its own: a stalled server must not hold the failure
 * back.
 */
export async function bounded(p, ms, what, explain) {
  try {
    return await within(p, ms, what);
  } catch (err) {
    if (!(err instanceof Late)) throw err;
    let state;
    try {
      state = await within(explain(), 60_000, "its state");
    } catch (e) {
      state = `(its state could not be read: ${e.message})`;
    }
    throw new Error(`${err.message}\n${state}`);
  }
}

function portOpen(port) {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

// stateRoot is /dev/shm (a tmpfs) when it is there and writable, else the
// system's temp dir: see startStack.
function stateRoot() {
  try {
    const probe = mkdtempSync(path.join("/dev/shm", "eve-node-probe-"));
    rmSync(probe, { recursive: true, force: true });
    return "/dev/shm";
  } catch {
    return tmpdir();
  }
}

// When a test of this file failed (node --test runs each file in its own
// process and sets exitCode), print the stack's last warnings and errors,
// so a CI log says what the servers saw. stdout, since CI keeps it.
function dumpOnFailure(logs, stateDir) {
  process.once("exit", (code) => {
    if (!code && !process.exitCode) return;
    const lines = logs.join("").split("\n").filter((l) => /error|warn|panic|fatal/i.test(l));
    if (lines.length === 0) return;
    process.stdout.write(`--- the stack's last warnings and errors (state dir ${stateDir}) ---\n${lines.slice(-40).join("\n")}\n`);
  });
}

let built;
/**
 * Builds eve and the worker (cmd/eve, cmd/worker) once per test file into a
 * temp dir; returns their paths. EVE_NODE_TEST_BIN_DIR names a directory that
 * already holds both, to skip the build.
 */
export function buildBinaries() {
  if (built) return built;
  const given = process.env.EVE_NODE_TEST_BIN_DIR;
  if (given) {
    const dir = path.resolve(given);
    built = { dir, eve: path.join(dir, "eve"), worker: path.join(dir, "worker"), keep: true };
    return built;
  }
  const dir = mkdtempSync(path.join(tmpdir(), "eve-node-bin-"));
  const go = process.env.GO ?? "go";
  execFileSync(go, ["build", "-o", dir + path.sep, "./cmd/eve", "./cmd/worker"], { cwd: repoRoot, stdio: "inherit" });
  built = { dir, eve: path.join(dir, "eve"), worker: path.join(dir, "worker") };
  return built;
}

function temporalBinary() {
  const bin = process.env.EVE_TEMPORAL_BIN ?? path.join(repoRoot, "bin", "temporal");
  if (!existsSync(bin)) {
    throw new Error(`Temporal CLI not found at ${bin}: run \`make bin/temporal\` in ${repoRoot} (or set EVE_TEMPORAL_BIN)`);
  }
  return bin;
}

/**
 * A running stack. stop() ends every process it started.
 * @typedef {{ url: string, temporal: string, taskQueue: string, payloadStore: string, procs: any[], logs: string[], stop: () => Promise<void>, serve: (opts?: object) => Promise<{url: string, stop: () => Promise<void>}>, workflows: (prefix: string) => Promise<string>, terminate: (workflowId: string, reason: string) => void }} Stack
 */

// Every process started here dies with this one, even when a test crashes.
const live = new Set();
process.once("exit", () => {
  for (const p of live) p.kill("SIGKILL");
});
for (const sig of ["SIGINT", "SIGTERM"]) {
  process.once(sig, () => {
    for (const p of live) p.kill("SIGKILL");
    process.exit(130);
  });
}

function start(cmd, args, env, logs, name) {
  const p = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  live.add(p);
  p.once("exit", () => live.delete(p));
  const keep = (chunk) => {
    logs.push(`[${name}] ${chunk}`);
    if (logs.length > 400) logs.splice(0, logs.length - 400);
    if (process.env.EVE_NODE_TEST_VERBOSE) process.stderr.write(`[${name}] ${chunk}`);
  };
  p.stdout.on("data", keep);
  p.stderr.on("data", keep);
  p.exited = new Promise((resolve) => p.once("exit", resolve));
  return p;
}

async function stopProc(p) {
  if (p.exitCode !== null || p.signalCode !== null) return;
  p.kill("SIGTERM");
  const timer = setTimeout(() => p.kill("SIGKILL"), 10_000);
  await p.exited;
  clearTimeout(timer);
}

/**
 * Starts the dev server, one `eve serve` (stream lease leaseSeconds) and a worker.
 * @returns {Promise<Stack>}
 */
export async function startStack({ leaseSeconds = 1, apiKey } = {}) {
  const bins = buildBinaries();
  const logs = [];
  const procs = [];
  const taskQueue = `node-${process.pid}`;
  // The stack's state, removed when it stops: the dev server's SQLite file
  // and one payload store shared by `eve serve` and the worker (large
  // payloads and conversations). A file, not the dev server's in-memory
  // default (temporalio/temporal#3784), on a tmpfs where there is one
  // (stateRoot): a CI run whose disk was busy stalled the server's SQLite,
  // and Temporal reports a namespace lookup that timed out as "Namespace
  // default is not found", which failed every request for a minute.
  const stateDir = mkdtempSync(path.join(stateRoot(), "eve-node-state-"));
  dumpOnFailure(logs, stateDir);
  const payloadStore = `file:${path.join(stateDir, "payloads")}`;
  const tport = await freePort();
  const temporal = `127.0.0.1:${tport}`;
  const fast = [
    "history.transferProcessorMaxPollRPS=200",
    "history.timerProcessorMaxPollRPS=200",
    "matching.numTaskqueueReadPartitions=1",
    "matching.numTaskqueueWritePartitions=1",
    "system.enableActivityEagerExecution=true",
  ].flatMap((kv) => ["--dynamic-config-value", kv]);
  // devserver.FastSQLitePragmas: a write-ahead log, no fsync per commit.
  const sqlite = ["--db-filename", path.join(stateDir, "temporal.db"), "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal"];
  procs.push(start(temporalBinary(), ["server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", String(tport), "--log-level", "warn", ...sqlite, ...fast], {}, logs, "temporal"));
  const stack = {
    temporal,
    taskQueue,
    payloadStore,
    procs,
    logs,
    /** keys: {"<bearer key>": {principalId, principalType, attributes, canActFor}} (EVE_API_KEYS_FILE). */
    async serve({ lease = leaseSeconds, key, keys } = {}) {
      const port = await freePort();
      let keysFile = "";
      if (keys !== undefined) {
        keysFile = path.join(stateDir, `keys-${port}.json`);
        writeFileSync(keysFile, JSON.stringify({ keys }));
      }
      const env = { EVE_API_KEY: key ?? "", EVE_API_KEYS_FILE: keysFile, EVE_PAYLOAD_STORE: payloadStore };
      const p = start(bins.eve, ["serve", "--address", temporal, "--task-queue", taskQueue, "--addr", `127.0.0.1:${port}`, "--stream-lease", `${lease}s`, "--log-level", "warn"], env, logs, `serve:${port}`);
      procs.push(p);
      const url = `http://127.0.0.1:${port}`;
      await waitFor(`eve serve at ${url}`, async () => {
        if (p.exitCode !== null) throw new Error(`eve serve exited: ${logs.slice(-10).join("")}`);
        const r = await fetch(`${url}/eve/v1/health`);
        return r.status === 200;
      });
      return { url, stop: () => stopProc(p) };
    },
    /**
     * The workflows whose ids start with prefix (a session's id: the
     * session and its turns), a line each with its status and last
     * history events (a failed workflow task's message too): what a hang
     * in a test left on the server.
     */
    async workflows(prefix) {
      const temporalCLI = (...args) => execFileSync(temporalBinary(), [...args, "--address", temporal, "-o", "json"], { encoding: "utf8", maxBuffer: 1 << 28, timeout: 10_000 });
      const list = JSON.parse(temporalCLI("workflow", "list", "--query", `WorkflowId STARTS_WITH "${prefix}"`) || "[]");
      const out = [];
      for (const w of list) {
        const id = w.execution.workflowId;
        let events = [];
        try {
          ({ events = [] } = JSON.parse(temporalCLI("workflow", "show", "-w", id)));
        } catch (err) {
          out.push(`  ${id} ${w.status}: its history could not be read (${err.message.split("\n")[0]})`);
          continue;
        }
        const last = events.slice(-6).map((e) => {
          const failed = e.workflowTaskFailedEventAttributes;
          const type = e.eventType.replace(/^EVENT_TYPE_/, "");
          return failed ? `${type}(${failed.cause}: ${failed.failure?.message ?? ""})` : type;
        });
        out.push(`  ${id} ${w.status.replace(/^WORKFLOW_EXECUTION_STATUS_/, "")}, ${events.length} events, the last: ${last.join(" ")}`);
      }
      return out.join("\n");
    },
    /** Terminates a workflow, as an operator would (temporal workflow terminate). */
    terminate(workflowId, reason) {
      execFileSync(temporalBinary(), ["workflow", "terminate", "-w", workflowId, "--reason", reason, "--address", temporal], { encoding: "utf8", timeout: 30_000 });
    },
    async stop() {
      for (const p of [...procs].reverse()) await stopProc(p);
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
  try {
    await waitFor(`the Temporal dev server at ${temporal}`, () => portOpen(tport));
    const api = await stack.serve({ key: apiKey });
    stack.url = api.url;
    // The action secret and public URL let the demo's delegated tool
    // (run_report) start its jobs, spooled into the stack's state dir.
    const actions = { EVE_ACTION_SECRET: "node-test-action-secret-0123456789", EVE_PUBLIC_URL: api.url, EVE_JOBS_DIR: path.join(stateDir, "jobs") };
    procs.push(start(bins.worker, ["--address", temporal, "--task-queue", taskQueue, "--metrics-addr", "", "--log-level", "warn"], { EVE_API_KEY: "", EVE_PAYLOAD_STORE: payloadStore, ...actions }, logs, "worker"));
  } catch (err) {
    await stack.stop();
    throw new Error(`${err.message}\n--- logs ---\n${logs.join("")}`);
  }
  return stack;
}

export function cleanupBinaries() {
  if (built && !built.keep) rmSync(built.dir, { recursive: true, force: true });
  built = undefined;
}
