/**
 * A script's training loop against a running server (`tinkerlab/client`): a session on a built-in base is placed
 * on the server's worker, its primitives answer as the in-process runtime does for the same batch and seed, calls
 * made without waiting run in the order they were made, and closing saves a checkpoint and ends the run.
 */
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { trainRemotely } from "@/examples/remote-rl";
import { fineTuneRemotely } from "@/examples/remote-sft";
import { createClient, TinkerlabError } from "@/lib/client";
import { useCases } from "@/lib/envs";
import { defineExperiment } from "@/lib/sdk/experiment";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { ROOT, startServer, tempDir, type TestServer } from "./support/server";

let server: TestServer;
beforeAll(async () => {
  server = await startServer({ ARTIFACTS_DIR: tempDir("artifacts"), TINKERLAB_EXAMPLES: "off" });
}, 180_000);
afterAll(() => server?.stop());

const batch = {
  tokens: [
    [1, 49, 50, 43, 55, 61],
    [1, 51, 43, 52, 52, 61, 57],
  ],
  weights: [
    [0, 0, 0, 0, 1, 1],
    [0, 0, 0, 0, 1, 1, 1],
  ],
};

/** The largest difference between two nested arrays of numbers (the worker's kernel may round differently). */
function maxDifference(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return Math.abs(a - b);
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) return Math.max(0, ...a.map((x, i) => maxDifference(x, b[i])));
  return Number.POSITIVE_INFINITY;
}

describe("a remote training session through the client", () => {
  it("trains on the server's worker as in-process, in the order of its calls, and closes with a checkpoint", async () => {
    const tl = createClient({ url: server.url });
    const session = await tl.training.create({ base: "arithmetic-base", seed: 3, leaseSeconds: 60, name: "e2e" });
    expect(session.contextLength).toBeGreaterThan(0);
    const reference = new TrainingClient(BaseModel.load(path.join(ROOT, "lib", "envs", "bases", "arithmetic-base")), { seed: 3 });

    const before = await session.forward(batch);
    expect(maxDifference(before.logprobs, (await reference.forward(batch)).logprobs)).toBeLessThan(1e-4);

    // Three calls made at once: they run in the order they were made.
    const trained = session.forwardBackward(batch, "cross_entropy");
    const stepped = session.optimStep({ lr: 0.01 });
    const after = session.forward(batch);
    const [remoteLoss, remoteStep, remoteAfter] = await Promise.all([trained, stepped, after]);
    const localLoss = await reference.forwardBackward(batch, "cross_entropy");
    const localStep = await reference.optimStep({ lr: 0.01 });
    expect(Math.abs(remoteLoss.loss - localLoss.loss)).toBeLessThan(1e-4);
    expect(remoteStep.step).toBe(1);
    expect(Math.abs(remoteStep.gradNorm - localStep.gradNorm) / localStep.gradNorm).toBeLessThan(1e-3);
    // After an AdamW step, whose first update is ±lr wherever a gradient is not 0, the rounding of the worker's
    // kernel (a native float32 softmax in the loss) shows a little more than in one forward pass.
    expect(maxDifference(remoteAfter.logprobs, (await reference.forward(batch)).logprobs)).toBeLessThan(5e-4);
    expect(maxDifference(remoteAfter.logprobs, before.logprobs)).toBeGreaterThan(1e-2); // the step changed the weights

    const { samples } = await session.sample([[1, 49, 50, 43]], 2, { maxTokens: 3, seed: 9, temperature: 1 });
    expect(samples[0]).toHaveLength(2);
    // The weights alone, saved for sampling (a base: below, a session on it answers as this one does now).
    const forSampler = await session.saveWeightsForSampler();
    expect(forSampler).toMatchObject({ step: 1, checkpointId: expect.stringMatching(/^ckpt_/) });

    // A failing call names the method and the reason; the session goes on.
    await expect(session.forwardBackward({ tokens: [[1, 2, 3]] }, "not-a-loss" as never)).rejects.toThrow(
      new RegExp(`forwardBackward failed on session ${session.sessionId}: forwardBackward: loss: must be cross_entropy, .*\\(got "not-a-loss"\\)`),
    );

    const closed = await session.close();
    expect(closed).toMatchObject({ step: 1, checkpointId: expect.stringMatching(/^ckpt_/) });
    const run = await tl.runs.wait(session.sessionId, { intervalMs: 200 });
    expect(run).toMatchObject({ status: "completed", reason: "closed by its client", experimentName: "Remote sessions" });
    const checkpoints = await tl.runs.checkpoints(session.sessionId);
    expect(checkpoints.map((c) => c.id)).toContain(closed.checkpointId);
    const error = await session.forward(batch).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TinkerlabError);
    expect((error as TinkerlabError).message).toMatch(/has ended \(completed: closed by its client\); open a new one/);

    expect(checkpoints.find((c) => c.id === forSampler.checkpointId)).toMatchObject({ kind: "sampler", step: 1 });
    const sampler = await tl.createTrainingClient({ base: forSampler.checkpointId!, seed: 3, leaseSeconds: 60, name: "e2e-sampler" });
    expect(maxDifference((await sampler.forward(batch)).logprobs, remoteAfter.logprobs)).toBeLessThan(1e-5);
    // The closed session's state loads into it: its optimizer and step too.
    expect(await sampler.loadState(closed.checkpointId!)).toEqual({ step: 1 });
    expect(await sampler.optimStep({ lr: 0.01 })).toMatchObject({ step: 2 });
    await sampler.close();
  }, 120_000);

  it("answers calls and workers' exchanges past Next.js with the procedures' own checks, and refuses a batch too large, saying how to split it", async () => {
    const post = (procedure: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${server.url}/api/trpc/${procedure}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
    const errorOf = async (response: Response) => ((await response.json()) as { error: { json: { message: string; data: { code: string } } } }).error.json;

    const tl = createClient({ url: server.url });
    const session = await tl.training.create({ base: "arithmetic-base", seed: 1, leaseSeconds: 30, name: "e2e-checks" });
    const call = {
      sessionId: session.sessionId,
      calls: [{ callId: "call-e2e-checks-1", method: "forward", argsJson: JSON.stringify({ batch }) }],
      waitMs: 20_000,
    };
    // An unknown API key is refused as by every procedure, whichever route answers.
    const stranger = await post("sessions.invokeMany", JSON.stringify({ json: call }), { authorization: "Bearer tl_not_a_key" });
    expect(stranger.status).toBe(401);
    expect(stranger.headers.get("x-tinkerlab-route")).toBe("direct");
    expect((await errorOf(stranger)).message).toMatch(/API key in the Authorization header is unknown/);
    // A worker's exchange without the worker token is refused.
    const noToken = await post("worker.sessionExchange", JSON.stringify({ json: { workerId: "wrk_x", jobId: "job_x", answers: [] } }));
    expect(noToken.status).toBe(401);
    expect((await errorOf(noToken)).message).toMatch(/worker token/);
    // Answered as through the client.
    const answered = await post("sessions.invokeMany", JSON.stringify({ json: call }));
    expect(answered.status).toBe(200);
    expect(answered.headers.get("x-tinkerlab-route")).toBe("direct");
    const { answers } = ((await answered.json()) as { result: { data: { json: { answers: { state: string; resultJson: string }[] } } } }).result.data.json;
    expect(answers[0]!.state).toBe("done");
    expect(JSON.parse(answers[0]!.resultJson)).toEqual(await session.forward(batch));

    // A batch over 16 MiB is refused before any of it is read; the message names the limit and how to split it.
    const huge = { batch: { tokens: Array.from({ length: 3_000 }, () => Array.from({ length: 2_000 }, () => 61)) }, loss: "cross_entropy" };
    const refusing = session.forwardBackward(huge.batch, "cross_entropy").catch((error: unknown) => error);
    // A call made with it goes in the next request, sent at once behind it; the refusal does not hold it up.
    const behind = session.forward(batch);
    const refused = await refusing;
    expect(await behind).toEqual(await session.forward(batch));
    expect(refused).toBeInstanceOf(TinkerlabError);
    expect(refused).toMatchObject({ code: "PAYLOAD_TOO_LARGE", status: 413 });
    expect((refused as TinkerlabError).message).toMatch(
      /sessions\.invokeMany accepts at most 16 MiB \(16777216 bytes\) in one request: split the batch: pass fewer sequences to each forwardBackward call/,
    );
    await session.close();
  }, 120_000);

  it("stays consistent when the client's connection is cut while its optimizer step runs: sent again, the step applies once", async () => {
    const tl = createClient({ url: server.url });
    const session = await tl.createTrainingClient({ base: "arithmetic-base", seed: 5, leaseSeconds: 60, name: "e2e-cut" });
    const reference = new TrainingClient(BaseModel.load(path.join(ROOT, "lib", "envs", "bases", "arithmetic-base")), { seed: 5 });
    await session.forward(batch); // placed and warm
    // Work enough for the worker to be busy when the connection is cut: eight passes over 256 sequences, then a step.
    const large = { tokens: Array.from({ length: 256 }, (_, i) => [1, ...Array.from({ length: 22 }, (_, j) => 43 + ((i * 7 + j * 3) % 18))]) };
    const calls = [
      ...Array.from({ length: 8 }, (_, i) => ({
        callId: `cut-fb-${i}-${session.sessionId}`,
        method: "forwardBackward",
        argsJson: JSON.stringify({ batch: large, loss: "cross_entropy" }),
      })),
      { callId: `cut-step-${session.sessionId}`, method: "optimStep", argsJson: JSON.stringify({ params: { lr: 0.01 } }) },
    ];
    const send = (signal?: AbortSignal) =>
      fetch(`${server.url}/api/trpc/sessions.invokeMany`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ json: { sessionId: session.sessionId, calls, waitMs: 20_000 } }),
        signal,
      });
    const cut = new AbortController();
    const sent = send(cut.signal);
    setTimeout(() => cut.abort(), 40);
    await expect(sent).rejects.toThrow(/abort/i); // the connection went before the answer
    // Sent again with the same ids: answered from the one run.
    // Sent again with the same ids until the one run has finished (each try waits up to 20 s: a busy machine may
    // need more than one); every try is answered from that run, none runs a call again.
    type Answer = { state: string; resultJson: string };
    let answers: Answer[] = [];
    for (let attempt = 0; attempt < 6; attempt++) {
      const answered = (await (await send()).json()) as { result: { data: { json: { answers: Answer[] } } } };
      answers = answered.result.data.json.answers;
      if (answers.every((a) => a.state !== "running" && a.state !== "queued")) break;
    }
    expect(answers.map((a) => a.state)).toEqual(calls.map(() => "done"));
    for (let i = 0; i < 8; i++) await reference.forwardBackward(large, "cross_entropy");
    const step = await reference.optimStep({ lr: 0.01 });
    expect(JSON.parse(answers.at(-1)!.resultJson)).toMatchObject({ step: 1 });
    expect(Math.abs(JSON.parse(answers.at(-1)!.resultJson).gradNorm - step.gradNorm) / step.gradNorm).toBeLessThan(1e-3);
    // One step applied: the weights are the reference's after one, and the next step is the second.
    expect(maxDifference((await session.forward(batch)).logprobs, (await reference.forward(batch)).logprobs)).toBeLessThan(1e-4);
    expect(await session.optimStep({ lr: 0.01 })).toMatchObject({ step: 2 });
    await session.close();
  }, 240_000);

  it("reproduces a workbench run's scores through the remote primitives alone (examples/remote-rl.ts)", async () => {
    const tl = createClient({ url: server.url });
    const template = useCases.arithmetic!.template;
    const input = {
      ...template,
      name: "arithmetic-small",
      algorithm: { ...template.algorithm, steps: 4, groupsPerStep: 8 },
      evaluation: { every: 2, episodes: 32 },
    };
    const { id } = await tl.experiments.create({ name: "arithmetic-small", config: input });
    const { runId } = await tl.runs.launch(id);
    // Its rollouts followed as they land: each step once, in order, to the last.
    const followed: { step: number; episodes: number }[] = [];
    const following = (async () => {
      for await (const { step, items } of tl.runs.followRollouts(runId, { intervalMs: 250 })) followed.push({ step, episodes: items.length });
    })();
    const run = await tl.runs.wait(runId, { intervalMs: 250 });
    expect(run.status).toBe("completed");
    await following;
    expect(followed.map((f) => f.step)).toEqual([1, 2, 3, 4]);
    const { groupsPerStep, groupSize } = defineExperiment(input as never).algorithm;
    expect(followed.every((f) => f.episodes === groupsPerStep * groupSize)).toBe(true);
    const evaluated: number[] = [];
    for await (const { step } of tl.runs.followRollouts(runId, { split: "eval" })) evaluated.push(step);
    expect(evaluated).toEqual([0, 2, 4]);
    const { points } = await tl.runs.metrics(runId);
    const workbench = points.filter((p) => p.name === "eval/score").map((p) => ({ step: p.step, score: p.value }));
    expect(workbench.map((e) => e.step)).toEqual([0, 2, 4]);

    const { evaluations, saved } = await trainRemotely(tl, defineExperiment(input as never));
    expect(evaluations).toEqual(workbench);
    expect(saved.step).toBe(4);
  }, 180_000);

  it("fine-tunes on a JSONL file of conversations, the loss falling (examples/remote-sft.ts)", async () => {
    const tl = createClient({ url: server.url });
    const lines = Array.from({ length: 12 }, (_, i) =>
      JSON.stringify({
        messages: [
          { role: "system", content: "Add." },
          { role: "user", content: `${i}+${i}` },
          { role: "assistant", content: String(2 * i) },
        ],
      }),
    );
    const { losses, saved } = await fineTuneRemotely(tl, lines.join("\n"), { base: "arithmetic-base", steps: 12, batchSize: 8, learningRate: 3e-3 });
    expect(losses).toHaveLength(12);
    expect(losses.at(-1)!).toBeLessThan(losses[0]! * 0.8);
    expect(saved.checkpointId).toMatch(/^ckpt_/);
  }, 120_000);
});
