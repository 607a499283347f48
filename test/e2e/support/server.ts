import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, type BrowserContext } from "playwright-core";
import { saveTinyBase } from "../../support/tiny-run";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../.."); // also under tsx (bench/browser.ts)
const TSX = path.join(ROOT, "node_modules", ".bin", "tsx");
const CLI = path.join(ROOT, "bin", "tinkerlab.ts");

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export function tempDir(prefix: string) {
  return fs.mkdtempSync(path.join(os.tmpdir(), `tinkerlab-${prefix}-`));
}

/** The server's environment: only what the test sets, so the developer's own variables cannot leak in. */
function serverEnvironment(overrides: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: "production", NEXT_TELEMETRY_DISABLED: "1", ...overrides };
}

export type TestServer = { url: string; port: number; dataDir: string; process: ChildProcess; output(): string; stop(): Promise<void> };

/** Starts `tinkerlab start` on a free port with a fresh PGlite folder, resolving once it says it is ready. */
export async function startServer(overrides: Record<string, string> = {}): Promise<TestServer> {
  const port = await freePort();
  const dataDir = overrides.PGLITE_DATA_DIR ?? path.join(tempDir("db"), "db");
  const child = spawn(TSX, [CLI, "start"], {
    cwd: ROOT,
    env: serverEnvironment({ PORT: String(port), PGLITE_DATA_DIR: dataDir, ...overrides }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within 120 s:\n${output}`)), 120_000);
    child.stdout!.on("data", () => {
      if (output.includes("Tinkerlab is ready at")) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before it was ready:\n${output}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    process: child,
    output: () => output,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Runs `tinkerlab start` expecting it to refuse; returns its exit code and everything it printed. */
export function startExpectingFailure(overrides: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [CLI, "start"], { cwd: ROOT, env: serverEnvironment(overrides), stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`expected start-up to fail, but it was still running after 60 s:\n${output}`));
    }, 60_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Debian's Chromium, headless, in a fresh profile; `extraArgs` go after the defaults (e.g. --enable-unsafe-webgpu). */
export async function launchBrowser(extraArgs: string[] = []): Promise<BrowserContext> {
  return chromium.launchPersistentContext(tempDir("chromium"), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...extraArgs,
    ],
  });
}

export const SCREENSHOTS = path.join(ROOT, "test-results", "screenshots");

/** Calls a procedure of a running server over HTTP, as the browser's client does (superjson envelope). */
export async function callProcedure<T>(server: { url: string }, procedure: string, input: unknown, method: "GET" | "POST" = "POST"): Promise<T> {
  const url = `${server.url}/api/trpc/${procedure}`;
  const response =
    method === "GET"
      ? await fetch(`${url}?input=${encodeURIComponent(JSON.stringify({ json: input }))}`)
      : await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ json: input }) });
  const body = await response.json();
  if (body.error) throw new Error(`${procedure}: ${body.error.json.message}`);
  return body.result.data.json as T;
}

/** A call as a worker process makes it, with the worker token. */
export async function callAsWorker<T>(server: { url: string }, token: string, procedure: string, input: unknown): Promise<T> {
  const response = await fetch(`${server.url}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tinkerlab-worker-token": token },
    body: JSON.stringify({ json: input }),
  });
  const body = await response.json();
  if (body.error) throw new Error(`${procedure}: ${body.error.json.message}`);
  return body.result.data.json as T;
}

/**
 * Registers this test as a worker (through the real worker API) and claims the job the scheduler places on it:
 * the test then reports metrics and rollouts as a worker would.
 */
export async function claimJobAsWorker(server: { url: string }, token: string): Promise<{ workerId: string; jobId: string }> {
  const { workerId } = await callAsWorker<{ workerId: string }>(server, token, "worker.register", {
    hostname: "e2e",
    pid: process.pid,
    backend: "e2e",
    devices: [{ kind: "cpu", name: "e2e", memoryMb: 4096, computeSlots: 1 }],
  });
  let jobId: string | undefined;
  for (let i = 0; i < 200 && !jobId; i++) {
    jobId = (await callAsWorker<{ assignments: string[] }>(server, token, "worker.heartbeat", { workerId, running: [] })).assignments[0];
    if (!jobId) await new Promise((resolve) => setTimeout(resolve, 200));
  }
  if (!jobId) throw new Error("the scheduler never placed the run's job");
  await callAsWorker(server, token, "worker.claim", { workerId, jobId });
  return { workerId, jobId };
}

/**
 * A server with no local workers and a tiny built-in base, and a run of `algorithm` on arithmetic launched on it,
 * for a test that then plays the worker (claimJobAsWorker) and reports exactly what it wants the pages to show.
 */
export async function startServerWithRunForTestWorker(
  token: string,
  name: string,
  algorithm: Record<string, unknown>,
): Promise<{ server: TestServer; runId: string }> {
  const basesDir = tempDir("bases");
  await saveTinyBase(basesDir);
  const server = await startServer({
    TINKERLAB_BASES_DIR: basesDir,
    TINKERLAB_EXAMPLES: "off",
    ARTIFACTS_DIR: tempDir("artifacts"),
    TINKERLAB_LOCAL_WORKERS: "0",
    TINKERLAB_WORKER_TOKEN: token,
  });
  const config = {
    name,
    environment: "arithmetic",
    agent: { base: "tiny-base", sampling: { maxTokens: 3 } },
    algorithm,
    evaluation: { every: 0, episodes: 8 },
    checkpointEvery: 0,
  };
  const { id } = await callProcedure<{ id: string }>(server, "experiments.create", { name, config });
  const { runId } = await callProcedure<{ runId: string }>(server, "runs.launch", { experimentId: id });
  return { server, runId };
}
