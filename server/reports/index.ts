/**
 * Reports: saved pages of a project, each a title and an ordered list of blocks (markdown notes and metric panels
 * over runs of the project). The only writer of the `reports` table. A report's share links read exactly the runs
 * its panels show: saving the report retargets them, deleting it revokes them (server/auth/share-links.ts).
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, inArray } from "drizzle-orm";
import { type ReportBlock, runsOfBlocks } from "@/lib/reports/blocks";
import { reportOfLink, retargetReportLinks, revokeReportLinks } from "../auth";
import { type Database, newId, reports, runs, type ShareKind, users } from "../db";

const notFound = (id: string) => new TRPCError({ code: "NOT_FOUND", message: `No report with id '${id}'` });

/**
 * Refuses a panel naming a run that is not in the report's project (or does not exist), by the block's path, so
 * a report never shows, nor shares, another project's runs.
 */
async function checkRunsOfBlocks(db: Database, projectId: string, blocks: readonly ReportBlock[]): Promise<void> {
  const wanted = runsOfBlocks(blocks);
  if (wanted.length === 0) return;
  const found = await db
    .select({ id: runs.id })
    .from(runs)
    .where(and(inArray(runs.id, wanted), eq(runs.projectId, projectId)));
  const known = new Set(found.map((row) => row.id));
  for (const [index, block] of blocks.entries()) {
    if (block.kind !== "panel") continue;
    const missing = block.runIds.find((id) => !known.has(id));
    if (missing !== undefined) {
      throw new TRPCError({ code: "BAD_REQUEST", message: `blocks.${index}.runIds: no run with id '${missing}' in this report's project` });
    }
  }
}

export async function createReport(
  db: Database,
  options: { projectId: string; title: string; blocks: ReportBlock[]; createdBy: string },
): Promise<{ id: string }> {
  await checkRunsOfBlocks(db, options.projectId, options.blocks);
  const id = newId("rep");
  await db.insert(reports).values({ id, ...options });
  return { id };
}

/** Changes a report's title or blocks (whichever is given); its links then read the runs its panels show now. */
export async function updateReport(db: Database, id: string, patch: { title?: string; blocks?: ReportBlock[] }): Promise<{ id: string; updatedAt: Date }> {
  const [current] = await db.select({ projectId: reports.projectId }).from(reports).where(eq(reports.id, id));
  if (!current) throw notFound(id);
  if (patch.blocks) await checkRunsOfBlocks(db, current.projectId, patch.blocks);
  const updatedAt = new Date();
  await db
    .update(reports)
    .set({ ...patch, updatedAt })
    .where(eq(reports.id, id));
  if (patch.blocks) await retargetReportLinks(db, id, runsOfBlocks(patch.blocks));
  return { id, updatedAt };
}

/** Deletes a report; its links are revoked first, so they answer as any revoked link does. */
export async function deleteReport(db: Database, id: string): Promise<void> {
  await revokeReportLinks(db, id);
  await db.delete(reports).where(eq(reports.id, id));
}

/** What a read of a report returns: the report and the name of who made it. */
const reportColumns = {
  id: reports.id,
  projectId: reports.projectId,
  title: reports.title,
  blocks: reports.blocks,
  createdBy: users.name,
  createdAt: reports.createdAt,
  updatedAt: reports.updatedAt,
};

/** One report with who made it, or NOT_FOUND. */
export async function reportById(db: Database, id: string) {
  const [row] = await db.select(reportColumns).from(reports).innerJoin(users, eq(users.id, reports.createdBy)).where(eq(reports.id, id));
  if (!row) throw notFound(id);
  return row;
}

/** The reports of these projects, last edited first, each with its block counts (not its blocks). */
export async function listReports(db: Database, projectIds: string[]) {
  if (projectIds.length === 0) return [];
  const rows = await db
    .select(reportColumns)
    .from(reports)
    .innerJoin(users, eq(users.id, reports.createdBy))
    .where(inArray(reports.projectId, projectIds))
    .orderBy(desc(reports.updatedAt));
  return rows.map(({ blocks, ...row }) => ({
    ...row,
    panels: blocks.filter((block) => block.kind === "panel").length,
    notes: blocks.filter((block) => block.kind === "note").length,
    runs: runsOfBlocks(blocks).length,
  }));
}

/** The runs a report's panels show now: what a new link to it may read. */
export async function runsOfReport(db: Database, id: string): Promise<{ projectId: string; title: string; runIds: string[] }> {
  const [row] = await db.select({ projectId: reports.projectId, title: reports.title, blocks: reports.blocks }).from(reports).where(eq(reports.id, id));
  if (!row) throw notFound(id);
  return { projectId: row.projectId, title: row.title, runIds: runsOfBlocks(row.blocks) };
}

/**
 * The report an opened share link shows, or null when the link is no report's or its report is gone. A link reads
 * only a report of its own project, whatever its view says.
 */
export async function reportOfShareLink(db: Database, link: { kind: ShareKind; view: Record<string, string>; projectId: string }) {
  const id = reportOfLink(link);
  if (id === null) return null;
  const [row] = await db
    .select({ id: reports.id, title: reports.title, blocks: reports.blocks, updatedAt: reports.updatedAt })
    .from(reports)
    .where(and(eq(reports.id, id), eq(reports.projectId, link.projectId)));
  return row ?? null;
}
