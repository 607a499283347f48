import { checkHealth } from "@/server/api/routers/health";
import { getDatabase } from "@/server/db";

export const dynamic = "force-dynamic";

export async function GET() {
  try {
    const database = await getDatabase();
    return Response.json(await checkHealth({ db: database.db, database }));
  } catch (error) {
    return Response.json({ status: "error", error: error instanceof Error ? error.message : String(error) }, { status: 503 });
  }
}
