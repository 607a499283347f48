"use client";

import { useState } from "react";
import { Button } from "@/components/ui/button";
import { runStates } from "@/lib/lifecycle";
import { BUILT_IN_COLUMNS, CONDITION_OPS, type ConditionOp, columnKey, columnLabel, type MetricSummary, parseColumnKey } from "@/lib/runs-table";
import type { TableState } from "./table-state";

/** What the pickers offer: the project's metric names, config fields and tags (runs.tableChoices). */
export type Choices = { metrics: string[]; configPaths: string[]; tags: string[] };

type Change = (change: Partial<TableState>) => void;

const selectClass = "rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm focus:border-brand-500 focus:outline-none";
const labelOf = (key: string) => {
  try {
    return columnLabel(parseColumnKey(key));
  } catch {
    return key;
  }
};

/** The search box, status, tag filter, grouping and the archived and derived switches. */
export function FilterBar({
  state,
  choices,
  projects,
  projectId,
  onChange,
}: {
  state: TableState;
  choices: Choices | null;
  projects: { id: string; name: string }[];
  projectId: string;
  onChange: Change;
}) {
  return (
    <search className="flex flex-wrap items-center gap-2">
      {projects.length > 1 && (
        <select
          aria-label="Project"
          className={selectClass}
          value={projectId}
          onChange={(e) => onChange({ project: e.target.value, tags: [], where: [], group: null })}
        >
          {projects.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name}
            </option>
          ))}
        </select>
      )}
      <form
        onSubmit={(event) => {
          event.preventDefault();
          onChange({ text: String(new FormData(event.currentTarget).get("q") ?? "").trim() });
        }}
      >
        <input
          type="search"
          name="q"
          aria-label="Search runs"
          defaultValue={state.text}
          key={state.text}
          placeholder="Search name, experiment, id, notes"
          className="w-64 rounded-md border border-slate-300 bg-white px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
        />
      </form>
      <select
        aria-label="Status"
        className={selectClass}
        value={state.status[0] ?? ""}
        onChange={(e) => onChange({ status: e.target.value ? [e.target.value as TableState["status"][number]] : [] })}
      >
        <option value="">Any status</option>
        {runStates.map((s) => (
          <option key={s} value={s}>
            {s}
          </option>
        ))}
      </select>
      <select
        aria-label="Filter by tag"
        className={selectClass}
        value=""
        onChange={(e) => e.target.value && onChange({ tags: [...new Set([...state.tags, e.target.value])] })}
      >
        <option value="">{choices?.tags.length ? "Tag…" : "No tags yet"}</option>
        {(choices?.tags ?? [])
          .filter((t) => !state.tags.includes(t))
          .map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
      </select>
      <select aria-label="Group by" className={selectClass} value={state.group ?? ""} onChange={(e) => onChange({ group: e.target.value || null })}>
        <option value="">No grouping</option>
        {state.group && !choices?.configPaths.includes(state.group) && <option value={state.group}>group by {state.group}</option>}
        {(choices?.configPaths ?? []).map((p) => (
          <option key={p} value={p}>
            group by {p}
          </option>
        ))}
      </select>
      <label className="flex items-center gap-1.5 text-sm text-slate-600">
        <input type="checkbox" className="accent-brand-600" checked={state.archived} onChange={(e) => onChange({ archived: e.target.checked })} />
        Archived
      </label>
      <label className="flex items-center gap-1.5 text-sm text-slate-600">
        <input type="checkbox" className="accent-brand-600" checked={state.derived} onChange={(e) => onChange({ derived: e.target.checked })} />
        Evaluations &amp; exports
      </label>
    </search>
  );
}

/** The filters in force as chips (each removable), and a form to add a condition on a column's value. */
export function ActiveFilters({ state, choices, onChange }: { state: TableState; choices: Choices | null; onChange: Change }) {
  const [column, setColumn] = useState("");
  const [op, setOp] = useState<ConditionOp>(">");
  const [value, setValue] = useState("");
  const columns = [...new Set([...state.columns.filter((c) => c !== "tags"), ...(choices?.metrics ?? []).map((m) => `metric:last:${m}`)])];
  const chip = "inline-flex items-center gap-1 rounded-full border border-slate-200 bg-slate-50 px-2.5 py-0.5 text-xs text-slate-700";
  return (
    <div className="flex flex-wrap items-center gap-2">
      <ul aria-label="Filters" className="flex flex-wrap items-center gap-1.5 empty:hidden">
        {state.tags.map((tag) => (
          <li key={`tag:${tag}`} className={chip}>
            tag: {tag}
            <button
              type="button"
              aria-label={`Remove tag filter ${tag}`}
              className="text-slate-400 hover:text-slate-800"
              onClick={() => onChange({ tags: state.tags.filter((t) => t !== tag) })}
            >
              ×
            </button>
          </li>
        ))}
        {state.where.map((condition, i) => (
          <li key={`${condition.column}${condition.op}${condition.value}`} className={chip}>
            {labelOf(condition.column)} {condition.op} {condition.value}
            <button
              type="button"
              aria-label={`Remove filter ${labelOf(condition.column)} ${condition.op} ${condition.value}`}
              className="text-slate-400 hover:text-slate-800"
              onClick={() => onChange({ where: state.where.filter((_, j) => j !== i) })}
            >
              ×
            </button>
          </li>
        ))}
      </ul>
      <form
        aria-label="Add a filter"
        className="flex items-center gap-1"
        onSubmit={(event) => {
          event.preventDefault();
          if (!column || !value.trim()) return;
          onChange({ where: [...state.where, { column, op, value: value.trim() }] });
          setValue("");
        }}
      >
        <select aria-label="Filter column" className={selectClass} value={column} onChange={(e) => setColumn(e.target.value)}>
          <option value="">Filter on…</option>
          {columns.map((c) => (
            <option key={c} value={c}>
              {labelOf(c)}
            </option>
          ))}
        </select>
        <select aria-label="Comparison" className={selectClass} value={op} onChange={(e) => setOp(e.target.value as ConditionOp)}>
          {CONDITION_OPS.map((o) => (
            <option key={o} value={o}>
              {o}
            </option>
          ))}
        </select>
        <input aria-label="Filter value" className={`w-24 ${selectClass}`} value={value} onChange={(e) => setValue(e.target.value)} placeholder="value" />
        <Button type="submit" variant="secondary" disabled={!column || !value.trim()}>
          Add filter
        </Button>
      </form>
    </div>
  );
}

/** Which columns show, in order: the built-in ones, and added metric summaries and config fields. */
export function ColumnPicker({ state, choices, onChange }: { state: TableState; choices: Choices | null; onChange: Change }) {
  const [metric, setMetric] = useState("");
  const [summary, setSummary] = useState<MetricSummary>("last");
  const [step, setStep] = useState("");
  const [configPath, setConfigPath] = useState("");
  const add = (key: string) => onChange({ columns: [...new Set([...state.columns, key])] });
  const remove = (key: string) => onChange({ columns: state.columns.filter((c) => c !== key) });
  const stepNumber = Number(step);
  const metricKey =
    metric && (summary !== "at" || (step.trim() !== "" && Number.isInteger(stepNumber) && stepNumber >= 0))
      ? columnKey(summary === "at" ? { kind: "metric", name: metric, summary, step: stepNumber } : { kind: "metric", name: metric, summary })
      : null;
  const added = state.columns.filter((c) => !(BUILT_IN_COLUMNS as readonly string[]).includes(c));
  return (
    <section aria-label="Columns" className="grid gap-4 border-t border-slate-200 bg-slate-50/60 px-4 py-3 text-sm md:grid-cols-3">
      <fieldset>
        <legend className="mb-1 font-medium text-slate-700">Built-in</legend>
        <div className="grid grid-cols-2 gap-x-3 gap-y-1">
          {BUILT_IN_COLUMNS.filter((c) => c !== "name").map((c) => (
            <label key={c} className="flex items-center gap-1.5 text-slate-600">
              <input
                type="checkbox"
                className="accent-brand-600"
                checked={state.columns.includes(c)}
                onChange={(e) => (e.target.checked ? add(c) : remove(c))}
              />
              {c}
            </label>
          ))}
        </div>
      </fieldset>
      <div className="space-y-2">
        <p className="font-medium text-slate-700">Add a metric</p>
        <div className="flex flex-wrap gap-1">
          <select aria-label="Metric" className={selectClass} value={metric} onChange={(e) => setMetric(e.target.value)}>
            <option value="">{choices?.metrics.length ? "Metric…" : "No metrics yet"}</option>
            {(choices?.metrics ?? []).map((m) => (
              <option key={m} value={m}>
                {m}
              </option>
            ))}
          </select>
          <select aria-label="Summary" className={selectClass} value={summary} onChange={(e) => setSummary(e.target.value as MetricSummary)}>
            <option value="last">last</option>
            <option value="max">best (max)</option>
            <option value="min">best (min)</option>
            <option value="at">at step</option>
          </select>
          {summary === "at" && (
            <input
              aria-label="Step"
              inputMode="numeric"
              className={`w-20 ${selectClass}`}
              value={step}
              onChange={(e) => setStep(e.target.value)}
              placeholder="step"
            />
          )}
          <Button variant="secondary" disabled={!metricKey} onClick={() => metricKey && add(metricKey)}>
            Add column
          </Button>
        </div>
        <p className="font-medium text-slate-700">Add a config field</p>
        <div className="flex flex-wrap gap-1">
          <select aria-label="Config field" className={`max-w-64 ${selectClass}`} value={configPath} onChange={(e) => setConfigPath(e.target.value)}>
            <option value="">Field…</option>
            {(choices?.configPaths ?? []).map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
          <Button variant="secondary" disabled={!configPath} onClick={() => add(`config:${configPath}`)}>
            Add column
          </Button>
        </div>
      </div>
      <div>
        <p className="mb-1 font-medium text-slate-700">Added</p>
        {added.length === 0 ? (
          <p className="text-slate-400">No metric or config columns yet.</p>
        ) : (
          <ul className="space-y-1">
            {added.map((key) => (
              <li key={key} className="flex items-center justify-between gap-2 rounded border border-slate-200 bg-white px-2 py-1">
                <span className="truncate">{labelOf(key)}</span>
                <button type="button" aria-label={`Remove column ${labelOf(key)}`} className="text-slate-400 hover:text-slate-800" onClick={() => remove(key)}>
                  ×
                </button>
              </li>
            ))}
          </ul>
        )}
      </div>
    </section>
  );
}
