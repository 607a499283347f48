"use client";

import { useQuery } from "@tanstack/react-query";
import { Suspense } from "react";
import { CompareView } from "@/components/compare/compare-view";
import { RolloutsPanel } from "@/components/run/rollouts-panel";
import { ReportBlocks } from "@/components/reports/report-view";
import { RunView } from "@/components/run/run-view";
import { PageHeader } from "@/components/ui/card";
import { RelativeTime } from "@/components/ui/time";
import { useTRPC } from "@/components/trpc/provider";
import type { ReportBlock } from "@/lib/reports/blocks";

/**
 * What a share link shows, view-only: a run (its live curves, rollouts, config, checkpoints and log), a comparison,
 * one trajectory, or a report (its notes and live panels). Every request of this page carries the link's token (components/trpc/provider.tsx), so the
 * server answers it as the link's holder: these runs' reads, nothing else.
 */
export function SharedView({
  kind,
  runIds,
  title,
  expiresAt,
  report,
}: {
  kind: "run" | "compare" | "trajectory" | "report";
  runIds: string[];
  title: string;
  expiresAt: Date | null;
  /** With kind "report": the report as saved when the page was opened. */
  report?: { blocks: ReportBlock[] };
}) {
  const note = (
    <span role="note" aria-label="Shared view">
      Shared view, read-only
      {expiresAt && (
        <>
          {" "}
          · the link expires <RelativeTime date={expiresAt} />
        </>
      )}
    </span>
  );
  return (
    <>
      <PageHeader title={title} subtitle={note} />
      <Suspense>
        {kind === "run" && <RunView runId={runIds[0]!} />}
        {kind === "compare" && <CompareView shared />}
        {kind === "trajectory" && <SharedTrajectory runId={runIds[0]!} />}
        {kind === "report" && report && <ReportBlocks blocks={report.blocks} />}
      </Suspense>
    </>
  );
}

function SharedTrajectory({ runId }: { runId: string }) {
  const trpc = useTRPC();
  const run = useQuery(trpc.runs.byId.queryOptions({ id: runId }));
  if (!run.data) return <p className="text-sm text-slate-500">{run.error ? run.error.message : "Loading…"}</p>;
  return <RolloutsPanel runId={runId} live={false} config={run.data.config} initialSplit={run.data.totalSteps > 0 ? "train" : "eval"} shared />;
}
