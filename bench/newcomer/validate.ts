/**
 * Validates environment files as the workbench's editor does (compile, type-check, the sandbox's dry run), and
 * prints the diagnostics and the dry run's episodes:
 *
 *   npx tsx bench/newcomer/validate.ts bench/newcomer/take-away.ts [more files…]
 */
import fs from "node:fs";
import path from "node:path";
import { validateInChildProcess } from "../../server/validation";

let failed = false;
for (const file of process.argv.slice(2)) {
  // the name the file has, so diagnostics point at it
  const name = path.basename(file);
  const report = await validateInChildProcess(
    { [name]: fs.readFileSync(file, "utf8") },
    { entry: name, context: { base: "generalist-base", contextLength: 256, maxTokens: 8 } },
  );
  console.log(`${path.basename(file)}: ${report.ok ? "ok" : "errors"}`);
  for (const d of report.diagnostics) console.log(`  ${d.severity} ${d.file ?? ""}${d.line ? `:${d.line}` : ""} ${d.message}`);
  for (const e of report.episodes)
    console.log(`  episode seed ${e.seed}: ${e.turns} turns, reward ${e.totalReward}, ${e.done ? "done" : "not done"}, actions ${e.actions}`);
  if (report.logs.length) console.log(`  logs: ${report.logs.join(" | ")}`);
  failed ||= !report.ok;
}
process.exit(failed ? 1 : 0);
