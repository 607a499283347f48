/**
 * QuickJS's WebAssembly (the release-sync build the server's sandbox runs), served by the app for the playground's
 * episode player, which runs an experiment's own environment in QuickJS in a worker of the page
 * (components/episode). The worker compiles this file and hands it to quickjs-emscripten, so nothing is fetched
 * from elsewhere.
 */
import { createRequire } from "node:module";
import path from "node:path";
import { packageFileResponse, packageVersion } from "@/server/package-file";

export const dynamic = "force-dynamic";

const FILE = "emscripten-module.wasm";

function packageDir(): string {
  const fromQuickjs = createRequire(path.join(process.cwd(), "node_modules", "quickjs-emscripten", "package.json"));
  return path.dirname(path.dirname(fromQuickjs.resolve("@jitl/quickjs-wasmfile-release-sync/wasm")));
}

export async function GET(_request: Request, context: { params: Promise<{ version: string; file: string }> }) {
  const { version, file } = await context.params;
  const dir = packageDir();
  const installed = packageVersion(dir);
  if (file !== FILE || version !== installed) {
    return Response.json({ error: `No file '${version}/${file}'; this server has QuickJS (quickjs-emscripten) ${installed} with ${FILE}` }, { status: 404 });
  }
  return packageFileResponse(path.join(dir, "dist", FILE), "application/wasm");
}
