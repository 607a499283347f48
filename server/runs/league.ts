/**
 * A league run's table (lib/rl/league-table.ts) for its page: read from the league its newest good checkpoint saved
 * (`league.json`, written by the worker beside the checkpoint's weights). A run saves its league with each
 * checkpoint, so a running run's table is as of its last checkpoint.
 */
import fs from "node:fs";
import path from "node:path";
import { and, desc, eq, isNull } from "drizzle-orm";
import type { LeagueState } from "@/lib/rl/league";
import { LEAGUE_FILE, type LeagueTable, leagueTable } from "@/lib/rl/league-table";
import { checkpoints, type Database } from "../db";

/** Tables already fitted, by checkpoint id and the file's modification time: a checkpoint's league never changes. */
const fitted = new Map<string, LeagueTable>();
const KEEP = 32;

/**
 * The league of `runId` as its newest checkpoint with one saved it, with that checkpoint's step; null when no
 * checkpoint of the run holds a league (not a league run, or none saved yet).
 */
export async function leagueOfRun(db: Database, runId: string): Promise<(LeagueTable & { checkpointStep: number }) | null> {
  const rows = await db
    .select({ id: checkpoints.id, step: checkpoints.step, path: checkpoints.path })
    .from(checkpoints)
    .where(and(eq(checkpoints.runId, runId), eq(checkpoints.kind, "state"), isNull(checkpoints.setAsideReason)))
    .orderBy(desc(checkpoints.step));
  for (const row of rows) {
    const file = path.join(row.path, LEAGUE_FILE);
    let stat: fs.Stats;
    try {
      stat = fs.statSync(file);
    } catch {
      continue; // a checkpoint without a league (or whose folder is gone): an older one may have one
    }
    const key = `${row.id}:${stat.mtimeMs}`;
    let table = fitted.get(key);
    if (!table) {
      const state: LeagueState & { dropped?: string[] } = JSON.parse(fs.readFileSync(file, "utf8"));
      table = leagueTable(state, row.step);
      fitted.set(key, table);
      if (fitted.size > KEEP) fitted.delete(fitted.keys().next().value!);
    }
    return { ...table, checkpointStep: row.step };
  }
  return null;
}
