"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { memo, type ReactNode, useOptimistic, useRef, useState, useTransition } from "react";
import { RunCheckbox, RunSelection } from "@/components/compare/run-selection";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { formatDuration } from "@/components/ui/time";
import type { TableColumn, TableResult, TableRow } from "@/server/runs";
import { alignsRight, formatJson, ValueCell } from "./cells";
import { type ActionRun, type RunAction, RunActionDialog, RunActionsMenu } from "./run-actions";
import { useRowWindow } from "./row-window";
import { ActiveFilters, ColumnPicker, FilterBar } from "./table-controls";
import { PAGE_SIZES, type TableState, tableQuery } from "./table-state";

/**
 * The runs table: chosen columns, sorting by a header, filters, grouping with each group's count and means, a
 * page at a time; ticked rows open /compare, and an editor's row menu renames, tags, annotates, clones, re-runs,
 * archives or deletes its run. Every change of view is a change of the URL, which the page renders on the server.
 */
export function RunsTableView({
  state,
  project,
  projects,
  result,
  problems,
}: {
  state: TableState;
  project: { id: string; role: string };
  projects: { id: string; name: string }[];
  result: TableResult | null;
  problems: string[];
}) {
  const router = useRouter();
  const trpc = useTRPC();
  const [pending, startTransition] = useTransition();
  const [picking, setPicking] = useState(false);
  const [dialog, setDialog] = useState<{ run: ActionRun; action: RunAction } | null>(null);
  const [notice, setNotice] = useState<ReactNode>(null);
  const choices = useQuery(trpc.runs.tableChoices.queryOptions({ projectId: project.id }, { staleTime: 30_000 }));
  const editor = project.role === "editor" || project.role === "owner";

  // The controls show a change at once; the rows follow when the page for the new URL arrives.
  const [view, setView] = useOptimistic(state);
  /** Any change of view goes back to the first page, except a change of page. */
  const change = (next: Partial<TableState>) => {
    const target = { ...view, page: 1, ...next };
    const query = tableQuery(target);
    startTransition(() => {
      setView(target);
      router.push(query ? `/runs?${query}` : "/runs");
    });
  };
  const sortBy = (column: TableColumn | "name") => {
    const key = column === "name" ? "name" : column.key;
    const type = column === "name" ? "text" : column.type;
    const current = view.sort?.column === key ? view.sort.order : null;
    const first = type === "text" || type === "tags" ? "asc" : "desc";
    change({ sort: { column: key, order: current === null ? first : current === "asc" ? "desc" : "asc" } });
  };

  const filtered = state.text !== "" || state.status.length > 0 || state.tags.length > 0 || state.where.length > 0;
  const columns = result?.columns ?? [];
  const groups = new Map((result?.groups ?? []).map((g) => [JSON.stringify(g.value), g]));
  const total = result?.total ?? 0;
  const from = (state.page - 1) * state.pageSize;
  // The body's lines in order: each group's header row before its first run, then the runs.
  const items: ({ kind: "group"; group: NonNullable<TableResult["groups"]>[number] } | { kind: "run"; row: TableRow })[] = [];
  for (const [i, row] of (result?.rows ?? []).entries()) {
    const groupKey = JSON.stringify(row.group ?? null);
    const startsGroup = result!.groups !== null && (i === 0 || JSON.stringify(result!.rows[i - 1]!.group ?? null) !== groupKey);
    const group = groups.get(groupKey);
    if (startsGroup && group) items.push({ kind: "group", group });
    items.push({ kind: "run", row });
  }
  // A long page draws the rows near the screen and stands in for the others with two spacers of their height.
  const body = useRef<HTMLTableSectionElement>(null);
  const shown = useRowWindow(items.length, body);
  const width = columns.length + 2 + (editor ? 1 : 0);

  return (
    <RunSelection>
      <Card className="mb-4">
        <div className="space-y-2 px-4 py-3">
          <div className="flex flex-wrap items-center justify-between gap-2">
            <FilterBar state={view} choices={choices.data ?? null} projects={projects} projectId={project.id} onChange={change} />
            <Button variant="secondary" aria-expanded={picking} onClick={() => setPicking(!picking)}>
              Columns
            </Button>
          </div>
          <ActiveFilters state={view} choices={choices.data ?? null} onChange={change} />
          {problems.map((problem) => (
            <p key={problem} role="alert" className="text-sm text-red-700">
              {problem}
            </p>
          ))}
        </div>
        {picking && <ColumnPicker state={view} choices={choices.data ?? null} onChange={change} />}
      </Card>
      {notice && (
        <output className="mb-3 flex items-center justify-between rounded-md border border-emerald-200 bg-emerald-50 px-3 py-2 text-sm text-emerald-800">
          <span>{notice}</span>
          <button type="button" aria-label="Dismiss" className="text-emerald-600 hover:text-emerald-900" onClick={() => setNotice(null)}>
            ×
          </button>
        </output>
      )}
      <Card className={pending ? "opacity-60 transition-opacity" : ""}>
        {result && result.rows.length > 0 ? (
          <div className="overflow-x-auto">
            <table className="w-full text-sm [&_td]:whitespace-nowrap [&_td]:px-3 [&_td]:py-1.5" aria-label="Runs" aria-busy={pending}>
              <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
                <tr>
                  <th className="w-8 py-2 pl-4 font-medium">
                    <span className="sr-only">Compare</span>
                  </th>
                  <SortHeader label="Run" sorted={view.sort?.column === "name" ? view.sort.order : null} onSort={() => sortBy("name")} />
                  {columns.map((column) => (
                    <SortHeader
                      key={column.key}
                      label={column.label}
                      right={alignsRight(column)}
                      sorted={view.sort?.column === column.key ? view.sort.order : null}
                      onSort={() => sortBy(column)}
                    />
                  ))}
                  {editor && (
                    <th className="w-10 px-2 py-2">
                      <span className="sr-only">Actions</span>
                    </th>
                  )}
                </tr>
              </thead>
              <tbody ref={body} className="divide-y divide-slate-100">
                {shown.start > 0 && (
                  <tr data-spacer="" aria-hidden style={{ height: shown.start * shown.rowHeight }}>
                    <td colSpan={width} />
                  </tr>
                )}
                {items
                  .slice(shown.start, shown.end)
                  .map((item) =>
                    item.kind === "group" ? (
                      <GroupRow key={`group:${JSON.stringify(item.group.value)}`} field={state.group!} group={item.group} columns={columns} editor={editor} />
                    ) : (
                      <Row key={item.row.id} row={item.row} columns={columns} editor={editor} onAction={setDialog} />
                    ),
                  )}
                {shown.end < items.length && (
                  <tr data-spacer="" aria-hidden style={{ height: (items.length - shown.end) * shown.rowHeight }}>
                    <td colSpan={width} />
                  </tr>
                )}
              </tbody>
            </table>
          </div>
        ) : (
          <EmptyState title={filtered ? "No runs match" : "No runs yet"}>
            {filtered ? "Try another search, status, tag or filter." : "Runs appear here once you launch one from an experiment."}
          </EmptyState>
        )}
        <footer className="flex flex-wrap items-center justify-between gap-3 border-t border-slate-200 px-4 py-2 text-sm text-slate-600">
          <span aria-live="polite">
            {total === 0 ? "No runs" : `${from + 1}–${Math.min(from + state.pageSize, total)} of ${total.toLocaleString("en-US")} runs`}
            {result?.groupCount ? ` in ${result.groupCount} group${result.groupCount === 1 ? "" : "s"}` : ""}
          </span>
          <div className="flex items-center gap-2">
            <label className="flex items-center gap-1.5">
              Rows
              <select
                className="rounded-md border border-slate-300 bg-white px-1.5 py-1 text-sm"
                value={view.pageSize}
                onChange={(e) => change({ pageSize: Number(e.target.value) })}
              >
                {PAGE_SIZES.map((size) => (
                  <option key={size} value={size}>
                    {size}
                  </option>
                ))}
              </select>
            </label>
            <Button variant="secondary" disabled={state.page <= 1} onClick={() => change({ page: state.page - 1 })}>
              Previous
            </Button>
            <Button variant="secondary" disabled={from + state.pageSize >= total} onClick={() => change({ page: state.page + 1 })}>
              Next
            </Button>
          </div>
        </footer>
      </Card>
      {dialog && (
        <RunActionDialog
          run={dialog.run}
          action={dialog.action}
          onClose={() => setDialog(null)}
          onDone={(message) => {
            setDialog(null);
            setNotice(message ?? null);
            startTransition(() => router.refresh());
          }}
        />
      )}
    </RunSelection>
  );
}

function SortHeader({ label, sorted, right = false, onSort }: { label: string; sorted: "asc" | "desc" | null; right?: boolean; onSort(): void }) {
  return (
    <th
      aria-sort={sorted === null ? undefined : sorted === "asc" ? "ascending" : "descending"}
      className={`whitespace-nowrap px-3 py-2 font-medium ${right ? "text-right" : ""}`}
    >
      <button type="button" onClick={onSort} className={`inline-flex items-center gap-1 uppercase hover:text-slate-900 ${sorted ? "text-slate-900" : ""}`}>
        {label}
        <span aria-hidden className="text-[10px]">
          {sorted === "asc" ? "▲" : sorted === "desc" ? "▼" : ""}
        </span>
      </button>
    </th>
  );
}

/** One run's row; memoised, so a change elsewhere on the page (a dialog, a notice, the window scrolling) skips the rows. */
const Row = memo(function Row({
  row,
  columns,
  editor,
  onAction,
}: {
  row: TableRow;
  columns: TableColumn[];
  editor: boolean;
  onAction(dialog: { run: ActionRun; action: RunAction }): void;
}) {
  return (
    <tr className={`hover:bg-slate-50 ${row.archived ? "text-slate-400" : ""}`} data-run={row.id}>
      <td className="pl-4">
        <RunCheckbox id={row.id} name={row.name} />
      </td>
      <th scope="row" className="max-w-80 px-3 py-1.5 text-left font-medium">
        {/* Not prefetched: a screen of rows would have the server render every one of their run pages at once. */}
        <Link className="text-slate-800 hover:text-brand-700 hover:underline" href={`/runs/${row.id}`} prefetch={false}>
          {row.name}
        </Link>
        {row.kind && row.kind !== "rl" && row.kind !== "sft" && (
          <span className="ml-1.5 rounded bg-slate-100 px-1.5 py-0.5 text-xs font-normal text-slate-600">{row.kind}</span>
        )}
        {row.archived && <span className="ml-1.5 rounded bg-slate-100 px-1.5 py-0.5 text-xs font-normal text-slate-500">archived</span>}
      </th>
      {columns.map((column) => (
        <ValueCell key={column.key} row={row} column={column} />
      ))}
      {editor && (
        <td className="text-right">
          <RunActionsMenu run={row} onPick={(action) => onAction({ run: row, action })} />
        </td>
      )}
    </tr>
  );
});

/** A group's header row: its value and count, and the mean of each numeric column under that column. */
function GroupRow({
  field,
  group,
  columns,
  editor,
}: {
  field: string;
  group: NonNullable<TableResult["groups"]>[number];
  columns: TableColumn[];
  editor: boolean;
}) {
  return (
    <tr className="bg-slate-50 text-slate-700" data-group={JSON.stringify(group.value)}>
      <td />
      <th scope="rowgroup" className="px-3 py-1.5 text-left font-semibold">
        {field} = {formatJson(group.value)}{" "}
        <span className="font-normal text-slate-500">
          · {group.count} run{group.count === 1 ? "" : "s"}
        </span>
      </th>
      {columns.map((column) => {
        const mean = group.means[column.key];
        const numeric = column.type === "number" || column.type === "json";
        return (
          <td key={column.key} className={alignsRight(column) ? "text-right tabular-nums" : undefined}>
            {numeric && mean !== null && mean !== undefined ? (
              <span title={`mean of ${group.count}`}>
                <span className="text-xs text-slate-400">μ </span>
                {column.key === "duration" ? formatDuration(mean) : formatJson(mean)}
              </span>
            ) : null}
          </td>
        );
      })}
      {editor && <td />}
    </tr>
  );
}
