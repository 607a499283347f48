/**
 * A share link reveals only its runs: for a shared run whose base is another run's checkpoint, the link's holder
 * reads "a checkpoint of another run" in the lineage and the config, never that run's id, name, step or experiment;
 * a comparison link naming both runs shows the whole lineage, as a member of the project sees it. A member of
 * another project, whose run started from this project's checkpoint, sees no more of it than a link holder.
 */
import { testRunConfig } from "../support/run-config";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { User } from "@/server/auth/access";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createProject } from "@/server/auth/projects";
import { authenticate } from "@/server/auth/request";
import { createShareLink } from "@/server/auth/share-links";
import { checkpoints, type DatabaseHandle, experiments, newId, runs, users } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const grace: User = { id: "usr_grace", name: "Grace", email: "grace@lab.test" };
const quinn: User = { id: "usr_quinn", name: "Quinn", email: "quinn@lab.test" };
const fx = { project: "", source: "", checkpoint: "", derived: "", elsewhere: "" };

/** A run of `experimentId` in `projectId` on `base`. */
async function insertRun(projectId: string, experimentId: string, versionId: string, name: string, base: string, createdBy: string) {
  const id = newId("run");
  await handle.db.insert(runs).values({
    id,
    projectId,
    experimentId,
    experimentVersionId: versionId,
    createdBy,
    name,
    status: "completed",
    config: testRunConfig({ agent: { base, training: { mode: "lora" } } }),
    totalSteps: 40,
  });
  return id;
}

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  await handle.db.insert(users).values([grace, quinn]);
  fx.project = (await createProject(handle.db, { name: "Secret lab", ownerId: grace.id })).id;
  const otherProject = (await createProject(handle.db, { name: "Quinn's", ownerId: quinn.id })).id;
  const source = await callerFor(handle, grace).experiments.create({ name: "confidential-recipe", projectId: fx.project, template: "arithmetic" });
  fx.source = await insertRun(fx.project, source.id, source.versionId, "confidential-source-run", "arithmetic-base", grace.id);
  fx.checkpoint = newId("ckpt");
  await handle.db.insert(checkpoints).values({ id: fx.checkpoint, runId: fx.source, step: 40, kind: "state", path: "/nowhere", sizeBytes: 1 });
  const derived = await callerFor(handle, grace).experiments.create({ name: "public-demo", projectId: fx.project, template: "arithmetic" });
  fx.derived = await insertRun(fx.project, derived.id, derived.versionId, "demo-run", fx.checkpoint, grace.id);
  // A run of another project on this project's checkpoint (launched while its maker could read it).
  const theirs = await callerFor(handle, quinn).experiments.create({ name: "borrowed", projectId: otherProject, template: "arithmetic" });
  fx.elsewhere = await insertRun(otherProject, theirs.id, theirs.versionId, "borrowed-run", fx.checkpoint, quinn.id);
});
afterAll(() => db.close());

/** A caller holding a fresh share link's token of `kind` over `runIds`, as a request carrying it is. */
async function linkHolder(kind: "run" | "compare", runIds: string[]) {
  const { token } = await createShareLink(handle.db, { projectId: fx.project, kind, runIds, view: {}, title: "shared", createdBy: grace.id, expiresAt: null });
  const principal = await authenticate(handle.db, new Headers({ [SHARE_HEADER]: token }), "team");
  expect(principal.kind).toBe("share");
  return callerFor(handle, principal);
}

describe("what a share link reveals", () => {
  it("reads another run's checkpoint as 'a checkpoint of another run' in the lineage and the config", async () => {
    const holder = await linkHolder("run", [fx.derived]);
    const lineage = await holder.checkpoints.lineage({ runId: fx.derived });
    expect(lineage).toEqual({ base: "a checkpoint of another run", lineage: "a checkpoint of another run" });
    const run = await holder.runs.byId({ id: fx.derived });
    expect(run.config.agent.base).toBe("a checkpoint of another run");
    expect(run).toMatchObject({ name: "demo-run", role: null });
    const seen = JSON.stringify([lineage, run]);
    const [sourceExperiment] = await handle.db.select({ id: experiments.id }).from(experiments).where(eq(experiments.name, "confidential-recipe"));
    for (const secret of [fx.checkpoint, fx.source, "confidential-source-run", "confidential-recipe", sourceExperiment!.id, "step 40"]) {
      expect(seen).not.toContain(secret);
    }
  });

  it("names a run the link also shows: a comparison of both runs reads the whole lineage, as a member does", async () => {
    const whole = `${fx.checkpoint} (run confidential-source-run, step 40, LoRA) ← arithmetic-base`;
    const holder = await linkHolder("compare", [fx.derived, fx.source]);
    expect(await holder.checkpoints.lineage({ runId: fx.derived })).toEqual({ base: fx.checkpoint, lineage: whole });
    expect((await holder.runs.byId({ id: fx.derived })).config.agent.base).toBe(fx.checkpoint);
    const member = callerFor(handle, grace);
    expect(await member.checkpoints.lineage({ runId: fx.derived })).toEqual({ base: fx.checkpoint, lineage: whole });
    expect(await member.runs.byId({ id: fx.derived })).toMatchObject({ experimentName: "public-demo", config: { agent: { base: fx.checkpoint } } });
  });

  it("tells a member of another project no more of this project's checkpoint under its own run", async () => {
    const other = callerFor(handle, quinn);
    expect(await other.checkpoints.lineage({ runId: fx.elsewhere })).toEqual({ base: "a checkpoint of another run", lineage: "a checkpoint of another run" });
    expect((await other.runs.byId({ id: fx.elsewhere })).config.agent.base).toBe("a checkpoint of another run");
  });
});
