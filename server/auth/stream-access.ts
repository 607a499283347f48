/**
 * A live stream authenticates once, when it opens; this keeps its right to read its run under watch while it stays
 * open. Every RECHECK_MS, and at once at a revocation announced in this process (./revocation.ts), one indexed
 * query asks whether the credential it opened with still works (the share link, the API key, the session) and
 * still reaches the run's project (the person's or the key maker's membership). When it does not, the stream hears
 * what a fresh request would: UNAUTHORIZED for a dead credential, NOT_FOUND for a run it may no longer see. The
 * interval is what bounds a revocation made by another server process on the same database: within RECHECK_MS
 * and a query.
 */
import { TRPCError } from "@trpc/server";
import { and, eq, gt, isNull, or } from "drizzle-orm";
import { apiKeys, type Database, projectMembers, type ProjectRole, runs, sessions, shareLinks } from "../db";
import type { Principal } from "./access";
import { onRevocation } from "./revocation";
import { signInMessage } from "./request";

export const RECHECK_MS = 2000;

type Watch = { key: string; check: () => Promise<TRPCError | null>; lost: (error: TRPCError) => void };

/** This module's open watches; one timer and one revocation listener serve them all while there are any. */
const watches = new Set<Watch>();
let timer: NodeJS.Timeout | null = null;
let stopListening: (() => void) | null = null;
let checking: Promise<void> | null = null;
let checkAgain = false;

/**
 * Watches `principal`'s right to read run `runId`; calls `lost` once, with the error a fresh request would get,
 * when the right is gone. Returns the function that stops watching. The local user's right never ends.
 */
export function watchRunAccess(db: Database, principal: Principal, runId: string, lost: (error: TRPCError) => void): () => void {
  if (principal.kind === "local") return () => {};
  const watch: Watch = { key: `${credentialKey(principal)} ${runId}`, check: () => runAccessLost(db, principal, runId), lost };
  watches.add(watch);
  timer ??= setInterval(recheck, RECHECK_MS).unref();
  stopListening ??= onRevocation(recheck);
  return () => unwatch(watch);
}

function unwatch(watch: Watch) {
  watches.delete(watch);
  if (watches.size > 0) return;
  if (timer) clearInterval(timer);
  stopListening?.();
  timer = null;
  stopListening = null;
}

/** Checks every watch, one query per credential and run; a call while a round runs asks for one more round after it. */
function recheck() {
  if (checking) {
    checkAgain = true;
    return;
  }
  checking = (async () => {
    do {
      checkAgain = false;
      const groups = new Map<string, Watch[]>();
      for (const watch of watches) {
        const group = groups.get(watch.key);
        if (group) group.push(watch);
        else groups.set(watch.key, [watch]);
      }
      await Promise.all([...groups.values()].map(checkGroup));
    } while (checkAgain);
  })().finally(() => (checking = null));
}

async function checkGroup(group: Watch[]) {
  let error: TRPCError | null;
  try {
    error = await group[0]!.check();
  } catch (failure) {
    // A database that cannot answer now cannot say the right is gone: the stream goes on, and the next round asks again.
    console.error("re-checking a live stream's access failed:", failure);
    return;
  }
  if (!error) return;
  for (const watch of group) {
    if (!watches.has(watch)) continue;
    unwatch(watch);
    watch.lost(error);
  }
}

function credentialKey(principal: Exclude<Principal, { kind: "local" }>): string {
  switch (principal.kind) {
    case "share":
      return `share ${principal.linkId}`;
    case "apikey":
      return `apikey ${principal.keyId}`;
    case "person":
      return `person ${principal.user.id} ${principal.sessionId ?? ""}`;
    case "anonymous":
      return "anonymous";
  }
}

/** Whether `principal` may still read run `runId`: null when it may, else the refusal a fresh request would get. */
export async function runAccessLost(db: Database, principal: Principal, runId: string): Promise<TRPCError | null> {
  const now = new Date();
  const signedOut = (p: Principal) => new TRPCError({ code: "UNAUTHORIZED", message: signInMessage(p) });
  const gone = new TRPCError({ code: "NOT_FOUND", message: `No run with id '${runId}'` });
  // Membership of the run's project, joined to the credential's row: no row, a dead credential; no role, no access.
  const member = (userId: typeof sessions.userId | typeof apiKeys.userId) =>
    and(eq(projectMembers.userId, userId), eq(projectMembers.projectId, runs.projectId));
  const verdict = (rows: { role: ProjectRole | null }[], dead: TRPCError) => (rows.length === 0 ? dead : rows[0]!.role === null ? gone : null);
  switch (principal.kind) {
    case "local":
      return null;
    case "anonymous":
      return signedOut(principal);
    case "share": {
      // A link names its runs once and for all: only whether it still works can change.
      const rows = await db
        .select({ id: shareLinks.id })
        .from(shareLinks)
        .where(and(eq(shareLinks.id, principal.linkId), isNull(shareLinks.revokedAt), or(isNull(shareLinks.expiresAt), gt(shareLinks.expiresAt, now))));
      return rows.length === 0 ? signedOut({ kind: "anonymous" }) : null;
    }
    case "apikey": {
      const rows = await db
        .select({ role: projectMembers.role })
        .from(apiKeys)
        .leftJoin(runs, and(eq(runs.id, runId), eq(runs.projectId, apiKeys.projectId)))
        .leftJoin(projectMembers, member(apiKeys.userId))
        .where(and(eq(apiKeys.id, principal.keyId), isNull(apiKeys.revokedAt), or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, now))));
      return verdict(rows, signedOut({ kind: "anonymous", rejected: "apikey" }));
    }
    case "person": {
      if (principal.sessionId === undefined) {
        // A person made in process (no session behind it): only its membership can end.
        const rows = await db
          .select({ role: projectMembers.role })
          .from(runs)
          .innerJoin(projectMembers, and(eq(projectMembers.userId, principal.user.id), eq(projectMembers.projectId, runs.projectId)))
          .where(eq(runs.id, runId));
        return rows.length === 0 ? gone : null;
      }
      const rows = await db
        .select({ role: projectMembers.role })
        .from(sessions)
        .leftJoin(runs, eq(runs.id, runId))
        .leftJoin(projectMembers, member(sessions.userId))
        .where(and(eq(sessions.id, principal.sessionId), gt(sessions.expiresAt, now)));
      return verdict(rows, signedOut({ kind: "anonymous" }));
    }
  }
}
