/**
 * The runs table's whole state, read from and written to the page's URL, so a reload or a shared link shows the same
 * table: `?project=…&c=status&c=metric:max:reward/mean&sort=metric:max:reward/mean&order=desc&tag=sweep&where=seed>1
 * &group=algorithm.learningRate&page=2`. Defaults are left out of the URL.
 */
import { runStates, type RunState } from "@/lib/lifecycle";
import { type Condition, conditionText, DEFAULT_COLUMNS, parseColumnKey, parseCondition, parseConfigPath } from "@/lib/runs-table";

export type TableState = {
  project: string | null;
  /** The columns after the name, in order. */
  columns: string[];
  sort: { column: string; order: "asc" | "desc" } | null;
  status: RunState[];
  tags: string[];
  text: string;
  where: Condition[];
  /** A config field's dotted path. */
  group: string | null;
  page: number;
  pageSize: number;
  archived: boolean;
  derived: boolean;
};

export const PAGE_SIZES = [50, 100, 250, 1000] as const;
const DEFAULT_PAGE_SIZE = 100;

/** What a page's search parameters hold, as Next.js gives them to a page or as URLSearchParams. */
export type SearchParams = Record<string, string | string[] | undefined> | URLSearchParams;

function all(params: SearchParams, name: string): string[] {
  if (params instanceof URLSearchParams) return params.getAll(name);
  const value = params[name];
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}
const one = (params: SearchParams, name: string): string | null => all(params, name)[0] ?? null;

/** The state a URL holds, and a sentence for each parameter it had to leave out. */
export function parseTableState(params: SearchParams): { state: TableState; problems: string[] } {
  const problems: string[] = [];
  const keep = <T>(what: string, read: () => T): T | null => {
    try {
      return read();
    } catch (error) {
      problems.push(`${what}: ${(error as Error).message}`);
      return null;
    }
  };
  const given = all(params, "c").flatMap((c) => c.split(","));
  const columns =
    given.length > 0 ? [...new Set(given.filter((key) => key !== "name" && keep("column", () => parseColumnKey(key)) !== null))] : [...DEFAULT_COLUMNS];
  const sortColumn = one(params, "sort");
  const sort =
    sortColumn && keep("sort", () => parseColumnKey(sortColumn))
      ? { column: sortColumn, order: one(params, "order") === "asc" ? ("asc" as const) : ("desc" as const) }
      : null;
  const status = (one(params, "status") ?? "").split(",").filter((s): s is RunState => (runStates as readonly string[]).includes(s));
  const where = all(params, "where")
    .map((text) => keep("filter", () => parseCondition(text)))
    .filter((c): c is Condition => c !== null);
  const groupText = one(params, "group");
  const group = groupText && keep("group", () => parseConfigPath(groupText)) ? groupText : null;
  const page = Math.max(1, Math.floor(Number(one(params, "page")) || 1));
  const size = Number(one(params, "size"));
  return {
    state: {
      project: one(params, "project"),
      columns,
      sort,
      status,
      tags: [...new Set(all(params, "tag").filter(Boolean))],
      text: (one(params, "q") ?? "").trim(),
      where,
      group,
      page,
      pageSize: (PAGE_SIZES as readonly number[]).includes(size) ? size : DEFAULT_PAGE_SIZE,
      archived: one(params, "archived") === "1",
      derived: one(params, "derived") === "1",
    },
    problems,
  };
}

/** The query string of a state (without `?`); what equals the default is left out. */
export function tableQuery(state: TableState): string {
  const entries: [string, string][] = [];
  if (state.project) entries.push(["project", state.project]);
  if (state.columns.join(",") !== DEFAULT_COLUMNS.join(",")) {
    // An empty list is written as the name alone, so that it is not read back as the default.
    for (const column of state.columns.length ? state.columns : ["name"]) entries.push(["c", column]);
  }
  if (state.sort) entries.push(["sort", state.sort.column], ["order", state.sort.order]);
  if (state.status.length) entries.push(["status", state.status.join(",")]);
  for (const tag of state.tags) entries.push(["tag", tag]);
  if (state.text) entries.push(["q", state.text]);
  for (const condition of state.where) entries.push(["where", conditionText(condition)]);
  if (state.group) entries.push(["group", state.group]);
  if (state.page > 1) entries.push(["page", String(state.page)]);
  if (state.pageSize !== DEFAULT_PAGE_SIZE) entries.push(["size", String(state.pageSize)]);
  if (state.archived) entries.push(["archived", "1"]);
  if (state.derived) entries.push(["derived", "1"]);
  // Colons, slashes and commas stay readable: column keys are full of them.
  return entries.map(([k, v]) => `${k}=${encodeURIComponent(v).replace(/%3A/g, ":").replace(/%2F/g, "/").replace(/%2C/g, ",")}`).join("&");
}

/** The runs.table input of a state, for its project. */
export function tableInput(state: TableState, projectId: string) {
  return {
    projectId,
    columns: state.columns,
    ...(state.sort ? { sort: state.sort } : {}),
    ...(state.status.length ? { status: state.status } : {}),
    ...(state.tags.length ? { tags: state.tags } : {}),
    ...(state.text ? { text: state.text } : {}),
    ...(state.where.length ? { where: state.where } : {}),
    ...(state.group ? { groupBy: state.group } : {}),
    includeArchived: state.archived,
    includeDerived: state.derived,
    limit: state.pageSize,
    offset: (state.page - 1) * state.pageSize,
  };
}
