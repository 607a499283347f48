/**
 * A newcomer's own game for two, trained in self-play through the real server: the source below is written from
 * the SDK reference alone (toAct, observe, per-agent rewards, legal actions), validated and launched as a turn-based
 * run where one policy plays both seats, trained a few steps by a worker, and its stored rollouts and metrics are
 * read back as the workbench shows them. The built-in self-play example (tic-tac-toe, one policy at X and O) runs
 * from its template the same way, at a tiny size.
 */
import path from "node:path";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { useCases } from "@/lib/envs";
import { jobs, metricPoints, type DatabaseHandle } from "@/server/db";
import { schedulerTick } from "@/server/jobs";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { createPackingPolicy } from "@/server/scheduler";
import { runJob } from "@/server/worker/run-job";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("self-play");

/** The file's one worker, registered on first use. */
let worker: { channel: ReturnType<typeof channelOn>; workerId: string } | null = null;

/** Places the run's job on the worker, runs it to its end, and returns the run as the API shows it. */
async function work(handle: DatabaseHandle, runId: string) {
  if (!worker) {
    const channel = channelOn(handle.db);
    worker = { channel, workerId: await registerTestWorker(channel) };
  }
  const { channel, workerId } = worker;
  await schedulerTick(handle.db, createPackingPolicy());
  const [job] = await handle.db.select({ id: jobs.id, kind: jobs.kind }).from(jobs).where(eq(jobs.runId, runId));
  expect(job!.kind).toBe("rl");
  const spec = await channel.claim(workerId, job!.id);
  const outcome = await runJob({ channel, workerId, spec, artifactsDir: bed.artifactsDir, stopRequested: () => null });
  expect(outcome).toMatchObject({ outcome: "completed" });
  await channel.finish({ workerId, jobId: job!.id, ...outcome });
  return callerFor(handle).runs.byId({ id: runId });
}

/** The run's metric `name` at `step`, as stored. */
async function metricAt(handle: DatabaseHandle, runId: string) {
  const points = await handle.db
    .select({ name: metricPoints.name, step: metricPoints.step, value: metricPoints.value })
    .from(metricPoints)
    .where(eq(metricPoints.runId, runId));
  return (name: string, step: number) => points.find((p) => p.name === name && p.step === step)?.value;
}

/**
 * Nim for two: a pile of 4 to 9 stones, each player takes 1 or 2 in turn, and whoever takes the last stone wins
 * (+1, the other -1). Each player is told the pile and whose move it is from its own side.
 */
const nim = `import { defineEnvironment } from "tinkerlab";

type Nim = { pile: number; toMove: "A" | "B"; winner: "A" | "B" | null };
const other = (player: "A" | "B") => (player === "A" ? "B" : "A");

export default defineEnvironment<Nim, number>({
  name: "nim-duel",
  description: "Take 1 or 2 stones; the last stone wins.",
  data: { kind: "free" },
  systemPrompt: (_sample, agent) => \`Nim. You are \${agent}.\`,
  maxTurns: 10,
  invalidAction: { penalty: -1, endEpisode: true },
  reset({ rng }) {
    const state: Nim = { pile: 4 + Math.floor(rng.uniform() * 6), toMove: "A", winner: null };
    return { state, observation: \`\${state.pile} left\` };
  },
  toAct: (state) => state.toMove,
  observe: (state, agent) => \`\${state.pile} left, \${state.toMove === agent ? "yours" : "theirs"}\`,
  actions: (state) => (state.pile >= 2 ? ["1", "2"] : ["1"]),
  parseAction(text, state) {
    const take = Number(text.trim());
    if (take !== 1 && take !== 2) return { ok: false, error: "take 1 or 2" };
    if (take > state.pile) return { ok: false, error: \`only \${state.pile} left\` };
    return { ok: true, action: take };
  },
  step(state, take, { agent }) {
    const pile = state.pile - take;
    if (pile === 0) {
      const rewards = agent === "A" ? { A: 1, B: -1 } : { A: -1, B: 1 };
      return { state: { ...state, pile, winner: state.toMove }, rewards, done: true, metrics: { a_won: agent === "A" ? 1 : 0 } };
    }
    const next: Nim = { ...state, pile, toMove: other(state.toMove) };
    return { state: next, observation: \`\${pile} left\`, rewards: { A: 0, B: 0 }, done: false };
  },
  demonstrate: (state) => String(state.pile % 3 === 0 ? 1 : state.pile % 3),
  score: ({ state }) => (state.winner === "A" ? 1 : 0),
  scoreName: "a_win_rate",
});
`;

describe("self-play through the server", () => {
  it("a newcomer's game for two validates, launches turn-based, trains on a worker and stores each turn's agent and every agent's rewards", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    const files = { "environment.ts": nim };
    const experiment = await caller.experiments.create({
      name: "nim self-play",
      files,
      config: {
        name: "nim-self-play",
        environment: "custom",
        agent: { base: "tiny-base", sampling: { maxTokens: 2 } },
        protocol: { name: "turn-based", agents: ["A", "B"], history: "last" },
        // Two SFT steps on the game's own demonstrator, both seats, then three of GRPO.
        sft: { data: "demonstrator", steps: 2, demonstrations: 16, batchSize: 8 },
        algorithm: { name: "grpo", steps: 3, groupSize: 4, groupsPerStep: 2 },
        evaluation: { every: 0, episodes: 4 },
      },
    });
    // As the editor asks: the dry run plays the protocol's agents, with the base's context and the sampling's budget.
    const report = await caller.experiments.validate({
      experimentId: experiment.id,
      files,
      typeCheck: false,
      base: "tiny-base",
      maxTokens: 2,
      protocol: { name: "turn-based", agents: ["A", "B"] },
    });
    expect(report.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    expect(report.ok).toBe(true);

    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    expect(await work(handle, runId)).toMatchObject({ status: "completed", step: 5 });

    // Every stored turn names who acted; the players alternate from A, and the last step pays both, summing to 0.
    const { items } = await caller.runs.rollouts({ runId, split: "train" });
    expect(items).toHaveLength(8);
    for (const rollout of items) {
      const agents = rollout.turns.map((turn) => turn.agent);
      expect(agents).toEqual(agents.map((_, i) => (i % 2 === 0 ? "A" : "B")));
      const last = rollout.turns.at(-1)!;
      expect(Object.keys(last.rewards ?? {}).sort()).toEqual(["A", "B"]);
      expect(last.rewards!.A! + last.rewards!.B!).toBe(0);
      // The policy held to the legal moves: no game ends on an invalid take, so the one who took the last stone won.
      expect(last.rewards![last.agent!]).toBe(1);
      // Each player sees the pile from its own side.
      for (const turn of rollout.turns) expect(turn.observation).toMatch(/^\d left, yours$/);
    }

    // The metrics split the reward by agent: zero-sum, so A's and B's mean returns cancel.
    const at = await metricAt(handle, runId);
    expect(at("loss/sft", 1)).toBeTypeOf("number");
    for (let step = 3; step <= 5; step++) {
      const a = at("reward/agent/A", step);
      const b = at("reward/agent/B", step);
      expect(a).toBeTypeOf("number");
      expect(a! + b!).toBeCloseTo(0, 10);
    }
  }, 120_000);

  it("runs the built-in self-play example: one policy seated at X and O, from its template", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    // The template's own settings but for size: a tiny base whose context holds a board, and a few steps.
    const base = BaseModel.create({ vocabSize: 262, contextLength: 96, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 3 });
    await new TrainingClient(base).saveWeightsForSampler(path.join(bed.basesDir, "tiny-board-base"));
    const { template } = useCases["tic-tac-toe-self-play"]!;
    const experiment = await caller.experiments.create({
      name: "tic-tac-toe self-play",
      template: "tic-tac-toe-self-play",
      config: {
        ...template,
        agent: { ...template.agent, base: "tiny-board-base" },
        sft: { ...template.sft, steps: 2, demonstrations: 16, batchSize: 8 },
        algorithm: { ...template.algorithm, steps: 2, groupSize: 4, groupsPerStep: 2 },
        evaluation: { every: 0, episodes: 4 },
      },
    });
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    expect(await work(handle, runId)).toMatchObject({ status: "completed", step: 4 });

    const { items } = await caller.runs.rollouts({ runId, split: "train" });
    expect(items).toHaveLength(8);
    for (const rollout of items) {
      // X and O alternate from whichever the seed made open, each held to the free cells.
      const agents = rollout.turns.map((turn) => turn.agent!);
      expect(agents.every((agent, i) => i === 0 || agent !== agents[i - 1])).toBe(true);
      for (const turn of rollout.turns) expect(turn.legalActions).toMatchObject({ actions: expect.arrayContaining([turn.action]) });
      const last = rollout.turns.at(-1)!;
      expect(last.rewards!.X! + last.rewards!.O!).toBe(0);
    }
    const at = await metricAt(handle, runId);
    for (const step of [3, 4]) expect(at("reward/agent/X", step)! + at("reward/agent/O", step)!).toBeCloseTo(0, 10);
  }, 120_000);
});
