import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import type { Principal, User } from "@/server/auth/access";
import { LOCAL_USER, openDatabase, type DatabaseHandle } from "@/server/db";
import { serverEnv } from "@/server/env";
import { createScratchDatabase } from "../../support/postgres";

/**
 * A fresh, migrated database for one test file: an in-memory PGlite, or a new database on the PostgreSQL server in
 * TEST_DATABASE_URL (dropped afterwards), as the vitest project's TINKERLAB_TEST_DB says.
 */
export async function openTestDatabase(): Promise<{ handle: DatabaseHandle; close(): Promise<void> }> {
  const env = serverEnv();
  if (env.TINKERLAB_TEST_DB === "pglite") {
    const handle = await openDatabase({ pgliteDir: "memory" });
    return { handle, close: () => handle.close() };
  }
  if (!env.TEST_DATABASE_URL) {
    throw new Error("TINKERLAB_TEST_DB=postgres needs TEST_DATABASE_URL; `npm test` starts a throwaway server and sets it.");
  }
  const scratch = await createScratchDatabase(env.TEST_DATABASE_URL, "tinkerlab_test");
  const handle = await openDatabase({ databaseUrl: scratch.url });
  return {
    handle,
    async close() {
      await handle.close();
      await scratch.drop();
    },
  };
}

/**
 * A tRPC caller acting as `who`: the local user of a local server by default (owner of every project); another
 * user signed in to a team server (a person, whose projects are its memberships); any principal (an API key, a share
 * link's holder); or null, an anonymous request.
 */
export function callerFor(handle: DatabaseHandle, who: User | Principal | null = LOCAL_USER) {
  return createCaller(createContextInner({ database: handle, principal: principalOf(who) }));
}

export function principalOf(who: User | Principal | null): Principal {
  if (who === null) return { kind: "anonymous" };
  if ("kind" in who) return who;
  return who.id === LOCAL_USER.id ? { kind: "local", user: who } : { kind: "person", user: who, admin: false };
}
