"use client";

import { type DiffHunk, diffFiles } from "./file-diff";

/** A compared run as the source diff names it. */
export type SourceColumn = { id: string; name: string; color: string };

type Version = { experimentId: string; experimentName: string; version: number; files: Record<string, string> };
export type RunSources = { runs: { runId: string; versionId: string | null }[]; versions: Record<string, Version> };

function Hunk({ hunk }: { hunk: DiffHunk }) {
  return (
    <tbody className="border-t border-slate-100 first:border-t-0">
      {hunk.lines.map((line, i) => (
        <tr key={i} data-kind={line.kind} className={line.kind === "added" ? "bg-emerald-50" : line.kind === "removed" ? "bg-rose-50" : ""}>
          <td className="w-10 select-none px-2 text-right text-slate-400">{line.oldLine ?? ""}</td>
          <td className="w-10 select-none px-2 text-right text-slate-400">{line.newLine ?? ""}</td>
          <td className={`w-4 select-none ${line.kind === "added" ? "text-emerald-700" : "text-rose-700"}`} aria-hidden>
            {line.kind === "added" ? "+" : line.kind === "removed" ? "−" : ""}
          </td>
          <td className="whitespace-pre-wrap break-all pr-4 text-slate-800">
            {line.kind !== "context" && <span className="sr-only">{line.kind === "added" ? "added: " : "removed: "}</span>}
            {line.text}
          </td>
        </tr>
      ))}
    </tbody>
  );
}

/**
 * The source files of each compared run's experiment version against the baseline run's, file by file and line by
 * line. Runs of one version share one diff; a run of the baseline's own version says so.
 */
export function SourceDiff({
  columns,
  sources,
  baseline,
  onBaseline,
}: {
  columns: SourceColumn[];
  sources: RunSources;
  baseline: string;
  onBaseline?: (runId: string) => void;
}) {
  const versionOf = new Map(sources.runs.map((r) => [r.runId, r.versionId]));
  const baseVersionId = versionOf.get(baseline) ?? null;
  const base = baseVersionId ? sources.versions[baseVersionId] : undefined;
  const baseName = columns.find((c) => c.id === baseline)?.name ?? baseline;
  // The other versions, each with the runs that ran it, in the order of their first run.
  const byVersion = new Map<string, SourceColumn[]>();
  for (const column of columns) {
    const versionId = versionOf.get(column.id);
    if (column.id === baseline || !versionId) continue;
    byVersion.set(versionId, [...(byVersion.get(versionId) ?? []), column]);
  }
  const others = [...byVersion.entries()].map(([versionId, runs]) => {
    const version = sources.versions[versionId]!;
    return { versionId, runs, version, files: versionId === baseVersionId || !base ? [] : diffFiles(base.files, version.files) };
  });

  if (!base) return <p className="px-4 py-6 text-center text-sm text-slate-500">The baseline run's source is not available.</p>;
  const versionName = (v: Version) => `${v.experimentName} v${v.version}`;
  return (
    <div className="space-y-4 p-4 text-sm">
      <div className="flex flex-wrap items-center gap-2 text-slate-600">
        <span>Against</span>
        {onBaseline ? (
          <select
            aria-label="Baseline run"
            className="rounded-md border border-slate-300 bg-white px-2 py-1 text-xs"
            value={baseline}
            onChange={(event) => onBaseline(event.target.value)}
          >
            {columns.map((c) => (
              <option key={c.id} value={c.id}>
                {c.name}
              </option>
            ))}
          </select>
        ) : (
          <span className="font-medium text-slate-800">{baseName}</span>
        )}
        <span className="text-slate-500">({versionName(base)})</span>
      </div>
      {others.length === 0 && <p className="text-slate-500">Add another run to compare sources.</p>}
      {others.map(({ versionId, runs, version, files }) => {
        const changed = files.filter((f) => f.status !== "same");
        return (
          <section key={versionId} aria-label={`Source of ${runs.map((r) => r.name).join(", ")}`} className="space-y-2">
            <h3 className="flex flex-wrap items-center gap-2 font-medium text-slate-800">
              {runs.map((r) => (
                <span key={r.id} className="inline-flex items-center gap-1.5">
                  <span className="size-2.5 rounded-full" style={{ backgroundColor: r.color }} aria-hidden />
                  <span className="font-mono text-xs">{r.name}</span>
                </span>
              ))}
              <span className="font-normal text-slate-500">· {versionName(version)}</span>
            </h3>
            {versionId === baseVersionId ? (
              <p className="text-slate-500">Same source as {baseName}.</p>
            ) : changed.length === 0 ? (
              <p className="text-slate-500">The files are identical to {baseName}'s.</p>
            ) : (
              <>
                <p className="text-xs text-slate-500">
                  {changed.length} of {files.length} file{files.length === 1 ? "" : "s"} differ
                  {files.length > changed.length
                    ? `; unchanged: ${files
                        .filter((f) => f.status === "same")
                        .map((f) => f.path)
                        .join(", ")}`
                    : ""}
                  .
                </p>
                {changed.map((file) => (
                  <div key={file.path} className="overflow-hidden rounded-md border border-slate-200">
                    <div className="flex items-center gap-2 border-b border-slate-200 bg-slate-50 px-3 py-1.5 font-mono text-xs">
                      <span className="font-medium text-slate-800">{file.path}</span>
                      <span className="text-slate-500">{file.status === "changed" ? "" : file.status}</span>
                      <span className="ml-auto text-emerald-700">+{file.added}</span>
                      <span className="text-rose-700">−{file.removed}</span>
                    </div>
                    <div className="max-h-[32rem] overflow-auto">
                      <table className="w-full font-mono text-xs leading-5" aria-label={`Diff of ${file.path}`}>
                        {file.hunks.map((hunk) => (
                          <Hunk key={`${hunk.oldStart}-${hunk.newStart}`} hunk={hunk} />
                        ))}
                      </table>
                    </div>
                  </div>
                ))}
              </>
            )}
          </section>
        );
      })}
    </div>
  );
}
