/**
 * Accounts and sessions of TINKERLAB_AUTH=team, through better-auth (docs/AUTH.md): email and password (scrypt
 * hashes, at least 12 characters), sessions in an HttpOnly cookie signed with a secret kept outside the database
 * (./secret.ts), sign-in limited per account and per address in the database (./sign-in-limits.ts). The first
 * account made on a server becomes its admin; after that, sign-up needs an invitation link to a project. Our own
 * tables hold everything else (projects, members, share links, API keys).
 */
import os from "node:os";
import { betterAuth } from "better-auth";
import { drizzleAdapter } from "better-auth/adapters/drizzle";
import { APIError, createAuthMiddleware } from "better-auth/api";
import { and, eq, ne, count } from "drizzle-orm";
import { CLIENT_IP_HEADER, COOKIE_PREFIX } from "./constants";
import { acceptInvitation, DEFAULT_PROJECT, findInvitation, setMember } from "./projects";
import { announceRevocation } from "./revocation";
import { authSecret, authSecretFile } from "./secret";
import { signInLimits } from "./sign-in-limits";
import { accounts, type Database, LOCAL_USER, projectMembers, newId, rateLimits, serverSettings, sessions, users, verifications } from "../db";
import { serverEnv } from "../env";

export const MIN_PASSWORD_LENGTH = 12;

const idPrefix = { user: "usr", session: "ses", account: "acc", verification: "vfy", rateLimit: "rl" } as const;

export type Accounts = ReturnType<typeof createAccounts>;

/**
 * The auth instance for a database. `hosts` are the "host:port" forms people reach the server by (the origins
 * sign-in accepts); `secret` signs cookies.
 */
function createAccounts(db: Database, options: { secret: string; hosts: string[] }) {
  return betterAuth({
    appName: "Tinkerlab",
    basePath: "/api/auth",
    baseURL: { allowedHosts: options.hosts, protocol: "http", fallback: `http://${options.hosts[0]}` },
    secret: options.secret,
    telemetry: { enabled: false },
    database: drizzleAdapter(db, { provider: "pg", schema: { users, sessions, accounts, verifications, rateLimits } }),
    user: {
      modelName: "users",
      additionalFields: { role: { type: "string", required: false, defaultValue: "member", input: false } },
    },
    session: { modelName: "sessions" },
    account: { modelName: "accounts" },
    verification: { modelName: "verifications" },
    emailAndPassword: { enabled: true, minPasswordLength: MIN_PASSWORD_LENGTH, maxPasswordLength: 128, autoSignIn: true },
    // Sign-in and sign-up are limited by ./sign-in-limits.ts (per account and per address, in the database);
    // better-auth's own per-address limit, in memory, guards the other endpoints against floods.
    rateLimit: { enabled: true, storage: "memory", customRules: { "/sign-in/email": false, "/sign-up/email": false } },
    plugins: [signInLimits(db)],
    hooks: {
      // A session signed out ends the live streams it opened now, not at their next re-check (./stream-access.ts).
      after: createAuthMiddleware(async (ctx) => {
        if (ctx.path === "/sign-out") announceRevocation();
      }),
    },
    advanced: {
      cookiePrefix: COOKIE_PREFIX,
      useSecureCookies: false,
      // Said outright: better-auth skips its origin check when NODE_ENV is "test" unless told, and ours is always on.
      disableOriginCheck: false,
      disableCSRFCheck: false,
      ipAddress: { ipAddressHeaders: [CLIENT_IP_HEADER] },
      database: { generateId: ({ model }) => newId(idPrefix[model as keyof typeof idPrefix] ?? "usr") },
    },
    databaseHooks: {
      user: {
        create: {
          // Sign-up is open on an empty server (the local user does not count: its first account), and to whoever
          // holds a working invitation link (`?invite=tli_…` on the sign-up request).
          before: async (user, ctx) => {
            if ((await peopleCount(db)) > 0 && !(await findInvitation(db, inviteOf(ctx)))) {
              throw new APIError("FORBIDDEN", {
                message: "Sign-up on this server needs an invitation link: ask a project owner for one, or sign in.",
              });
            }
            return { data: user };
          },
          // The first account becomes the admin and an owner of the default project (the examples and whatever the
          // server made before it had accounts), once: two sign-ups racing for it cannot both win. An invited
          // account joins the invitation's project.
          after: async (user, ctx) => {
            const won = await db.insert(serverSettings).values({ key: "first_admin", value: user.id }).onConflictDoNothing().returning();
            if (won.length > 0) {
              await db.update(users).set({ role: "admin" }).where(eq(users.id, user.id));
              await setMember(db, DEFAULT_PROJECT, user.id, "owner");
              // The local user stands for "no accounts": on a team server it is nobody's teammate.
              await db.delete(projectMembers).where(and(eq(projectMembers.projectId, DEFAULT_PROJECT), eq(projectMembers.userId, LOCAL_USER.id)));
            }
            const invite = inviteOf(ctx);
            if (invite) await acceptInvitation(db, invite, user.id);
          },
        },
      },
    },
  });
}

/** The invitation token a sign-up request carries in its query (`?invite=`), or "". */
function inviteOf(ctx: { query?: Record<string, unknown> | undefined } | null | undefined): string {
  const invite = ctx?.query?.invite;
  return typeof invite === "string" ? invite : "";
}

async function peopleCount(db: Database): Promise<number> {
  const [row] = await db.select({ n: count() }).from(users).where(ne(users.id, LOCAL_USER.id));
  return Number(row?.n ?? 0);
}

/** The "host:port" forms the server is reached by: its HOST, or every address of this machine when it listens on 0.0.0.0. */
function serverHosts(host: string, port: number): string[] {
  const names =
    host === "0.0.0.0" || host === "::" ? ["localhost", "127.0.0.1", ...machineAddresses()] : host === "127.0.0.1" ? ["127.0.0.1", "localhost"] : [host];
  return [...new Set(names)].map((name) => `${name}:${port}`);
}

function machineAddresses(): string[] {
  return Object.values(os.networkInterfaces())
    .flat()
    .flatMap((address) => (address && address.family === "IPv4" ? [address.address] : []));
}

const holder = globalThis as typeof globalThis & { __tinkerlabAccounts?: { db: Database; accounts: Promise<Accounts> } };

/**
 * The process's auth instance for its database (made on first use; Next's bundles share it through globalThis).
 * `secret`: TINKERLAB_AUTH_SECRET; without it, the secret in `secretFile` (by default the server's, ./secret.ts).
 */
export function accountsFor(db: Database, options: { secret: string | undefined; secretFile?: string; host: string; port: number }): Promise<Accounts> {
  if (holder.__tinkerlabAccounts?.db !== db) {
    const env = serverEnv();
    const secret = authSecret(db, {
      configured: options.secret,
      file: options.secretFile ?? authSecretFile(env),
      sharedDatabase: env.DATABASE_URL !== undefined,
    });
    holder.__tinkerlabAccounts = { db, accounts: secret.then((secret) => createAccounts(db, { secret, hosts: serverHosts(options.host, options.port) })) };
    // A secret that could not be had (an unreadable file) is tried again at the next request, not kept as a failure.
    holder.__tinkerlabAccounts.accounts.catch(() => {
      if (holder.__tinkerlabAccounts?.db === db) holder.__tinkerlabAccounts = undefined;
    });
  }
  return holder.__tinkerlabAccounts.accounts;
}
