"use client";

import type { LiveValidation } from "./use-live-validation";

type Diagnostic = NonNullable<LiveValidation["report"]>["diagnostics"][number];

const severityStyle: Record<Diagnostic["severity"], string> = {
  error: "bg-red-50 text-red-700 ring-red-200",
  warning: "bg-amber-50 text-amber-800 ring-amber-200",
  info: "bg-slate-100 text-slate-600 ring-slate-200",
};

function count(n: number, word: string) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** What the last validation found: its problems (each a link to its line), the dry run's episodes and logs. */
export function ValidationPanel({ validation, onReveal }: { validation: LiveValidation; onReveal(diagnostic: Diagnostic): void }) {
  const { report } = validation;
  const errors = report?.diagnostics.filter((d) => d.severity === "error").length ?? 0;
  const warnings = report?.diagnostics.filter((d) => d.severity === "warning").length ?? 0;
  const busy = validation.state === "pending" || validation.state === "running";
  return (
    <section className="space-y-3 px-4 py-3 text-sm" aria-label="Validation" aria-busy={busy}>
      <p className="flex items-center gap-2" data-testid="validation-status">
        {busy && <span className="size-2 animate-pulse rounded-full bg-brand-500" aria-hidden />}
        {!busy && report && <span className={`size-2 rounded-full ${errors ? "bg-red-500" : warnings ? "bg-amber-500" : "bg-emerald-500"}`} aria-hidden />}
        <span className="text-slate-700">
          {validation.state === "running"
            ? "Validating…"
            : validation.state === "pending"
              ? "Edited; validating shortly…"
              : validation.state === "failed"
                ? "Validation failed to run"
                : !report
                  ? "Not validated yet"
                  : errors || warnings
                    ? [errors && count(errors, "error"), warnings && count(warnings, "warning")].filter(Boolean).join(", ")
                    : "No problems"}
        </span>
      </p>
      {validation.error && <p className="text-xs text-red-600">{validation.error}</p>}
      {report && report.diagnostics.length > 0 && (
        <ul className="space-y-1.5" aria-label="Problems">
          {report.diagnostics.map((d, i) => (
            <li key={i}>
              <button
                type="button"
                onClick={() => onReveal(d)}
                disabled={!d.file}
                className="w-full rounded-md px-2 py-1.5 text-left hover:bg-slate-50 disabled:cursor-default disabled:hover:bg-transparent"
              >
                <span className={`mr-2 rounded px-1.5 py-0.5 text-[11px] font-medium ring-1 ring-inset ${severityStyle[d.severity]}`}>{d.source}</span>
                <span className="font-mono text-xs text-slate-500">
                  {d.file ?? "—"}
                  {d.line !== null && `:${d.line}${d.column !== null ? `:${d.column}` : ""}`}
                </span>
                <span className="mt-0.5 block text-xs text-slate-800">{d.message}</span>
              </button>
            </li>
          ))}
        </ul>
      )}
      {report?.environment && (
        <fieldset aria-label="Dry run" className="min-w-0">
          <h3 className="mb-1 text-xs font-semibold uppercase tracking-wide text-slate-500">Dry run</h3>
          <dl className="grid grid-cols-[auto_1fr] gap-x-3 gap-y-0.5 text-xs">
            <dt className="text-slate-500">environment</dt>
            <dd className="font-mono text-slate-800">{report.environment.name}</dd>
            <dt className="text-slate-500">data</dt>
            <dd className="text-slate-800">{report.environment.data.kind === "dataset" ? `dataset ${report.environment.data.dataset}` : "free"}</dd>
            <dt className="text-slate-500">max turns</dt>
            <dd className="tabular-nums text-slate-800">{report.environment.maxTurns}</dd>
            {report.environment.tools.length > 0 && (
              <>
                <dt className="text-slate-500">tools</dt>
                <dd className="font-mono text-slate-800">{report.environment.tools.join(", ")}</dd>
              </>
            )}
            <dt className="text-slate-500">score</dt>
            <dd className="text-slate-800">{report.environment.scoreName ?? "return > 0"}</dd>
          </dl>
          {report.episodes.length > 0 && (
            <table className="mt-2 w-full text-xs">
              <thead className="text-left text-slate-500">
                <tr>
                  <th className="py-0.5 font-medium">seed</th>
                  <th className="py-0.5 font-medium">turns</th>
                  <th className="py-0.5 font-medium">return</th>
                  <th className="py-0.5 font-medium">ended</th>
                </tr>
              </thead>
              <tbody className="tabular-nums text-slate-800">
                {report.episodes.map((e) => (
                  <tr key={e.seed}>
                    <td className="py-0.5">{e.seed}</td>
                    <td className="py-0.5">{e.turns}</td>
                    <td className="py-0.5">{Number(e.totalReward.toFixed(4))}</td>
                    <td className="py-0.5">{e.done ? "done" : "cut off"}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <p className="mt-1 text-xs text-slate-500">Random probe actions; the rewards say the code runs, not how good a policy is.</p>
        </fieldset>
      )}
      {report && report.logs.length > 0 && (
        <details>
          <summary className="cursor-pointer text-xs font-medium text-slate-600">console ({report.logs.length})</summary>
          <pre className="mt-1 max-h-40 overflow-auto rounded bg-slate-50 p-2 font-mono text-[11px] text-slate-700">{report.logs.join("\n")}</pre>
        </details>
      )}
    </section>
  );
}
