/** The built-in use cases, present as example experiments in every new workbench. */
import { and, eq } from "drizzle-orm";
import { useCases } from "@/lib/envs";
import { parseExperiment } from "@/lib/sdk/experiment";
import { type Database, newId, experiments, experimentVersions } from "../db";
import { LOCAL_USER } from "../db";
import { DEFAULT_PROJECT } from "../auth";

export async function ensureExampleExperiments(db: Database) {
  for (const [name, useCase] of Object.entries(useCases)) {
    const [existing] = await db
      .select({ id: experiments.id })
      .from(experiments)
      .where(and(eq(experiments.template, name), eq(experiments.projectId, DEFAULT_PROJECT)))
      .limit(1);
    if (existing) continue;
    const id = newId("exp");
    await db.transaction(async (tx) => {
      await tx.insert(experiments).values({
        id,
        projectId: DEFAULT_PROJECT,
        ownerId: LOCAL_USER.id,
        name: useCase.template.name,
        description: useCase.environment.description ?? useCase.title,
        template: name,
      });
      await tx.insert(experimentVersions).values({
        id: newId("ver"),
        experimentId: id,
        version: 1,
        files: {},
        config: parseExperiment(useCase.template),
        message: "built-in example",
      });
    });
  }
}
