import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";

const ROOT = path.resolve(__dirname, "../..");

export type DatabaseWorker = { process: ChildProcess; output: () => string; stop: () => Promise<void> };

/** `tinkerlab worker` with nothing but a database URL (no server URL, no token), and what else `env` adds. */
export function startDatabaseWorker(databaseUrl: string, env: Record<string, string>): DatabaseWorker {
  const child = spawn(path.join(ROOT, "node_modules", ".bin", "tsx"), [path.join(ROOT, "bin", "tinkerlab.ts"), "worker"], {
    cwd: ROOT,
    env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: databaseUrl, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  return {
    process: child,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Resolves once every worker has registered with the database. */
export async function waitForRegistration(workers: DatabaseWorker[], seconds = 120) {
  const deadline = Date.now() + seconds * 1000;
  while (!workers.every((w) => /registered as wrk_\w+ with database/.test(w.output()))) {
    if (Date.now() > deadline) throw new Error(`workers did not register:\n${workers.map((w) => w.output()).join("\n---\n")}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
