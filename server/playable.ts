/**
 * What a browser needs to play a run's environment itself (the playground's episode player): the environment (a
 * built-in one by name, which the page runs from lib/envs; or the experiment's own code, compiled here as for the
 * run's sandbox, which the page runs in QuickJS), the protocol and the agents' sampling as the run played them,
 * and, for an environment that reads a dataset, rows of its held-out part.
 *
 * It compiles with esbuild and reads built-in datasets next to lib/envs, which Next cannot bundle: the router
 * imports this module at run time (server/project-module.ts).
 */
import { eq } from "drizzle-orm";
import { useCases } from "@/lib/envs";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";
import { splitDataset } from "@/lib/rl/train";
import { parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow } from "@/lib/sdk/environment";
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import type { Protocol } from "@/lib/sdk/protocol";
import fs from "node:fs";
import { datasetFiles } from "./datasets";
import { type Database, experimentVersions, runs } from "./db";
import { compileEnvironment, resolveSandboxLimits, type SandboxLimits } from "./sandbox";

/** Held-out rows sent with a dataset environment: enough to pick from, small enough to send. */
const PLAYABLE_ROWS = 50;

type PlayableEnvironment =
  | { kind: "builtin"; name: string }
  /** `code`: the sandbox's bundle (SDK, bridge and the user's modules), run with `limits` as a run's sandbox is. */
  | { kind: "sandboxed"; code: string; limits: SandboxLimits };

interface PlayableRun {
  runId: string;
  environment: PlayableEnvironment;
  protocol: Protocol;
  /** how the run's agent sampled its actions */
  sampling: { temperature: number; maxTokens: number; topP: number; topK: number };
  /** the first held-out seed: episodes from here on were never trained on */
  heldOutSeed: number;
  /** the dataset an environment reads, and rows of its held-out part (null for an environment with no dataset) */
  dataset: { name: string; rows: DatasetRow[]; total: number } | null;
}

export class PlayableError extends Error {}

/** Compiled bundles by experiment version: a version's files never change. */
const compiled = new Map<string, Promise<string>>();

export async function playableRun(db: Database, runId: string): Promise<PlayableRun> {
  const [run] = await db
    .select({ config: runs.config, projectId: runs.projectId, versionId: runs.experimentVersionId, files: experimentVersions.files })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .where(eq(runs.id, runId));
  if (!run) throw new PlayableError(`No run with id '${runId}'`);
  const config = parseRunConfig(run.config);
  const protocol: Protocol = { name: config.protocol.name, agents: config.protocol.agents, history: config.protocol.history };
  const { temperature, maxTokens, topP, topK } = config.agent.sampling;
  const base = { runId, protocol, sampling: { temperature, maxTokens, topP, topK }, heldOutSeed: config.evaluation.seedOffset };

  if (config.environment !== "custom") {
    const useCase = useCases[config.environment];
    if (!useCase) throw new PlayableError(`the run's environment '${config.environment}' is not built into this server`);
    const data = useCase.environment.data;
    const dataset = data.kind === "dataset" ? await heldOutRows(db, run.projectId, data.dataset) : null;
    return { ...base, environment: { kind: "builtin", name: config.environment }, dataset };
  }

  const files = (run.files ?? {}) as Record<string, string>;
  let pending = compiled.get(run.versionId);
  if (!pending) {
    pending = compileEnvironment(files, { entry: "environment.ts" }).then((result) => {
      if (!result.ok) {
        const first = result.diagnostics[0]!;
        throw new PlayableError(`the experiment's environment does not compile: ${first.message}${first.file ? ` (${first.file}:${first.line})` : ""}`);
      }
      return result.compiled.code;
    });
    compiled.set(run.versionId, pending);
    pending.catch(() => compiled.delete(run.versionId));
    if (compiled.size > 32) compiled.delete(compiled.keys().next().value!);
  }
  const code = await pending;
  // The dataset a custom environment reads is named in its code; the page learns it when the sandbox describes
  // the environment, so rows are sent for every rows dataset the project has, by name, only when asked.
  return { ...base, environment: { kind: "sandboxed", code, limits: resolveSandboxLimits() }, dataset: null };
}

/** Rows of a dataset's held-out part (as a run splits it), for an environment that reads the dataset `name`. */
export async function heldOutRows(db: Database, projectId: string, name: string): Promise<{ name: string; rows: DatasetRow[]; total: number }> {
  let rows: DatasetRow[];
  if ((builtInDatasets as readonly string[]).includes(name)) rows = readBuiltInDataset(name);
  else {
    const file = (await datasetFiles(db, projectId))[name];
    if (!file) throw new PlayableError(`the environment reads dataset '${name}', which this project has not uploaded`);
    if (file.kind !== "rows") throw new PlayableError(`dataset '${name}' holds SFT conversations, not rows an environment can read`);
    rows = parseDataset(fs.readFileSync(file.path, "utf8"), "jsonl", name);
  }
  const { test } = splitDataset(rows);
  return { name, rows: test.slice(0, PLAYABLE_ROWS), total: test.length };
}
