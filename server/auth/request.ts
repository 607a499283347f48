/**
 * Who an HTTP request comes from, for every door of the server: tRPC's context, the metric stream, downloads and
 * uploads. The same principal everywhere, and the same words when there is none.
 */
import { type Database, LOCAL_USER } from "../db";
import { serverEnv } from "../env";
import type { Principal, User } from "./access";
import { accountsFor } from "./accounts";
import { principalForApiKey } from "./api-keys";
import { SHARE_HEADER } from "./constants";
import { principalForShareToken } from "./share-links";

export type AuthMode = "local" | "apikey" | "team";

/**
 * Who a request comes from: a share link's holder when it carries a share token (the link decides what it sees,
 * even for a signed-in person: a shared view looks the same to everyone), else the API key it sends, else the local
 * user (local mode) or a team server's session; otherwise nobody.
 */
export async function authenticate(db: Database, headers: Headers, mode: AuthMode, shareToken?: string): Promise<Principal> {
  const share = shareToken ?? headers.get(SHARE_HEADER);
  if (share) return (await principalForShareToken(db, share)) ?? { kind: "anonymous" };
  const header = headers.get("authorization");
  const key = header?.match(/^Bearer\s+(\S+)$/i)?.[1];
  if (key) return (await principalForApiKey(db, key, mode === "local")) ?? { kind: "anonymous", rejected: "apikey" };
  if (mode === "local") return { kind: "local", user: { ...LOCAL_USER } };
  if (mode === "team") return (await sessionPrincipal(db, headers)) ?? { kind: "anonymous" };
  return { kind: "anonymous" };
}

/** The signed-in person of a team server's request (its session cookie), or null. */
async function sessionPrincipal(db: Database, headers: Headers): Promise<Principal | null> {
  const env = serverEnv();
  const accounts = await accountsFor(db, { secret: env.TINKERLAB_AUTH_SECRET, host: env.HOST, port: env.PORT });
  // disableRefresh: a server-side call cannot renew the cookie; the browser's own get-session call does both.
  const session = await accounts.api.getSession({ headers, query: { disableRefresh: true } });
  if (!session) return null;
  const user: User = { id: session.user.id, name: session.user.name, email: session.user.email };
  return { kind: "person", user, admin: (session.user as { role?: string }).role === "admin", sessionId: session.session.id };
}

/** Why a request without a working credential is refused, in the words that say how to get one. */
export function signInMessage(principal: Principal): string {
  if (principal.kind === "anonymous" && principal.rejected === "apikey") {
    return "The API key in the Authorization header is unknown, revoked or expired. Make a new one on the Settings page and send it as 'Authorization: Bearer tl_…'.";
  }
  return serverEnv().TINKERLAB_AUTH === "team"
    ? "Sign in required: sign in at /sign-in, or send an API key as 'Authorization: Bearer tl_…'."
    : "Sign in required: send an API key as 'Authorization: Bearer tl_…'.";
}
