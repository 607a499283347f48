/**
 * What the playground's episode player needs of a run (server/playable.ts): its environment, protocol and sampling,
 * and the held-out rows of a dataset it reads. A run it cannot play answers BAD_REQUEST, saying why.
 */
import { TRPCError } from "@trpc/server";
import type { Database } from "../db";
import { importProjectModule } from "../project-module";
import { projectOfRun } from "./read";

type Playable = typeof import("@/server/playable");

/** server/playable.ts compiles with esbuild and reads files beside lib/envs, which Next cannot bundle. */
const playableModule = () => importProjectModule<Playable>("server/playable.ts");

export async function playableRun(db: Database, runId: string) {
  const playable = await playableModule();
  return refusedAsBadRequest(playable, () => playable.playableRun(db, runId));
}

/** Held-out rows of a dataset the run's environment reads (as a run splits it). */
export async function playableRows(db: Database, runId: string, dataset: string) {
  const projectId = await projectOfRun(db, runId);
  const playable = await playableModule();
  return refusedAsBadRequest(playable, () => playable.heldOutRows(db, projectId, dataset));
}

async function refusedAsBadRequest<T>(playable: Playable, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof playable.PlayableError) throw new TRPCError({ code: "BAD_REQUEST", message: error.message });
    throw error;
  }
}
