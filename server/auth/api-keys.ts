import { createHash, randomBytes } from "node:crypto";
import { and, eq, isNull } from "drizzle-orm";
import { type Database, apiKeys, users, newId } from "../db";

export type User = { id: string; name: string; email: string };

const hashKey = (key: string) => createHash("sha256").update(key).digest("hex");

/** Creates an API key for a user. The key is returned once; only its hash is stored. */
export async function createApiKey(db: Database, userId: string, name: string) {
  const key = `tl_${randomBytes(24).toString("base64url")}`;
  const id = newId("key");
  await db.insert(apiKeys).values({ id, userId, name, prefix: key.slice(0, 10), hash: hashKey(key) });
  return { id, key, prefix: key.slice(0, 10) };
}

/** The user an API key belongs to, or null when the key is unknown or revoked. */
export async function userForApiKey(db: Database, key: string): Promise<User | null> {
  const [row] = await db
    .select({ id: users.id, name: users.name, email: users.email, keyId: apiKeys.id })
    .from(apiKeys)
    .innerJoin(users, eq(users.id, apiKeys.userId))
    .where(and(eq(apiKeys.hash, hashKey(key)), isNull(apiKeys.revokedAt)))
    .limit(1);
  if (!row) return null;
  await db.update(apiKeys).set({ lastUsedAt: new Date() }).where(eq(apiKeys.id, row.keyId));
  return { id: row.id, name: row.name, email: row.email };
}
