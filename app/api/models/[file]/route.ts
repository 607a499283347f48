/**
 * GET /api/models/<name>.onnx: a model as an ONNX file (server/onnx.ts), for download and for the browser. A
 * built-in base is for anyone signed in; a run's checkpoint (`ckpt_….onnx`) for members of its run's project.
 * Share links open a run's view, never its files: their holders hear 403 with how to get access (nobody, 401).
 */
import fs from "node:fs";
import { Readable } from "node:stream";
import { TRPCError } from "@trpc/server";
import { Access, authenticate, SHARE_LINKS_DOWNLOAD_NO_FILES, signInMessage } from "@/server/auth";
import { getDatabase } from "@/server/db";
import { serverEnv } from "@/server/env";
import { importProjectModule } from "@/server/project-module";

/** server/onnx.ts loads models with the runtime, which Next cannot bundle: imported at run time. */
const onnxModule = () => importProjectModule<typeof import("@/server/onnx")>("server/onnx.ts");

/** What a model file may be called, in words for an error message (as server/onnx.ts says it). */
const NAMES_ACCEPTED = "a base, built-in or imported ('<name>.onnx', e.g. 'arithmetic-base.onnx'), or a run's checkpoint ('ckpt_….onnx')";

export const dynamic = "force-dynamic";

export async function GET(request: Request, context: { params: Promise<{ file: string }> }) {
  const { file } = await context.params;
  const notFound = (error: string) => Response.json({ error }, { status: 404 });
  if (!file.endsWith(".onnx") || file.length === ".onnx".length) return notFound(`No model file '${file}'. A model file is ${NAMES_ACCEPTED}.`);
  const name = file.slice(0, -".onnx".length);
  const { db } = await getDatabase();
  const env = serverEnv();
  const principal = await authenticate(db, request.headers, env.TINKERLAB_AUTH);
  if (principal.kind === "anonymous") return Response.json({ error: signInMessage(principal) }, { status: 401 });
  if (principal.kind === "share") return Response.json({ error: SHARE_LINKS_DOWNLOAD_NO_FILES }, { status: 403 });
  if (name.startsWith("ckpt_")) {
    try {
      await new Access(db, principal).require("viewer", { kind: "checkpoint", id: name });
    } catch (error) {
      if (error instanceof TRPCError) return notFound(`No checkpoint '${name}'; a run's checkpoints are listed on its page.`);
      throw error;
    }
  }
  const { onnxFileFor, UnknownBaseError } = await onnxModule();
  let onnx: Awaited<ReturnType<typeof onnxFileFor>>;
  try {
    onnx = await onnxFileFor(db, env.ARTIFACTS_DIR, name);
  } catch (error) {
    if (error instanceof UnknownBaseError) return notFound(error.message);
    console.error(`exporting '${name}' to ONNX failed:`, error);
    return Response.json({ error: `Could not export '${name}' to ONNX; the server's log says why.` }, { status: 500 });
  }
  const body = Readable.toWeb(fs.createReadStream(onnx.path)) as ReadableStream<Uint8Array>;
  return new Response(body, {
    headers: {
      "content-type": "application/octet-stream",
      "content-length": String(onnx.size),
      "content-disposition": `attachment; filename="${name}.onnx"`,
      "cache-control": "private, max-age=3600",
    },
  });
}
