#!/usr/bin/env node
// `npm start`: install dependencies if needed, build the workbench if its sources changed, then start it.
//
// This process owns the server: a SIGINT, SIGTERM or SIGHUP sent to it goes on to the server, which stops its local
// workers and exits, and this process then exits with it. npm passes SIGINT and SIGTERM on to its script's process;
// the script `exec`s node (package.json), so that process is this one and not a `sh -c`, which passes nothing on
// (dash dies of a SIGTERM, leaving this process and the server running, and sits out a SIGINT).
import { spawn } from "node:child_process";
import os from "node:os";
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
// The server is one process: node with tsx's loader, not tsx's command line, which would run it in a child of its own
// and SIGKILL that child when it does not acknowledge a passed-on signal within 30 ms (as a busy server may not).
const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "bin", "tinkerlab.ts"), "start", ...process.argv.slice(2)], {
  cwd: root,
  stdio: "inherit",
  env: { NODE_ENV: "production", ...process.env },
});
// Every signal goes on, even one the server also got itself (Ctrl-C signals the terminal's whole process group, and
// npm passes it on too): the server shuts down once however many arrive.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  });
}
child.on("error", (error) => {
  console.error(`tinkerlab: cannot start the server: ${error.message}`);
  process.exit(1);
});
child.on("exit", (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
