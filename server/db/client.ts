import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import { sql } from "drizzle-orm";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import { migrate as migrateNodePg } from "drizzle-orm/node-postgres/migrator";
import { drizzle as drizzlePglite } from "drizzle-orm/pglite";
import { migrate as migratePglite } from "drizzle-orm/pglite/migrator";
import pg from "pg";
import * as schema from "./schema";

export type Schema = typeof schema;
/** Either driver: the embedded PGlite or node-postgres. Code above this file does not care which. */
export type Database = PgDatabase<PgQueryResultHKT, Schema>;
type DatabaseKind = "pglite" | "postgres";

type MigrationState = { applied: number; latest: string | null };

export type DatabaseHandle = {
  db: Database;
  kind: DatabaseKind;
  /** Where it lives, for messages: a folder, "memory", or host:port/dbname (no password). */
  location: string;
  migration: MigrationState;
  close(): Promise<void>;
};

/** How long the database took to answer `select 1`, in milliseconds to two decimals: the health check's probe. */
export async function pingDatabase(db: Database): Promise<number> {
  const started = performance.now();
  await db.execute(sql`select 1`);
  return Math.round((performance.now() - started) * 100) / 100;
}

/** A start-up failure whose message says what to change. */
export class StartupError extends Error {
  override name = "StartupError";
}

export type OpenDatabaseOptions = {
  /** A PostgreSQL server; when absent, the embedded PGlite database. */
  databaseUrl?: string;
  /** PGlite's data folder, or "memory" for a throwaway in-memory database. */
  pgliteDir?: string;
  migrationsFolder?: string;
};

export const LOCAL_USER = { id: "usr_local", name: "Local user", email: "local@tinkerlab.local" } as const;

const LOCK_FILE = "tinkerlab.lock";
// An arbitrary constant: every Tinkerlab process migrating the same server takes this advisory lock first.
const MIGRATION_LOCK_KEY = 7_264_501;

export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  const migrationsFolder = options.migrationsFolder ?? path.resolve(process.cwd(), "drizzle");
  if (!fs.existsSync(path.join(migrationsFolder, "meta", "_journal.json"))) {
    throw new StartupError(`No migrations found in ${migrationsFolder}. Start Tinkerlab from the repository root.`);
  }
  const handle = options.databaseUrl
    ? await openPostgres(options.databaseUrl, migrationsFolder)
    : await openPglite(options.pgliteDir ?? "./.data/db", migrationsFolder);
  await ensureLocalUser(handle.db);
  return handle;
}

// ── PGlite ───────────────────────────────────────────────────────────────────────────────────────────────────
async function openPglite(dir: string, migrationsFolder: string): Promise<DatabaseHandle> {
  const inMemory = dir === "memory";
  const dataDir = inMemory ? undefined : path.resolve(dir);
  const releaseLock = dataDir ? lockDataFolder(dataDir) : () => {};
  let client: PGlite;
  try {
    client = await PGlite.create(dataDir);
  } catch (error) {
    releaseLock();
    throw new StartupError(
      `The embedded database in ${dataDir} could not be opened: ${describeError(error)}. ` +
        `If the folder holds something else, set PGLITE_DATA_DIR to another folder.`,
    );
  }
  const pglite = drizzlePglite({ client, schema });
  const db = pglite as unknown as Database;
  try {
    await migratePglite(pglite, { migrationsFolder });
  } catch (error) {
    await client.close().catch(() => {});
    releaseLock();
    throw new StartupError(`Migrating the embedded database in ${dataDir} failed: ${describeError(error)}`);
  }
  return {
    db,
    kind: "pglite",
    location: dataDir ?? "memory",
    migration: await readMigrationState(db, migrationsFolder),
    async close() {
      await client.close();
      releaseLock();
    },
  };
}

/**
 * PGlite is a single-process database: two processes writing one folder corrupt it. A lock file holding the
 * owner's pid keeps a second server out; a lock left by a process that no longer exists is taken over.
 */
function lockDataFolder(dataDir: string): () => void {
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.accessSync(dataDir, fs.constants.W_OK);
    const probe = path.join(dataDir, `.write-probe-${process.pid}`);
    fs.writeFileSync(probe, "");
    fs.rmSync(probe);
  } catch (error) {
    throw new StartupError(
      `The data folder ${dataDir} is not writable (${describeError(error)}). ` +
        `Set PGLITE_DATA_DIR to a folder this user can write, or set DATABASE_URL to use a PostgreSQL server.`,
    );
  }
  const lockPath = path.join(dataDir, LOCK_FILE);
  const owner = { pid: process.pid, hostname: os.hostname(), startedAt: new Date().toISOString() };
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      fs.writeFileSync(lockPath, JSON.stringify(owner), { flag: "wx" });
      const release = () => {
        try {
          const current = JSON.parse(fs.readFileSync(lockPath, "utf8")) as { pid: number };
          if (current.pid === process.pid) fs.rmSync(lockPath);
        } catch {
          // Already gone: nothing to release.
        }
        process.off("exit", release);
      };
      process.on("exit", release);
      return release;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = readLock(lockPath);
      if (holder && holder.hostname === os.hostname() && !processExists(holder.pid)) {
        fs.rmSync(lockPath, { force: true }); // stale: its owner died without cleaning up
        continue;
      }
      const who = holder ? `process ${holder.pid} on ${holder.hostname}, since ${holder.startedAt}` : "another process";
      throw new StartupError(
        `The embedded database in ${dataDir} is already in use by another Tinkerlab server (${who}). ` +
          `Stop that server first, or set PGLITE_DATA_DIR to another folder.`,
      );
    }
  }
  throw new StartupError(`Could not lock the data folder ${dataDir}.`);
}

function readLock(lockPath: string): { pid: number; hostname: string; startedAt: string } | null {
  try {
    return JSON.parse(fs.readFileSync(lockPath, "utf8"));
  } catch {
    return null;
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

// ── PostgreSQL ───────────────────────────────────────────────────────────────────────────────────────────────
async function openPostgres(databaseUrl: string, migrationsFolder: string): Promise<DatabaseHandle> {
  const url = new URL(databaseUrl);
  const location = `${url.hostname}:${url.port || 5432}${url.pathname}`;
  const pool = new pg.Pool({ connectionString: databaseUrl, connectionTimeoutMillis: 5_000, max: 10 });
  // An idle client that loses its server must not crash the process; the next query reports the error.
  pool.on("error", () => {});
  const migrator = await pool.connect().catch(async (error: unknown) => {
    await pool.end().catch(() => {});
    throw new StartupError(explainPostgresError(error, location));
  });
  try {
    await migrator.query("select pg_advisory_lock($1)", [MIGRATION_LOCK_KEY]);
    await migrateNodePg(drizzleNodePg({ client: migrator, schema }), { migrationsFolder });
    await migrator.query("select pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY]);
  } catch (error) {
    migrator.release(true);
    await pool.end().catch(() => {});
    throw new StartupError(`Migrating the PostgreSQL database at ${location} failed: ${describeError(error)}`);
  }
  migrator.release();
  const db = drizzleNodePg({ client: pool, schema }) as unknown as Database;
  return {
    db,
    kind: "postgres",
    location,
    migration: await readMigrationState(db, migrationsFolder),
    close: () => pool.end(),
  };
}

function explainPostgresError(error: unknown, location: string): string {
  const code = (error as { code?: string }).code;
  const what = describeError(error);
  switch (code) {
    case "ECONNREFUSED":
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "ETIMEDOUT":
    case "EHOSTUNREACH":
      return (
        `Cannot reach the PostgreSQL server at ${location} (${what}). ` +
        `Start that server, fix DATABASE_URL, or unset DATABASE_URL to use the embedded database.`
      );
    case "3D000":
      return `The database in DATABASE_URL does not exist on ${location} (${what}). Create it, or point DATABASE_URL at one that exists.`;
    case "28P01":
    case "28000":
      return `PostgreSQL at ${location} refused the credentials in DATABASE_URL (${what}). Fix the user or password.`;
    default:
      return /timeout/i.test(what)
        ? `Cannot reach the PostgreSQL server at ${location}: no answer within 5 s. Check DATABASE_URL and the network.`
        : `Cannot connect to PostgreSQL at ${location}: ${what}. Check DATABASE_URL.`;
  }
}

// ── shared ───────────────────────────────────────────────────────────────────────────────────────────────────
async function readMigrationState(db: Database, migrationsFolder: string): Promise<MigrationState> {
  const journal = JSON.parse(fs.readFileSync(path.join(migrationsFolder, "meta", "_journal.json"), "utf8")) as {
    entries: { idx: number; tag: string }[];
  };
  const rows = await db.execute<{ n: number }>(sql`select count(*)::int as n from drizzle.__drizzle_migrations`);
  const applied = Number((rows as unknown as { rows: { n: number }[] }).rows[0]?.n ?? 0);
  return { applied, latest: journal.entries[applied - 1]?.tag ?? null };
}

async function ensureLocalUser(db: Database) {
  await db.insert(schema.users).values(LOCAL_USER).onConflictDoNothing();
}

function describeError(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return describeError(error.errors[0]);
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code && !error.message.includes(code) ? `${code}: ${error.message}` : error.message || String(code);
  }
  return String(error);
}
