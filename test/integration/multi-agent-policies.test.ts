/**
 * Runs of a two-player game through the server with a policy per agent and with a league of frozen past selves:
 * launched, paused (the job saves its checkpoint), resumed and finished by a worker. A checkpoint carries every
 * agent's adapter and the league, and the resumed job goes on from them.
 */
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { LeagueState } from "@/lib/rl/league";
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import { GET as downloadExport } from "@/app/api/exports/[id]/route";
import { decodeSafetensors, type TensorMap } from "@/lib/model/safetensors";
import { listGPTParameters, parametersToTensorMap } from "@/lib/model/weights";
import { checkpoints, jobs, metricPoints, setDatabase, type DatabaseHandle } from "@/server/db";
import { resumeRun, schedulerTick } from "@/server/jobs";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { createPackingPolicy } from "@/server/scheduler";
import { runJob } from "@/server/worker/run-job";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("policies");
let worker: { channel: ReturnType<typeof channelOn>; workerId: string } | null = null;

/** Places the run's job, runs it until `pauseAt` (a pause, as the server asks one) or its end, and says how it ended. */
async function attempt(handle: DatabaseHandle, runId: string, pauseAt: number | null) {
  if (!worker) {
    const channel = channelOn(handle.db);
    worker = { channel, workerId: await registerTestWorker(channel) };
  }
  const { channel, workerId } = worker;
  await channel.heartbeat(workerId); // only a worker heard from lately is given work
  await schedulerTick(handle.db, createPackingPolicy());
  const [job] = await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, runId));
  const spec = await channel.claim(workerId, job!.id);
  let step = 0;
  try {
    const outcome = await runJob({
      channel,
      workerId,
      spec,
      artifactsDir: bed.artifactsDir,
      onStep: (s) => void (step = s),
      stopRequested: () => (pauseAt !== null && step >= pauseAt ? "pause" : null),
    });
    await channel.finish({ workerId, jobId: job!.id, ...outcome });
    return { spec, outcome };
  } catch (error) {
    await channel.finish({ workerId, jobId: job!.id, outcome: "failed", reason: (error as Error).message });
    throw error;
  }
}

async function launch(handle: DatabaseHandle, name: string, patch: Partial<ExperimentConfigInput>) {
  const caller = callerFor(handle);
  if (!fs.existsSync(path.join(bed.basesDir, "tiny-board-base"))) {
    const base = BaseModel.create({ vocabSize: 262, contextLength: 96, dModel: 32, nLayers: 1, nHeads: 2 }, { seed: 3 });
    await new TrainingClient(base).saveWeightsForSampler(path.join(bed.basesDir, "tiny-board-base"));
  }
  const experiment = await caller.experiments.create({
    name,
    config: {
      name,
      environment: "tic-tac-toe-self-play",
      agent: { base: "tiny-board-base", training: { mode: "lora", rank: 4, alpha: 8 }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last" },
      algorithm: { name: "grpo", steps: 4, groupSize: 4, groupsPerStep: 2, learningRate: 1e-2 },
      evaluation: { every: 0, episodes: 4 },
      checkpointEvery: 0,
      ...patch,
    },
  });
  return (await caller.runs.launch({ experimentId: experiment.id })).runId;
}

async function metricsOf(handle: DatabaseHandle, runId: string) {
  const points = await handle.db
    .select({ name: metricPoints.name, step: metricPoints.step, value: metricPoints.value })
    .from(metricPoints)
    .where(eq(metricPoints.runId, runId));
  return (name: string, step: number) => points.find((p) => p.name === name && p.step === step)?.value;
}

async function footprintOf(handle: DatabaseHandle, runId: string) {
  const [job] = await handle.db.select({ footprint: jobs.footprint }).from(jobs).where(eq(jobs.runId, runId));
  return job!.footprint as { breakdown: Record<string, number> };
}

async function checkpointAt(handle: DatabaseHandle, runId: string, step: number) {
  const rows = await handle.db.select({ step: checkpoints.step, path: checkpoints.path }).from(checkpoints).where(eq(checkpoints.runId, runId));
  return rows.find((row) => row.step === step)!.path;
}

describe("separate policies through the server", () => {
  it("saves each agent's adapter in a checkpoint, resumes both, and reports each agent's update", async () => {
    const { handle } = bed;
    const runId = await launch(handle, "separate", { protocol: { name: "turn-based", agents: ["X", "O"], history: "last", policies: "separate" } });
    // The scheduler counts a client per agent: two adapters with their gradients and Adam state on the one base.
    expect(Object.keys((await footprintOf(handle, runId)).breakdown)).toEqual(
      expect.arrayContaining(["baseWeights", "adapter ×2", "adapterGradients ×2", "adapterAdam ×2"]),
    );
    const first = await attempt(handle, runId, 2);
    expect(first.outcome.outcome).toBe("paused");
    const dir = await checkpointAt(handle, runId, 2);
    // X's state is the checkpoint's own (it still reads as one policy); O's is beside it.
    expect(fs.existsSync(path.join(dir, "manifest.json"))).toBe(true);
    expect(fs.existsSync(path.join(dir, "agents", "O", "manifest.json"))).toBe(true);
    const savedO = fs.readFileSync(path.join(dir, "agents", "O", "weights.safetensors"));
    expect(savedO.equals(fs.readFileSync(path.join(dir, "weights.safetensors")))).toBe(false);

    await resumeRun(handle.db, runId);
    const second = await attempt(handle, runId, null);
    expect(second.spec.resume).toMatchObject({ step: 2 });
    expect(second.outcome).toEqual({ outcome: "completed", reason: null });
    expect(await callerFor(handle).runs.byId({ id: runId })).toMatchObject({ status: "completed", step: 4 });
    const at = await metricsOf(handle, runId);
    for (let step = 1; step <= 4; step++) {
      // Each agent's policy trains on its own turns: every game has X's moves and O's.
      expect(at("train/agent/X/sequences", step)).toBeGreaterThan(0);
      expect(at("train/agent/O/sequences", step)).toBeGreaterThan(0);
      expect(at("train/sequences", step)).toBe(at("train/agent/X/sequences", step)! + at("train/agent/O/sequences", step)!);
    }
    // The final checkpoint holds O's adapter, moved on from the one the pause saved.
    const last = await checkpointAt(handle, runId, 4);
    expect(fs.readFileSync(path.join(last, "agents", "O", "weights.safetensors")).equals(savedO)).toBe(false);

    // Evaluate on its last checkpoint plays each agent with its own policy: the evaluation run scores exactly as
    // the run's own evaluation after step 4 (the same held-out games, greedy, on a deterministic engine).
    const [checkpoint] = await handle.db
      .select({ id: checkpoints.id })
      .from(checkpoints)
      .where(and(eq(checkpoints.runId, runId), eq(checkpoints.step, 4), eq(checkpoints.kind, "state")));
    const { runId: evaluation } = await callerFor(handle).runs.evaluate({ checkpointId: checkpoint!.id });
    expect((await attempt(handle, evaluation, null)).outcome).toEqual({ outcome: "completed", reason: null });
    const evaluated = await metricsOf(handle, evaluation);
    expect(evaluated("eval/score", 0)).toBeTypeOf("number");
    expect(evaluated("eval/score", 0)).toBe(at("eval/score", 4));
    expect(evaluated("eval/reward/agent/O", 0)).toBe(at("eval/reward/agent/O", 4));
  }, 180_000);
});

describe("SFT steps with separate policies through the server", () => {
  it("teaches each agent's policy its own demonstrated turns, then trains both by RL, resumed in the RL stage", async () => {
    const { handle } = bed;
    const runId = await launch(handle, "separate-sft", {
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last", policies: "separate" },
      sft: { steps: 2, demonstrations: 12, batchSize: 4, learningRate: 1e-2 },
      algorithm: { name: "grpo", steps: 2, groupSize: 4, groupsPerStep: 2, learningRate: 1e-2, klCoef: 0.1 },
    });
    expect((await attempt(handle, runId, 3)).outcome.outcome).toBe("paused");
    const sftEnd = await checkpointAt(handle, runId, 2);
    // The SFT stage moved each agent's adapter away from the base's, each its own way.
    const weightsOf = (dir: string) => fs.readFileSync(path.join(dir, "weights.safetensors"));
    expect(weightsOf(path.join(sftEnd, "agents", "O")).equals(weightsOf(sftEnd))).toBe(false);
    await resumeRun(handle.db, runId);
    const resumed = await attempt(handle, runId, null);
    expect(resumed.spec.resume).toMatchObject({ step: 3 });
    expect(resumed.outcome).toEqual({ outcome: "completed", reason: null });
    const at = await metricsOf(handle, runId);
    for (const step of [1, 2]) {
      for (const agent of ["X", "O"]) expect(at(`train/agent/${agent}/loss/sft`, step)).toBeGreaterThan(0);
      expect(at("train/tokens", step)).toBe(at("train/agent/X/tokens", step)! + at("train/agent/O/tokens", step)!);
    }
    for (const step of [3, 4]) for (const agent of ["X", "O"]) expect(at(`train/agent/${agent}/sequences`, step)).toBeGreaterThan(0);
    // With a KL penalty against where each policy's RL began: resumed, each agent's reference is its own SFT policy,
    // so the resumed run trains as one never stopped does.
    const straight = await launch(handle, "separate-sft-straight", {
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last", policies: "separate" },
      sft: { steps: 2, demonstrations: 12, batchSize: 4, learningRate: 1e-2 },
      algorithm: { name: "grpo", steps: 2, groupSize: 4, groupsPerStep: 2, learningRate: 1e-2, klCoef: 0.1 },
    });
    expect((await attempt(handle, straight, null)).outcome.outcome).toBe("completed");
    const other = await metricsOf(handle, straight);
    for (const name of ["train/agent/X/kl", "train/agent/O/kl", "train/agent/O/loss/policy", "loss"]) {
      expect(at(name, 4)).toBeTypeOf("number");
      expect(at(name, 4)).toBe(other(name, 4));
    }
    const logs = (await callerFor(handle).runs.logs({ runId })).map((line) => line.message).join("\n");
    expect(logs).toMatch(/SFT of each agent's policy on its own turns: X \d+, O \d+ conversations \(12 demonstration episodes/);
  }, 180_000);
});

describe("an export of a run with separate policies", () => {
  it("downloads a tar of one safetensors per agent, each that agent's policy merged into the base", async () => {
    const { handle } = bed;
    setDatabase(handle);
    const runId = await launch(handle, "separate-export", {
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last", policies: "separate" },
      algorithm: { name: "grpo", steps: 2, groupSize: 4, groupsPerStep: 2, learningRate: 1e-2 },
    });
    expect((await attempt(handle, runId, null)).outcome.outcome).toBe("completed");
    const [checkpoint] = await handle.db
      .select({ id: checkpoints.id, path: checkpoints.path })
      .from(checkpoints)
      .where(and(eq(checkpoints.runId, runId), eq(checkpoints.step, 2), eq(checkpoints.kind, "state")));
    const { runId: exported } = await callerFor(handle).runs.export({ checkpointId: checkpoint!.id });
    expect((await attempt(handle, exported, null)).outcome).toEqual({ outcome: "completed", reason: null });
    const [file] = (await callerFor(handle).checkpoints.ofRun({ runId: exported })).filter((c) => c.kind === "export");
    expect((await callerFor(handle).derived.ofRun({ runId }))[0]!.downloads).toEqual([{ id: file!.id, sizeBytes: file!.sizeBytes, format: "tar" }]);

    const response = await downloadExport(new Request(`http://localhost/api/exports/${file!.id}`), { params: Promise.resolve({ id: file!.id }) });
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/x-tar");
    expect(response.headers.get("content-disposition")).toMatch(/filename=".*\.tar"$/);
    const bytes = Buffer.from(await response.arrayBuffer());
    expect(bytes.length).toBe(file!.sizeBytes);
    // A standard tar reads it: one file per agent, named by the agent.
    const out = fs.mkdtempSync(path.join(bed.artifactsDir, "unpacked-"));
    fs.writeFileSync(path.join(out, "export.tar"), bytes);
    expect(execFileSync("tar", ["-tf", "export.tar"], { cwd: out, encoding: "utf8" }).trim().split("\n")).toEqual(["X.safetensors", "O.safetensors"]);
    execFileSync("tar", ["-xf", "export.tar"], { cwd: out });
    const read = (agent: string) => decodeSafetensors(new Uint8Array(fs.readFileSync(path.join(out, `${agent}.safetensors`))));
    const [x, o] = [read("X"), read("O")];
    expect([x.metadata.agent, o.metadata.agent]).toEqual(["X", "O"]);
    expect(o.metadata.origin).toContain(`${checkpoint!.id}/agents/O`);
    // Each file is its agent's policy: its adapter folded into the base, as the checkpoint holds it.
    const tinyBoard = BaseModel.load(path.join(bed.basesDir, "tiny-board-base"));
    const merged = (dir: string) => {
      const model = BaseModel.fromCheckpoint(dir, tinyBoard);
      return parametersToTensorMap(listGPTParameters(model.weights, model.config));
    };
    const tensors = (map: TensorMap) => Object.fromEntries([...map].map(([name, tensor]) => [name, Array.from(tensor.data)]));
    expect(tensors(o.tensors)).toEqual(tensors(merged(path.join(checkpoint!.path, "agents", "O"))));
    expect(tensors(x.tensors)).toEqual(tensors(merged(checkpoint!.path)));
    expect(tensors(x.tensors)).not.toEqual(tensors(o.tensors));
  }, 180_000);
});

describe("a league run through the server", () => {
  it("keeps frozen snapshots in the run's folder and its league in each checkpoint, a resumed job continues it, and its page reads the table", async () => {
    const { handle } = bed;
    const runId = await launch(handle, "league", {
      algorithm: {
        name: "grpo",
        steps: 4,
        groupSize: 4,
        groupsPerStep: 2,
        learningRate: 1e-2,
        league: { every: 2, maxMembers: 5, mix: { latest: 1, uniform: 0, pfsp: 1 }, learner: "both-seats-alternating" },
      },
    });
    // The learner and the five snapshots the league may keep, each a client on the base.
    expect((await footprintOf(handle, runId)).breakdown).toHaveProperty("adapter ×6");
    expect((await attempt(handle, runId, 3)).outcome.outcome).toBe("paused");
    const paused: LeagueState = JSON.parse(fs.readFileSync(path.join(await checkpointAt(handle, runId, 3), "league.json"), "utf8"));
    expect(paused.members.map((m) => m.id)).toEqual(["step-0", "step-2", "step-4"]);
    expect(paused.games).toHaveLength(3 * 8);
    const snapshots = path.join(bed.artifactsDir, "runs", runId, "league");
    expect(fs.readdirSync(snapshots).sort()).toEqual(["step-0", "step-2"]);

    await resumeRun(handle.db, runId);
    expect((await attempt(handle, runId, null)).outcome).toEqual({ outcome: "completed", reason: null });
    const final: LeagueState = JSON.parse(fs.readFileSync(path.join(await checkpointAt(handle, runId, 4), "league.json"), "utf8"));
    expect(final.members.map((m) => m.id)).toEqual(["step-0", "step-2", "step-4"]);
    expect(final.games.slice(0, paused.games.length)).toEqual(paused.games);
    expect(final.games).toHaveLength(4 * 8);
    const at = await metricsOf(handle, runId);
    expect([1, 2, 3, 4].map((step) => at("league/members", step))).toEqual([1, 2, 2, 3]);
    expect(at("league/elo/latest", 4)).toBeTypeOf("number");
    expect(at("league/win_rate/all", 4)).toBeGreaterThanOrEqual(0);

    // The run page's league table: the league of the newest checkpoint, its members rated (the first at 1000), and
    // the learner's score in each period (→2, →4) from the games it played then.
    const table = (await callerFor(handle).league.ofRun({ runId }))!;
    expect(table.checkpointStep).toBe(4);
    expect(table.members.map((m) => [m.id, m.training])).toEqual([
      ["step-0", false],
      ["step-2", false],
      ["step-4", false],
    ]);
    expect(table.members[0]).toMatchObject({ rating: 1000, low: 1000, high: 1000 });
    expect(table.members[2]!.rating).toBeCloseTo(at("league/elo/latest", 4)!, 6);
    expect(table.periods.map((p) => p.learner)).toEqual(["step-2", "step-4"]);
    const played = (p: (typeof table.periods)[number]) => Object.values(p.scores).reduce((sum, s) => sum + s.games, 0);
    expect(table.periods.map(played)).toEqual([2 * 8, 2 * 8]);
    expect(table.games).toBe(final.games.length);
  }, 180_000);
});

// Last: the job it fails keeps the worker's one slot.
describe("a checkpoint without an agent's policy", () => {
  it("is refused on resume from a checkpoint that lacks an agent's policy, naming the agent", async () => {
    const { handle } = bed;
    const runId = await launch(handle, "separate-lost", { protocol: { name: "turn-based", agents: ["X", "O"], history: "last", policies: "separate" } });
    expect((await attempt(handle, runId, 1)).outcome.outcome).toBe("paused");
    // As a checkpoint of a run whose agents shared one policy would be.
    fs.rmSync(path.join(await checkpointAt(handle, runId, 1), "agents"), { recursive: true });
    await resumeRun(handle.db, runId);
    await expect(attempt(handle, runId, null)).rejects.toThrow(/holds no policy for agent 'O'/);
  }, 180_000);
});
