import { checkHealth } from "@/server/api";
import { authenticate } from "@/server/auth";
import { newErrorId } from "@/server/error-ids";
import { getDatabase } from "@/server/db";
import { serverEnv } from "@/server/env";

export const dynamic = "force-dynamic";

export async function GET(request: Request) {
  try {
    const database = await getDatabase();
    const principal = await authenticate(database.db, request.headers, serverEnv().TINKERLAB_AUTH);
    return Response.json(await checkHealth({ db: database.db, database, principal }));
  } catch (error) {
    // The error may name the database's folder or address, or hold a stack: the log gets it, the client an id.
    const errorId = newErrorId();
    console.error(`health check failed (${errorId}):`, error);
    return Response.json(
      { status: "error", error: `The database did not answer (error ${errorId}); the server's log has the details under that id.`, errorId },
      { status: 503 },
    );
  }
}
