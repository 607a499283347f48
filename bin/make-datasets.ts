/** Writes the built-in datasets shipped in lib/envs/data. Deterministic: running it again gives the same files. */
import fs from "node:fs";
import path from "node:path";
import { generateWordProblems } from "../lib/envs/word-problems";

const dir = path.resolve(import.meta.dirname, "../lib/envs/data");
fs.mkdirSync(dir, { recursive: true });
const rows = generateWordProblems(20261202, 5000);
fs.writeFileSync(path.join(dir, "word-problems.jsonl"), rows.map((row) => JSON.stringify(row)).join("\n") + "\n");
console.log(`word-problems.jsonl: ${rows.length} rows (${rows.filter((r) => r.split === "test").length} test)`);
