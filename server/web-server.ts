import { randomBytes } from "node:crypto";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import next from "next";
import { directProcedures, serveDirect, admitRequest, setWorkerToken } from "./api";
import { accountsFor } from "./auth";
import { openDatabase, setDatabase, StartupError, type DatabaseHandle } from "./db";
import type { ServerEnv } from "./env";
import { ensureExampleExperiments } from "./experiments";
import { startSchedulerLoop, workerProcessEnded } from "./jobs";
import { createPackingPolicy } from "./scheduler";
import { createServingRoutes, isServingRequest, ServingHub } from "./serving";
import { announceRunData, followLiveRuns, isMetricStreamRequest, serveMetricStream } from "./metrics";
import { listenAsServer, startLocalWorkers } from "./worker";

export type RunningServer = { url: string; database: DatabaseHandle; localWorkerPids(): number[]; close(): Promise<void> };

/**
 * Starts the workbench: takes the port first (so a port in use fails in a second, not after a build), opens and
 * migrates the database, then hands requests to Next.js.
 */
export async function startWebServer(
  env: ServerEnv,
  options: { dev?: boolean; root?: string /** the environment local workers inherit */; workerEnv?: NodeJS.ProcessEnv } = {},
): Promise<RunningServer> {
  const root = path.resolve(options.root ?? process.cwd());
  let handle: ((req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>) | undefined;
  let serving: ReturnType<typeof createServingRoutes> | undefined;
  const serve = (req: http.IncomingMessage, res: http.ServerResponse): void => {
    // The gate (server/api/limits.ts) writes the client's address from the socket, answers a tRPC request it refuses
    // (a batch over the cap, a body not JSON, a signed-out address past its rate), and holds each body to its
    // procedure's limit as it streams in (413 over it). A chunked body comes back here once it has all arrived.
    if (!admitRequest(req, res, serve)) return;
    if (!handle) {
      res.writeHead(503, { "content-type": "text/plain", "retry-after": "2" }).end("Tinkerlab is starting…");
      return;
    }
    // Live metric streams go from the run's feed straight to the socket, past Next.js (see server/metrics/stream-sse.ts).
    if (isMetricStreamRequest(req.method, req.url)) {
      serveMetricStream(req, res).catch((error) => (console.error("metric stream failed:", error), res.destroy()));
      return;
    }
    // The OpenAI-compatible endpoints and serving jobs' exchanges, past Next.js (server/serving).
    if (serving && isServingRequest(req.url)) {
      void serving.serve(req, res);
      return;
    }
    // A remote session's calls, its worker's exchanges and workers' reports, past Next.js too (server/api/direct.ts).
    const direct = directProcedures(req.method, req.url);
    if (direct) {
      void serveDirect(req, res, direct);
      return;
    }
    void handle(req, res);
  };
  const server = http.createServer(serve);
  await listen(server, env.PORT, env.HOST);

  let database: DatabaseHandle;
  try {
    database = await openDatabase({
      databaseUrl: env.DATABASE_URL,
      pgliteDir: env.PGLITE_DATA_DIR,
      migrationsFolder: path.join(root, "drizzle"),
    });
  } catch (error) {
    server.close();
    throw error;
  }
  setDatabase(database);
  // A team server's cookie-signing secret, read or made now (server/auth/secret.ts), so that what it says of it is
  // said at start-up and a secret it cannot read stops the start rather than the first sign-in.
  if (env.TINKERLAB_AUTH === "team") {
    try {
      await accountsFor(database.db, { secret: env.TINKERLAB_AUTH_SECRET, host: env.HOST, port: env.PORT });
    } catch (error) {
      server.close();
      await database.close();
      throw new StartupError(
        `Could not read or make the secret that signs session cookies: ${error instanceof Error ? error.message : String(error)}. Set TINKERLAB_AUTH_SECRET (32 characters or more), or TINKERLAB_AUTH_SECRET_FILE to a file this user may write.`,
      );
    }
  }
  // Live runs' metric summaries stay in memory as they report, so their pages open without reading all history.
  const stopFollowing = followLiveRuns(database.db);

  const app = next({ dev: options.dev ?? false, dir: root, hostname: env.HOST, port: env.PORT, httpServer: server });
  try {
    await app.prepare();
  } catch (error) {
    server.close();
    await database.close();
    const message = error instanceof Error ? error.message : String(error);
    if (/production build|\.next/i.test(message)) {
      throw new StartupError(`No build of the workbench was found in ${root}/.next. Run 'npm start' (it builds first) or 'npm run build'.`);
    }
    throw error;
  }
  handle = app.getRequestHandler();
  if (env.TINKERLAB_EXAMPLES === "on") await ensureExampleExperiments(database.db);

  const url = `http://${env.HOST === "0.0.0.0" ? "localhost" : env.HOST}:${env.PORT}`;
  const localUrl = `http://${env.HOST === "0.0.0.0" ? "127.0.0.1" : env.HOST}:${env.PORT}`;
  if (!(options.dev ?? false)) await warmRoutes(localUrl);
  const token = env.TINKERLAB_WORKER_TOKEN ?? randomBytes(24).toString("base64url");
  setWorkerToken(token);
  const servingHub = new ServingHub();
  serving = createServingRoutes(servingHub, { workerToken: token });
  const scheduler = startSchedulerLoop(database.db, createPackingPolicy(), {
    onError: (error) => console.error("scheduler pass failed:", error),
  });
  const notices = env.DATABASE_URL ? listenAsServer(env.DATABASE_URL, { jobs: () => scheduler.wake(), runData: announceRunData }) : null;
  const localWorkers = startLocalWorkers({
    count: env.TINKERLAB_LOCAL_WORKERS,
    serverUrl: localUrl,
    token,
    root,
    env: options.workerEnv ?? ({} as NodeJS.ProcessEnv),
    // The server saw its worker die: its jobs go back to the queue now, saying how, not after its lease runs out.
    onExit: (pid, how) =>
      void workerProcessEnded(database.db, { hostname: os.hostname(), pid, how })
        .then(() => scheduler.wake())
        .catch((error: unknown) => console.error("could not hand back a dead worker's jobs:", error)),
  });
  return {
    url,
    database,
    localWorkerPids: localWorkers.pids,
    async close() {
      scheduler.stop();
      servingHub.close();
      stopFollowing();
      await notices?.close();
      await localWorkers.stop();
      // Open requests end here (a page's metric stream never ends by itself), so that the database closes next.
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await app.close?.();
      await database.close();
    },
  };
}

/**
 * Renders the pages people open first once, before the server says it is ready: Next.js loads a route's server
 * code on its first request, which cost the first visitor of a run page about 0.4 s (bench:stream's first open of
 * a 100,000-point run: 1.40 s cold, 0.98 s with the route loaded). A missing id renders the not-found page through
 * the route's own code, touching no run. Failures only cost the first visitor that time again, so they are logged.
 */
async function warmRoutes(baseUrl: string): Promise<void> {
  // /compare with no runs loads the compare view's code (its charts) the same way.
  const paths = ["/runs", "/runs/run_startup_warmup", "/experiments/exp_startup_warmup", "/compare"];
  await Promise.all(
    paths.map(async (route) => {
      try {
        const response = await fetch(`${baseUrl}${route}`, { signal: AbortSignal.timeout(15_000) });
        await response.arrayBuffer();
      } catch (error) {
        console.error(`warming ${route} failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }),
  );
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException) => {
      server.off("listening", onListening);
      if (error.code === "EADDRINUSE") {
        reject(new StartupError(`Port ${port} on ${host} is already in use. Stop the program using it, or set PORT to a free port (e.g. PORT=${port + 1}).`));
      } else if (error.code === "EACCES") {
        reject(new StartupError(`Not allowed to listen on port ${port}. Choose a port above 1023 with PORT.`));
      } else if (error.code === "EADDRNOTAVAIL" || error.code === "ENOTFOUND") {
        reject(new StartupError(`Cannot listen on HOST=${host}: no such address on this machine. Use 127.0.0.1 or 0.0.0.0.`));
      } else {
        reject(error);
      }
    };
    const onListening = () => {
      server.off("error", onError);
      resolve();
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen(port, host);
  });
}
