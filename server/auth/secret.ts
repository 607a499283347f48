/**
 * The secret that signs a team server's session cookies, held by the operator outside the database: a cookie is the
 * session's token and HMAC(secret, token), and `sessions` holds the tokens, so a secret kept beside them would let a
 * copy of the database sign anyone in. TINKERLAB_AUTH_SECRET when set; else a file made at first start with mode
 * 0600 (TINKERLAB_AUTH_SECRET_FILE, by default `auth-secret` beside the embedded database's folder).
 */
import { randomBytes } from "node:crypto";
import { chmod, link, mkdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { eq } from "drizzle-orm";
import { type Database, serverSettings } from "../db";
import type { ServerEnv } from "../env";

/** The shortest secret accepted, in characters (TINKERLAB_AUTH_SECRET's own minimum). */
const MIN_SECRET_LENGTH = 32;

/** Where the secret file is: TINKERLAB_AUTH_SECRET_FILE, else `auth-secret` in the folder that holds PGLITE_DATA_DIR. */
export function authSecretFile(env: Pick<ServerEnv, "TINKERLAB_AUTH_SECRET_FILE" | "PGLITE_DATA_DIR">): string {
  // turbopackIgnore: paths from the environment, not files of the project for the build to trace.
  if (env.TINKERLAB_AUTH_SECRET_FILE) return path.resolve(/* turbopackIgnore: true */ env.TINKERLAB_AUTH_SECRET_FILE);
  return path.join(path.dirname(path.resolve(/* turbopackIgnore: true */ env.PGLITE_DATA_DIR)), "auth-secret");
}

/**
 * The secret that signs cookies: `configured` (TINKERLAB_AUTH_SECRET), else the one in `file`, made there (mode
 * 0600) when the file does not exist. A secret an older server kept in `server_settings` is deleted and never used:
 * whoever held a session signs in once more. `sharedDatabase`: the server uses a PostgreSQL server, which processes
 * on other machines may share; each of them would make a file of its own, so the log says to set the variable.
 */
export async function authSecret(db: Database, options: { configured: string | undefined; file: string; sharedDatabase: boolean }): Promise<string> {
  const dropped = await db.delete(serverSettings).where(eq(serverSettings.key, "auth_secret")).returning({ key: serverSettings.key });
  if (dropped.length > 0) {
    console.warn(
      "Removed the cookie-signing secret an older Tinkerlab kept in the database (server_settings.auth_secret): a copy of the database could sign anyone in with it. Sessions signed with it no longer work; everyone signs in once more.",
    );
  }
  if (options.configured) return options.configured;
  const secret = await readOrMakeSecretFile(options.file);
  if (options.sharedDatabase) {
    console.warn(
      `Session cookies are signed with the secret in ${options.file}, made on this machine. Server processes on other machines that share this database (DATABASE_URL) sign with their own and refuse this one's cookies: give every process the same TINKERLAB_AUTH_SECRET (32 characters or more, e.g. \`openssl rand -base64 32\`).`,
    );
  }
  return secret;
}

async function readOrMakeSecretFile(file: string): Promise<string> {
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written whole under a name of its own, then linked into place: of several processes starting at once, the
  // first link wins and the others read the finished file, never a half-written one.
  const draft = `${file}.${process.pid}.${randomBytes(4).toString("hex")}`;
  await writeFile(draft, `${randomBytes(32).toString("base64url")}\n`, { flag: "wx", mode: 0o600 });
  try {
    await link(draft, file);
    console.log(`Made the secret that signs session cookies in ${file} (mode 0600). Keep it out of database backups; deleting it signs everyone out.`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  } finally {
    await unlink(draft);
  }
  const { mode } = await stat(file);
  if ((mode & 0o077) !== 0) {
    await chmod(file, 0o600);
    console.warn(`${file} was readable by other users (mode ${(mode & 0o777).toString(8)}); made it 0600.`);
  }
  const secret = (await readFile(file, "utf8")).trim();
  if (secret.length < MIN_SECRET_LENGTH) {
    throw new Error(
      `${file} holds a cookie-signing secret of ${secret.length} characters; ${MIN_SECRET_LENGTH} or more are needed. Delete the file to have a new one made (everyone signs in once more), or set TINKERLAB_AUTH_SECRET.`,
    );
  }
  return secret;
}
