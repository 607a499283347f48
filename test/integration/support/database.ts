import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import type { User } from "@/server/auth/api-keys";
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

/** A tRPC caller acting as `user` (the local user by default; null for an anonymous request). */
export function callerFor(handle: DatabaseHandle, user: User | null = LOCAL_USER) {
  return createCaller(createContextInner({ database: handle, user }));
}
