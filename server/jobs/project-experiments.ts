/**
 * The experiments a project gets for runs it does not design: remote sessions' and serving's. Each is made on
 * first use, once per project and template, under an advisory lock, so two first requests at the same moment
 * find one experiment.
 */
import { and, eq, sql } from "drizzle-orm";
import { GENERALIST_BASE } from "@/lib/sdk/agent";
import { parseExperiment } from "@/lib/sdk/experiment";
import { type Database, experiments, experimentVersions, newId } from "../db";
import { inTransaction } from "./transitions";

export type ProjectExperiment = {
  /** Marks the experiment as this kind's (experiments.template). */
  template: string;
  name: string;
  description: string;
  /** The environment its version's config names (its runs have no environment of their own). */
  environment: string;
  /** The version's message. */
  message: string;
};

/** The project's experiment of this kind, made on first use by `userId`; returns its id. */
export async function projectExperiment(db: Database, projectId: string, userId: string, kind: ProjectExperiment): Promise<string> {
  const find = async (from: Pick<Database, "select">) =>
    (
      await from
        .select({ id: experiments.id })
        .from(experiments)
        .where(and(eq(experiments.projectId, projectId), eq(experiments.template, kind.template)))
        .limit(1)
    )[0]?.id;
  const existing = await find(db);
  if (existing) return existing;
  return inTransaction(db, async (tx) => {
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`${kind.template} experiment ${projectId}`}, 0))`);
    const again = await find(tx);
    if (again) return again;
    const id = newId("exp");
    await tx.insert(experiments).values({
      id,
      projectId,
      ownerId: userId,
      name: kind.name,
      description: kind.description,
      template: kind.template,
      latestVersion: 1,
    });
    await tx.insert(experimentVersions).values({
      id: newId("ver"),
      experimentId: id,
      version: 1,
      files: {},
      config: parseExperiment({ name: kind.name, environment: kind.environment, agent: { base: GENERALIST_BASE } }),
      message: kind.message,
    });
    return id;
  });
}
