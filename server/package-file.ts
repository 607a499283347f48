/**
 * A file of an installed package, served by the app for the browser (onnxruntime-web's runtime, QuickJS's
 * WebAssembly) rather than from a CDN. The URL names the package's version, so a browser may keep the file for
 * good and a new version arrives under a new URL. Every such file carries Cross-Origin-Embedder-Policy: a worker
 * or script loaded by a cross-origin-isolated page (the playground) must.
 */
import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";

/** The version in the package's package.json (`dir` is the package's folder). */
export function packageVersion(dir: string): string {
  return (JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as { version: string }).version;
}

export function packageFileResponse(file: string, contentType: string): Response {
  const body = Readable.toWeb(fs.createReadStream(file)) as ReadableStream<Uint8Array>;
  return new Response(body, {
    headers: {
      "content-type": contentType,
      "content-length": String(fs.statSync(file).size),
      "cache-control": "public, max-age=31536000, immutable",
      "cross-origin-embedder-policy": "require-corp",
      "cross-origin-resource-policy": "same-origin",
    },
  });
}
