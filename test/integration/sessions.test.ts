/**
 * Remote training sessions: a session is a job placed like any other, its calls run on the worker in order with
 * the same results as in-process, a call sent again (a lost connection) runs once, a failing call leaves the
 * session usable, and a session without calls for its lease is saved and ended, which frees its place.
 */
import fs from "node:fs";
import path from "node:path";
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { checkpoints, jobs, metricPoints, sessionCalls } from "@/server/db";
import { resolveBase, schedulerTick, type SessionMethod } from "@/server/jobs";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { createPackingPolicy } from "@/server/scheduler";
import { loadBaseModel } from "@/server/worker/base-models";
import { runJob } from "@/server/worker/run-job";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("sessions");

let callNumber = 0;
/**
 * Calls a primitive of a session by `caller.sessions.invoke` and gives its result; a call not done throws. A call
 * id given is sent as it is (a call sent again), else a fresh one is made.
 */
function invokerOn(caller: ReturnType<typeof callerFor>, sessionId: string) {
  return async (method: SessionMethod, args: Record<string, unknown>, callId = `${method}-${++callNumber}-${sessionId}`) => {
    const answer = await caller.sessions.invoke({ sessionId, callId, method, args });
    if (answer.state !== "done") throw new Error(`${method}: ${answer.state} ${answer.error}`);
    return answer.result as never;
  };
}

/**
 * A session on tiny-base, placed by the scheduler on one of the registered test workers and claimed by it, and an
 * in-process client of the same seed.
 */
async function placedSession(seed: number, leaseSeconds: number, lora: { rank: number } | null = null) {
  const { handle, basesDir } = bed;
  const caller = callerFor(handle);
  const channel = channelOn(handle.db);
  await registerTestWorker(channel);
  const { sessionId } = await caller.sessions.create({ base: "tiny-base", seed, leaseSeconds, lora });
  await schedulerTick(handle.db, createPackingPolicy());
  const [job] = await handle.db.select({ id: jobs.id, workerId: jobs.workerId }).from(jobs).where(eq(jobs.runId, sessionId));
  const workerId = job!.workerId!;
  await channel.heartbeat(workerId); // its lease, renewed as its loop would
  const spec = await channel.claim(workerId, job!.id);
  const reference = new TrainingClient(BaseModel.load(path.join(basesDir, "tiny-base")), { seed });
  return { caller, channel, workerId, sessionId, job: job!, spec, reference };
}

const batch = {
  tokens: [
    [1, 72, 105, 33, 10, 65, 66],
    [1, 50, 43, 50, 61, 52],
  ],
  weights: [
    [0, 0, 0, 1, 1, 1, 1],
    [0, 0, 0, 1, 1, 1],
  ],
};

describe("a remote training session", () => {
  it("runs the primitives on a worker as in-process, each call once, and ends when it goes quiet", async () => {
    const { handle, artifactsDir, basesDir } = bed;
    const caller = callerFor(handle);
    const channel = channelOn(handle.db);
    const workerId = await registerTestWorker(channel);

    const { sessionId, contextLength } = await caller.sessions.create({ base: "tiny-base", seed: 5, leaseSeconds: 3 });
    expect(contextLength).toBe(48);
    const run = await caller.runs.byId({ id: sessionId });
    expect(run).toMatchObject({ status: "queued", experimentName: "Remote sessions" });

    // The scheduler places it like any job; the worker then holds the session until it ends.
    await schedulerTick(handle.db, createPackingPolicy());
    const [job] = await handle.db.select({ id: jobs.id, kind: jobs.kind, status: jobs.status }).from(jobs).where(eq(jobs.runId, sessionId));
    expect(job).toMatchObject({ kind: "session", status: "placing" });
    const spec = await channel.claim(workerId, job!.id);
    const working = runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });

    const call = invokerOn(caller, sessionId);

    const reference = new TrainingClient(BaseModel.load(path.join(basesDir, "tiny-base")), { seed: 5 });
    expect(await call("forward", { batch })).toEqual(await reference.forward(batch));
    expect(await call("forwardBackward", { batch, loss: "cross_entropy" })).toEqual(await reference.forwardBackward(batch, "cross_entropy"));
    // An optimizer step sent twice with the same id (the first answer lost with its connection) is applied once.
    const stepId = `step-once-${sessionId}`;
    const first = await caller.sessions.invoke({ sessionId, callId: stepId, method: "optimStep", args: { params: { lr: 0.05 } }, waitMs: 0 });
    expect(["queued", "running", "done"]).toContain(first.state);
    const again = await call("optimStep", { params: { lr: 0.05 } }, stepId);
    expect(again).toEqual(await reference.optimStep({ lr: 0.05 }));
    expect(again).toMatchObject({ step: 1 });
    expect(await call("forward", { batch })).toEqual(await reference.forward(batch)); // the next weights are the same
    const sampleArgs = { prompts: [[1, 50, 43]], n: 2, params: { maxTokens: 4, seed: 11 } };
    expect(await call("sample", sampleArgs)).toEqual(await reference.sample([[1, 50, 43]], 2, { maxTokens: 4, seed: 11 }));

    // A call that fails is answered with its error; the session goes on.
    const bad = await caller.sessions.invoke({
      sessionId,
      callId: `bad-${sessionId}`,
      method: "forwardBackward",
      args: { batch: { tokens: [[1, 2]] }, loss: "no-such-loss" },
    });
    expect(bad.state).toBe("failed");
    expect(bad.error).toMatch(/no-such-loss/);
    await expect(caller.sessions.invoke({ sessionId, callId: stepId, method: "forward", args: { batch } })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/was a optimStep call; give each call a fresh id/),
    });
    expect(await call("saveState", {})).toMatchObject({ step: 1, checkpointId: expect.stringMatching(/^ckpt_/) });

    // Quiet for its lease (3 s): saved, completed, its place freed.
    const outcome = await working;
    expect(outcome).toMatchObject({ outcome: "completed", reason: expect.stringMatching(/^ended after 3 s without a call \(its lease\); saved at step 1$/) });
    await channel.finish({ workerId, jobId: job!.id, ...outcome });
    const [ended] = await handle.db.select({ status: jobs.status, workerId: jobs.workerId }).from(jobs).where(eq(jobs.id, job!.id));
    expect(ended!.status).toBe("completed");
    const overview = await caller.scheduler.overview({});
    expect(JSON.stringify(overview)).not.toContain(job!.id.concat('","status":"running'));
    expect((await handle.db.select().from(checkpoints).where(eq(checkpoints.runId, sessionId))).map((c) => c.step)).toEqual([1]);
    // Its checkpoint exports as any other (an export needs no environment).
    const [saved] = await caller.checkpoints.ofRun({ runId: sessionId });
    const { runId: exported } = await caller.runs.export({ checkpointId: saved!.id });
    await channel.heartbeat(workerId); // the worker's lease, renewed as its loop would (a slow machine may have let it lapse)
    await schedulerTick(handle.db, createPackingPolicy());
    const [exportJob] = await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, exported));
    const exportOutcome = await runJob({ channel, workerId, spec: await channel.claim(workerId, exportJob!.id), artifactsDir, stopRequested: () => null });
    expect(exportOutcome).toEqual({ outcome: "completed", reason: null });
    await expect(caller.sessions.invoke({ sessionId, callId: `late-${sessionId}`, method: "forward", args: { batch } })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/has ended \(completed: ended after 3 s without a call/),
    });
  }, 60_000);

  it("runs calls sent together in one request in their order, each once, its worker taking and answering them together", async () => {
    const { handle, artifactsDir } = bed;
    const { caller, channel, workerId, sessionId, job, spec, reference } = await placedSession(7, 2);

    // Submitted without waiting: one exchange of the worker takes them in order, as many as it asks for.
    const forwards = ["a", "b", "c"].map((name) => ({ callId: `${name}-${sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) }));
    const results = (answers: { resultJson: string | null }[]) => answers.map((a) => (a.resultJson === null ? null : JSON.parse(a.resultJson)));
    const queued = await caller.sessions.invokeMany({ sessionId, calls: forwards, waitMs: 0 });
    expect(queued.answers.map((a) => [a.id, a.state])).toEqual(forwards.map((c) => [c.callId, "queued"]));
    const { calls: taken } = await channel.sessionExchange({ workerId, jobId: job!.id, answers: [], take: { waitMs: 0, max: 2 } });
    expect(taken.map((c) => c.id)).toEqual([forwards[0]!.callId, forwards[1]!.callId]);
    // A call keeps its first answer: one sent again (its response lost with the connection) changes nothing.
    const first = { logprobs: [[0]] };
    await channel.sessionExchange({ workerId, jobId: job!.id, answers: [{ callId: taken[0]!.id, resultJson: JSON.stringify(first), error: null }] });
    await channel.sessionExchange({ workerId, jobId: job!.id, answers: [{ callId: taken[0]!.id, error: "sent again" }] });
    const early = await caller.sessions.invokeMany({ sessionId, calls: forwards, waitMs: 0 });
    expect(early.answers.map((a) => a.state)).toEqual(["done", "running", "queued"]);
    expect(results(early.answers)).toEqual([first, null, null]);

    // The same id twice in one request, or an id reused for another method, is refused, and nothing of it submitted.
    await expect(caller.sessions.invokeMany({ sessionId, calls: [forwards[0]!, forwards[0]!], waitMs: 0 })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/appears twice in one request/),
    });
    const stray = { callId: `stray-${sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) };
    await expect(caller.sessions.invokeMany({ sessionId, calls: [stray, { ...forwards[2]!, method: "sample" as const }], waitMs: 0 })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/was a forward call; give each call a fresh id/),
    });
    expect(await handle.db.select().from(sessionCalls).where(eq(sessionCalls.id, stray.callId))).toEqual([]);
    await expect(caller.sessions.invokeMany({ sessionId, calls: [{ ...stray, argsJson: "[1, 2" }], waitMs: 0 })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringMatching(/argsJson: expected a JSON object as text/),
    });

    // The worker's loop runs the call left running, then the rest, in order.
    const working = runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });
    const forwarded = await caller.sessions.invokeMany({ sessionId, calls: forwards, waitMs: 20_000 });
    expect(results(forwarded.answers)).toEqual([first, await reference.forward(batch), await reference.forward(batch)]);

    // A step's calls together: the same results as in-process; sent again, answered from the one run.
    const update = [
      { callId: `fb-${sessionId}`, method: "forwardBackward" as const, argsJson: JSON.stringify({ batch, loss: "cross_entropy" }) },
      { callId: `step-${sessionId}`, method: "optimStep" as const, argsJson: JSON.stringify({ params: { lr: 0.05 } }) },
      { callId: `after-${sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) },
    ];
    const answered = await caller.sessions.invokeMany({ sessionId, calls: update, waitMs: 20_000 });
    expect(results(answered.answers)).toEqual([
      await reference.forwardBackward(batch, "cross_entropy"),
      await reference.optimStep({ lr: 0.05 }),
      await reference.forward(batch),
    ]);
    expect((await caller.sessions.invokeMany({ sessionId, calls: update, waitMs: 20_000 })).answers).toEqual(answered.answers);
    const next = await caller.sessions.invoke({ sessionId, callId: `step2-${sessionId}`, method: "optimStep", args: { params: { lr: 0.05 } } });
    expect(next.result).toEqual(await reference.optimStep({ lr: 0.05 }));
    expect(next.result).toMatchObject({ step: 2 });
    expect(await working).toMatchObject({ outcome: "completed", reason: expect.stringMatching(/without a call \(its lease\)/) });
  }, 60_000);

  it("stores every optimizer step's metrics once when a busy session sends several steps' in one report", async () => {
    const { handle, artifactsDir } = bed;
    const { caller, sessionId, spec, channel, workerId, reference } = await placedSession(13, 2);
    const working = runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });
    // Four steps back to back, well within a second: the first step's metrics go at once, the rest together later.
    const calls = [1, 2, 3, 4].flatMap((n) => [
      { callId: `fb${n}-${sessionId}`, method: "forwardBackward" as const, argsJson: JSON.stringify({ batch, loss: "cross_entropy" }) },
      { callId: `step${n}-${sessionId}`, method: "optimStep" as const, argsJson: JSON.stringify({ params: { lr: 0.05 } }) },
    ]);
    for (const call of calls) {
      const { answers } = await caller.sessions.invokeMany({ sessionId, calls: [call], waitMs: 20_000 });
      expect(answers[0]!.state).toBe("done");
    }
    const expected: { step: number; name: string; value: number }[] = [];
    for (let n = 1; n <= 4; n++) {
      const { loss } = await reference.forwardBackward(batch, "cross_entropy");
      const { gradNorm, step } = await reference.optimStep({ lr: 0.05 });
      expected.push({ step, name: "grad_norm", value: gradNorm }, { step, name: "loss", value: loss });
    }
    expect(await working).toMatchObject({ outcome: "completed" });
    const points = await handle.db
      .select({ step: metricPoints.step, name: metricPoints.name, value: metricPoints.value })
      .from(metricPoints)
      .where(eq(metricPoints.runId, sessionId));
    const sorted = (list: typeof expected) => [...list].sort((a, b) => a.step - b.step || a.name.localeCompare(b.name));
    expect(sorted(points).map((p) => ({ ...p, value: Number(p.value.toPrecision(5)) }))).toEqual(
      sorted(expected).map((p) => ({ ...p, value: Number(p.value.toPrecision(5)) })),
    );
    // Arguments and results are stored out of line without compression (drizzle/0009): compressing them cost the
    // embedded database several ms on each training step's critical path.
    const storage = await handle.db.execute(
      sql`select attname, attstorage from pg_attribute where attrelid = 'session_calls'::regclass and attname in ('args', 'result') order by attname`,
    );
    expect((storage as unknown as { rows: unknown[] }).rows).toEqual([
      { attname: "args", attstorage: "e" },
      { attname: "result", attstorage: "e" },
    ]);
  }, 60_000);

  it("submits a request that names the call it follows behind that call, whichever reaches the server first", async () => {
    const { handle, artifactsDir } = bed;
    const { caller, channel, workerId, sessionId, job, spec, reference } = await placedSession(9, 2);
    const working = runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });
    const results = (answers: { resultJson: string | null }[]) => answers.map((a) => (a.resultJson === null ? null : JSON.parse(a.resultJson)));

    const update = [
      { callId: `fb-${sessionId}`, method: "forwardBackward" as const, argsJson: JSON.stringify({ batch, loss: "cross_entropy" }) },
      { callId: `step-${sessionId}`, method: "optimStep" as const, argsJson: JSON.stringify({ params: { lr: 0.05 } }) },
    ];
    const following = {
      sessionId,
      calls: [{ callId: `next-${sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) }],
      after: update[1]!.callId,
    };
    // Sent after the update but arriving first: not submitted, answered queued once its wait is over.
    const early = await caller.sessions.invokeMany({ ...following, waitMs: 300 });
    expect(early.answers.map((a) => [a.id, a.state])).toEqual([[`next-${sessionId}`, "queued"]]);
    expect(
      await handle.db
        .select()
        .from(sessionCalls)
        .where(eq(sessionCalls.id, `next-${sessionId}`)),
    ).toEqual([]);
    // Sent again, it waits for the update; then both run in the order they were sent.
    const next = caller.sessions.invokeMany({ ...following, waitMs: 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const updated = await caller.sessions.invokeMany({ sessionId, calls: update, waitMs: 20_000 });
    expect(results(updated.answers)).toEqual([await reference.forwardBackward(batch, "cross_entropy"), await reference.optimStep({ lr: 0.05 })]);
    expect(results((await next).answers)).toEqual([await reference.forward(batch)]); // the next weights'
    const seqs = await handle.db.select({ id: sessionCalls.id, seq: sessionCalls.seq }).from(sessionCalls).where(eq(sessionCalls.runId, sessionId));
    expect(seqs.sort((a, b) => Number(a.seq) - Number(b.seq)).map((row) => row.id)).toEqual([...update.map((call) => call.callId), `next-${sessionId}`]);

    // Only the worker holding the session may take or answer its calls; the answers of another change nothing.
    const intruder = await registerTestWorker(channel);
    const pending = await caller.sessions.invokeMany({ sessionId, calls: [{ ...following.calls[0]!, callId: `late-${sessionId}` }], waitMs: 0 });
    for (const exchange of [{ answers: [{ callId: `late-${sessionId}`, resultJson: "{}" }] }, { answers: [], take: { waitMs: 0, max: 1 } }]) {
      await expect(channel.sessionExchange({ workerId: intruder, jobId: job!.id, ...exchange })).rejects.toThrow(
        new RegExp(`worker ${intruder} holds no session job`),
      );
    }
    expect(pending.answers[0]!.state).not.toBe("done");
    expect(
      results(
        (await caller.sessions.invokeMany({ sessionId, calls: pending.answers.map((a) => ({ ...following.calls[0]!, callId: a.id })), waitMs: 20_000 }))
          .answers,
      ),
    ).toEqual([await reference.forward(batch)]);

    // The call it follows must be this session's, and not one of its own.
    const other = await caller.sessions.create({ base: "tiny-base", seed: 1 });
    const elsewhere = { callId: `elsewhere-${other.sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) };
    await caller.sessions.invokeMany({ sessionId: other.sessionId, calls: [elsewhere], waitMs: 0 });
    const stray = { callId: `stray-${sessionId}`, method: "forward" as const, argsJson: JSON.stringify({ batch }) };
    await expect(caller.sessions.invokeMany({ sessionId, calls: [stray], after: elsewhere.callId, waitMs: 0 })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/which these calls follow, belongs to another session/),
    });
    await expect(caller.sessions.invokeMany({ sessionId, calls: [stray], after: stray.callId, waitMs: 0 })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/cannot follow itself/),
    });
    // Once the session has ended, a request behind a call it never had is refused as ended, not left waiting.
    expect(await working).toMatchObject({ outcome: "completed" });
    await channel.finish({ workerId, jobId: job!.id, outcome: "completed", reason: "quiet" });
    await expect(caller.sessions.invokeMany({ sessionId, calls: [stray], after: "never-sent-call", waitMs: 20_000 })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(/has ended/),
    });
  }, 60_000);

  it("saves a LoRA session's weights for a sampler: its adapter alone, a base that answers as the session does", async () => {
    const { handle, artifactsDir } = bed;
    const { caller, channel, workerId, sessionId, spec } = await placedSession(4, 2, { rank: 4 });
    const working = runJob({ channel, workerId, spec, artifactsDir, stopRequested: () => null });
    const invoke = invokerOn(caller, sessionId);
    await invoke("forwardBackward", { batch, loss: "cross_entropy" });
    await invoke("optimStep", { params: { lr: 0.05 } });
    const trained: { logprobs: number[][] } = await invoke("forward", { batch });
    const saved: { step: number; checkpointId: string } = await invoke("saveWeightsForSampler", {});
    expect(saved).toMatchObject({ step: 1, checkpointId: expect.stringMatching(/^ckpt_/) });

    expect(await caller.checkpoints.ofRun({ runId: sessionId })).toMatchObject([{ id: saved.checkpointId, kind: "sampler", step: 1 }]);
    const { checkpoints: bases } = await caller.checkpoints.bases({});
    expect(bases.find((base) => base.id === saved.checkpointId)).toMatchObject({ mode: "lora", parentBase: "tiny-base" });
    const source = await resolveBase(handle.db, saved.checkpointId);
    expect(source).toMatchObject({ kind: "checkpoint", mode: "lora", parent: { kind: "builtin", name: "tiny-base" } });
    // The adapter alone: no optimizer moments.
    expect(fs.readdirSync((source as { path: string }).path).sort()).not.toContain("optimizer.safetensors");
    const sampled = await new TrainingClient(loadBaseModel(source), { seed: 4 }).forward(batch);
    const difference = Math.max(...sampled.logprobs.flatMap((row, i) => row.map((value, j) => Math.abs(value - trained.logprobs[i]![j]!))));
    expect(difference).toBeLessThan(1e-5);
    expect(await working).toMatchObject({ outcome: "completed" });
  }, 60_000);

  it("loads a saved state into a new session, which trains on exactly from there; a checkpoint it cannot take is refused", async () => {
    const { artifactsDir } = bed;
    // One session (A) trains two steps, saves its state and ends.
    const first = await placedSession(11, 30);
    const firstWorking = runJob({ channel: first.channel, workerId: first.workerId, spec: first.spec, artifactsDir, stopRequested: () => null });
    const a = invokerOn(first.caller, first.sessionId);
    for (let i = 0; i < 2; i++) {
      await a("forwardBackward", { batch, loss: "cross_entropy" });
      await a("optimStep", { params: { lr: 0.05 } });
    }
    const saved: { checkpointId: string } = await a("saveState", {});
    const trainedOn: { logprobs: number[][] } = await a("forward", { batch });
    await a("forwardBackward", { batch, loss: "cross_entropy" });
    const thirdStep: { gradNorm: number; step: number } = await a("optimStep", { params: { lr: 0.05 } });
    const afterThird: { logprobs: number[][] } = await a("forward", { batch });
    await a("close", {});
    expect(await firstWorking).toMatchObject({ outcome: "completed" });
    await first.channel.finish({ workerId: first.workerId, jobId: first.job.id, outcome: "completed", reason: "closed" });

    // A new session of another seed loads it: the same weights, and its next step is session A's third.
    const second = await placedSession(99, 2);
    const secondWorking = runJob({ channel: second.channel, workerId: second.workerId, spec: second.spec, artifactsDir, stopRequested: () => null });
    const b = invokerOn(second.caller, second.sessionId);
    expect(await b("loadState", { checkpointId: saved.checkpointId })).toEqual({ step: 2 });
    expect(await b("forward", { batch })).toEqual(trainedOn);
    await b("forwardBackward", { batch, loss: "cross_entropy" });
    expect(await b("optimStep", { params: { lr: 0.05 } })).toEqual(thirdStep);
    expect(await b("forward", { batch })).toEqual(afterThird);

    // What it cannot take: no checkpoint named, one that does not exist; the worker's own refusal names the checkpoint, not its folder.
    await expect(b("loadState", {})).rejects.toMatchObject({ code: "BAD_REQUEST", message: expect.stringMatching(/give \{ checkpointId: 'ckpt_…' \}/) });
    await expect(b("loadState", { checkpointId: "ckpt_nope" })).rejects.toMatchObject({ code: "NOT_FOUND" });
    const lora = await placedSession(5, 2, { rank: 4 });
    const loraWorking = runJob({ channel: lora.channel, workerId: lora.workerId, spec: lora.spec, artifactsDir, stopRequested: () => null });
    const refused = await lora.caller.sessions.invoke({
      sessionId: lora.sessionId,
      callId: `load-${lora.sessionId}`,
      method: "loadState",
      args: { checkpointId: saved.checkpointId },
    });
    expect(refused.state).toBe("failed");
    expect(refused.error).toMatch(new RegExp(`cannot load '${saved.checkpointId}': checkpoint holds full weights, client trains a LoRA adapter`));
    expect(refused.error).not.toContain(artifactsDir);
    expect(await secondWorking).toMatchObject({ outcome: "completed" });
    expect(await loraWorking).toMatchObject({ outcome: "completed" });
  }, 90_000);

  it("refuses a session on a base that does not exist, naming what a base is", async () => {
    const caller = callerFor(bed.handle);
    await expect(caller.sessions.create({ base: "no-such-base" })).rejects.toMatchObject({ code: "BAD_REQUEST", message: expect.stringMatching(/^base: /) });
    await expect(caller.sessions.invoke({ sessionId: "run_nope", callId: "call-00000001", method: "forward", args: {} })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });
});
