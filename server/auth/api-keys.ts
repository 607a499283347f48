/**
 * API keys for the CLI, scripts and remote workers: each acts for the person who made it, in one project, with at
 * most the role chosen when it was made (and never more than that person's role there now). The role "admin" is its
 * project's owner and also acts for the whole server, while its maker is the server's admin. The key is shown once;
 * only its SHA-256 is stored.
 */
import { TRPCError } from "@trpc/server";
import { and, desc, eq, gt, isNull, or } from "drizzle-orm";
import { type ApiKeyRole, apiKeys, type Database, LOCAL_USER, newId, projects, users } from "../db";
import type { Principal } from "./access";
import { announceRevocation } from "./revocation";
import { hashToken, newToken } from "./tokens";

/** Makes a key for a user in a project. The key is returned once. */
export async function createApiKey(
  db: Database,
  options: { userId: string; name: string; projectId: string; role: ApiKeyRole; expiresAt?: Date | null },
): Promise<{ id: string; key: string; prefix: string }> {
  const key = newToken("tl");
  const id = newId("key");
  const prefix = key.slice(0, 10);
  await db.insert(apiKeys).values({
    id,
    userId: options.userId,
    name: options.name,
    prefix,
    hash: hashToken(key),
    projectId: options.projectId,
    role: options.role,
    expiresAt: options.expiresAt ?? null,
  });
  return { id, key, prefix };
}

/** A user's keys (revoked and expired ones too), newest first, by prefix: never the key itself. */
export async function listApiKeys(db: Database, userId: string) {
  return db
    .select({
      id: apiKeys.id,
      name: apiKeys.name,
      prefix: apiKeys.prefix,
      projectId: apiKeys.projectId,
      projectName: projects.name,
      role: apiKeys.role,
      createdAt: apiKeys.createdAt,
      lastUsedAt: apiKeys.lastUsedAt,
      expiresAt: apiKeys.expiresAt,
      revokedAt: apiKeys.revokedAt,
    })
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(eq(apiKeys.userId, userId))
    .orderBy(desc(apiKeys.createdAt));
}

/** Revokes one of the user's active keys; another's key, or one revoked already, answers NOT_FOUND. */
export async function revokeApiKey(db: Database, userId: string, id: string): Promise<void> {
  const revoked = await db
    .update(apiKeys)
    .set({ revokedAt: new Date() })
    .where(and(eq(apiKeys.id, id), eq(apiKeys.userId, userId), isNull(apiKeys.revokedAt)))
    .returning({ id: apiKeys.id });
  if (revoked.length === 0) throw new TRPCError({ code: "NOT_FOUND", message: `No active API key of yours with id '${id}'` });
  announceRevocation();
}

/** How stale a key's "last used" time may be: it is written at most this often. */
const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * The principal a key stands for, or null when it is unknown, revoked or expired. `localMode`: the server runs
 * without accounts, where the local user is the admin.
 */
export async function principalForApiKey(db: Database, key: string, localMode = false): Promise<Extract<Principal, { kind: "apikey" }> | null> {
  const now = new Date();
  const [row] = await db
    .select({
      id: users.id,
      name: users.name,
      email: users.email,
      makerRole: users.role,
      keyId: apiKeys.id,
      projectId: apiKeys.projectId,
      role: apiKeys.role,
      lastUsedAt: apiKeys.lastUsedAt,
    })
    .from(apiKeys)
    .innerJoin(users, eq(users.id, apiKeys.userId))
    .where(and(eq(apiKeys.hash, hashToken(key)), isNull(apiKeys.revokedAt), or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, now))))
    .limit(1);
  if (!row) return null;
  // "Last used" to the minute: a script's stream of calls writes it once a minute, not once a request.
  if (!row.lastUsedAt || now.getTime() - row.lastUsedAt.getTime() >= LAST_USED_RESOLUTION_MS) {
    await db.update(apiKeys).set({ lastUsedAt: now }).where(eq(apiKeys.id, row.keyId));
  }
  // An admin key is its project's owner, and acts for the server only while its maker is still the admin.
  const { role } = row;
  const admin = role === "admin";
  return {
    kind: "apikey",
    user: { id: row.id, name: row.name, email: row.email },
    keyId: row.keyId,
    projectId: row.projectId,
    role: role === "admin" ? "owner" : role,
    admin: admin && (row.makerRole === "admin" || (localMode && row.id === LOCAL_USER.id)),
  };
}
