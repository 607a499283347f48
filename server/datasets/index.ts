/**
 * Uploaded datasets: validated, split into train and test, stored as a JSONL file in the artifact store, listed,
 * renamed and deleted by name. An environment reads one with `data: { kind: "dataset", dataset: "name" }`; an SFT
 * run imitates one with `sft: { data: "dataset", dataset: "name" }`.
 */
import fs from "node:fs";
import path from "node:path";
import { and, desc, eq, inArray, sql } from "drizzle-orm";
import { builtInDatasets } from "@/lib/envs/datasets";
import { Rng } from "@/lib/model/rng";
import { looksLikeConversations, parseConversations, parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow } from "@/lib/sdk/environment";
import { type Database, datasets, experiments, experimentVersions, newId, runs } from "../db";

/** The largest upload accepted, in bytes of its text. */
export const MAX_DATASET_BYTES = 16 * 1024 * 1024;
const NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** A refusal the caller hears as it is: a bad upload or name (`BAD_REQUEST`), no such dataset (`NOT_FOUND`), or one in use (`CONFLICT`). */
export class DatasetError extends Error {
  override name = "DatasetError";
  constructor(
    message: string,
    readonly code: "BAD_REQUEST" | "NOT_FOUND" | "CONFLICT" = "BAD_REQUEST",
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
  await requireFreeName(db, input.projectId, name);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MAX_DATASET_BYTES)
    throw new DatasetError(`the dataset is ${(bytes / 2 ** 20).toFixed(1)} MiB; at most ${MAX_DATASET_BYTES / 2 ** 20} MiB is accepted`);
  const testShare = input.testShare ?? 0.2;
  if (!(testShare >= 0 && testShare < 1)) throw new DatasetError(`testShare must be at least 0 and below 1; got ${testShare}`);

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

/** Refuses a name a dataset of the project may not take: malformed, a built-in dataset's, or another dataset's. */
async function requireFreeName(db: Database, projectId: string, name: string): Promise<void> {
  if (!NAME.test(name)) throw new DatasetError(`name: use 1-64 lowercase letters, digits or '-', starting with a letter or digit; got ${JSON.stringify(name)}`);
  if ((builtInDatasets as readonly string[]).includes(name)) throw new DatasetError(`name: '${name}' is a built-in dataset; choose another name`);
  const [existing] = await db
    .select({ id: datasets.id })
    .from(datasets)
    .where(and(eq(datasets.projectId, projectId), eq(datasets.name, name)));
  if (existing) throw new DatasetError(`a dataset named '${name}' exists already in this project; choose another name`);
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

/** What names a dataset: experiments whose latest version does, and runs not yet ended (they read it when they start or resume). */
export type DatasetUsers = {
  experiments: { id: string; name: string }[];
  runs: { id: string; name: string; status: string }[];
};

/** Run states whose job will still look the dataset up by name: a queued or paused run reads it when it starts or resumes. */
const UNENDED = ["queued", "running", "paused"] as const;

/**
 * Whether a version's config or source names the dataset: its `sft.dataset`, or (a custom environment) the name as a
 * string literal in a source file, where `data: { kind: "dataset", dataset: "name" }` writes it. Reading the source
 * rather than running it errs on the side of keeping the dataset: a literal that only happens to equal the name counts.
 */
function namesDataset(config: unknown, files: Record<string, string> | null, name: string): boolean {
  const { sft, environment } = (config ?? {}) as { sft?: { dataset?: unknown }; environment?: unknown };
  if (sft?.dataset === name) return true;
  if (environment !== "custom") return false;
  const literal = new RegExp(`(["'\`])${name}\\1`); // a name is [a-z0-9-]: nothing to escape
  return Object.values(files ?? {}).some((source) => literal.test(source));
}

/** The experiments and unended runs of a project that name a dataset (see `namesDataset`). */
export async function datasetUsers(db: Database, projectId: string, name: string): Promise<DatasetUsers> {
  // Only rows whose files or config hold the name at all are read whole: sources may be large.
  const mentions = (files: typeof experimentVersions.files, config: typeof experimentVersions.config | typeof runs.config) =>
    sql`strpos(${files}::text || ${config}::text, ${name}) > 0`;
  const latest = await db
    .select({ id: experiments.id, name: experiments.name, config: experimentVersions.config, files: experimentVersions.files })
    .from(experiments)
    .innerJoin(experimentVersions, and(eq(experimentVersions.experimentId, experiments.id), eq(experimentVersions.version, experiments.latestVersion)))
    .where(and(eq(experiments.projectId, projectId), mentions(experimentVersions.files, experimentVersions.config)))
    .orderBy(experiments.name);
  const unended = await db
    .select({ id: runs.id, name: runs.name, status: runs.status, config: runs.config, files: experimentVersions.files })
    .from(runs)
    .innerJoin(experimentVersions, eq(experimentVersions.id, runs.experimentVersionId))
    .where(and(eq(runs.projectId, projectId), inArray(runs.status, [...UNENDED]), mentions(experimentVersions.files, runs.config)))
    .orderBy(desc(runs.createdAt));
  return {
    experiments: latest.filter((e) => namesDataset(e.config, e.files, name)).map(({ id, name }) => ({ id, name })),
    runs: unended.filter((r) => namesDataset(r.config, r.files, name)).map(({ id, name, status }) => ({ id, name, status })),
  };
}

/** "experiment 'quiz' (exp_1), experiment 'b' (exp_2) and 3 more": at most five named. */
function listed(items: string[]): string {
  const shown = items.slice(0, 5);
  const more = items.length - shown.length;
  if (more > 0) return `${shown.join(", ")} and ${more} more`;
  return shown.length > 1 ? `${shown.slice(0, -1).join(", ")} and ${shown.at(-1)}` : (shown[0] ?? "");
}

const runsWords = (users: DatasetUsers) => listed(users.runs.map((r) => `run '${r.name}' (${r.id}, ${r.status})`));

async function requireDataset(db: Database, id: string): Promise<DatasetSummary> {
  const [row] = await db.select().from(datasets).where(eq(datasets.id, id));
  if (!row) throw new DatasetError(`No dataset with id '${id}'`, "NOT_FOUND");
  return row;
}

/**
 * Renames a dataset. Refused for a name the project may not take, and while a run that has not ended reads it (its
 * job looks the dataset up by name when it starts or resumes). Experiments that name the old name are not changed:
 * they are returned, to be edited.
 */
export async function renameDataset(db: Database, id: string, name: string): Promise<{ dataset: DatasetSummary; stillNamedBy: DatasetUsers["experiments"] }> {
  return db.transaction(async (tx) => {
    const dataset = await requireDataset(tx, id);
    if (dataset.name === name) return { dataset, stillNamedBy: [] };
    await requireFreeName(tx, dataset.projectId, name);
    const users = await datasetUsers(tx, dataset.projectId, dataset.name);
    if (users.runs.length > 0) {
      throw new DatasetError(
        `dataset '${dataset.name}' is read by ${runsWords(users)}, which look${users.runs.length === 1 ? "s" : ""} it up by name when starting or resuming: cancel ${users.runs.length === 1 ? "it" : "them"} or let ${users.runs.length === 1 ? "it" : "them"} end, then rename the dataset`,
        "CONFLICT",
      );
    }
    const [renamed] = await tx.update(datasets).set({ name }).where(eq(datasets.id, id)).returning();
    return { dataset: renamed!, stillNamedBy: users.experiments };
  });
}

/**
 * Deletes a dataset and its file. Refused while an experiment's latest version names it or a run that has not ended
 * reads it, naming each and what to do.
 */
export async function deleteDataset(db: Database, id: string): Promise<{ id: string; name: string }> {
  const dataset = await db.transaction(async (tx) => {
    const dataset = await requireDataset(tx, id);
    const users = await datasetUsers(tx, dataset.projectId, dataset.name);
    if (users.experiments.length > 0 || users.runs.length > 0) {
      const who = [
        users.experiments.length > 0 &&
          `${listed(users.experiments.map((e) => `experiment '${e.name}' (${e.id})`))} name${users.experiments.length === 1 ? "s" : ""} it in the latest version`,
        users.runs.length > 0 && `${runsWords(users)} read${users.runs.length === 1 ? "s" : ""} it`,
      ].filter(Boolean);
      const todo = [
        users.experiments.length > 0 && "save each experiment naming another dataset",
        users.runs.length > 0 && "cancel each run or let it end",
      ].filter(Boolean);
      throw new DatasetError(
        `dataset '${dataset.name}' is in use, so it was not deleted: ${who.join("; ")}. ${capitalized(todo.join(" and "))}, then delete it.`,
        "CONFLICT",
      );
    }
    await tx.delete(datasets).where(eq(datasets.id, id));
    return dataset;
  });
  // After the commit: a file removed before a rolled-back delete would leave a dataset without its rows.
  fs.rmSync(dataset.path, { force: true });
  return { id: dataset.id, name: dataset.name };
}

const capitalized = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);
