/**
 * The runs table: one project's runs with any built-in, metric-summary or config column (lib/runs-table.ts), sorted,
 * filtered and grouped in SQL. One statement whatever the number of runs: the page's rows, with the total and their
 * groups' counts and means. Each metric summary is a probe per run of one of metric_points' indexes: (run, name, step) for a value at
 * a step or the latest, (run, name, value) for the highest or lowest.
 */
import { TRPCError } from "@trpc/server";
import { type SQL, sql } from "drizzle-orm";
import type { RunState } from "@/lib/lifecycle";
import {
  type ColumnSpec,
  type ColumnType,
  type Condition,
  ColumnKeyError,
  columnLabel,
  columnType,
  parseColumnKey,
  parseConfigPath,
  TOKENS_METRIC,
} from "@/lib/runs-table";
import { type Database, type RunWarning, experiments, jobs, metricPoints, runs } from "../db";

/** Job kinds whose runs belong to another run (an evaluation or export of its checkpoint) or serve one. */
export const DERIVED_JOB_KINDS = ["eval", "export", "inference"] as const;

export type TableQuery = {
  projectId: string;
  /** The columns whose values each row carries, by key. */
  columns: string[];
  sort?: { column: string; order: "asc" | "desc" };
  status?: RunState[];
  /** Runs carrying every one of these tags. */
  tags?: string[];
  /** Part of the run's name, id, notes or its experiment's name. */
  text?: string;
  where?: Condition[];
  /** A config path (`algorithm.learningRate`): rows come group by group, and each group's count and means. */
  groupBy?: string;
  includeDerived?: boolean;
  includeArchived?: boolean;
  limit: number;
  offset: number;
};

export type TableColumn = { key: string; label: string; type: ColumnType };

export type TableRow = {
  id: string;
  name: string;
  status: RunState;
  reason: string | null;
  warnings: RunWarning[];
  experimentId: string;
  experimentName: string;
  /** The kind of its latest job (rl, sft, eval, …); null for a run without a job. */
  kind: string | null;
  step: number;
  totalSteps: number;
  seed: number;
  tags: string[];
  notes: string;
  archived: boolean;
  createdAt: Date;
  /** The group's value (the config field's JSON value; null where the field is absent) when the table is grouped. */
  group?: unknown;
  /** Each requested column's value, by key: a number, text, a date, the tags, or a config field's JSON value. */
  values: Record<string, unknown>;
};

/** A group of rows: its value, how many rows it holds (on every page) and the means of its numeric columns. */
export type TableGroup = { value: unknown; count: number; means: Record<string, number | null> };

export type TableResult = {
  columns: TableColumn[];
  rows: TableRow[];
  /** How many runs pass the filters, on every page. */
  total: number;
  /** When grouped: the groups of this page's rows, in the page's order. */
  groups: TableGroup[] | null;
  /** When grouped: how many groups there are on every page. */
  groupCount: number | null;
};

const refuse = (message: string) => new TRPCError({ code: "BAD_REQUEST", message });

function specOf(key: string, field: string): ColumnSpec {
  try {
    return parseColumnKey(key);
  } catch (error) {
    if (error instanceof ColumnKeyError) throw refuse(`${field}: ${error.message}`);
    throw error;
  }
}

/** Values as a list of parameters: `$1, $2, …`. */
const listOf = (values: readonly string[]) =>
  sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  );

/** A jsonb value as a number where it is one (null otherwise): CASE keeps the cast from seeing a string. */
const numberOf = (json: SQL) => sql`(case when jsonb_typeof(${json}) = 'number' then (${json} #>> '{}')::float8 end)`;

/** The SQL of a column's value, over `runs` joined with `experiments`. */
function expressionOf(spec: ColumnSpec): SQL {
  if (spec.kind === "config") return sql`(${runs.config} #> ${`{${spec.path.join(",")}}`}::text[])`;
  if (spec.kind === "metric") {
    const ofSeries = sql`mp.run_id = ${runs.id} and mp.name = ${spec.name}`;
    switch (spec.summary) {
      case "last":
        return sql`(select mp.value from ${metricPoints} mp where ${ofSeries} order by mp.step desc limit 1)`;
      case "max":
        return sql`(select mp.value from ${metricPoints} mp where ${ofSeries} order by mp.value desc limit 1)`;
      case "min":
        return sql`(select mp.value from ${metricPoints} mp where ${ofSeries} order by mp.value asc limit 1)`;
      case "at":
        return sql`(select mp.value from ${metricPoints} mp where ${ofSeries} and mp.step = ${spec.step})`;
    }
  }
  switch (spec.id) {
    case "name":
      return sql`${runs.name}`;
    case "experiment":
      return sql`${experiments.name}`;
    case "status":
      return sql`${runs.status}::text`;
    case "steps":
      return sql`${runs.step}`;
    case "duration":
      // A run still going counts up to now; one that never started has none.
      return sql`extract(epoch from (coalesce(${runs.finishedAt}, case when ${runs.status} = 'running' then now() end) - ${runs.startedAt}))::float8`;
    case "tokens":
      return sql`(select sum(mp.value) from ${metricPoints} mp where mp.run_id = ${runs.id} and mp.name = ${TOKENS_METRIC})`;
    case "base":
      return sql`(${runs.config} -> 'agent' ->> 'base')`;
    case "algorithm":
      return sql`(${runs.config} -> 'algorithm' ->> 'name')`;
    case "seed":
      return sql`${runs.seed}`;
    case "tags":
      return sql`${runs.tags}`;
    case "notes":
      return sql`${runs.notes}`;
    case "created":
      // Milliseconds since the epoch: sorted and compared as the time, read the same from either driver.
      return sql`(extract(epoch from ${runs.createdAt}) * 1000)::float8`;
  }
}

/** What a column sorts by: its value, tags as one text, a config field as jsonb (numbers by number, text by text). */
function sortableOf(alias: SQL, spec: ColumnSpec): SQL {
  return columnType(spec) === "tags" ? sql`array_to_string(${alias}, ' ')` : alias;
}

const SQL_OPS: Record<Condition["op"], string> = { ">": ">", ">=": ">=", "<": "<", "<=": "<=", "=": "=", "!=": "<>" };

/** A condition on a computed column (`alias`), or BAD_REQUEST saying what its column accepts. */
function conditionSql(alias: SQL, spec: ColumnSpec, condition: Condition, index: number): SQL {
  const where = `where[${index}] (${condition.column}${condition.op}${condition.value})`;
  const op = sql.raw(SQL_OPS[condition.op]);
  const asNumber = Number(condition.value);
  const numeric = condition.value.trim() !== "" && Number.isFinite(asNumber);
  const equality = condition.op === "=" || condition.op === "!=";
  switch (columnType(spec)) {
    case "number":
      if (!numeric) throw refuse(`${where}: ${columnLabel(spec)} holds numbers; compare it with a number, not '${condition.value}'`);
      return sql`${alias} ${op} ${asNumber}`;
    case "date": {
      const date = new Date(condition.value);
      if (Number.isNaN(date.getTime()))
        throw refuse(`${where}: ${columnLabel(spec)} holds dates; compare it with a date such as 2026-12-07, not '${condition.value}'`);
      return sql`${alias} ${op} ${date.getTime()}`;
    }
    case "text":
      if (!equality) throw refuse(`${where}: ${columnLabel(spec)} holds text; compare it with = or !=, not ${condition.op}`);
      return condition.op === "=" ? sql`${alias} = ${condition.value}` : sql`${alias} is distinct from ${condition.value}`;
    case "tags":
      throw refuse(`${where}: filter by tags with the tag filter (tags), not a condition`);
    case "json": {
      if (!equality) {
        if (!numeric) throw refuse(`${where}: ${condition.op} compares numbers; '${condition.value}' is not one`);
        return sql`${numberOf(alias)} ${op} ${asNumber}`;
      }
      // A number equals the same number however it is written (0.001 = 1e-3); anything else compares as text.
      const equal = numeric ? sql`${numberOf(alias)} = ${asNumber}` : sql`(${alias} #>> '{}') = ${condition.value}`;
      return condition.op === "=" ? sql`coalesce(${equal}, false)` : sql`not coalesce(${equal}, false)`;
    }
  }
}

/** One project's runs as the table shows them: a page of rows, the total, and the groups when grouped. */
export async function runsTable(db: Database, query: TableQuery): Promise<TableResult> {
  // Every column computed once: the requested ones, then any that only the sort or a condition uses.
  const keys = [...new Set(query.columns)];
  const shown = keys.map((key, i) => ({ key, spec: specOf(key, `columns[${i}]`) }));
  const computed = [...shown];
  const aliasOf = (key: string, field: string) => {
    let index = computed.findIndex((c) => c.key === key);
    if (index < 0) index = computed.push({ key, spec: specOf(key, field) }) - 1;
    return { alias: sql.raw(`c${index}`), spec: computed[index]!.spec };
  };
  const conditions = (query.where ?? []).map((condition, i) => {
    const { alias, spec } = aliasOf(condition.column, `where[${i}]`);
    return conditionSql(alias, spec, condition, i);
  });
  const sortColumn = query.sort ? aliasOf(query.sort.column, "sort.column") : aliasOf("created", "sort.column");
  const order = sql.raw(query.sort?.order === "asc" ? "asc" : "desc");
  const sortKey = sortableOf(sortColumn.alias, sortColumn.spec);
  let groupPath: string[] | null = null;
  if (query.groupBy !== undefined) {
    try {
      groupPath = parseConfigPath(query.groupBy.replace(/^config:/, ""));
    } catch (error) {
      throw refuse(`groupBy: ${(error as Error).message}`);
    }
  }

  const filters: SQL[] = [sql`${runs.projectId} = ${query.projectId}`];
  if (!query.includeArchived) filters.push(sql`${runs.archivedAt} is null`);
  if (!query.includeDerived) filters.push(sql`not exists (select 1 from ${jobs} j where j.run_id = ${runs.id} and j.kind in (${listOf(DERIVED_JOB_KINDS)}))`);
  if (query.status?.length) filters.push(sql`${runs.status}::text in (${listOf(query.status)})`);
  if (query.tags?.length) filters.push(sql`${runs.tags} @> array[${listOf(query.tags)}]::text[]`);
  if (query.text) {
    const pattern = `%${query.text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    filters.push(sql`(${runs.name} ilike ${pattern} or ${experiments.name} ilike ${pattern} or ${runs.id} ilike ${pattern} or ${runs.notes} ilike ${pattern})`);
  }

  const base = sql`
    select ${runs.id} as id, ${runs.name} as name, ${runs.status}::text as status, ${runs.reason} as reason, ${runs.warnings} as warnings,
           ${runs.experimentId} as experiment_id, ${experiments.name} as experiment_name,
           (select j.kind::text from ${jobs} j where j.run_id = ${runs.id} order by j.submitted_at desc limit 1) as kind,
           ${runs.step} as step, ${runs.totalSteps} as total_steps, ${runs.seed} as seed, ${runs.tags} as tags, ${runs.notes} as notes,
           ${runs.archivedAt} is not null as archived, (extract(epoch from ${runs.createdAt}) * 1000)::float8 as created_ms,
           ${groupPath ? sql`(${runs.config} #> ${`{${groupPath.join(",")}}`}::text[])` : sql`null::jsonb`} as g
           ${sql.join(
             computed.map((c, i) => sql`, ${expressionOf(c.spec)} as ${sql.raw(`c${i}`)}`),
             sql``,
           )}
    from ${runs} join ${experiments} on ${experiments.id} = ${runs.experimentId}
    where ${sql.join(filters, sql` and `)}`;
  const filtered = sql`with base as (${base}), filtered as (select * from base ${conditions.length ? sql`where ${sql.join(conditions, sql` and `)}` : sql``})`;
  // Numeric columns get a mean per group (not the seed, a label), json ones (config fields) where their values are numbers.
  const numeric = shown.map((c, i) => ({ ...c, i })).filter((c) => c.key !== "seed" && ["number", "json"].includes(columnType(c.spec)));
  // One statement: the page's rows with the total and their groups' counts and means as window aggregates, which
  // span every filtered row, not only the page's. A group's place is its first row's under the sort.
  const groupRank = sql`first_value(${sortKey}) over (partition by g order by ${sortKey} ${order} nulls last)`;
  const page = (limit: number, offset: number) => sql`${filtered}
    select filtered.*, count(*) over ()::int as total
      ${
        groupPath
          ? sql`, count(*) over (partition by g)::int as group_count, (select count(distinct g) from filtered)::int as group_total
              ${sql.join(
                numeric.map((c) => {
                  const alias = sql.raw(`c${c.i}`);
                  return sql`, avg(${columnType(c.spec) === "json" ? numberOf(alias) : alias}) over (partition by g)::float8 as ${sql.raw(`m${c.i}`)}`;
                }),
                sql``,
              )}`
          : sql``
      }
    from filtered
    order by ${groupPath ? sql`${groupRank} ${order} nulls last, g,` : sql``} ${sortKey} ${order} nulls last, created_ms desc, id
    limit ${limit} offset ${offset}`;
  type Raw = Record<string, unknown>;
  const rowsOf = (result: unknown) => (result as { rows: Raw[] }).rows;
  const rawRows = rowsOf(await db.execute(page(query.limit, query.offset)));
  // A page past the end holds no row to carry the totals: the first page's first row has them.
  const totals = rawRows[0] ?? (query.offset > 0 ? rowsOf(await db.execute(page(1, 0)))[0] : undefined);

  const rows: TableRow[] = rawRows.map((r) => ({
    id: r.id as string,
    name: r.name as string,
    status: r.status as RunState,
    reason: (r.reason as string | null) ?? null,
    warnings: (r.warnings as RunWarning[]) ?? [],
    experimentId: r.experiment_id as string,
    experimentName: r.experiment_name as string,
    kind: (r.kind as string | null) ?? null,
    step: Number(r.step),
    totalSteps: Number(r.total_steps),
    seed: Number(r.seed),
    tags: (r.tags as string[]) ?? [],
    notes: r.notes as string,
    archived: Boolean(r.archived),
    createdAt: new Date(Number(r.created_ms)),
    ...(groupPath ? { group: r.g ?? null } : {}),
    values: Object.fromEntries(shown.map((c, i) => [c.key, clientValue(c.spec, r[`c${i}`])])),
  }));
  // The groups the page shows, in its order, each once.
  const groups = new Map<string, TableGroup>();
  if (groupPath) {
    for (const r of rawRows) {
      const key = JSON.stringify(r.g ?? null);
      if (groups.has(key)) continue;
      const mean = (c: (typeof numeric)[number]) => (r[`m${c.i}`] === null || r[`m${c.i}`] === undefined ? null : Number(r[`m${c.i}`]));
      groups.set(key, { value: r.g ?? null, count: Number(r.group_count), means: Object.fromEntries(numeric.map((c) => [c.key, mean(c)])) });
    }
  }
  return {
    columns: shown.map((c) => ({ key: c.key, label: columnLabel(c.spec), type: columnType(c.spec) })),
    rows,
    total: Number(totals?.total ?? 0),
    groups: groupPath ? [...groups.values()] : null,
    groupCount: groupPath ? Number(totals?.group_total ?? 0) : null,
  };
}

/** A computed value as the client gets it: numbers as numbers (a driver may give text), dates as dates. */
function clientValue(spec: ColumnSpec, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  switch (columnType(spec)) {
    case "number":
      return Number(value);
    case "date":
      return new Date(Number(value));
    default:
      return value;
  }
}

/** What the table's pickers offer: the metric names, config fields and tags that this project's runs have. */
export async function tableChoices(db: Database, projectId: string): Promise<{ metrics: string[]; configPaths: string[]; tags: string[] }> {
  // Each recent run's metric names, by skipping through metric_points' (run, name, step) index: one probe per name.
  const names = await db.execute(sql`
    with recursive recent as (
      select ${runs.id} as id from ${runs} where ${runs.projectId} = ${projectId} order by ${runs.createdAt} desc limit ${CHOICE_RUNS}
    ), names(run_id, name) as (
      select recent.id, (select mp.name from ${metricPoints} mp where mp.run_id = recent.id order by mp.name limit 1) from recent
      union all
      select names.run_id, (select mp.name from ${metricPoints} mp where mp.run_id = names.run_id and mp.name > names.name order by mp.name limit 1)
      from names where names.name is not null
    )
    select distinct name from names where name is not null order by name`);
  const configs = await db.execute(
    sql`select ${runs.config} as config from ${runs} where ${runs.projectId} = ${projectId} order by ${runs.createdAt} desc limit ${CHOICE_RUNS}`,
  );
  const tags = await db.execute(sql`select distinct unnest(${runs.tags}) as tag from ${runs} where ${runs.projectId} = ${projectId} order by tag`);
  const paths = new Set<string>();
  for (const row of (configs as unknown as { rows: { config: unknown }[] }).rows) leafPaths(row.config, [], paths);
  return {
    metrics: (names as unknown as { rows: { name: string }[] }).rows.map((r) => r.name),
    configPaths: [...paths].sort(),
    tags: (tags as unknown as { rows: { tag: string }[] }).rows.map((r) => r.tag),
  };
}

/** How many of a project's latest runs the pickers look at. */
const CHOICE_RUNS = 300;

/** The dotted paths of a config's leaves (numbers, text, booleans), which a column or a group can name. */
function leafPaths(value: unknown, path: string[], into: Set<string>) {
  if (value === null || Array.isArray(value)) return;
  if (typeof value === "object") {
    if (path.length >= 8) return;
    for (const [key, child] of Object.entries(value)) if (/^[A-Za-z0-9_-]{1,64}$/.test(key)) leafPaths(child, [...path, key], into);
    return;
  }
  into.add(path.join("."));
}
