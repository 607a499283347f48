/**
 * PUT /api/bases/<name>/files/<file>: one file of a Hugging Face model folder, streamed to the server to import as
 * the base <name> (then POST /api/bases/<name>/import). For the server's admin; see server/base-uploads.ts.
 */
import { rateLimitResponse } from "@/server/api";
import { requireBaseManager, stageFile, UploadError } from "@/server/base-uploads";
import { getDatabase } from "@/server/db";

export const dynamic = "force-dynamic";

export async function PUT(request: Request, context: { params: Promise<{ name: string; file: string }> }) {
  const { name, file } = await context.params;
  const { db } = await getDatabase();
  const gate = await requireBaseManager(db, request);
  if ("refused" in gate) return gate.refused;
  const limited = rateLimitResponse("bases.upload", gate.principal, request.headers);
  if (limited) return limited;
  const length = request.headers.get("content-length");
  try {
    const bytes = await stageFile(name, file, request.body, length === null ? null : Number(length));
    return Response.json({ file, bytes });
  } catch (error) {
    if (error instanceof UploadError) return Response.json({ error: error.message }, { status: error.status });
    throw error;
  }
}
