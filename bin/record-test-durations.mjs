#!/usr/bin/env node
/**
 * Writes test/durations.json from vitest's cache of the last run here: each file's duration by project, in whole
 * tenths of a second. The test sequencer (vitest.config.ts) orders files longest first by the cache, and by this file
 * where the cache has no result (a fresh clone, as CI runs): without it, CI started files in the order found and the
 * last long one ran alone on one fork while the other waited. Run after a full `npm test`:
 *
 *   node bin/record-test-durations.mjs
 */
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const cacheDir = path.join(root, "node_modules", ".vite", "vitest");
const caches = fs.existsSync(cacheDir)
  ? fs
      .readdirSync(cacheDir)
      .map((name) => path.join(cacheDir, name, "results.json"))
      .filter((file) => fs.existsSync(file))
      .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)
  : [];
if (caches.length === 0) {
  console.error(`No vitest results in ${cacheDir}: run 'npm test' first, then this.`);
  process.exit(2);
}
const { results } = JSON.parse(fs.readFileSync(caches[0], "utf8"));
const target = path.join(root, "test", "durations.json");
const kept = fs.existsSync(target) ? JSON.parse(fs.readFileSync(target, "utf8")) : {};
const durations = { ...kept };
let counted = 0;
for (const [key, result] of results) {
  const file = key.slice(key.indexOf(":") + 1);
  if (!result || typeof result.duration !== "number" || !fs.existsSync(path.join(root, file))) continue;
  durations[key] = Math.round(result.duration / 100) / 10;
  counted += 1;
}
// Files since removed leave the table.
for (const key of Object.keys(durations)) if (!fs.existsSync(path.join(root, key.slice(key.indexOf(":") + 1)))) delete durations[key];
const sorted = Object.fromEntries(
  Object.keys(durations)
    .sort()
    .map((key) => [key, durations[key]]),
);
fs.writeFileSync(target, `${JSON.stringify(sorted, null, 2)}\n`);
console.log(
  `${path.relative(root, target)}: ${counted} files' durations from ${path.relative(root, caches[0])}, ${Object.keys(sorted).length} in all (seconds)`,
);
