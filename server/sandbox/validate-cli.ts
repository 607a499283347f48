/**
 * `experiments.validate` runs here, in a long-lived child process of the web server (one of a pool:
 * server/validation): user code never runs in the server's own process, and a validation that hangs past its
 * limits is killed from outside. It says `{"ready":true}` once its modules are loaded, then answers one JSON
 * request per stdin line ({id, files, options}) with one JSON answer per stdout line ({id, report} or {id, error}),
 * one request at a time.
 */
import readline from "node:readline";
import { validateExperimentSource, withoutServerPaths } from "./validate";

process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const { id, files, options } = JSON.parse(line);
  try {
    const report = await validateExperimentSource(files, options);
    process.stdout.write(`${JSON.stringify({ id, report })}\n`);
  } catch (error) {
    // The message goes to the user; the whole error, with its stack, to the server's log (this process's stderr).
    console.error(error);
    process.stdout.write(`${JSON.stringify({ id, error: withoutServerPaths(error instanceof Error ? error.message : String(error)) })}\n`);
  }
}
