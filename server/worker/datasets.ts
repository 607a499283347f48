/** Built-in datasets shipped in lib/envs/data/<name>.jsonl, parsed once per process. */
import fs from "node:fs";
import path from "node:path";
import type { DatasetRow } from "@/lib/sdk/environment";
import { parseDataset } from "@/lib/sdk/dataset";

const DATA_DIR = path.resolve(process.cwd(), "lib/envs/data");
const cache = new Map<string, DatasetRow[]>();

export function loadBuiltinDataset(name: string): DatasetRow[] {
  let rows = cache.get(name);
  if (!rows) {
    const file = path.join(DATA_DIR, `${name}.jsonl`);
    if (!/^[a-z0-9-]+$/.test(name) || !fs.existsSync(file)) throw new Error(`No built-in dataset named '${name}'.`);
    rows = parseDataset(fs.readFileSync(file, "utf8"), "jsonl", `${name}.jsonl`);
    cache.set(name, rows);
  }
  return rows;
}
