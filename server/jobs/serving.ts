/**
 * Inference jobs: a worker serving one base (and any LoRA adapters on it) to the OpenAI-compatible endpoints
 * (server/serving). One run per project and base, under the project's "Serving" experiment, made on first use and
 * reused: a job that idles ends paused (its place freed), and the next request for its models queues it again.
 * So the runs list holds one "serving" run per base a project has served, not one per start.
 */
import { and, desc, eq, sql } from "drizzle-orm";
import { parseRunConfig } from "@/lib/lifecycle/run-config";
import type { JobState } from "@/lib/lifecycle";
import { type Database, experimentVersions, jobs, runLogs, runs } from "../db";
import { launchRun, runNameStamp } from "./lifecycle";
import { notifyJobs } from "./notify";
import { projectExperiment } from "./project-experiments";
import type { SubmitJob } from "./scheduling";
import { inTransaction, moveJobs } from "./transitions";

/** The template name of each project's experiment that holds its serving runs. */
export const SERVING_TEMPLATE = "serving";
/** The environment name a serving run's config carries (it has no environment). */
export const SERVING_ENVIRONMENT = "serving";

export type ServingNeed = {
  projectId: string;
  userId: string;
  /** A built-in or imported base, or a full-weights checkpoint id. */
  base: string;
  /** The base's shape, for the job's footprint (the caller resolves it). */
  shape: { parameters: number; dModel: number; nLayers: number; contextLength: number };
  /** A job with no request for this long ends (paused), freeing its place. */
  idleSeconds: number;
  /** Rows decoded at once, for the footprint's key/value cache. */
  rows: number;
};

/**
 * Where the serving job of a project's base stands after `ensureServing`: launched, queued again, already on its
 * way, or `failed` lately (its reason), when no new one is launched for a while.
 */
export type ServingState = { runId: string; jobId: string; status: JobState; started: "launched" | "resumed" | "already" | "failed"; reason: string | null };

/** After a serving job fails, requests for its base are told why for this long before another is launched. */
export const SERVING_RETRY_AFTER_FAILURE_S = 60;

/**
 * Makes sure a job serves `base` for the project: the latest serving run of that base is left alone while its job
 * is queued, placed or running, queued again when it ended paused (idle), and a new run is launched otherwise.
 * Serialised per project and base by a transaction-level advisory lock, so requests at the same moment start one.
 */
export async function ensureServing(db: Database, need: ServingNeed): Promise<ServingState> {
  const experimentId = await projectExperiment(db, need.projectId, need.userId, SERVING_EXPERIMENT);
  return inTransaction(db, async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`serving ${need.projectId} ${need.base}`}, 0))`);
    const [latest] = await tx
      .select({ runId: runs.id, jobId: jobs.id, status: jobs.status, reason: runs.reason, finishedAt: jobs.finishedAt })
      .from(runs)
      .innerJoin(jobs, eq(jobs.runId, runs.id))
      .where(and(eq(runs.experimentId, experimentId), sql`${runs.config}->'agent'->>'base' = ${need.base}`))
      .orderBy(desc(runs.createdAt), desc(jobs.submittedAt))
      .limit(1);
    if (latest && ["queued", "placing", "running"].includes(latest.status)) return { ...latest, started: "already" as const };
    // A job that failed lately (a worker that cannot serve, a base that does not load) is not started again at once:
    // every request would launch a run that fails the same way.
    if (latest?.status === "failed" && latest.finishedAt && Date.now() - latest.finishedAt.getTime() < SERVING_RETRY_AFTER_FAILURE_S * 1000) {
      return { ...latest, started: "failed" as const };
    }
    if (latest?.status === "paused") {
      const [resumed] = await moveJobs(tx, "queued", and(eq(jobs.id, latest.jobId), eq(jobs.status, "paused")), {
        job: { reason: "a request named one of its models", stopRequested: null },
        run: { reason: null },
      });
      if (resumed) {
        await tx.insert(runLogs).values({ runId: latest.runId, level: "info", message: "Queued again: a request named one of its models." });
        await notifyJobs(tx, { queued: true });
        return { runId: latest.runId, jobId: latest.jobId, status: "queued" as const, started: "resumed" as const, reason: null };
      }
    }
    const [version] = await tx
      .select({ id: experimentVersions.id })
      .from(experimentVersions)
      .where(eq(experimentVersions.experimentId, experimentId))
      .orderBy(desc(experimentVersions.version))
      .limit(1);
    const config = parseRunConfig({
      name: `serving ${need.base}`,
      environment: SERVING_ENVIRONMENT,
      agent: { base: need.base, training: { mode: "full" } },
      // A serving job has no lease of calls; its idle time is kept where a session keeps its lease.
      session: { leaseSeconds: need.idleSeconds },
    });
    // Its own weights and a key/value cache of `rows` full contexts: a serving job computes in a job host of its
    // own, so that its decoding steps never wait on a training step (docs/SERVING.md).
    const resources: SubmitJob["resources"] = {
      kind: "inference",
      mode: "full",
      baseModel: need.base,
      model: { name: need.base, parameters: need.shape.parameters, dModel: need.shape.dModel, nLayers: need.shape.nLayers },
      batchSize: need.rows,
      contextLength: need.shape.contextLength,
      computeSlots: 1,
    };
    const { runId, jobId } = await launchRun(
      tx,
      {
        experimentId,
        projectId: need.projectId,
        experimentVersionId: version!.id,
        createdBy: need.userId,
        name: `serving-${need.base}-${runNameStamp()}`,
        config,
        seed: 0,
        totalSteps: 0,
      },
      { priority: 0, resources },
    );
    return { runId, jobId, status: "queued" as const, started: "launched" as const, reason: null };
  });
}

/** The project's experiment for serving runs, made on first use. */
const SERVING_EXPERIMENT = {
  template: SERVING_TEMPLATE,
  name: "Serving",
  description: "Models served through the OpenAI-compatible endpoints (/v1): each run serves one base and the adapters on it.",
  environment: SERVING_ENVIRONMENT,
  message: "made for serving",
};

/** Whether a job of this worker is a running inference job: a worker's first exchange is checked with it. */
export async function servingJobOf(db: Database, workerId: string, jobId: string): Promise<{ runId: string; projectId: string } | null> {
  const [row] = await db
    .select({ runId: runs.id, projectId: runs.projectId })
    .from(jobs)
    .innerJoin(runs, eq(runs.id, jobs.runId))
    .where(and(eq(jobs.id, jobId), eq(jobs.workerId, workerId), eq(jobs.kind, "inference"), eq(jobs.status, "running")));
  return row ?? null;
}
