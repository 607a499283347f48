#!/usr/bin/env node
// `npm start`: install dependencies if needed, build the workbench if its sources changed, then start it.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { buildIfStale, ensureDependencies } from "./build-if-stale.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
try {
  ensureDependencies(root);
  buildIfStale(root);
} catch (error) {
  console.error(`tinkerlab: ${error.message}`);
  process.exit(1);
}
const child = spawn(path.join(root, "node_modules", ".bin", "tsx"), [path.join(root, "bin", "tinkerlab.ts"), "start", ...process.argv.slice(2)], {
  cwd: root,
  stdio: "inherit",
  env: { NODE_ENV: "production", ...process.env },
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
