/**
 * Evaluations and exports belong to their source run: `derived.ofRun` lists the runs started from a run's checkpoints
 * by Evaluate and Export, with the evaluation's settings and score and the export's file, and not a training run
 * that merely starts from one of its checkpoints; `derived.sourceOf` names a derived run's source. A share link's
 * holder sees only the runs the link names.
 */
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { SHARE_HEADER } from "@/server/auth/constants";
import { authenticate } from "@/server/auth/request";
import { createShareLink } from "@/server/auth/share-links";
import { jobs, LOCAL_USER, metricPoints } from "@/server/db";
import { schedulerTick } from "@/server/jobs";
import { createPackingPolicy } from "@/server/scheduler";
import { runJob } from "@/server/worker/run-job";
import { tinyExperiment } from "../support/tiny-run";
import { callerFor } from "./support/database";
import { channelOn, jobTestbed, registerTestWorker } from "./support/worker-channel";

const bed = jobTestbed("derived");

describe("a run's evaluations and exports", () => {
  it("are listed on their source run with the score and the file to download", async () => {
    const { handle } = bed;
    const caller = callerFor(handle);
    const channel = channelOn(handle.db);
    const workerId = await registerTestWorker(channel);
    const work = async (runId: string) => {
      await schedulerTick(handle.db, createPackingPolicy());
      const [job] = await handle.db.select({ id: jobs.id }).from(jobs).where(eq(jobs.runId, runId));
      const spec = await channel.claim(workerId, job!.id);
      const outcome = await runJob({ channel, workerId, spec, artifactsDir: bed.artifactsDir, stopRequested: () => null });
      await channel.finish({ workerId, jobId: job!.id, ...outcome });
    };

    const experiment = tinyExperiment("source", 6);
    const { id } = await caller.experiments.create(experiment);
    const { runId } = await caller.runs.launch({ experimentId: id });
    await work(runId);
    expect(await caller.derived.ofRun({ runId })).toEqual([]);
    const [last, first] = await caller.checkpoints.ofRun({ runId });
    expect([first!.step, last!.step]).toEqual([5, 6]);

    const { runId: evaluation } = await caller.runs.evaluate({ checkpointId: first!.id, episodes: 6, temperature: 0.5 });
    // Queued: listed already, without a score.
    expect(await caller.derived.ofRun({ runId })).toEqual([
      expect.objectContaining({ id: evaluation, kind: "eval", status: "queued", checkpointId: first!.id, checkpointStep: 5, score: null }),
    ]);
    await work(evaluation);
    const { runId: exported } = await caller.runs.export({ checkpointId: last!.id });
    await work(exported);
    // A training run from one of its checkpoints is a run of its own experiment, not an evaluation or export of it.
    const { id: fromCheckpoint } = await caller.experiments.create({
      name: "continued",
      config: { ...experiment.config, name: "continued", agent: { ...experiment.config.agent, base: last!.id } },
    });
    const { runId: continued } = await caller.runs.launch({ experimentId: fromCheckpoint });

    const [score] = await handle.db.select({ value: metricPoints.value }).from(metricPoints).where(eq(metricPoints.runId, evaluation));
    const [file] = (await caller.checkpoints.ofRun({ runId: exported })).filter((c) => c.kind === "export");
    const listed = await caller.derived.ofRun({ runId });
    expect(listed.map((run) => run.id)).toEqual([exported, evaluation]);
    expect(listed[0]).toMatchObject({
      kind: "export",
      status: "completed",
      checkpointStep: 6,
      evaluation: null,
      downloads: [{ id: file!.id, sizeBytes: file!.sizeBytes }],
    });
    expect(listed[1]).toMatchObject({
      kind: "eval",
      status: "completed",
      checkpointStep: 5,
      evaluation: { episodes: 6, temperature: 0.5 },
      score: score!.value,
      downloads: [],
    });
    // Derived runs have none of their own: an evaluation's base is the source's checkpoint, not one of its own.
    expect(await caller.derived.ofRun({ runId: evaluation })).toEqual([]);
    // Each names the run it comes from; the source, and a training run from its checkpoint, name none.
    const source = { runId, name: (await caller.runs.byId({ id: runId })).name };
    expect(await caller.derived.sourceOf({ runId: evaluation })).toEqual({ kind: "eval", ...source, checkpointStep: 5 });
    expect(await caller.derived.sourceOf({ runId: exported })).toEqual({ kind: "export", ...source, checkpointStep: 6 });
    expect(await caller.derived.sourceOf({ runId })).toBeNull();
    expect(await caller.derived.sourceOf({ runId: continued })).toBeNull();

    // A share link of the source run alone shows none of them; one naming the evaluation too shows that one.
    const holder = async (runIds: string[]) => {
      const { token } = await createShareLink(handle.db, {
        projectId: (await caller.runs.byId({ id: runId })).projectId,
        kind: "compare",
        runIds,
        view: {},
        title: "shared",
        createdBy: LOCAL_USER.id,
        expiresAt: null,
      });
      return callerFor(handle, await authenticate(handle.db, new Headers({ [SHARE_HEADER]: token }), "team"));
    };
    expect(await (await holder([runId])).derived.ofRun({ runId })).toEqual([]);
    expect((await (await holder([runId, evaluation])).derived.ofRun({ runId })).map((run) => run.id)).toEqual([evaluation]);
    // A link to the evaluation alone does not reveal the run it comes from.
    expect(await (await holder([evaluation])).derived.sourceOf({ runId: evaluation })).toBeNull();
    expect(await (await holder([evaluation, runId])).derived.sourceOf({ runId: evaluation })).toMatchObject(source);
  }, 180_000);
});
