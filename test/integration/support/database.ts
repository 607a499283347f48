import { randomBytes } from "node:crypto";
import pg from "pg";
import { createCaller } from "@/server/api/root";
import { createContextInner } from "@/server/api/trpc";
import type { User } from "@/server/auth/api-keys";
import { LOCAL_USER, openDatabase, type DatabaseHandle } from "@/server/db";
import { serverEnv } from "@/server/env";

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
  const name = `tinkerlab_test_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: env.TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(env.TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const handle = await openDatabase({ databaseUrl: url.toString() });
  return {
    handle,
    async close() {
      await handle.close();
      const dropper = new pg.Client({ connectionString: env.TEST_DATABASE_URL });
      await dropper.connect();
      await dropper.query(`drop database if exists ${name} with (force)`);
      await dropper.end();
    },
  };
}

/** A tRPC caller acting as `user` (the local user by default; null for an anonymous request). */
export function callerFor(handle: DatabaseHandle, user: User | null = LOCAL_USER) {
  return createCaller(createContextInner({ database: handle, user }));
}
