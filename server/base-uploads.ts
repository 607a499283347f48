/**
 * Uploading a Hugging Face model folder to the server, file by file, to import it as a base: each file streams to
 * a staging folder (ARTIFACTS_DIR/uploads/<name>), never held whole in memory, and the import converts the staged
 * folder (base-import.ts) and removes it. A base is the whole server's, so only its admin may add one.
 */
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { authenticate, isServerAdmin, type Principal, serverAdminRefusal, signInMessage } from "./auth";
import type { Database } from "./db";
import { MODEL_FILES_ACCEPTED, modelFileRule } from "@/lib/model/hf/folder";
import { serverEnv } from "./env";
import { baseNameProblem } from "./bases";

/** One file's largest size: a 7B model's shards are under 5 GB each. */
const MAX_UPLOAD_FILE_BYTES = 16 * 1024 ** 3;

export class UploadError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * The upload routes' gate: the request's principal when it may add bases, else the response that refuses it
 * (401 without a credential, 403 for anyone but the admin, and for the admin's keys not made with the admin role).
 */
export async function requireBaseManager(
  db: Database,
  request: Request,
): Promise<{ principal: Extract<Principal, { user: unknown }> } | { refused: Response }> {
  const principal = await authenticate(db, request.headers, serverEnv().TINKERLAB_AUTH);
  if (principal.kind === "anonymous" || principal.kind === "share") return { refused: Response.json({ error: signInMessage(principal) }, { status: 401 }) };
  if (!isServerAdmin(principal)) {
    return { refused: Response.json({ error: serverAdminRefusal(principal, "Importing a model adds a base for everyone on this server") }, { status: 403 }) };
  }
  return { principal };
}

export function stagingDir(name: string): string {
  const problem = baseNameProblem(name);
  if (problem) throw new UploadError(problem, 400);
  return path.resolve(serverEnv().ARTIFACTS_DIR, "uploads", name);
}

/** Streams `body` to the staging folder as `file`; a part written is never mistaken for the whole. */
export async function stageFile(name: string, file: string, body: ReadableStream<Uint8Array> | null, declaredBytes: number | null): Promise<number> {
  const dir = stagingDir(name);
  if (!modelFileRule.test(file)) throw new UploadError(`'${file}' is not a file a model import reads; accepted: ${MODEL_FILES_ACCEPTED}`, 400);
  if (!body) throw new UploadError(`the request has no body; send ${file}'s bytes`, 400);
  if (declaredBytes !== null && declaredBytes > MAX_UPLOAD_FILE_BYTES) {
    throw new UploadError(`${file} is ${declaredBytes} bytes, over the ${MAX_UPLOAD_FILE_BYTES / 1024 ** 3} GiB a file may be`, 413);
  }
  fs.mkdirSync(dir, { recursive: true });
  const target = path.join(dir, file);
  const partial = `${target}.partial`;
  let written = 0;
  const source = Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>);
  source.on("data", (chunk: Buffer) => {
    written += chunk.length;
    if (written > MAX_UPLOAD_FILE_BYTES) source.destroy(new UploadError(`${file} is over the ${MAX_UPLOAD_FILE_BYTES / 1024 ** 3} GiB a file may be`, 413));
  });
  try {
    await pipeline(source, fs.createWriteStream(partial));
  } catch (error) {
    fs.rmSync(partial, { force: true });
    throw error;
  }
  fs.renameSync(partial, target);
  return written;
}

export function discardStaging(name: string): void {
  fs.rmSync(stagingDir(name), { recursive: true, force: true });
}
