/**
 * A worker job run in this process on a custom environment, as the worker tests play them: "say the colour" (its
 * demonstrator answers right, its legal actions are the three colours), and what the job reported.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { MetricPointInput } from "@/server/jobs";
import { inProcessChannel } from "@/server/worker/channel";
import { runJob, type JobSpec } from "@/server/worker/run-job";

/** Say the colour the observation names: "red" → "red". The demonstrator answers right. */
export const colours = `import { defineEnvironment } from "tinkerlab";
const COLOURS = ["red", "blue", "green"];
export default defineEnvironment<{ colour: string; said?: string }, string>({
  name: "say-colour",
  data: { kind: "free" },
  systemPrompt: "Say it.",
  maxTurns: 1,
  invalidAction: { penalty: 0, endEpisode: true },
  actions: COLOURS,
  reset: ({ rng }) => {
    const colour = COLOURS[Math.floor(rng.uniform() * 3)]!;
    return { state: { colour }, observation: colour };
  },
  parseAction: (text) => (COLOURS.includes(text) ? { ok: true, action: text } : { ok: false, error: "a colour" }),
  step: (state, said) => ({ state: { ...state, said }, reward: said === state.colour ? 1 : 0, done: true }),
  demonstrate: (state) => state.colour,
  score: ({ state }) => (state.said === state.colour ? 1 : 0),
});
`;

/**
 * Runs one job of `config` on the colour environment (by default an SFT job, full-parameter, on `tiny-base`;
 * `extra` replaces parts of the spec), paused once it reaches `pauseAfter` steps when given.
 */
export async function playColourJob(
  config: Record<string, unknown>,
  extra: Partial<JobSpec> = {},
  pauseAfter?: number,
  artifactsDir = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-sft-artifacts-")),
) {
  const metrics: MetricPointInput[] = [];
  const saved: { step: number; path: string }[] = [];
  const logs: string[] = [];
  const channel = inProcessChannel({
    report: (report) => {
      metrics.push(...(report.metrics ?? []));
      logs.push(...(report.logs ?? []).map((l) => l.message));
    },
    checkpoint: (input) => void saved.push({ step: input.step, path: input.path }),
  });
  const spec = {
    job: { id: "job_sft", runId: "run_sft", kind: "sft", mode: "full", lastCheckpointId: null, attempts: 0 },
    run: { id: "run_sft", config, seed: 1, files: { "environment.ts": colours } },
    resume: null,
    base: { kind: "builtin", name: "tiny-base" },
    datasets: {},
    ...extra,
  } as unknown as JobSpec;
  let reached = 0;
  const outcome = await runJob({
    channel,
    workerId: "wrk_test",
    spec,
    artifactsDir,
    stopRequested: () => (pauseAfter !== undefined && reached >= pauseAfter ? "pause" : null),
    onStep: (step) => void (reached = step),
  });
  const series = (name: string) => metrics.filter((m) => m.name === name).map((m) => m.value);
  const stepsOf = (name: string) => metrics.filter((m) => m.name === name).map((m) => m.step);
  return { outcome, saved, series, stepsOf, logs, artifactsDir };
}
