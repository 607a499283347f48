import Link from "next/link";
import { formatValue } from "@/components/charts";
import { RunStatus } from "@/components/ui/status-badge";
import { formatDuration, RelativeTime } from "@/components/ui/time";
import type { TableColumn, TableRow } from "@/server/runs";

/** A config field's or a group's JSON value as text: numbers to four significant digits, "—" where there is none. */
export function formatJson(value: unknown): string {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") return formatValue(value);
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/** Whether a column's cells line up on the right (numbers). */
export const alignsRight = (column: TableColumn) => column.type === "number" || column.type === "json";

/** One cell of a row: the column's value as its type reads best. */
export function ValueCell({ row, column }: { row: TableRow; column: TableColumn }) {
  const value = row.values[column.key];
  // Padding and wrapping come from the table (`[&_td]:…`): a page of 1,000 rows is smaller without them on every cell.
  return <td className={alignsRight(column) ? "text-right tabular-nums" : undefined}>{cellContent(row, column, value)}</td>;
}

function cellContent(row: TableRow, column: TableColumn, value: unknown) {
  switch (column.key) {
    case "status":
      return <RunStatus status={row.status} warnings={row.warnings} />;
    case "steps":
      return <span className="text-slate-600">{row.totalSteps > 0 ? `${row.step} / ${row.totalSteps}` : row.step > 0 ? `${row.step}` : "—"}</span>;
    case "duration":
      return <span className="text-slate-600">{typeof value === "number" ? formatDuration(value) : "—"}</span>;
    case "experiment":
      return (
        <Link className="text-brand-700 hover:underline" href={`/experiments/${row.experimentId}`} prefetch={false}>
          {row.experimentName}
        </Link>
      );
    case "created":
      return value instanceof Date ? (
        <span className="text-slate-500">
          <RelativeTime date={value} />
        </span>
      ) : (
        "—"
      );
    case "tags":
      return row.tags.length === 0 ? null : (
        <span className="inline-flex flex-wrap gap-1">
          {row.tags.map((tag) => (
            <span key={tag} className="rounded-full bg-brand-50 px-2 py-0.5 text-xs text-brand-700">
              {tag}
            </span>
          ))}
        </span>
      );
    case "notes":
      return row.notes ? (
        <span className="block max-w-56 truncate text-slate-600" title={row.notes}>
          {row.notes}
        </span>
      ) : null;
  }
  if (value === null || value === undefined) return <span className="text-slate-300">—</span>;
  if (column.type === "number" && typeof value === "number") return formatValue(value);
  return formatJson(value);
}
