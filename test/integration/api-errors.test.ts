/**
 * What a client hears when a call fails, over real HTTP (server/api/trpc.ts): text PostgreSQL cannot store (a NUL,
 * a lone surrogate) is refused with a 400 naming the field, or replaced in what workers send; an internal error
 * answers a generic message with an id (the log has the details) and never SQL, a stack or a server path; the errors
 * a caller can fix keep their messages; a malformed request (not JSON, not superjson's shape, nested too deep, another
 * content type) hears what is accepted, in our words, never a library's; GET /api/health fails without naming the
 * database's location.
 */
import { testRunConfig } from "../support/run-config";
import { TRPCClientError } from "@trpc/client";
import { eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GET as health } from "@/app/api/health/route";
import { setWorkerToken } from "@/server/api/routers/worker";
import { MAX_INPUT_DEPTH } from "@/server/api/trpc";
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

describe("malformed requests", () => {
  /** A raw POST to the tRPC endpoint: its status and, from tRPC's envelope (one, or the first of a batch's), the message and data. */
  async function post(path: string, body: string | FormData, headers: Record<string, string> = { "content-type": "application/json" }) {
    const response = await fetch(`${server.url}/api/trpc/${path}`, { method: "POST", headers, body });
    const text = await response.text();
    const parsed = JSON.parse(text) as Envelope | Envelope[];
    const envelope = Array.isArray(parsed) ? parsed[0]! : parsed;
    return { status: response.status, text, message: envelope.error.json.message, data: envelope.error.json.data };
  }
  type Envelope = { error: { json: { message: string; data: Record<string, unknown> } } };
  const SHAPE = 'the input must be an object, {"json": <input>} as superjson (tRPC\'s transformer here) sends it';
  /** Words of a library's or the runtime's internals that must never reach a client. */
  const INTERNAL = ["Cannot destructure", "Maximum call stack", "superjson/issues", "github.com", "    at ", "payload", "undefined (reading"];
  const expectNoInternals = (text: string) => {
    for (const leak of INTERNAL) expect(text).not.toContain(leak);
  };

  it("answers a null, string or array body with what the input must be", async () => {
    const before = await experimentCount();
    for (const [body, got] of [
      ["null", "null"],
      ['"a name"', "a string"],
      ["[1,2]", "an array"],
      ["7", "a number"],
    ] as const) {
      const answer = await post("experiments.create", body);
      expect(answer.status).toBe(400);
      expect(answer.message).toBe(`${SHAPE}; got ${got}`);
      expectNoInternals(answer.text);
    }
    // A batch's call whose input is null, and a raw input sent without superjson's wrapper.
    const inBatch = await post("experiments.create?batch=1", JSON.stringify({ 0: null }));
    expect(inBatch.message).toBe(`${SHAPE}; got null`);
    const unwrapped = await post("experiments.create", JSON.stringify({ name: "raw" }));
    expect(unwrapped.message).toBe(`${SHAPE}; got one with "name"`);
    // A GET's ?input= is read the same way.
    const query = await fetch(`${server.url}/api/trpc/health.check?input=null`);
    expect(query.status).toBe(400);
    expect(await query.text()).toContain(`${SHAPE}; got null`.replaceAll('"', '\\"'));
    expect(await experimentCount()).toBe(before);
  });

  it(`refuses an input nested deeper than ${MAX_INPUT_DEPTH} levels in those words, and reads one that deep`, async () => {
    const nested = (levels: number) => `${'{"a":'.repeat(levels - 1)}[]${"}".repeat(levels - 1)}`;
    for (const path of ["experiments.create", "experiments.create?batch=1"]) {
      const input = `{"json":{"name":"deep","config":${nested(10_000)}}}`;
      const answer = await post(path, path.endsWith("batch=1") ? `{"0":${input}}` : input);
      expect(answer.status).toBe(400);
      expect(answer.message).toBe(`JSON nested deeper than ${MAX_INPUT_DEPTH} levels is not accepted`);
      expectNoInternals(answer.text);
    }
    // {"name", "config": …} is one level; the config's levels come on top.
    const over = await post("experiments.create", `{"json":{"name":"deep","config":${nested(MAX_INPUT_DEPTH)}}}`);
    expect(over.message).toBe(`JSON nested deeper than ${MAX_INPUT_DEPTH} levels is not accepted`);
    const within = await post("experiments.create", `{"json":{"name":"deep","config":${nested(MAX_INPUT_DEPTH - 1)}}}`);
    expect(within.message).not.toContain("nested deeper");
    expectNoInternals(within.text);
  });

  it("answers a body that is not JSON with that, in its words, and other content types with what is accepted", async () => {
    const invalid = await post("experiments.create", "{not json");
    expect(invalid.status).toBe(400);
    expect(invalid.message).toMatch(/^the input is not valid JSON \(.+\): send \{"json": <input>\} as superjson serializes it/);
    for (const [headers, named] of [
      [{ "content-type": "text/plain" }, '"text/plain"'],
      [{}, '"text/plain;charset=UTF-8"'],
    ] as const) {
      const answer = await post("experiments.create", '{"json":{"name":"typed"}}', headers);
      expect(answer.status).toBe(415);
      expect(answer.message).toBe(`a tRPC call's body must be JSON, sent with content-type: application/json; this request's content-type is ${named}`);
    }
    // A form: tRPC would hand it to the procedure as it is.
    const form = new FormData();
    form.set("name", "formed");
    const formed = await post("experiments.create", form, {});
    expect(formed.status).toBe(415);
    expect(formed.message).toMatch(/content-type is "multipart\/form-data; boundary=/);
  });

  it("answers superjson meta that does not fit its json without superjson's own words", async () => {
    for (const meta of [{ values: { name: [["class", "Foo"]] } }, { values: { name: [["custom", "Foo"]] } }, { values: { "__proto__.x": ["Date"] } }]) {
      const answer = await post("experiments.create", JSON.stringify({ json: { name: "meta" }, meta }));
      expect(answer.status).toBe(400);
      expect(answer.message).toBe(
        'the input\'s "meta" does not fit its "json": send what superjson.serialize makes of the input (plain JSON, Dates, Maps, Sets, BigInts, undefined)',
      );
      expectNoInternals(answer.text);
    }
  });
});
