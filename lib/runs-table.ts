/**
 * The runs table's columns, named by one key each: the server computes them (server/runs/table.ts), the page keeps
 * them in its URL and labels its headers with them. A key is
 * - a built-in column: `status`, `steps`, `duration`, `tokens`, …;
 * - a metric's summary: `metric:<summary>:<name>`, the summary `last` (the value at the series' latest step), `max`,
 *   `min`, or `at<step>` (the value at that step): `metric:max:reward/mean`, `metric:at100:eval/score`;
 * - a config field by its dotted path: `config:algorithm.learningRate`.
 * A condition (a filter on a column's value) is `<key><op><value>`: `metric:last:reward/mean>0.5`,
 * `config:algorithm.name=grpo`.
 */

/** Every built-in column, in the table's default order; `name` is always shown first. */
export const BUILT_IN_COLUMNS = [
  "name",
  "experiment",
  "status",
  "steps",
  "duration",
  "tokens",
  "base",
  "algorithm",
  "seed",
  "tags",
  "notes",
  "created",
] as const;
export type BuiltInColumn = (typeof BUILT_IN_COLUMNS)[number];

/** The columns a table shows until the user picks others (every row also carries its name, id and status). */
export const DEFAULT_COLUMNS: readonly string[] = ["status", "steps", "duration", "base", "algorithm", "seed", "tags", "created"];

/** What a column's values are: how they are compared, averaged over a group and shown. */
export type ColumnType = "number" | "text" | "date" | "tags" | "json";

const BUILT_IN_TYPES: Record<BuiltInColumn, ColumnType> = {
  name: "text",
  experiment: "text",
  status: "text",
  steps: "number",
  duration: "number",
  tokens: "number",
  base: "text",
  algorithm: "text",
  seed: "number",
  tags: "tags",
  notes: "text",
  created: "date",
};

/** The metric whose points are summed in the `tokens` column: the tokens each step trained on. */
export const TOKENS_METRIC = "train/tokens";

export type MetricSummary = "last" | "max" | "min" | "at";

export type ColumnSpec =
  | { kind: "builtin"; id: BuiltInColumn }
  | { kind: "metric"; name: string; summary: Exclude<MetricSummary, "at"> }
  | { kind: "metric"; name: string; summary: "at"; step: number }
  | { kind: "config"; path: string[] };

/** A config path's segments: letters, digits, `_` and `-`, at most 8 deep. */
const PATH_SEGMENT = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_PATH_DEPTH = 8;
/** Metric names as the table reads them: no spaces, commas or comparison signs (a condition ends its key at one). */
const METRIC_NAME = /^[^\s,<>=!]{1,200}$/;

export class ColumnKeyError extends Error {
  override name = "ColumnKeyError";
}

/** A config field's path, checked: `algorithm.learningRate` → ["algorithm", "learningRate"]. */
export function parseConfigPath(dotted: string): string[] {
  const path = dotted.split(".");
  if (path.length > MAX_PATH_DEPTH || !path.every((segment) => PATH_SEGMENT.test(segment))) {
    throw new ColumnKeyError(
      `'${dotted}' is not a config path: give dotted field names (letters, digits, '_' and '-'), at most ${MAX_PATH_DEPTH} deep, e.g. algorithm.learningRate`,
    );
  }
  return path;
}

/** A column key's meaning, or a ColumnKeyError saying what was wrong and what is accepted. */
export function parseColumnKey(key: string): ColumnSpec {
  if ((BUILT_IN_COLUMNS as readonly string[]).includes(key)) return { kind: "builtin", id: key as BuiltInColumn };
  if (key.startsWith("config:")) return { kind: "config", path: parseConfigPath(key.slice("config:".length)) };
  if (key.startsWith("metric:")) {
    const rest = key.slice("metric:".length);
    const colon = rest.indexOf(":");
    const summary = colon < 0 ? "" : rest.slice(0, colon);
    const name = colon < 0 ? "" : rest.slice(colon + 1);
    if (!METRIC_NAME.test(name)) {
      throw new ColumnKeyError(
        `'${key}': a metric column is metric:<summary>:<name>, the name without spaces, commas or <, >, =, ! (e.g. metric:last:reward/mean)`,
      );
    }
    if (summary === "last" || summary === "max" || summary === "min") return { kind: "metric", name, summary };
    const at = /^at(\d{1,9})$/.exec(summary);
    if (at) return { kind: "metric", name, summary: "at", step: Number(at[1]) };
    throw new ColumnKeyError(`'${key}': a metric's summary is last, max, min or at<step> (e.g. metric:at100:${name}), not '${summary}'`);
  }
  throw new ColumnKeyError(
    `'${key}' is not a column: use one of ${BUILT_IN_COLUMNS.join(", ")}, metric:<last|max|min|at<step>>:<metric name>, or config:<dotted.path>`,
  );
}

/** The key of a column (the inverse of `parseColumnKey`). */
export function columnKey(spec: ColumnSpec): string {
  if (spec.kind === "builtin") return spec.id;
  if (spec.kind === "config") return `config:${spec.path.join(".")}`;
  return `metric:${spec.summary === "at" ? `at${spec.step}` : spec.summary}:${spec.name}`;
}

export function columnType(spec: ColumnSpec): ColumnType {
  if (spec.kind === "builtin") return BUILT_IN_TYPES[spec.id];
  return spec.kind === "metric" ? "number" : "json";
}

/** A header's words: `reward/mean (max)`, `eval/score @ 100`, `algorithm.learningRate`. */
export function columnLabel(spec: ColumnSpec): string {
  if (spec.kind === "builtin") return spec.id;
  if (spec.kind === "config") return spec.path.join(".");
  return spec.summary === "at" ? `${spec.name} @ ${spec.step}` : `${spec.name} (${spec.summary})`;
}

export const CONDITION_OPS = [">=", "<=", "!=", ">", "<", "="] as const;
export type ConditionOp = (typeof CONDITION_OPS)[number];
export type Condition = { column: string; op: ConditionOp; value: string };

/** `metric:last:reward/mean>0.5` → { column, op: ">", value: "0.5" }: the key ends at the first comparison sign. */
export function parseCondition(text: string): Condition {
  const match = /^([^<>=!]+)(>=|<=|!=|>|<|=)(.*)$/.exec(text.trim());
  if (!match) {
    throw new ColumnKeyError(
      `'${text}' is not a condition: write <column><op><value> with op one of ${CONDITION_OPS.join(" ")}, e.g. metric:last:reward/mean>0.5`,
    );
  }
  const [, column, op, value] = match;
  parseColumnKey(column!.trim());
  if (value!.trim() === "") throw new ColumnKeyError(`'${text}': the condition has no value after '${op}'`);
  return { column: column!.trim(), op: op as ConditionOp, value: value!.trim() };
}

export function conditionText(condition: Condition): string {
  return `${condition.column}${condition.op}${condition.value}`;
}

/** A tag: a letter or digit, then up to 39 letters, digits and `. _ : / + -`. */
const TAG_RULE = /^[\p{L}\p{N}][\p{L}\p{N}._:/+-]{0,39}$/u;
export const MAX_TAGS = 20;

/** Why `tag` cannot be a tag, or null when it can. */
export function tagProblem(tag: string): string | null {
  return TAG_RULE.test(tag) ? null : `'${tag}' cannot be a tag: use 1–40 letters, digits and . _ : / + -, starting with a letter or digit`;
}
