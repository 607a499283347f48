/**
 * `npm start` owns its processes: a SIGTERM or SIGINT sent to the npm process itself, as a user's `kill` or a process
 * supervisor sends it, stops the server and its local worker, and leaves no process of the tree behind. The worker is
 * training a run and a page follows the run's metric stream, as when someone stops a workbench they are using.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { saveTinyBase, tinyExperiment } from "../support/tiny-run";
import { callProcedure, freePort, ROOT, tempDir } from "./support/server";

type Proc = { pid: number; ppid: number; start: string; state: string; cmd: string };

/** A process as /proc shows it now, or null once it is gone (a zombie is gone: it only waits to be reaped). */
function readProc(pid: number): Proc | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    // After the command's name in parentheses (which may hold spaces): state, ppid, …, the start time (field 22).
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
    return { pid, ppid: Number(fields[1]), state: fields[0], start: fields[19], cmd };
  } catch {
    return null;
  }
}

/** The process and all its descendants. */
function processTree(root: number): Proc[] {
  const all = fs
    .readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProc(Number(name)))
    .filter((proc): proc is Proc => proc !== null);
  const tree: Proc[] = [];
  const add = (pid: number) => {
    const proc = all.find((p) => p.pid === pid);
    if (!proc) return;
    tree.push(proc);
    for (const child of all.filter((p) => p.ppid === pid)) add(child.pid);
  };
  add(root);
  return tree;
}

/** Whether the very process seen earlier (same start time, so not a reused id) still runs. */
function alive(proc: Proc): boolean {
  const now = readProc(proc.pid);
  return now !== null && now.start === proc.start && now.state !== "Z";
}

const started: ChildProcess[] = [];
afterEach(() => {
  // A failed test must not leave its servers behind: npm runs in a process group of its own.
  for (const child of started.splice(0)) {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {}
  }
});

/** `npm start` as a user runs it, on a free port with fresh data folders and one local worker, once it is ready. */
async function npmStart() {
  const port = await freePort();
  const data = tempDir("signals");
  await saveTinyBase(path.join(data, "bases"));
  const child = spawn("npm", ["start"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: "production",
      NEXT_TELEMETRY_DISABLED: "1",
      npm_config_update_notifier: "false",
      PORT: String(port),
      PGLITE_DATA_DIR: path.join(data, "db"),
      ARTIFACTS_DIR: path.join(data, "artifacts"),
      TINKERLAB_BASES_DIR: path.join(data, "bases"),
      TINKERLAB_EXAMPLES: "off",
      TINKERLAB_LOCAL_WORKERS: "1",
    },
  });
  started.push(child);
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  let exitedEarly = false;
  void exited.then(() => (exitedEarly = true));

  // Ready: /api/health answers, and lists the local worker as alive (registered with the server).
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 240_000; // a start that has to build first takes a few minutes on two busy cores
  let workerPid: number | undefined;
  while (workerPid === undefined) {
    if (exitedEarly) throw new Error(`npm start exited before it was ready:\n${output}`);
    if (Date.now() > deadline) throw new Error(`npm start was not ready with a worker within 240 s:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const health = await fetch(`${url}/api/health`)
      .then((response) => (response.ok ? response.json() : null))
      .catch(() => null);
    const workers: { id: string }[] = health?.training?.workers ?? [];
    for (const { id } of workers) {
      const pid = output.match(new RegExp(`\\[worker (\\d+)\\] registered as ${id} `))?.[1];
      if (pid) workerPid = Number(pid);
    }
  }
  return { npm: child, exited, url, workerPid, output: () => output };
}

describe("npm start owns its processes", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`a ${signal} to npm's process stops the server and its worker, leaving nothing behind`, async () => {
      const { npm, exited, url, workerPid, output } = await npmStart();
      // A run the worker is training, and a page's metric stream of it, open (it ends only when the run does).
      const { id } = await callProcedure<{ id: string }>({ url }, "experiments.create", tinyExperiment("busy", 100_000));
      const { runId } = await callProcedure<{ runId: string }>({ url }, "runs.launch", { experimentId: id });
      const training = Date.now() + 120_000;
      while ((await callProcedure<{ step: number }>({ url }, "runs.byId", { id: runId }, "GET")).step < 1) {
        if (Date.now() > training) throw new Error(`the run did not reach its first step within 120 s:\n${output()}`);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      const stream = await fetch(`${url}/api/trpc/runs.metricStream?input=${encodeURIComponent(JSON.stringify({ json: { runId } }))}`);
      const events = stream.body!.getReader();
      expect(new TextDecoder().decode((await events.read()).value)).toContain("event: connected");

      const tree = processTree(npm.pid!);
      const describeTree = (procs: Proc[]) => procs.map((p) => `${p.pid} (parent ${p.ppid}) ${p.cmd.slice(0, 160)}`).join("\n");
      // The whole tree: npm, bin/start.mjs, the server, the worker, and whatever they started (the worker's job host).
      const pids = tree.map((p) => p.pid);
      const commands = tree.map((p) => p.cmd).join("\n");
      expect(pids, describeTree(tree)).toContain(workerPid);
      expect(commands).toContain("bin/start.mjs");
      expect(commands).toContain("bin/tinkerlab.ts start");

      const sent = Date.now();
      process.kill(npm.pid!, signal);
      const within = 20_000;
      let left = tree.filter(alive);
      while (left.length > 0 && Date.now() - sent < within) {
        await new Promise((resolve) => setTimeout(resolve, 200));
        left = tree.filter(alive);
      }
      expect(describeTree(left), `still running ${within / 1000} s after ${signal}; output:\n${output()}`).toBe("");
      // The server shut down on the signal (its workers stopped, its database closed) and npm ended cleanly.
      expect(output()).toContain(`${signal}: shutting down`);
      expect(output()).not.toContain("still shutting down");
      await events.cancel().catch(() => {});
      expect(await exited).toEqual({ code: 0, signal: null });
    }, 300_000);
  }
});
