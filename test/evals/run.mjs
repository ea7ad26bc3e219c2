// Runs eve's own eval runner (npm eve@0.80.1, pinned by package-lock.json:
// `eve eval --url`) with the eval files of ./evals against `eve dev` (the
// demo agent: cmd/eve), as a user would: it builds cmd/eve, starts
// `eve dev` on free ports with its state in a temporary directory (its
// Temporal dev server from EVE_TEMPORAL_BIN, default ../../bin/temporal),
// waits for /eve/v1/health, and runs every eval, strict, with the JUnit
// report in build/evals/junit.xml (EVE_EVALS_JUNIT overrides) and eve's
// artifacts in .eve/evals/. Then the same evals against `eve serve` beside
// a worker (cmd/worker) and a dev server (test/node/stack.mjs), the
// production topology, with their report in junit-serve.xml. The exit
// code is the runner's, and 1 when a stubbed delegated call spooled a job
// (its real body ran).

import { spawn, spawnSync, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, mkdirSync, readdirSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startStack, cleanupBinaries } from "../node/stack.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "..", "..");
const temporalBin = process.env.EVE_TEMPORAL_BIN || path.join(repoRoot, "bin", "temporal");
const goBin = process.env.GO || "go";
const eveCLI = path.join(here, "node_modules", "eve", "bin", "eve.js");
const junit = process.env.EVE_EVALS_JUNIT || path.join(repoRoot, "build", "evals", "junit.xml");

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

async function waitHealthy(url, proc) {
  const deadline = Date.now() + 120_000;
  let last = "";
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`eve dev exited (${proc.exitCode})`);
    try {
      const r = await fetch(`${url}/eve/v1/health`);
      if (r.ok) return;
      last = `${r.status}`;
    } catch (err) {
      last = err.message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${url}/eve/v1/health (${last})`);
}

const dir = mkdtempSync(path.join(tmpdir(), "eve-evals-"));
const logs = [];
let dev;
let code = 1;
try {
  const eve = path.join(dir, "eve");
  execFileSync(goBin, ["build", "-o", eve, "./cmd/eve"], { cwd: repoRoot, stdio: "inherit" });
  const [api, temporal, ui] = [await freePort(), await freePort(), await freePort()];
  const url = `http://127.0.0.1:${api}`;
  dev = spawn(eve, [
    "dev", "--addr", `127.0.0.1:${api}`, "--address", `127.0.0.1:${temporal}`, "--ui-port", `${ui}`,
    "--state-dir", path.join(dir, "state"), "--metrics-addr", "",
  ], { cwd: dir, env: { ...process.env, EVE_TEMPORAL_BIN: temporalBin, EVE_JOBS_DIR: path.join(dir, "jobs") }, stdio: ["ignore", "pipe", "pipe"] });
  dev.stdout.on("data", (d) => logs.push(`${d}`));
  dev.stderr.on("data", (d) => logs.push(`${d}`));
  await waitHealthy(url, dev);
  mkdirSync(path.dirname(junit), { recursive: true });
  const r = spawnSync(process.execPath, [eveCLI, "eval", "--url", url, "--strict", "--junit", junit], {
    cwd: here, stdio: "inherit", env: { ...process.env, NO_COLOR: "1" },
  });
  code = r.status ?? 1;
  // Every run_report call of the evals is stubbed: the real tool spools a
  // job file, so one here means a stubbed call ran for real.
  const jobs = path.join(dir, "jobs");
  const spooled = existsSync(jobs) ? readdirSync(jobs) : [];
  if (spooled.length > 0) {
    console.error(`a stubbed delegated call ran for real: jobs spooled ${spooled.join(", ")}`);
    code = 1;
  }
  if (code === 0) console.log(`eve eval passed against eve dev; JUnit report: ${path.relative(process.cwd(), junit)}`);
  if (code === 0) code = await againstServe();
} catch (err) {
  console.error(err.message);
} finally {
  if (dev && dev.exitCode === null) {
    const exited = new Promise((r) => dev.once("exit", r));
    dev.kill("SIGTERM");
    const timer = setTimeout(() => dev.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
  if (code !== 0) {
    console.error("eve dev's log (last 60 lines):");
    console.error(logs.join("").split("\n").slice(-60).join("\n"));
  }
  rmSync(dir, { recursive: true, force: true });
}
process.exit(code);

// againstServe runs the evals against `eve serve` (open mode on loopback,
// whose caller may stub tools as eve dev's does) and a worker.
async function againstServe() {
  const stack = await startStack({ leaseSeconds: 10 });
  try {
    const report = path.join(path.dirname(junit), "junit-serve.xml");
    const r = spawnSync(process.execPath, [eveCLI, "eval", "--url", stack.url, "--strict", "--junit", report], {
      cwd: here, stdio: "inherit", env: { ...process.env, NO_COLOR: "1" },
    });
    let status = r.status ?? 1;
    const jobs = path.join(path.dirname(stack.payloadStore.slice("file:".length)), "jobs");
    const spooled = existsSync(jobs) ? readdirSync(jobs) : [];
    if (spooled.length > 0) {
      console.error(`a stubbed delegated call ran for real against eve serve: jobs spooled ${spooled.join(", ")}`);
      status = 1;
    }
    if (status === 0) console.log(`eve eval passed against eve serve; JUnit report: ${path.relative(process.cwd(), report)}`);
    else console.error("eve serve's stack log (last 60 lines):\n" + stack.logs.join("").split("\n").slice(-60).join("\n"));
    return status;
  } finally {
    await stack.stop();
    cleanupBinaries();
  }
}
