import { serverEnv } from "../env";
import { openDatabase, type DatabaseHandle } from "./client";

export * from "./client";
export * from "./schema";
export { newId } from "./ids";

// Next.js bundles route handlers apart from the server entry, so a module-level variable would exist twice and
// open the same PGlite folder twice. One handle per process lives on globalThis instead.
const holder = globalThis as typeof globalThis & { __tinkerlabDatabase?: Promise<DatabaseHandle> };

/** The process's database, opened (and migrated) on first use. */
export function getDatabase(): Promise<DatabaseHandle> {
  if (!holder.__tinkerlabDatabase) {
    const env = serverEnv();
    holder.__tinkerlabDatabase = openDatabase({ databaseUrl: env.DATABASE_URL, pgliteDir: env.PGLITE_DATA_DIR });
    holder.__tinkerlabDatabase.catch(() => {
      holder.__tinkerlabDatabase = undefined;
    });
  }
  return holder.__tinkerlabDatabase;
}

/** Install an already-open handle as the process's database (the server entry and tests do this). */
export function setDatabase(handle: DatabaseHandle) {
  holder.__tinkerlabDatabase = Promise.resolve(handle);
}
