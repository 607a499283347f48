/**
 * Idempotent writes (server/api/idempotency.ts): a create, launch, evaluate, export or upload sent again with the
 * same idempotency key (a retry after a lost answer, a double click, 200 at once) makes one object, and every
 * request gets its ids; the same key with another input is refused; without a key, each request makes its own.
 */
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerOnce } from "@/server/api/idempotency";
import { createProject } from "@/server/auth/projects";
import { experiments, idempotencyKeys, LOCAL_USER, runs, users } from "@/server/db";
import { closeValidationProcesses } from "@/server/validation";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  closeValidationProcesses();
  await db.close();
});

const experimentsNamed = async (name: string) =>
  (await db.handle.db.select({ id: experiments.id }).from(experiments).where(eq(experiments.name, name))).map((e) => e.id);
const runsOf = async (experimentId: string) =>
  (await db.handle.db.select({ id: runs.id }).from(runs).where(eq(runs.experimentId, experimentId))).map((r) => r.id);
const arithmetic = (name: string) => ({ name, template: "arithmetic" });

describe("idempotent writes", () => {
  it("makes one experiment of 200 identical creates sent at once with one key, and answers each with its id", async () => {
    const caller = callerFor(db.handle);
    const input = { ...arithmetic("retried"), idempotencyKey: "create-retried-0001" };
    const answers = await Promise.all(Array.from({ length: 200 }, () => caller.experiments.create(input)));
    const made = await experimentsNamed("retried");
    expect(made).toHaveLength(1);
    expect(new Set(answers.map((a) => a.id))).toEqual(new Set(made));
    // Later, the same retry still gets the first answer.
    expect(await caller.experiments.create(input)).toEqual(answers[0]);
  });

  it("makes a second experiment for a second key, and one for each request without a key, as before", async () => {
    const caller = callerFor(db.handle);
    const first = await caller.experiments.create({ ...arithmetic("two-keys"), idempotencyKey: "two-keys-first" });
    const second = await caller.experiments.create({ ...arithmetic("two-keys"), idempotencyKey: "two-keys-second" });
    expect(second.id).not.toBe(first.id);
    expect((await caller.experiments.create({ ...arithmetic("two-keys"), idempotencyKey: "two-keys-first" })).id).toBe(first.id);
    await Promise.all([caller.experiments.create(arithmetic("no-key")), caller.experiments.create(arithmetic("no-key"))]);
    expect(await experimentsNamed("two-keys")).toHaveLength(2);
    expect(await experimentsNamed("no-key")).toHaveLength(2);
  });

  it("refuses the same key with a different input (422) and makes nothing for it", async () => {
    const caller = callerFor(db.handle);
    await caller.experiments.create({ ...arithmetic("first-input"), idempotencyKey: "reused-key-01" });
    const refused = await caller.experiments.create({ ...arithmetic("other-input"), idempotencyKey: "reused-key-01" }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "UNPROCESSABLE_CONTENT", message: expect.stringMatching(/^this idempotency key was used with different input/) });
    expect(await experimentsNamed("other-input")).toHaveLength(0);
  });

  it("refuses a malformed key, naming what a key may be", async () => {
    const refused = await callerFor(db.handle)
      .experiments.create({ ...arithmetic("bad-key"), idempotencyKey: "short" })
      .catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "BAD_REQUEST", message: expect.stringMatching(/idempotencyKey: .*8 to 200 characters of letters, digits/) });
  });

  it("keeps nothing of a refused request: its key then works for the corrected one", async () => {
    const caller = callerFor(db.handle);
    const key = "refused-then-fixed";
    await expect(caller.experiments.create({ name: "fixed", template: "no-such-template", idempotencyKey: key })).rejects.toThrow(/no built-in template/);
    const made = await caller.experiments.create({ ...arithmetic("fixed"), idempotencyKey: key });
    expect((await caller.experiments.create({ ...arithmetic("fixed"), idempotencyKey: key })).id).toBe(made.id);
    expect(await experimentsNamed("fixed")).toEqual([made.id]);
  });

  it("scopes keys by caller: another person's same key makes their own experiment", async () => {
    const bob = { id: "usr_idem_bob", name: "Bob", email: "bob@idem.test" };
    await db.handle.db.insert(users).values(bob);
    await createProject(db.handle.db, { name: "Bob's", ownerId: bob.id });
    const input = { ...arithmetic("two-callers"), idempotencyKey: "shared-key-01" };
    const mine = await callerFor(db.handle).experiments.create(input);
    const bobs = await callerFor(db.handle, bob).experiments.create(input);
    expect(bobs.id).not.toBe(mine.id);
    expect((await callerFor(db.handle, bob).experiments.create(input)).id).toBe(bobs.id);
    expect(await experimentsNamed("two-callers")).toHaveLength(2);
  });

  it("forgets a key after 24 hours: the same key then makes a new experiment", async () => {
    const caller = callerFor(db.handle);
    const input = { ...arithmetic("expired"), idempotencyKey: "expiring-key-01" };
    const first = await caller.experiments.create(input);
    expect((await caller.experiments.create(input)).id).toBe(first.id);
    await db.handle.db.update(idempotencyKeys).set({ createdAt: sql`now() - interval '25 hours'` }).where(eq(idempotencyKeys.key, input.idempotencyKey));
    const second = await caller.experiments.create(input);
    expect(second.id).not.toBe(first.id);
    expect(await experimentsNamed("expired")).toHaveLength(2);
  });

  it("makes one run of 50 identical launches sent at once with one key; a second key launches a second run", async () => {
    const caller = callerFor(db.handle);
    const { id: experimentId } = await caller.experiments.create(arithmetic("launched"));
    const answers = await Promise.all(Array.from({ length: 50 }, () => caller.runs.launch({ experimentId, idempotencyKey: "launch-once-0001" })));
    const launched = await runsOf(experimentId);
    expect(launched).toHaveLength(1);
    expect(new Set(answers.map((a) => a.runId))).toEqual(new Set(launched));
    const again = await caller.runs.launch({ experimentId, idempotencyKey: "launch-twice-0002" });
    expect(await runsOf(experimentId)).toEqual(expect.arrayContaining([...launched, again.runId]));
    expect(await runsOf(experimentId)).toHaveLength(2);
    await expect(caller.runs.launch({ experimentId, priority: 5, idempotencyKey: "launch-once-0001" })).rejects.toMatchObject({
      code: "UNPROCESSABLE_CONTENT",
    });
  });

  it("launches a custom environment once for launches sent at once with one key, validating it inside the claim", async () => {
    const caller = callerFor(db.handle);
    const config = { name: "own-game", environment: "custom", agent: { base: "generalist-base", sampling: { maxTokens: 4 } }, sft: { steps: 0 } };
    const { id: experimentId } = await caller.experiments.create({ name: "own-game", files: { "environment.ts": GAME }, config });
    const answers = await Promise.all(Array.from({ length: 5 }, () => caller.runs.launch({ experimentId, idempotencyKey: "launch-custom-0001" })));
    const launched = await runsOf(experimentId);
    expect(launched).toHaveLength(1);
    expect(new Set(answers.map((a) => a.runId))).toEqual(new Set(launched));
  });

  it("validates a keyed launch before its transaction, so the database answers others while the validation runs", async () => {
    const caller = callerFor(db.handle);
    // A reset that takes a while: the launch's validation (episodes in the sandbox) lasts a second or more.
    const slow = GAME.replace("reset: () => ({", "reset: () => { const until = Date.now() + 150; while (Date.now() < until) {} return {").replace(
      'observation: "7 stones" }),',
      'observation: "7 stones" }; },',
    );
    const config = { name: "slow-game", environment: "custom", agent: { base: "generalist-base", sampling: { maxTokens: 4 } }, sft: { steps: 0 } };
    const { id: experimentId } = await caller.experiments.create({ name: "slow-game", files: { "environment.ts": slow }, config });
    const order: string[] = [];
    const launch = caller.runs.launch({ experimentId, idempotencyKey: "launch-slow-0001" }).then(() => order.push("launch"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // On PGlite (one connection), a transaction open through the validation would hold this query until the launch ends.
    await db.handle.db.execute(sql`select 1`);
    order.push("query");
    await launch;
    expect(order).toEqual(["query", "launch"]);
    expect(await runsOf(experimentId)).toHaveLength(1);
  });

  it("answers a retried upload with the first dataset as it was answered, dates as dates", async () => {
    const caller = callerFor(db.handle);
    const input = { name: "retried-rows", text: '{"q": 1}\n{"q": 2}', idempotencyKey: "upload-once-0001" };
    const [first, retried] = await Promise.all([caller.datasets.upload(input), caller.datasets.upload(input)]);
    expect(retried).toEqual(first);
    expect(retried.createdAt).toBeInstanceOf(Date);
  });
});

describe("answerOnce (work outside a transaction: a base's import)", () => {
  const principal = { kind: "local", user: LOCAL_USER } as const;

  it("does the work once for requests sent at once with one key, and answers each with its answer", async () => {
    let done = 0;
    const work = async () => {
      done += 1;
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { name: "imported", at: new Date(0) };
    };
    const request = { procedure: "bases.import", key: "import-once-0001", input: { name: "imported" } };
    const answers = await Promise.all(Array.from({ length: 10 }, () => answerOnce(db.handle.db, principal, request, work, () => null)));
    expect(done).toBe(1);
    for (const answer of answers) expect(answer).toEqual({ name: "imported", at: new Date(0) });
    await expect(answerOnce(db.handle.db, principal, { ...request, input: { name: "other" } }, work, () => null)).rejects.toMatchObject({ status: 422 });
  });

  it("takes over a key whose holder died, answering what it finished rather than doing it again", async () => {
    const request = { procedure: "bases.import", key: "import-died-0001", input: { name: "half" } };
    // A request that claimed the key and died before storing its answer: its lease has lapsed.
    await answerOnce(
      db.handle.db,
      principal,
      request,
      () => Promise.reject(new Error("not yet")),
      () => null,
    ).catch(() => null);
    await db.handle.db.insert(idempotencyKeys).values({
      caller: `user:${LOCAL_USER.id}`,
      procedure: request.procedure,
      key: request.key,
      inputHash: (await hashOf(request)) ?? "",
      heldUntil: sql`now() - interval '1 second'`,
    });
    let worked = false;
    const answer = await answerOnce(
      db.handle.db,
      principal,
      request,
      async () => {
        worked = true;
        return { name: "again" };
      },
      () => ({ name: "finished by the request that died" }),
    );
    expect(answer).toEqual({ name: "finished by the request that died" });
    expect(worked).toBe(false);
    const [row] = await db.handle.db
      .select({ answer: idempotencyKeys.answer })
      .from(idempotencyKeys)
      .where(and(eq(idempotencyKeys.key, request.key), eq(idempotencyKeys.procedure, request.procedure)));
    expect(row?.answer).toContain("finished by the request that died");
  });
});

/** The input hash answerOnce stores for a request: read back from a key it completed. */
async function hashOf(request: { procedure: string; key: string; input: unknown }): Promise<string | null> {
  const probe = { ...request, key: `${request.key}-probe` };
  await answerOnce(
    db.handle.db,
    { kind: "local", user: LOCAL_USER },
    probe,
    async () => 0,
    () => null,
  );
  const [row] = await db.handle.db.select({ inputHash: idempotencyKeys.inputHash }).from(idempotencyKeys).where(eq(idempotencyKeys.key, probe.key));
  return row?.inputHash ?? null;
}

/** A take-away game: a custom environment, validated in the sandbox before its launch. */
const GAME = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ left: number }, number>({
  name: "stones",
  data: { kind: "free" },
  systemPrompt: "Take 1, 2 or 3 stones; whoever takes the last one wins.",
  maxTurns: 5,
  actions: ["1", "2", "3"],
  reset: () => ({ state: { left: 7 }, observation: "7 stones" }),
  parseAction: (text) => (/^[123]$/.test(text) ? { ok: true, action: Number(text) } : { ok: false, error: "1, 2 or 3" }),
  step: (state, take) => {
    const left = Math.max(state.left - take, 0);
    return { state: { left }, reward: left === 0 ? 1 : 0, done: left === 0, observation: left + " stones" };
  },
});
`;
