/**
 * Imports one of the project's own TypeScript modules at run time, past Next's bundler: for modules that load
 * what Next cannot bundle (the runtime's native kernel, esbuild, files found next to the module by
 * `import.meta.url`). The server process runs under tsx from the project folder (bin/start.mjs, web-server.ts's
 * Next `dir`), and tests from the same folder, so the path is the module's from there.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";

export function importProjectModule<Module>(relativePath: string): Promise<Module> {
  const file = pathToFileURL(path.join(/* turbopackIgnore: true */ process.cwd(), relativePath)).href;
  return import(/* webpackIgnore: true */ /* turbopackIgnore: true */ /* @vite-ignore */ file) as Promise<Module>;
}
