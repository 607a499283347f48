/**
 * Any checkpoint is a base: the bases list holds the built-in bases and every run's checkpoints with their shape,
 * a run launched from a checkpoint is accepted and shows its lineage, and a checkpoint that does not exist (or lies
 * in a project the caller is no member of) is refused with a message naming it.
 */
import { testRunConfig } from "../support/run-config";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject, DEFAULT_PROJECT, setMember } from "@/server/auth/projects";
import { checkpoints, LOCAL_USER, newId, runs, users, type DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-ckpt-"));

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
});
afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** A finished LoRA run on arithmetic-base with a checkpoint at step 40 (its folder holds the model's config). */
async function finishedRun() {
  const caller = callerFor(handle);
  const experiment = await caller.experiments.create({
    name: "source",
    config: { name: "source", environment: "arithmetic", agent: { base: "arithmetic-base" } },
  });
  const runId = newId("run");
  await handle.db.insert(runs).values({
    id: runId,
    projectId: DEFAULT_PROJECT,
    experimentId: experiment.id,
    experimentVersionId: experiment.versionId,
    createdBy: LOCAL_USER.id,
    name: "source-run",
    status: "completed",
    config: testRunConfig({ agent: { base: "arithmetic-base", training: { mode: "lora" } } }),
    totalSteps: 40,
  });
  const dir = path.join(folder, runId, "step-000040");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "model_config.json"), JSON.stringify({ vocabSize: 262, contextLength: 24, dModel: 64, nLayers: 2, nHeads: 4 }));
  const id = newId("ckpt");
  await handle.db.insert(checkpoints).values({ id, runId, step: 40, kind: "state", path: dir, sizeBytes: 1000 });
  return { id, runId };
}

describe("checkpoints as bases", () => {
  it("lists built-in bases and run checkpoints with their shape and origin", async () => {
    const { id } = await finishedRun();
    const bases = await callerFor(handle).checkpoints.bases();
    expect(bases.builtin.find((b) => b.name === "arithmetic-base")).toMatchObject({
      shape: { contextLength: 24 },
      origin: expect.stringMatching(/arithmetic demonstrator/),
    });
    expect(bases.checkpoints.find((c) => c.id === id)).toMatchObject({
      step: 40,
      runName: "source-run",
      mode: "lora",
      parentBase: "arithmetic-base",
      shape: { contextLength: 24, dModel: 64 },
    });
  });

  it("launches a run from a checkpoint, which shows where its base came from", async () => {
    const { id } = await finishedRun();
    const caller = callerFor(handle);
    const experiment = await caller.experiments.create({
      name: "from a checkpoint",
      config: { name: "from a checkpoint", environment: "arithmetic", agent: { base: id, training: { mode: "lora" }, sampling: { maxTokens: 5 } } },
    });
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    const run = await caller.runs.byId({ id: runId });
    expect(run.status).toBe("queued");
    expect(await caller.checkpoints.lineage({ runId })).toEqual({
      base: id,
      lineage: `${id} (run source-run, step 40, LoRA) ← arithmetic-base`,
    });
  });

  it("refuses a checkpoint that does not exist, naming it", async () => {
    const caller = callerFor(handle);
    const experiment = await caller.experiments.create({
      name: "missing",
      config: { name: "missing", environment: "arithmetic", agent: { base: "ckpt_nothere" } },
    });
    await expect(caller.runs.launch({ experimentId: experiment.id })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: "agent.base: No checkpoint named 'ckpt_nothere'. A base is a built-in base or a checkpoint id (ckpt_…) from a run's Checkpoints list.",
    });
  });

  it("refuses another project's checkpoint as a base as if it did not exist", async () => {
    const { id } = await finishedRun();
    const bob = { id: "usr_bob", name: "Bob", email: "bob@example.com" };
    await handle.db.insert(users).values(bob);
    await createProject(handle.db, { name: "Bob's", ownerId: bob.id });
    const asBob = callerFor(handle, bob);
    expect((await asBob.checkpoints.bases()).checkpoints.map((c) => c.id)).not.toContain(id);
    const experiment = await asBob.experiments.create({
      name: "borrowed",
      config: { name: "borrowed", environment: "arithmetic", agent: { base: id, training: { mode: "lora" }, sampling: { maxTokens: 5 } } },
    });
    // The same words as for a checkpoint that does not exist.
    await expect(asBob.runs.launch({ experimentId: experiment.id })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: `agent.base: No checkpoint named '${id}'. A base is a built-in base or a checkpoint id (ckpt_…) from a run's Checkpoints list.`,
    });
    // Once Bob is a member of the checkpoint's project (a viewer is enough), it is his to start from.
    await setMember(handle.db, DEFAULT_PROJECT, bob.id, "viewer");
    const asMember = callerFor(handle, bob);
    expect((await asMember.checkpoints.bases()).checkpoints.map((c) => c.id)).toContain(id);
    await expect(asMember.runs.launch({ experimentId: experiment.id })).resolves.toMatchObject({ runId: expect.stringMatching(/^run_/) });
  });
});
