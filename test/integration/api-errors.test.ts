/**
 * What a client hears when a call fails, over real HTTP (server/api/trpc.ts): text PostgreSQL cannot store (a NUL,
 * a lone surrogate) is refused with a 400 naming the field, or replaced in what workers send; an internal error
 * answers a generic message with an id (the log has the details) and never SQL, a stack or a server path; the errors
 * a caller can fix keep their messages; GET /api/health fails without naming the database's location.
 */
import { testRunConfig } from "../support/run-config";
import { TRPCClientError } from "@trpc/client";
import { eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GET as health } from "@/app/api/health/route";
import { setWorkerToken } from "@/server/api/routers/worker";
import { DEFAULT_PROJECT } from "@/server/auth/projects";
import { type DatabaseHandle, LOCAL_USER, setDatabase } from "@/server/db";
import { newId } from "@/server/db/ids";
import { experiments, experimentVersions, jobs, runs } from "@/server/db/schema";
import { registerWorker } from "@/server/jobs";
import { type ApiServer, startApiServer } from "./support/api-server";
import { openTestDatabase } from "./support/database";

const WORKER_TOKEN = "api-errors-test-token";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let server: ApiServer;
beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
  setWorkerToken(WORKER_TOKEN);
  server = await startApiServer();
});
afterAll(async () => {
  await server?.close();
  await db?.close();
});
afterEach(() => {
  vi.restoreAllMocks();
  setDatabase(db.handle);
});

const failure = async (call: Promise<unknown>) => {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCClientError);
  return error as { message: string; data: Record<string, unknown> };
};
const experimentCount = async () => (await db.handle.db.select({ n: sql<number>`count(*)::int` }).from(experiments))[0]!.n;
const versionsOf = async (id: string) =>
  (await db.handle.db.select({ version: experimentVersions.version }).from(experimentVersions).where(eq(experimentVersions.experimentId, id))).length;

const testConfig = { name: "errors", environment: "custom", agent: { base: "generalist-base" } };

describe("text the database cannot store", () => {
  it("refuses a NUL in an experiment's name with a 400 naming the field, and stores nothing", async () => {
    const before = await experimentCount();
    const error = await failure(server.client().experiments.create.mutate({ name: "bad\u0000name" }));
    expect(error.data).toMatchObject({ code: "BAD_REQUEST", httpStatus: 400, path: "experiments.create" });
    expect(error.message).toBe("name: NUL characters (\\u0000) are not accepted; remove them.");
    expect(await experimentCount()).toBe(before);
  });

  it("refuses a NUL in a source file or the config, naming the file or key, and saves no version", async () => {
    const client = server.client();
    const { id } = await client.experiments.create.mutate({ name: "nul-source", files: { "environment.ts": "export default 1;" } });
    const inFile = await failure(client.experiments.save.mutate({ id, files: { "environment.ts": "const a = 1;\u0000" }, config: testConfig }));
    expect(inFile.data.httpStatus).toBe(400);
    expect(inFile.message).toMatch(/^files\["environment\.ts"\]: NUL characters/);
    const inConfig = await failure(
      client.experiments.save.mutate({ id, files: {}, config: { ...testConfig, agent: { base: "generalist-base", name: "a\u0000" } } }),
    );
    expect(inConfig.message).toMatch(/^config\.agent\.name: NUL characters/);
    const lone = await failure(client.experiments.save.mutate({ id, files: {}, config: { ...testConfig, name: "\ud83d" } }));
    expect(lone.message).toMatch(/^config\.name: lone UTF-16 surrogates/);
    expect(lone.data.httpStatus).toBe(400);
    expect(await versionsOf(id)).toBe(1);
  });

  it("stores a NUL a worker sends (an environment's error message) as U+FFFD, so the run still ends", async () => {
    const { workerId, runId, jobId } = await runningJob();
    const worker = server.client({ "x-tinkerlab-worker-token": WORKER_TOKEN });
    await worker.worker.finish.mutate({ workerId, jobId, outcome: "failed", reason: "step() threw: bad byte \u0000 in observation" });
    const [run] = await db.handle.db.select({ status: runs.status, reason: runs.reason }).from(runs).where(eq(runs.id, runId));
    expect(run).toEqual({ status: "failed", reason: "step() threw: bad byte \uFFFD in observation" });
  });
});

/** A running run whose job a freshly registered worker holds. */
async function runningJob() {
  const { id: experimentId, versionId } = await server.client().experiments.create.mutate({ name: "worker-job" });
  const { workerId } = await registerWorker(db.handle.db, {
    hostname: "test",
    pid: 1,
    backend: "test",
    devices: [{ kind: "cpu", name: "cpu", memoryMb: 1024, computeSlots: 1 }],
  });
  const runId = newId("run");
  await db.handle.db.insert(runs).values({
    id: runId,
    projectId: DEFAULT_PROJECT,
    experimentId,
    experimentVersionId: versionId,
    createdBy: LOCAL_USER.id,
    name: runId,
    status: "running",
    config: testRunConfig(),
    seed: 1,
    totalSteps: 10,
  });
  const jobId = newId("job");
  await db.handle.db.insert(jobs).values({
    id: jobId,
    kind: "rl",
    runId,
    userId: LOCAL_USER.id,
    status: "running",
    footprint: { sharedBase: null, baseMemoryMb: 0, ownMemoryMb: 100, computeSlots: 1, breakdown: {} },
    workerId,
  });
  return { workerId, runId, jobId };
}

describe("error messages", () => {
  it("passes the errors a caller can fix as they are, without a stack", async () => {
    const client = server.client();
    const missingName = await failure(client.experiments.create.mutate({ name: "   " }));
    expect(missingName.data).toMatchObject({ code: "BAD_REQUEST", httpStatus: 400 });
    expect(missingName.message).toContain("give the experiment a name");
    expect(missingName.data.zodError).toMatchObject({ fieldErrors: { name: ["give the experiment a name"] } });
    expect(missingName.data.stack).toBeUndefined();
    const notFound = await failure(client.experiments.save.mutate({ id: "exp_nope", files: {}, config: testConfig }));
    expect(notFound.data).toMatchObject({ code: "NOT_FOUND", httpStatus: 404 });
    expect(notFound.message).toBe("No experiment with id 'exp_nope'");
    expect(notFound.data.stack).toBeUndefined();
  });

  it("keeps a worker's refusals as they are: a job no longer its own, a job that does not exist", async () => {
    const { jobId } = await runningJob();
    const { workerId: other } = await runningJob();
    const worker = server.client({ "x-tinkerlab-worker-token": WORKER_TOKEN });
    const taken = await failure(worker.worker.report.mutate({ workerId: other, jobId, step: 1 }));
    expect(taken.data).toMatchObject({ code: "CONFLICT", httpStatus: 409 });
    expect(taken.message).toContain("no longer assigned"); // what a worker's report queue stops retrying on
    const missing = await failure(worker.worker.report.mutate({ workerId: other, jobId: "job_missing", step: 1 }));
    expect(missing.data).toMatchObject({ code: "NOT_FOUND", httpStatus: 404 });
    expect(missing.message).toBe("No job with id 'job_missing'");
  });

  it("answers an internal error (a failing SQL statement) with an id, and no SQL, stack or server path", async () => {
    const broken = await openTestDatabase();
    try {
      await broken.handle.db.execute(sql`alter table experiments rename to experiments_moved_away`);
      setDatabase(broken.handle);
      const logged = vi.spyOn(console, "error").mockImplementation(() => {});

      const error = await failure(server.client().experiments.list.query({ limit: 5 }));
      expect(error.data).toMatchObject({ code: "INTERNAL_SERVER_ERROR", httpStatus: 500, path: "experiments.list" });
      const errorId = error.data.errorId as string;
      expect(errorId).toMatch(/^err_[0-9a-f]{8}$/);
      expect(error.message).toContain(`(error ${errorId})`);
      expect(error.data.stack).toBeUndefined();

      const response = await fetch(`${server.url}/api/trpc/experiments.list?input=${encodeURIComponent(JSON.stringify({ json: { limit: 5 } }))}`);
      expect(response.status).toBe(500);
      const body = await response.text();
      for (const leak of ["select", "Failed query", "relation", '"experiments"', "params", "    at ", process.cwd(), "node_modules"]) {
        expect(body).not.toContain(leak);
      }

      // The log has the whole error under the id the client was given.
      const line = logged.mock.calls.find((args) => String(args[0]).includes(errorId));
      expect(line).toBeDefined();
      const loggedError = line![1] as Error & { cause?: Error };
      expect(`${loggedError.message} ${loggedError.cause?.message ?? ""}`).toMatch(/select/i);
    } finally {
      await broken.close();
    }
  });

  it("answers a failed health check without the database's location or a stack", async () => {
    const location = "/var/lib/tinkerlab-secret/pgdata";
    const failing = {
      kind: "pglite",
      location,
      migration: { applied: 1, latest: "0001_x" },
      db: {
        execute: async () => {
          throw new Error(`could not open ${location}: permission denied`);
        },
      },
    } as unknown as DatabaseHandle;
    setDatabase(failing);
    const logged = vi.spyOn(console, "error").mockImplementation(() => {});
    const response = await health(new Request("http://127.0.0.1:3000/api/health"));
    expect(response.status).toBe(503);
    const body = (await response.json()) as { status: string; error: string; errorId: string };
    expect(body.status).toBe("error");
    expect(body.errorId).toMatch(/^err_[0-9a-f]{8}$/);
    expect(JSON.stringify(body)).not.toContain(location);
    expect(JSON.stringify(body)).not.toContain("    at ");
    expect(logged.mock.calls.some((args) => String(args[0]).includes(body.errorId))).toBe(true);
  });
});
