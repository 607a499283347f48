/**
 * The CLI's side of the runs table: `runs ls --sort … --tag …` (runs.table), and `runs tag`, `runs rename`,
 * `runs archive`, `runs delete`.
 */
import type { RunState } from "../../lib/lifecycle";
import { columnLabel, parseColumnKey } from "../../lib/runs-table";
import { CliError, clientFor, EXIT, type GlobalOptions, printJson, printTable } from "./context";

export type TableListOptions = GlobalOptions & { project?: string; sort?: string; order?: string; tag?: string[]; status?: RunState[]; limit?: string };

/** `runs ls` with a sort or tags: one project's runs through the runs table, the sort column printed beside them. */
export async function runsTableList(options: TableListOptions) {
  const client = clientFor(options);
  const limit = Number(options.limit ?? 20);
  if (!Number.isInteger(limit) || limit < 1 || limit > 1000)
    throw new CliError(`--limit must be a whole number from 1 to 1000; got '${options.limit}'`, EXIT.usage);
  if (options.order !== undefined && options.order !== "asc" && options.order !== "desc") {
    throw new CliError(`--order is asc or desc; got '${options.order}'`, EXIT.usage);
  }
  let sortLabel: string | null = null;
  if (options.sort) {
    try {
      sortLabel = columnLabel(parseColumnKey(options.sort));
    } catch (error) {
      throw new CliError(`--sort: ${(error as Error).message}`, EXIT.usage);
    }
  }
  const extra = options.sort && !["name", "status", "steps", "created", "tags"].includes(options.sort) ? [options.sort] : [];
  const result = await client.runs.table({
    projectId: options.project,
    columns: ["status", "steps", "tags", "created", ...extra],
    ...(options.sort ? { sort: { column: options.sort, order: options.order === "asc" ? ("asc" as const) : ("desc" as const) } } : {}),
    ...(options.tag?.length ? { tags: options.tag } : {}),
    ...(options.status?.length ? { status: options.status } : {}),
    limit,
  });
  const printed = (value: unknown) =>
    value === null || value === undefined ? null : typeof value === "object" ? JSON.stringify(value) : (value as string | number);
  printTable(
    result.rows.map((r) => ({
      id: r.id,
      name: r.name,
      status: r.status,
      step: `${r.step}/${r.totalSteps}`,
      ...(sortLabel && extra.length ? { [sortLabel]: printed(r.values[extra[0]!]) } : {}),
      tags: r.tags.join(",") || null,
      created: r.createdAt.toISOString().slice(0, 16).replace("T", " "),
    })),
    ["id", "name", "status", "step", ...(sortLabel && extra.length ? [sortLabel] : []), "tags", "created"],
    options.json,
  );
}

/** `runs tag <run> [tags...] [--remove tags...]`: prints the run's tags after the change. */
export async function runsTag(runId: string, tags: string[], options: GlobalOptions & { remove?: string[] }) {
  if (tags.length === 0 && !options.remove?.length) throw new CliError("name tags to add, or --remove tags to take off", EXIT.usage);
  const { tags: now } = await clientFor(options).runs.tag(runId, { add: tags, remove: options.remove ?? [] });
  if (options.json) printJson({ id: runId, tags: now });
  else console.log(now.length ? `${runId}: ${now.join(", ")}` : `${runId}: no tags`);
}

export async function runsRename(runId: string, name: string, options: GlobalOptions) {
  const renamed = await clientFor(options).runs.rename(runId, name);
  if (options.json) printJson({ id: runId, name: renamed.name });
  else console.log(`${runId} is now named '${renamed.name}'.`);
}

export async function runsArchive(runId: string, options: GlobalOptions & { undo?: boolean }) {
  await clientFor(options).runs.archive(runId, !options.undo);
  if (options.json) printJson({ id: runId, archived: !options.undo });
  else console.log(options.undo ? `${runId} is back in the runs table.` : `Archived ${runId}: the runs table shows it only with archived runs.`);
}

/** `runs delete <run> --confirm <its name>`: the name confirms it, as the workbench's dialog asks; its evaluations and exports go with it. */
export async function runsDelete(runId: string, options: GlobalOptions & { confirm?: string }) {
  const client = clientFor(options);
  if (options.confirm === undefined) {
    const { name } = await client.runs.get(runId);
    throw new CliError(`to delete run '${name}' and all it recorded, confirm with its name: --confirm '${name.replace(/'/g, "'\\''")}'`, EXIT.usage);
  }
  const deleted = await client.runs.delete(runId, options.confirm);
  if (options.json) printJson(deleted);
  else {
    const withIt = deleted.withIt.map((d) => `${d.name} (${d.id})`);
    console.log(`Deleted ${deleted.name} (${deleted.id})${withIt.length ? `, and its evaluations and exports: ${withIt.join(", ")}` : ""}.`);
  }
}
