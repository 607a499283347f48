/** The built-in datasets shipped in lib/envs/data (made by bin/make-datasets.ts). Node only: reads the files. */
import { readFileSync } from "node:fs";
import { parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow } from "@/lib/sdk/environment";

export const builtInDatasets = ["word-problems"] as const;

export function readBuiltInDataset(name: string): DatasetRow[] {
  if (!(builtInDatasets as readonly string[]).includes(name)) {
    throw new Error(`no built-in dataset '${name}'; the built-in datasets are ${builtInDatasets.join(", ")}`);
  }
  const file = decodeURIComponent(new URL(`./data/${name}.jsonl`, import.meta.url).pathname);
  return parseDataset(readFileSync(file, "utf8"), "jsonl", name);
}
