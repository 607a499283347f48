/**
 * A remote training session on this worker (server/jobs/sessions.ts): the model and its optimizer live here for
 * the session's life, and the script's calls of the primitives are taken one at a time, in the order they came,
 * run on a TrainingClient exactly as in-process, and answered. A call that fails (a malformed batch) is answered
 * with its error and the session goes on. Each optimizer step is reported as the run's step, with the loss of
 * the forwardBackward calls before it and the gradient norm, so the run page charts the session.
 *
 * The session ends when the client closes it (`close`: saved first), when it has had no call for its lease
 * (saved, then completed, which frees its place), or when it is cancelled. Paused or preempted, it saves a
 * checkpoint and resumes from it when placed again.
 */
import fs from "node:fs";
import path from "node:path";
import { defineExperiment } from "@/lib/sdk/experiment";
import { DEFAULT_LEASE_SECONDS, type SessionMethod } from "../jobs";
import { loadBaseModel } from "./base-models";
import { type JobOptions, type JobOutcome, newTrainingClient } from "./run-job";

/** The longest one wait for a call: stop requests and the lease are looked at in between. */
const TAKE_WAIT_MS = 1_000;

export async function runSessionJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const jobId = spec.job.id;
  const runId = spec.run.id;
  const raw = spec.run.config as { session?: { leaseSeconds?: number } };
  const leaseMs = (raw.session?.leaseSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
  const config = defineExperiment(spec.run.config as never);
  const training = config.agent.training;
  const client = newTrainingClient(loadBaseModel(spec.base ?? config.agent.base), config);
  let step = 0;
  if (spec.resume) {
    await client.loadState(spec.resume.path);
    step = spec.resume.step;
  }
  const log = (level: "info" | "warn" | "error", message: string) => channel.report({ workerId, jobId, logs: [{ level, message }] });
  await log(
    "info",
    `Session ready on ${config.agent.base}${training.mode === "lora" ? ` (LoRA rank ${training.rank})` : ""}${spec.resume ? `, resumed at step ${step}` : ""}; it ends after ${leaseMs / 1000} s without a call.`,
  );

  const save = async () => {
    const dir = path.resolve(options.artifactsDir, "runs", runId, `step-${String(step).padStart(6, "0")}`);
    await client.saveState(dir);
    const sizeBytes = fs.readdirSync(dir).reduce((sum, file) => sum + fs.statSync(path.join(dir, file)).size, 0);
    const recorded = (await channel.checkpoint({ workerId, jobId, step, path: dir, sizeBytes })) as { checkpointId?: string } | undefined;
    return { step, checkpointId: recorded?.checkpointId ?? null };
  };

  let losses: number[] = [];
  const run = async (method: SessionMethod, args: Record<string, unknown>): Promise<unknown> => {
    switch (method) {
      case "forward":
        return client.forward(args.batch as never, (args.options ?? {}) as never);
      case "forwardBackward": {
        const result = await client.forwardBackward(args.batch as never, args.loss as never, args.config as never);
        losses.push(result.loss);
        return result;
      }
      case "optimStep": {
        const result = await client.optimStep(args.params as never);
        step = result.step;
        const wallTime = new Date();
        const metrics = [{ step, name: "grad_norm", value: result.gradNorm, wallTime }];
        if (losses.length > 0) metrics.push({ step, name: "loss", value: losses.reduce((a, b) => a + b, 0) / losses.length, wallTime });
        losses = [];
        await channel.report({ workerId, jobId, step, metrics: metrics.filter((m) => Number.isFinite(m.value)) });
        options.onStep?.(step);
        return result;
      }
      case "sample":
        return client.sample(args.prompts as never, args.n as never, args.params as never);
      case "saveState":
      case "close":
        return save();
    }
  };

  let lastCall = Date.now();
  for (;;) {
    const stop = options.stopRequested();
    if (stop === "cancel") return { outcome: "cancelled", reason: null };
    if (stop) {
      await save();
      return { outcome: stop === "pause" ? "paused" : "preempted", reason: null };
    }
    const quietMs = Date.now() - lastCall;
    if (quietMs >= leaseMs) {
      const saved = await save();
      const reason = `ended after ${Math.round(quietMs / 1000)} s without a call (its lease); saved at step ${saved.step}`;
      await log("info", `Session ${reason}.`);
      return { outcome: "completed", reason };
    }
    const call = await channel.sessionTake({ workerId, jobId, waitMs: Math.min(TAKE_WAIT_MS, leaseMs - quietMs) });
    if (!call) continue;
    lastCall = Date.now();
    let result: unknown;
    let error: string | null = null;
    try {
      result = await run(call.method, (call.args ?? {}) as Record<string, unknown>);
    } catch (failure) {
      error = failure instanceof Error ? failure.message : String(failure);
    }
    try {
      await channel.sessionAnswer({ workerId, jobId, callId: call.id, result, error });
    } catch (failure) {
      // An answer the server could not take (too large, not JSON): the call fails with why, the session goes on.
      const why = failure instanceof Error ? failure.message : String(failure);
      await channel.sessionAnswer({ workerId, jobId, callId: call.id, error: `its answer could not be sent: ${why.slice(0, 2000)}` });
    }
    lastCall = Date.now();
    if (call.method === "close" && error === null) {
      await log("info", `Session closed by its client at step ${step}.`);
      return { outcome: "completed", reason: "closed by its client" };
    }
  }
}
