/**
 * Validation under load, over real HTTP: twenty experiments.validate calls at once, with type-checking, on a
 * server with one validation process. Each is answered with its report, or refused with 429 saying how many
 * experiments the server is validating and when to retry (the same seconds in a Retry-After header); none fails
 * otherwise.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { setDatabase } from "@/server/db";
import { closeValidationProcesses } from "@/server/validation";
import { type ApiServer, startApiServer } from "./support/api-server";
import { openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let server: ApiServer;
const sizeBefore = process.env.TINKERLAB_VALIDATION_PROCESSES;
beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
  server = await startApiServer();
  // A pool of one process, made at the first validation below.
  closeValidationProcesses();
  process.env.TINKERLAB_VALIDATION_PROCESSES = "1";
});
afterAll(async () => {
  closeValidationProcesses();
  if (sizeBefore === undefined) delete process.env.TINKERLAB_VALIDATION_PROCESSES;
  else process.env.TINKERLAB_VALIDATION_PROCESSES = sizeBefore;
  await server?.close();
  await db?.close();
});

/** A sound environment whose dry run takes a few hundred milliseconds; `n` makes each source its own (no reuse). */
const environment = (n: number) => `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, number>({
  name: "count-${n}",
  data: { kind: "free" },
  systemPrompt: "Say a number.",
  maxTurns: 3,
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => (/^\\d+$/.test(text) ? { ok: true, action: Number(text) } : { ok: false, error: "a number" }),
  step(state, action) {
    const until = Date.now() + 20;
    while (Date.now() < until) {}
    return { state: { n: state.n + action }, reward: 1, done: state.n + action > 2, observation: String(state.n + action) };
  },
});
`;

describe("validation under load", () => {
  it("answers twenty validations at once, or refuses the extra ones with 429 and when to retry", async () => {
    const { id: experimentId } = await server.client().experiments.create.mutate({ name: "validated under load" });
    const answers = await Promise.all(
      Array.from({ length: 20 }, async (_, n) => {
        const response = await fetch(`${server.url}/api/trpc/experiments.validate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ json: { experimentId, files: { "environment.ts": environment(n) }, typeCheck: true } }),
        });
        return { n, status: response.status, retryAfter: response.headers.get("retry-after"), body: (await response.json()) as Record<string, any> };
      }),
    );
    const answered = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status !== 200 && a.status !== 429).map((a) => `${a.status} ${JSON.stringify(a.body)}`)).toEqual([]);
    for (const { n, body } of answered) {
      const report = body.result.data.json;
      expect(report.diagnostics).toEqual([]);
      expect(report.ok).toBe(true);
      expect(report.environment.name).toBe(`count-${n}`);
    }
    for (const { body, retryAfter } of refused) {
      const message: string = body.error.json.message;
      expect(message).toMatch(/^the server is busy validating \d+ experiments; retry in \d+ s$/);
      expect(retryAfter).toBe(/retry in (\d+) s/.exec(message)![1]);
    }
    // One process, twenty at once: the queue holds what it can answer in time, and the rest are told to retry.
    expect(answered.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
  });
});
