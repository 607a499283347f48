/**
 * onnxruntime-web's WebAssembly runtime, served by the app rather than a CDN: the playground's worker imports the
 * loader (`.mjs`) and streams the binary (`.wasm`) from here. Files are read from the installed package, so they
 * always match the JavaScript bundled into the worker; the URL names that version, which lets browsers cache each
 * file for good and a new version arrive under a new URL.
 *
 * The loader also starts the runtime's threads as module workers; a worker started from a cross-origin-isolated
 * page must itself be served with Cross-Origin-Embedder-Policy, so every file here carries it.
 */
import path from "node:path";
import { packageFileResponse, packageVersion } from "@/server/package-file";

export const dynamic = "force-dynamic";

const DIST = path.join(process.cwd(), "node_modules", "onnxruntime-web", "dist");

/** The runtimes the playground's worker loads: plain WebAssembly (threads, SIMD), and the JSEP build for WebGPU. */
const FILES: Record<string, string> = {
  "ort-wasm-simd-threaded.mjs": "text/javascript; charset=utf-8",
  "ort-wasm-simd-threaded.wasm": "application/wasm",
  "ort-wasm-simd-threaded.jsep.mjs": "text/javascript; charset=utf-8",
  "ort-wasm-simd-threaded.jsep.wasm": "application/wasm",
};

let installedVersion: string | undefined;
function ortVersion(): string {
  installedVersion ??= packageVersion(path.join(DIST, ".."));
  return installedVersion;
}

export async function GET(_request: Request, context: { params: Promise<{ version: string; file: string }> }) {
  const { version, file } = await context.params;
  const contentType = FILES[file];
  if (!contentType || version !== ortVersion()) {
    return Response.json(
      { error: `No file '${version}/${file}'; this server has onnxruntime-web ${ortVersion()} with ${Object.keys(FILES).join(", ")}` },
      { status: 404 },
    );
  }
  return packageFileResponse(path.join(DIST, file), contentType);
}
