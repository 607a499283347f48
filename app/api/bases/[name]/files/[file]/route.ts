/**
 * PUT /api/bases/<name>/files/<file>: one file of a Hugging Face model folder, streamed to the server to import as
 * the base <name> (then POST /api/bases/<name>/import). For the server's admin; see server/base-uploads.ts.
 */
import { authenticate, signInMessage } from "@/server/api/trpc";
import { mayManageBases, NOT_ADMIN, stageFile, UploadError } from "@/server/base-uploads";
import { getDatabase } from "@/server/db";
import { serverEnv } from "@/server/env";

export const dynamic = "force-dynamic";

export async function PUT(request: Request, context: { params: Promise<{ name: string; file: string }> }) {
  const { name, file } = await context.params;
  const { db } = await getDatabase();
  const principal = await authenticate(db, request.headers, serverEnv().TINKERLAB_AUTH);
  if (principal.kind === "anonymous" || principal.kind === "share") return Response.json({ error: signInMessage(principal) }, { status: 401 });
  if (!(await mayManageBases(db, principal))) return Response.json({ error: NOT_ADMIN }, { status: 403 });
  const length = request.headers.get("content-length");
  try {
    const bytes = await stageFile(name, file, request.body, length === null ? null : Number(length));
    return Response.json({ file, bytes });
  } catch (error) {
    if (error instanceof UploadError) return Response.json({ error: error.message }, { status: error.status });
    throw error;
  }
}
