/**
 * Downloads an export (an export job's safetensors file, or its tar of one safetensors per agent) by its id: for members of its run's project, and the
 * file streamed from disk, never held whole in memory.
 */
import fs from "node:fs";
import { Readable } from "node:stream";
import { and, eq } from "drizzle-orm";
import { TRPCError } from "@trpc/server";
import { Access, authenticate, SHARE_LINKS_DOWNLOAD_NO_FILES, signInMessage } from "@/server/auth";
import { checkpoints, getDatabase, runs } from "@/server/db";
import { serverEnv } from "@/server/env";

export const dynamic = "force-dynamic";

export async function GET(request: Request, context: { params: Promise<{ id: string }> }) {
  const { id } = await context.params;
  const { db } = await getDatabase();
  const principal = await authenticate(db, request.headers, serverEnv().TINKERLAB_AUTH);
  // Downloads are for the run's project members: a share link shows a run's view, never its files.
  if (principal.kind === "anonymous") return Response.json({ error: signInMessage(principal) }, { status: 401 });
  if (principal.kind === "share") return Response.json({ error: SHARE_LINKS_DOWNLOAD_NO_FILES }, { status: 403 });
  const gone = Response.json({ error: `No export '${id}'; a run's exports are listed on its page` }, { status: 404 });
  try {
    await new Access(db, principal).require("viewer", { kind: "checkpoint", id });
  } catch (error) {
    if (error instanceof TRPCError) return gone;
    throw error;
  }
  const [row] = await db
    .select({ path: checkpoints.path, runName: runs.name })
    .from(checkpoints)
    .innerJoin(runs, eq(runs.id, checkpoints.runId))
    .where(and(eq(checkpoints.id, id), eq(checkpoints.kind, "export")));
  const size = row && fs.existsSync(row.path) ? fs.statSync(row.path).size : null;
  if (!row || size === null) return gone;
  const body = Readable.toWeb(fs.createReadStream(row.path)) as ReadableStream<Uint8Array>;
  // An export of a run with a policy per agent is a tar archive of one safetensors per agent (server/worker/export-job.ts).
  const archive = row.path.endsWith(".tar");
  return new Response(body, {
    headers: {
      "content-type": archive ? "application/x-tar" : "application/octet-stream",
      "content-length": String(size),
      "content-disposition": `attachment; filename="${row.runName.replace(/[^\w.-]/g, "_")}.${archive ? "tar" : "safetensors"}"`,
    },
  });
}
