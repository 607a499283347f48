"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { Card } from "@/components/ui/card";
import { StatusBadge } from "@/components/ui/status-badge";
import { useTRPC } from "@/components/trpc/provider";

const ACTIVE = new Set(["queued", "running"]);

/**
 * The evaluations and exports of this run's checkpoints, each a run of its own, listed here with its score or its
 * download: what the checkpoints' Evaluate and Export started. Polls while one of them has not ended.
 */
export function DerivedRuns({ runId, mayDownload }: { runId: string; mayDownload: boolean }) {
  const trpc = useTRPC();
  const derived = useQuery({
    ...trpc.derived.ofRun.queryOptions({ runId }),
    refetchInterval: (q) => (q.state.data?.some((run) => ACTIVE.has(run.status)) ? 2000 : false),
  });
  const rows = derived.data ?? [];
  return (
    <Card title="Evaluations and exports">
      <ol aria-label="Evaluations and exports" className="max-h-96 overflow-auto px-4 py-3 text-xs">
        {derived.error && <li className="text-red-700">{derived.error.message}</li>}
        {derived.data && rows.length === 0 && (
          <li className="text-slate-500">None yet: a checkpoint's Evaluate plays the held-out episodes with it, its Export writes its model to download.</li>
        )}
        {rows.map((run) => (
          <li key={run.id} data-kind={run.kind} className="flex flex-wrap items-baseline gap-x-3 gap-y-0.5 border-b border-slate-100 py-1 last:border-0">
            <span className="w-16 font-medium text-slate-700">{run.kind === "eval" ? "Evaluation" : "Export"}</span>
            <span className="tabular-nums text-slate-600">of step {run.checkpointStep}</span>
            <StatusBadge status={run.status} />
            {run.kind === "eval" && run.evaluation && (
              <span className="tabular-nums text-slate-600">
                {run.score !== null && (
                  <>
                    score <span className="font-semibold text-slate-900">{formatScore(run.score)}</span> ·{" "}
                  </>
                )}
                {run.evaluation.episodes} episode{run.evaluation.episodes === 1 ? "" : "s"},{" "}
                {run.evaluation.temperature === 0 ? "greedy" : `temperature ${run.evaluation.temperature}`}
              </span>
            )}
            {run.kind === "export" &&
              mayDownload &&
              run.downloads.map((file) => (
                <a key={file.id} className="text-brand-700 hover:underline" href={`/api/exports/${file.id}`} download>
                  Download {file.format === "tar" ? "tar (a safetensors per agent)" : "safetensors"} ({(file.sizeBytes / 1024).toFixed(0)} KiB)
                </a>
              ))}
            {run.reason && run.status !== "completed" && <span className="text-slate-500">{run.reason}</span>}
            <Link className="ml-auto text-brand-700 hover:underline" href={`/runs/${run.id}`} title={run.name}>
              Open
            </Link>
          </li>
        ))}
      </ol>
    </Card>
  );
}

/** A score as the run's log writes it (three decimals), or in exponent form when that would read 0.000. */
function formatScore(score: number): string {
  return score !== 0 && Math.abs(score) < 0.001 ? score.toExponential(2) : score.toFixed(3);
}
