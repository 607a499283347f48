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
import { parseSessionCall, type SessionMethod } from "@/lib/rl/session-calls";
import { DEFAULT_LEASE_SECONDS, MAX_CALLS_PER_REQUEST, type ReportInput, type SessionAnswer, type TakenSessionCall } from "../jobs";
import { loadBaseModel } from "./base-models";
import { mergeReports, ReportQueue } from "../jobs";
import { type JobOptions, type JobOutcome, newTrainingClient } from "./job";

/** The longest one wait for a call: stop requests and the lease are looked at in between. */
const TAKE_WAIT_MS = 1_000;
/** How often a busy session sends its optimizer steps' metrics (an idle one sends them at once). */
const METRICS_EVERY_MS = 1_000;
/** The most calls taken at once (those a client sent together): run back to back, answered together. */
const TAKE_MAX = MAX_CALLS_PER_REQUEST;

export async function runSessionJob(options: JobOptions): Promise<JobOutcome> {
  const { channel, workerId, spec } = options;
  const jobId = spec.job.id;
  const runId = spec.run.id;
  const config = spec.run.config;
  const leaseMs = (config.session?.leaseSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
  const training = config.agent.training;
  const client = newTrainingClient(loadBaseModel(spec.base ?? config.agent.base), config);
  let step = 0;
  if (spec.resume) {
    await client.loadState(spec.resume.path);
    step = spec.resume.step;
  }
  // Reports go in order in the background (as a training job's do), so that an optimizer step's answer does not
  // wait for its metrics to be stored; a checkpoint and the session's end wait for them.
  const reports = new ReportQueue<ReportInput>((report) => channel.report(report), { merge: mergeReports });
  const log = (level: "info" | "warn" | "error", message: string) => reports.push({ workerId, jobId, logs: [{ level, message }] });
  // Optimizer steps' metrics wait until the worker has its next calls in hand and go as it starts them, so that
  // the server stores them while the worker computes. Sent with the step's answer, they reached the server as its
  // client's next calls did and held them up (the database is one connection). A busy session sends them at most
  // every METRICS_EVERY_MS, several steps' in one report: storing a report costs the server about as much CPU as
  // a call's round trip, taken from the worker's computing on a small machine. An idle session, a checkpoint and
  // the session's end send them at once.
  const stepMetrics: ReportInput[] = [];
  let metricsSentAt = 0;
  const releaseMetrics = async (computing: boolean) => {
    if (stepMetrics.length === 0) return;
    if (computing && Date.now() - metricsSentAt < METRICS_EVERY_MS) return;
    metricsSentAt = Date.now();
    for (const report of stepMetrics.splice(0)) reports.push(report);
    // Two turns of the event loop (the queue's start, then the request's write) before the calls hold it.
    if (computing) for (let turn = 0; turn < 2; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
  };
  const ended = async (outcome: JobOutcome): Promise<JobOutcome> => {
    await releaseMetrics(false);
    await reports.flush();
    return outcome;
  };
  log(
    "info",
    `Session ready on ${config.agent.base}${training.mode === "lora" ? ` (LoRA rank ${training.rank})` : ""}${spec.resume ? `, resumed at step ${step}` : ""}; it ends after ${leaseMs / 1000} s without a call.`,
  );

  /**
   * Saves the session at its step as a checkpoint of its run: its whole state (resumable), or (sampler) the
   * weights or adapter alone, which later runs, the playground and exports use as a base.
   */
  const save = async (kind: "state" | "sampler" = "state") => {
    await releaseMetrics(false);
    await reports.flush();
    const dir = path.resolve(options.artifactsDir, "runs", runId, `${kind === "sampler" ? "sampler-" : ""}step-${String(step).padStart(6, "0")}`);
    if (kind === "sampler") await client.saveWeightsForSampler(dir);
    else await client.saveState(dir);
    const sizeBytes = fs.readdirSync(dir).reduce((sum, file) => sum + fs.statSync(path.join(dir, file)).size, 0);
    const recorded = (await channel.checkpoint({ workerId, jobId, step, path: dir, sizeBytes, kind })) as { checkpointId?: string } | undefined;
    return { step, checkpointId: recorded?.checkpointId ?? null };
  };

  let losses: number[] = [];
  /** Runs one call, its arguments parsed here once by its method's schema (lib/rl/session-calls.ts). */
  const run = async (method: SessionMethod, argsJson: string): Promise<unknown> => {
    const call = parseSessionCall(method, JSON.parse(argsJson));
    switch (call.method) {
      case "forward":
        return client.forward(call.args.batch, call.args.options);
      case "forwardBackward": {
        const result = await client.forwardBackward(call.args.batch, call.args.loss, call.args.config);
        losses.push(result.loss);
        return result;
      }
      case "optimStep": {
        const result = await client.optimStep(call.args.params);
        step = result.step;
        const wallTime = new Date();
        const metrics = [{ step, name: "grad_norm", value: result.gradNorm, wallTime }];
        if (losses.length > 0) metrics.push({ step, name: "loss", value: losses.reduce((a, b) => a + b, 0) / losses.length, wallTime });
        losses = [];
        stepMetrics.push({ workerId, jobId, step, metrics: metrics.filter((m) => Number.isFinite(m.value)) });
        options.onStep?.(step);
        return result;
      }
      case "sample":
        return client.sample(call.args.prompts, call.args.n, call.args.params);
      case "saveState":
      case "close":
        return save();
      case "saveWeightsForSampler":
        return save("sampler");
      case "loadState": {
        // The server put the checkpoint's folder in the arguments (server/api/routers/sessions.ts).
        const { checkpointId, path: dir } = call.args;
        if (!dir) throw new Error(`loadState: the server gave no folder for checkpoint '${checkpointId}'`);
        try {
          await client.loadState(dir);
        } catch (failure) {
          throw new Error((failure as Error).message.replaceAll(dir, checkpointId));
        }
        step = client.step;
        losses = [];
        return { step };
      }
    }
  };

  let lastCall = Date.now();
  // The calls taken and not yet run: several when the client sent several together, run back to back and answered
  // together with the next take. Calls taken and then left by a stop stay marked running: placed again, the
  // session runs them first; cancelled, their client hears that the session ended before answering them.
  let calls: TakenSessionCall[] = [];
  for (;;) {
    const stop = options.stopRequested();
    if (stop === "cancel") return ended({ outcome: "cancelled", reason: null });
    if (stop) {
      await save();
      return ended({ outcome: stop === "pause" ? "paused" : "preempted", reason: null });
    }
    const quietMs = Date.now() - lastCall;
    if (calls.length === 0 && quietMs >= leaseMs) {
      const saved = await save();
      const reason = `ended after ${Math.round(quietMs / 1000)} s without a call (its lease); saved at step ${saved.step}`;
      log("info", `Session ${reason}.`);
      return ended({ outcome: "completed", reason });
    }
    if (calls.length === 0) {
      ({ calls } = await channel.sessionExchange({ workerId, jobId, answers: [], take: { waitMs: Math.min(TAKE_WAIT_MS, leaseMs - quietMs), max: TAKE_MAX } }));
      if (calls.length === 0) {
        await releaseMetrics(false);
        continue;
      }
    }
    await releaseMetrics(true);
    lastCall = Date.now();
    const answers: SessionAnswer[] = [];
    let closed = false;
    while (calls.length > 0 && !closed) {
      if (answers.length > 0 && options.stopRequested()) break; // the rest wait, marked running (above)
      const call = calls.shift()!;
      try {
        const result = await run(call.method, call.argsJson);
        answers.push({ callId: call.id, resultJson: JSON.stringify(result ?? null), error: null });
        closed = call.method === "close";
      } catch (failure) {
        answers.push({ callId: call.id, error: failure instanceof Error ? failure.message : String(failure) });
      }
    }
    // With the answers, the next calls, waited for as long as a take would (the lease starts now), unless the
    // session ends or stops here.
    const take = closed || calls.length > 0 ? undefined : { waitMs: Math.min(TAKE_WAIT_MS, leaseMs), max: TAKE_MAX };
    try {
      calls.push(...(await channel.sessionExchange({ workerId, jobId, answers, take })).calls);
    } catch {
      // Answers the server could not take together (too large, not JSON): each alone, and one it cannot take fails
      // its call with why; the session goes on. A call keeps its first answer, so one sent again changes nothing.
      for (const answer of answers) {
        try {
          await channel.sessionExchange({ workerId, jobId, answers: [answer] });
        } catch (failure) {
          const why = (failure instanceof Error ? failure.message : String(failure)).slice(0, 2000);
          await channel.sessionExchange({ workerId, jobId, answers: [{ callId: answer.callId, error: `its answer could not be sent: ${why}` }] });
        }
      }
    }
    lastCall = Date.now();
    if (closed) {
      log("info", `Session closed by its client at step ${step}.`);
      return ended({ outcome: "completed", reason: "closed by its client" });
    }
  }
}
