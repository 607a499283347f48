/**
 * Uploaded datasets: validated, split into train and test, stored as a JSONL file in the artifact store, and
 * listed by name. An environment reads one with `data: { kind: "dataset", dataset: "name" }`; an SFT run imitates
 * one with `sft: { data: "dataset", dataset: "name" }`.
 */
import fs from "node:fs";
import path from "node:path";
import { and, desc, eq, inArray } from "drizzle-orm";
import { builtInDatasets } from "@/lib/envs/datasets";
import { Rng } from "@/lib/model/rng";
import { looksLikeConversations, parseConversations, parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow } from "@/lib/sdk/environment";
import { type Database, datasets, newId } from "../db";

/** The largest upload accepted, in bytes of its text. */
export const MAX_DATASET_BYTES = 16 * 1024 * 1024;
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** A refusal the caller hears as it is: a bad upload (`BAD_REQUEST`), or no such dataset (`NOT_FOUND`). */
export class DatasetError extends Error {
  override name = "DatasetError";
  constructor(
    message: string,
    readonly code: "BAD_REQUEST" | "NOT_FOUND" = "BAD_REQUEST",
  ) {
    super(message);
  }
}

export type DatasetSummary = typeof datasets.$inferSelect;

/**
 * Validates and stores a dataset. Rows may say their split ("split": "train" or "test"); rows that do not are
 * split by a shuffle seeded by the dataset's name, `testShare` of them held out for evaluation.
 */
export async function createDataset(
  db: Database,
  artifactsDir: string,
  input: { projectId: string; ownerId: string; name: string; description?: string; text: string; format?: "jsonl" | "csv"; testShare?: number },
): Promise<DatasetSummary> {
  const { name, text } = input;
  if (!NAME.test(name)) throw new DatasetError(`name: use 1-64 lowercase letters, digits or '-', starting with a letter or digit; got ${JSON.stringify(name)}`);
  if ((builtInDatasets as readonly string[]).includes(name)) throw new DatasetError(`name: '${name}' is a built-in dataset; choose another name`);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_DATASET_BYTES)
    throw new DatasetError(`the dataset is ${(bytes / 2 ** 20).toFixed(1)} MiB; at most ${MAX_DATASET_BYTES / 2 ** 20} MiB is accepted`);
  const testShare = input.testShare ?? 0.2;
  if (!(testShare >= 0 && testShare < 1)) throw new DatasetError(`testShare must be at least 0 and below 1; got ${testShare}`);
  const [existing] = await db
    .select({ id: datasets.id })
    .from(datasets)
    .where(and(eq(datasets.projectId, input.projectId), eq(datasets.name, name)));
  if (existing) throw new DatasetError(`a dataset named '${name}' exists already in this project; choose another name`);

  const format = input.format ?? "jsonl";
  const conversations = format === "jsonl" && looksLikeConversations(text);
  let lines: string[];
  let fields: string[];
  let testRows = 0;
  try {
    if (conversations) {
      const parsed = parseConversations(text, name);
      lines = parsed.map((messages) => JSON.stringify({ messages }));
      fields = [...new Set(parsed.flatMap((messages) => messages.map((m) => m.role)))];
    } else {
      const rows = parseDataset(text, format, name);
      for (const [i, row] of rows.entries()) {
        if ("split" in row && row.split !== "train" && row.split !== "test") {
          throw new Error(`${name}: row ${i + 1} has split ${JSON.stringify(row.split)}; a split is "train" or "test"`);
        }
      }
      const held = heldOut(rows, testShare, name);
      const split = rows.map((row, i): DatasetRow => ("split" in row ? row : { ...row, split: held.has(i) ? "test" : "train" }));
      testRows = split.filter((row) => row.split === "test").length;
      lines = split.map((row) => JSON.stringify(row));
      fields = [...new Set(rows.flatMap((row) => Object.keys(row)))];
    }
  } catch (error) {
    throw new DatasetError((error as Error).message);
  }
  const id = newId("ds");
  const file = path.resolve(artifactsDir, "datasets", `${id}.jsonl`);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  // Written whole, then renamed: a reader never sees half a dataset.
  fs.writeFileSync(`${file}.partial`, `${lines.join("\n")}\n`);
  fs.renameSync(`${file}.partial`, file);
  const [row] = await db
    .insert(datasets)
    .values({
      id,
      projectId: input.projectId,
      ownerId: input.ownerId,
      name,
      description: input.description ?? "",
      kind: conversations ? "conversations" : "rows",
      path: file,
      sizeBytes: fs.statSync(file).size,
      rowCount: lines.length,
      trainRows: lines.length - testRows,
      testRows,
      fields,
    })
    .returning();
  return row!;
}

/** The rows held out for testing: a shuffle of the indices seeded by the dataset's name. */
function heldOut(rows: DatasetRow[], share: number, name: string): Set<number> {
  let seed = 0;
  for (const char of name) seed = (seed * 31 + char.charCodeAt(0)) >>> 0;
  const rng = new Rng(seed);
  const order = rows.map((_, i) => i);
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.nextU32() % (i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return new Set(order.slice(0, Math.round(rows.length * share)));
}

/** The datasets of some projects, newest first. */
export async function listDatasets(db: Database, projectIds: string[]): Promise<DatasetSummary[]> {
  if (projectIds.length === 0) return [];
  return db.select().from(datasets).where(inArray(datasets.projectId, projectIds)).orderBy(desc(datasets.createdAt));
}

/** A project's uploaded datasets' files, by name: what its runs read (environments' rows, SFT conversations). */
export async function datasetFiles(db: Database, projectId: string): Promise<Record<string, { path: string; kind: "rows" | "conversations" }>> {
  const rows = await db.select({ name: datasets.name, path: datasets.path, kind: datasets.kind }).from(datasets).where(eq(datasets.projectId, projectId));
  return Object.fromEntries(rows.map((row) => [row.name, { path: row.path, kind: row.kind }]));
}

/** The first `limit` lines of a dataset, parsed: what the datasets page previews. */
export async function previewDataset(db: Database, id: string, limit = 20): Promise<unknown[]> {
  const [row] = await db.select({ path: datasets.path }).from(datasets).where(eq(datasets.id, id));
  if (!row) throw new DatasetError(`No dataset with id '${id}'`, "NOT_FOUND");
  const text = fs.readFileSync(row.path, "utf8");
  return text
    .split("\n")
    .filter((line) => line.trim())
    .slice(0, limit)
    .map((line) => JSON.parse(line) as unknown);
}
