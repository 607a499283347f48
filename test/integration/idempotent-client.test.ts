/**
 * The typed client (lib/client, what scripts and the CLI use) sends each write with one idempotency key and sends
 * it again, with that key, when the answer is lost on the way back: the server did the work once, and the retry
 * gets its answer, so a flaky connection never makes a second experiment or run.
 */
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET, POST } from "@/app/api/trpc/[trpc]/route";
import { createClient } from "@/lib/client";
import { type DatabaseHandle, experiments, runs, setDatabase } from "@/server/db";
import { openTestDatabase } from "./support/database";

process.env.TINKERLAB_AUTH = "local";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
});
afterAll(() => db.close());

/**
 * A client whose requests reach the server's tRPC route in-process, and whose first `lose` answers to writes are
 * lost after the server has answered them, as when a connection drops on the way back.
 */
function flakyClient(lose: number) {
  const sent: unknown[] = [];
  const fetchThrough = async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    if (request.method === "POST") sent.push(await request.clone().json());
    const response = await (request.method === "GET" ? GET : POST)(request);
    if (request.method === "POST" && lose-- > 0) throw new TypeError("fetch failed");
    return response;
  };
  return { tl: createClient({ url: "http://127.0.0.1:3000", fetch: fetchThrough }), sent };
}

const named = async (name: string) => (await handle.db.select({ id: experiments.id }).from(experiments).where(eq(experiments.name, name))).map((e) => e.id);

describe("the typed client's writes", () => {
  it("sends a create whose answer was lost again with the same key: one experiment, and its id", async () => {
    const { tl, sent } = flakyClient(2);
    const created = await tl.experiments.create({ name: "lost-answers", template: "arithmetic" });
    expect(await named("lost-answers")).toEqual([created.id]);
    const keys = sent.map((body) => (body as { json: { idempotencyKey: string } }).json.idempotencyKey);
    expect(keys).toHaveLength(3);
    expect(new Set(keys).size).toBe(1);
  });

  it("sends a launch whose answer was lost again with the same key: one run", async () => {
    const { tl } = flakyClient(0);
    const { id: experimentId } = await tl.experiments.create({ name: "lost-launch", template: "arithmetic" });
    const flaky = flakyClient(1);
    const { runId } = await flaky.tl.runs.launch(experimentId);
    const launched = await handle.db.select({ id: runs.id }).from(runs).where(eq(runs.experimentId, experimentId));
    expect(launched.map((r) => r.id)).toEqual([runId]);
    // A second launch is a second logical request: a new key, a second run.
    await tl.runs.launch(experimentId);
    expect(await handle.db.select({ id: runs.id }).from(runs).where(eq(runs.experimentId, experimentId))).toHaveLength(2);
  });
});
