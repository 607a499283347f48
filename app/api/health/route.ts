import { checkHealth } from "@/server/api/routers/health";
import { newErrorId } from "@/server/api/trpc";
import { getDatabase } from "@/server/db";

export const dynamic = "force-dynamic";

export async function GET() {
  try {
    const database = await getDatabase();
    return Response.json(await checkHealth({ db: database.db, database }));
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
