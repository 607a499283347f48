import "server-only";
import fs from "node:fs";
import path from "node:path";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";
import { parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow } from "@/lib/sdk/environment";

/** What the datasets page shows of a built-in dataset: the uploaded datasets' summary, plus its first rows. */
export type BuiltInDataset = {
  name: string;
  kind: "rows";
  rowCount: number;
  trainRows: number;
  testRows: number;
  fields: string[];
  sizeBytes: number;
  preview: Record<string, unknown>[];
};

const PREVIEW_ROWS = 20;

const cached = new Map<string, BuiltInDataset | null>();

/**
 * A built-in dataset's rows and its file's size. In the bundled server lib/envs/datasets cannot find its files
 * beside itself, so they are read from the repository root, the server's working directory (as the migrations are).
 */
function readRows(name: string): { rows: DatasetRow[]; sizeBytes: number } {
  const file = path.join(/* turbopackIgnore: true */ process.cwd(), "lib", "envs", "data", `${name}.jsonl`);
  if (fs.existsSync(file)) return { rows: parseDataset(fs.readFileSync(file, "utf8"), "jsonl", name), sizeBytes: fs.statSync(file).size };
  const rows = readBuiltInDataset(name);
  return { rows, sizeBytes: rows.reduce((sum, row) => sum + Buffer.byteLength(JSON.stringify(row), "utf8") + 1, 0) };
}

/** The built-in datasets, read once per server process; null for one that cannot be read (shown by name only). */
export function builtInSummaries(names: readonly string[] = builtInDatasets): { name: string; summary: BuiltInDataset | null }[] {
  return names.map((name) => {
    if (!cached.has(name)) {
      try {
        const { rows, sizeBytes } = readRows(name);
        const testRows = rows.filter((row) => row.split === "test").length;
        cached.set(name, {
          name,
          kind: "rows",
          rowCount: rows.length,
          trainRows: rows.length - testRows,
          testRows,
          fields: [...new Set(rows.flatMap((row) => Object.keys(row)))],
          sizeBytes,
          preview: rows.slice(0, PREVIEW_ROWS),
        });
      } catch (error) {
        console.error(`datasets page: could not read the built-in dataset '${name}':`, error);
        cached.set(name, null);
      }
    }
    return { name, summary: cached.get(name) ?? null };
  });
}
