/**
 * POST /api/bases/<name>/import: converts the files uploaded for <name> (PUT /api/bases/<name>/files/<file>) into
 * the base <name>, and removes them. Body (JSON, optional): { contextLength?: number, replace?: boolean }.
 * Answers the import record, or 400 with what is wrong with the model folder (the uploaded files are kept, so a
 * missing one can be added and the import asked again). With an `Idempotency-Key` header, the import is done once
 * per key: a retry gets the first record (server/api/idempotency.ts).
 */
import { z } from "zod";
import { answerOnce, IdempotencyError, idempotencyKeyOf, rateLimitResponse } from "@/server/api";
import { discardStaging, requireBaseManager, stagingDir, UploadError } from "@/server/base-uploads";
import { importRecord } from "@/server/bases";
import { getDatabase } from "@/server/db";
import { importProjectModule } from "@/server/project-module";
import type { ImportRecord } from "@/server/worker/base-import";

export const dynamic = "force-dynamic";

const options = z.object({
  contextLength: z.number().int().min(1).optional(),
  replace: z.boolean().optional(),
});

export async function POST(request: Request, context: { params: Promise<{ name: string }> }) {
  const { name } = await context.params;
  const { db } = await getDatabase();
  const gate = await requireBaseManager(db, request);
  if ("refused" in gate) return gate.refused;
  const limited = rateLimitResponse("bases.import", gate.principal, request.headers);
  if (limited) return limited;
  const { principal } = gate;
  const idempotency = idempotencyKeyOf(request.headers);
  if ("error" in idempotency) return Response.json({ error: idempotency.error }, { status: 400 });
  const text = await request.text();
  let parsed: z.infer<typeof options>;
  try {
    const result = options.safeParse(text.trim() === "" ? {} : JSON.parse(text));
    if (!result.success) return Response.json({ error: `invalid import options: ${z.prettifyError(result.error)}` }, { status: 400 });
    parsed = result.data;
  } catch {
    return Response.json({ error: "the body must be JSON: { contextLength?: number, replace?: boolean }" }, { status: 400 });
  }
  let dir: string;
  try {
    dir = stagingDir(name);
  } catch (error) {
    if (error instanceof UploadError) return Response.json({ error: error.message }, { status: error.status });
    throw error;
  }
  // The conversion loads the runtime's modules, which Next does not bundle, and runs in a process of its own.
  const { importHFBaseApart } = await importProjectModule<typeof import("@/server/worker/base-import")>("server/worker/base-import.ts");
  const importBase = async () => {
    try {
      const who = principal.kind === "local" ? "the local user" : principal.user.email;
      const record = await importHFBaseApart(dir, { name, ...parsed, origin: `an upload by ${who}` });
      discardStaging(name);
      return record;
    } catch (error) {
      throw new UploadError((error as Error).message.replaceAll(dir, `the files uploaded for '${name}'`), 400);
    }
  };
  // A request that died after importing, before storing its answer: the base's import.json (the whole record) says so.
  const importedSince = (since: Date) => {
    const record = importRecord(name) as ImportRecord | null;
    return record && new Date(record.importedAt) >= since ? record : null;
  };
  try {
    const { key } = idempotency;
    const record =
      key === null
        ? await importBase()
        : await answerOnce(db, principal, { procedure: "bases.import", key, input: { name, ...parsed } }, importBase, importedSince);
    return Response.json(record);
  } catch (error) {
    if (error instanceof UploadError || error instanceof IdempotencyError) return Response.json({ error: error.message }, { status: error.status });
    throw error;
  }
}
