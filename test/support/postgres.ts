import { randomBytes } from "node:crypto";
import pg from "pg";

/** Runs one statement as the admin connection of `adminUrl` (create or drop a database). */
async function asAdmin(adminUrl: string, statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

/**
 * A new, empty database on the PostgreSQL server of `adminUrl` (TEST_DATABASE_URL), named `prefix_<random>`: its
 * URL, and `drop()` to remove it even while connections remain.
 */
export async function createScratchDatabase(adminUrl: string, prefix: string): Promise<{ name: string; url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(5).toString("hex")}`;
  await asAdmin(adminUrl, `create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { name, url: url.toString(), drop: () => asAdmin(adminUrl, `drop database if exists ${name} with (force)`) };
}
