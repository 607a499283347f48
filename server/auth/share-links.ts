/**
 * Share links: view-only links to a run, a comparison of runs or one trajectory, carrying the view they open. The
 * token (256 bits) is shown when the link is made; only its SHA-256 is stored. An expired or revoked link, or one
 * that never existed, opens nothing, and says so in the same words.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, gt, inArray, isNull, or, sql } from "drizzle-orm";
import { type Database, newId, runs, type ShareKind, shareLinks, users } from "../db";
import type { Access, Principal } from "./access";
import { announceRevocation } from "./revocation";
import { hashToken, looksLikeToken, newToken } from "./tokens";

/** The one answer for a link that does not open: unknown, revoked and expired alike. */
export const LINK_GONE = "This share link does not exist or no longer works; ask whoever sent it for a new one.";

export async function createShareLink(
  db: Database,
  options: { projectId: string; kind: ShareKind; runIds: string[]; view: Record<string, string>; title: string; createdBy: string; expiresAt: Date | null },
): Promise<{ id: string; token: string }> {
  const token = newToken("tls");
  const id = newId("shr");
  await db.insert(shareLinks).values({ id, tokenHash: hashToken(token), ...options });
  return { id, token };
}

/**
 * Makes a link to one run ("run", "trajectory") or several ("compare", all of one project), opening with `view`.
 * The caller must be an editor of the runs' project. Without a title, the link is named after its run, or counts
 * the runs it compares. The token is returned once.
 */
export async function shareRuns(
  db: Database,
  access: Access,
  options: { kind: ShareKind; runIds: string[]; view: Record<string, string>; title?: string; createdBy: string; expiresAt: Date | null },
): Promise<{ id: string; token: string }> {
  const { kind } = options;
  if (kind === "report") throw new TRPCError({ code: "BAD_REQUEST", message: "kind: a report is shared from its page (reports.share), not by its runs" });
  if (kind !== "compare" && options.runIds.length !== 1) {
    throw new TRPCError({ code: "BAD_REQUEST", message: `runIds: a ${kind} link shows one run; a comparison shows several` });
  }
  const runIds = [...new Set(options.runIds)];
  const projectIds = new Set<string>();
  for (const id of runIds) projectIds.add((await access.require("editor", { kind: "run", id })).projectId);
  if (projectIds.size > 1) throw new TRPCError({ code: "BAD_REQUEST", message: "runIds: a link shows runs of one project" });
  const names = await db.select({ id: runs.id, name: runs.name }).from(runs).where(inArray(runs.id, runIds));
  const title = options.title || (kind === "compare" ? `Comparison of ${runIds.length} runs` : (names[0]?.name ?? runIds[0]!));
  const { view, createdBy, expiresAt } = options;
  return createShareLink(db, { projectId: [...projectIds][0]!, kind, runIds, view, title, createdBy, expiresAt });
}

/** The report a "report" link shows (its `view.report`), or null for a link of another kind. */
export function reportOfLink(link: { kind: ShareKind; view: Record<string, string> }): string | null {
  return link.kind === "report" ? (link.view.report ?? null) : null;
}

const linksOfReport = (reportId: string) => and(eq(shareLinks.kind, "report"), sql`${shareLinks.view}->>'report' = ${reportId}`);

/**
 * Makes a link to a report: its holder reads the report and the runs its panels show (`runIds`, kept current by
 * `retargetReportLinks` as the report changes). The caller checks that the maker may edit the report.
 */
export async function shareReport(
  db: Database,
  options: { projectId: string; reportId: string; runIds: string[]; title: string; createdBy: string; expiresAt: Date | null },
): Promise<{ id: string; token: string }> {
  const { reportId, ...rest } = options;
  return createShareLink(db, { ...rest, kind: "report", view: { report: reportId } });
}

/** A saved report's links read the runs its panels show now, no more. Announced, so open streams of a removed run end. */
export async function retargetReportLinks(db: Database, reportId: string, runIds: string[]): Promise<void> {
  await db.update(shareLinks).set({ runIds }).where(linksOfReport(reportId));
  announceRevocation();
}

/** Every link to a report, revoked: what deleting it does first. */
export async function revokeReportLinks(db: Database, reportId: string): Promise<void> {
  await db
    .update(shareLinks)
    .set({ revokedAt: new Date() })
    .where(and(linksOfReport(reportId), isNull(shareLinks.revokedAt)));
  announceRevocation();
}

export async function revokeShareLink(db: Database, id: string): Promise<void> {
  await db.update(shareLinks).set({ revokedAt: new Date() }).where(eq(shareLinks.id, id));
  announceRevocation();
}

/** The link a token opens now, or null (unknown, revoked or expired). Records when it was opened. */
export async function openShareLink(db: Database, token: string) {
  if (!looksLikeToken(token, "tls")) return null;
  const now = new Date();
  const [row] = await db
    .select()
    .from(shareLinks)
    .where(and(eq(shareLinks.tokenHash, hashToken(token)), isNull(shareLinks.revokedAt), or(isNull(shareLinks.expiresAt), gt(shareLinks.expiresAt, now))));
  if (!row) return null;
  // At most one write a minute per link, so a page's many requests do not each write.
  if (!row.lastOpenedAt || now.getTime() - row.lastOpenedAt.getTime() > 60_000) {
    await db.update(shareLinks).set({ lastOpenedAt: now }).where(eq(shareLinks.id, row.id));
  }
  return row;
}

export async function principalForShareToken(db: Database, token: string): Promise<Extract<Principal, { kind: "share" }> | null> {
  const link = await openShareLink(db, token);
  return link ? { kind: "share", linkId: link.id, projectId: link.projectId, runIds: link.runIds } : null;
}

/** The links of a project that show a run (or every link of the project), newest first, with who made them. */
/** What a listed link shows (never its token, which is kept only as a hash). */
const listedColumns = {
  id: shareLinks.id,
  kind: shareLinks.kind,
  runIds: shareLinks.runIds,
  view: shareLinks.view,
  title: shareLinks.title,
  createdAt: shareLinks.createdAt,
  expiresAt: shareLinks.expiresAt,
  revokedAt: shareLinks.revokedAt,
  lastOpenedAt: shareLinks.lastOpenedAt,
  createdBy: users.name,
};

export async function listShareLinks(db: Database, projectId: string, runId?: string) {
  return db
    .select(listedColumns)
    .from(shareLinks)
    .innerJoin(users, eq(users.id, shareLinks.createdBy))
    .where(and(eq(shareLinks.projectId, projectId), runId ? sql`${shareLinks.runIds} @> ${JSON.stringify([runId])}::jsonb` : undefined))
    .orderBy(desc(shareLinks.createdAt));
}

/** The links to a report, newest first (revoked and expired ones too). */
export async function listReportLinks(db: Database, reportId: string) {
  return db
    .select(listedColumns)
    .from(shareLinks)
    .innerJoin(users, eq(users.id, shareLinks.createdBy))
    .where(linksOfReport(reportId))
    .orderBy(desc(shareLinks.createdAt));
}

/** One link as the lists show it, or null: what a new link's panel adds to its list without asking for the list again. */
export async function listedShareLink(db: Database, id: string) {
  const [link] = await db.select(listedColumns).from(shareLinks).innerJoin(users, eq(users.id, shareLinks.createdBy)).where(eq(shareLinks.id, id));
  return link ?? null;
}
