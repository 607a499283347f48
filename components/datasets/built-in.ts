import "server-only";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";

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

export const PREVIEW_ROWS = 20;

let cached: Map<string, BuiltInDataset | null> | undefined;

/** The built-in datasets, read once per server process; null for one that cannot be read (shown by name only). */
export function builtInSummaries(names: readonly string[] = builtInDatasets): { name: string; summary: BuiltInDataset | null }[] {
  cached ??= new Map();
  return names.map((name) => {
    if (!cached!.has(name)) {
      try {
        const rows = readBuiltInDataset(name);
        const testRows = rows.filter((row) => row.split === "test").length;
        cached!.set(name, {
          name,
          kind: "rows",
          rowCount: rows.length,
          trainRows: rows.length - testRows,
          testRows,
          fields: [...new Set(rows.flatMap((row) => Object.keys(row)))],
          sizeBytes: rows.reduce((sum, row) => sum + Buffer.byteLength(JSON.stringify(row), "utf8") + 1, 0),
          preview: rows.slice(0, PREVIEW_ROWS),
        });
      } catch (error) {
        console.error(`datasets page: could not read the built-in dataset '${name}':`, error);
        cached!.set(name, null);
      }
    }
    return { name, summary: cached!.get(name)! };
  });
}
