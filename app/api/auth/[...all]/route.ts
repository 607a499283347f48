/** Sign-up, sign-in, sign-out and the session of a team server (better-auth's handler); absent in other modes. */
import { accountsFor } from "@/server/auth";
import { getDatabase } from "@/server/db";
import { serverEnv } from "@/server/env";

export const dynamic = "force-dynamic";

async function handle(request: Request): Promise<Response> {
  const env = serverEnv();
  if (env.TINKERLAB_AUTH !== "team") {
    return Response.json(
      { error: `Accounts exist only with TINKERLAB_AUTH=team; this server runs with TINKERLAB_AUTH=${env.TINKERLAB_AUTH}.` },
      { status: 404 },
    );
  }
  const { db } = await getDatabase();
  const accounts = await accountsFor(db, { secret: env.TINKERLAB_AUTH_SECRET, host: env.HOST, port: env.PORT });
  return accounts.handler(request);
}

export { handle as GET, handle as POST };
