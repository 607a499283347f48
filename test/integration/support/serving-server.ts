import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { admitRequest, directProcedures, serveDirect, setWorkerToken } from "@/server/api";
import { type DatabaseHandle, setDatabase } from "@/server/db";
import { startSchedulerLoop } from "@/server/jobs";
import { createPackingPolicy } from "@/server/scheduler";
import { createServingRoutes, ServingHub } from "@/server/serving";
import { workerCommand } from "@/server/worker/local-workers";

const ROOT = path.resolve(__dirname, "../../..");

export type ServingServer = { url: string; hub: ServingHub; output(): string; close(): Promise<void> };

/**
 * The web server's doors that serving uses, without a Next.js build: the gate, the OpenAI-compatible routes and
 * the serving jobs' exchange (server/serving), and the workers' direct tRPC procedures (register, heartbeat, claim,
 * report, finish, and remote sessions' calls), as server/web-server.ts routes them; the scheduler loop; and one real
 * worker process (`tinkerlab worker`) joined over HTTP, whose job hosts run the jobs.
 */
export async function startServingServer(handle: DatabaseHandle, env: { basesDir: string; artifactsDir: string }): Promise<ServingServer> {
  setDatabase(handle);
  const token = randomBytes(24).toString("base64url");
  setWorkerToken(token);
  const hub = new ServingHub();
  const routes = createServingRoutes(hub, { workerToken: token });
  const serve = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    if (!admitRequest(req, res, serve)) return;
    if (routes && (req.url ?? "").startsWith("/v1/")) return void routes.serve(req, res);
    if ((req.url ?? "").startsWith("/api/serving/")) return void routes.serve(req, res);
    const direct = directProcedures(req.method, req.url);
    if (direct) return void serveDirect(req, res, direct);
    res.writeHead(404).end();
  };
  const server = http.createServer(serve);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const scheduler = startSchedulerLoop(handle.db, createPackingPolicy(), { onError: (error) => console.error("scheduler pass failed:", error) });
  let output = "";
  const { DATABASE_URL: _, ...inherited } = process.env;
  const worker: ChildProcess = spawn(process.execPath, workerCommand(ROOT), {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "pipe"],
    env: {
      ...inherited,
      TINKERLAB_SERVER_URL: url,
      TINKERLAB_WORKER_TOKEN: token,
      TINKERLAB_BASES_DIR: env.basesDir,
      ARTIFACTS_DIR: env.artifactsDir,
      TINKERLAB_WORKER_EXIT_WITH_PARENT: "on",
      // Serving jobs hold a slot while they idle; the tests' sessions need theirs too.
      TINKERLAB_WORKER_SLOTS: "8",
    },
  });
  worker.stdout!.on("data", (chunk) => (output += chunk));
  worker.stderr!.on("data", (chunk) => (output += chunk));
  return {
    url,
    hub,
    output: () => output,
    async close() {
      scheduler.stop();
      await new Promise<void>((resolve) => {
        if (worker.exitCode !== null) return resolve();
        const timer = setTimeout(() => worker.kill("SIGKILL"), 5_000);
        worker.once("exit", () => (clearTimeout(timer), resolve()));
        worker.kill("SIGTERM");
      });
      hub.close();
      await new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      });
    },
  };
}
