"use client";

import { useQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { Fragment, useState } from "react";
import { formatBytes } from "@/components/datasets/format";
import { Card } from "@/components/ui/card";
import { DataTable, TimeCell } from "@/components/ui/data-table";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import { ServePanel } from "./serve-panel";
import type { AppRouter } from "@/server/api";

export type RunCheckpoints = inferRouterOutputs<AppRouter>["checkpoints"]["list"];

const KIND_WORDS: Record<RunCheckpoints[number]["kind"], { label: string; title: string }> = {
  state: { label: "state", title: "Weights or adapter, optimizer and RNG: a run resumes from it, and it can be a base" },
  sampler: { label: "weights", title: "Saved by saveWeightsForSampler: the weights alone, a base but not a point to resume from" },
  export: { label: "export", title: "A safetensors file written by an export, to download" },
};

const link = "text-brand-700 hover:underline";

/**
 * The checkpoints of the caller's runs, newest first: the run that saved each (a link), its step, kind, size and
 * age, and what the run page offers for it: export (editors), the ONNX file and the playground, or an export's download.
 */
export function CheckpointsTable({ initial }: { initial: RunCheckpoints }) {
  const trpc = useTRPC();
  const router = useRouter();
  const list = useQuery({ ...trpc.checkpoints.list.queryOptions(), initialData: initial });
  const exportCheckpoint = useKeyedMutation(trpc.runs.export.mutationOptions({ onSuccess: ({ runId }) => router.push(`/runs/${runId}`) }));
  const rows = list.data;
  const [serving, setServing] = useState<string | null>(null);
  return (
    <Card title={`Checkpoints of your runs (${rows.length})`}>
      {rows.length === 0 ? (
        <p className="px-4 py-3 text-sm text-slate-500">None yet: a run saves one every config.checkpointEvery steps and at its end.</p>
      ) : (
        <DataTable label="Checkpoints" columns={["checkpoint", "run", { name: "step", align: "right" }, "kind", { name: "size", align: "right" }, "created"]}>
          {rows.map((c) => (
            <Fragment key={c.id}>
              <tr data-checkpoint={c.id}>
                <td className="whitespace-nowrap px-4 py-2 font-mono text-xs text-slate-700" title="Name it as agent.base to start a run from here">
                  {c.id}
                </td>
                <td className="px-4 py-2">
                  <Link className={`font-medium ${link}`} href={`/runs/${c.runId}`}>
                    {c.runName}
                  </Link>
                  <p className="text-xs text-slate-500">{c.experimentName}</p>
                </td>
                <td className="px-4 py-2 text-right tabular-nums">{c.step}</td>
                <td className="whitespace-nowrap px-4 py-2 text-slate-600">
                  {c.setAsideReason ? (
                    <span className="text-amber-700" title={c.setAsideReason}>
                      set aside: damaged
                    </span>
                  ) : (
                    <span title={KIND_WORDS[c.kind].title}>{KIND_WORDS[c.kind].label}</span>
                  )}
                </td>
                <td className="whitespace-nowrap px-4 py-2 text-right tabular-nums text-slate-600">{formatBytes(c.sizeBytes)}</td>
                <TimeCell date={c.createdAt} />
                <td className="whitespace-nowrap px-4 py-2 text-right text-sm">
                  {c.setAsideReason ? null : c.kind === "export" ? (
                    <a className={link} href={`/api/exports/${c.id}`} download>
                      Download
                    </a>
                  ) : (
                    <span className="flex justify-end gap-3">
                      {c.mayEdit && (
                        <button
                          type="button"
                          className={`${link} disabled:text-slate-400`}
                          disabled={exportCheckpoint.isPending}
                          onClick={() => exportCheckpoint.mutate({ checkpointId: c.id })}
                          title="Write this checkpoint's model (an adapter merged into its base) as one safetensors file to download"
                        >
                          Export
                        </button>
                      )}
                      <a
                        className={link}
                        href={`/api/models/${c.id}.onnx`}
                        download
                        title="This checkpoint's model (an adapter merged into its base) as ONNX, with its key/value cache as inputs and outputs"
                      >
                        ONNX
                      </a>
                      <Link className={link} href={`/playground?model=${c.id}&run=${c.runId}`} title="Sample from this checkpoint in your browser">
                        Try
                      </Link>
                      <button
                        type="button"
                        className={link}
                        aria-expanded={serving === c.id}
                        onClick={() => setServing(serving === c.id ? null : c.id)}
                        title="Call this checkpoint through the server's OpenAI-compatible endpoint"
                      >
                        Serve
                      </button>
                    </span>
                  )}
                </td>
              </tr>
              {serving === c.id && (
                <tr>
                  <td colSpan={7} className="p-0">
                    <ServePanel checkpointId={c.id} runId={c.runId} />
                  </td>
                </tr>
              )}
            </Fragment>
          ))}
        </DataTable>
      )}
      <p className="border-t border-slate-100 px-4 py-2 text-xs text-slate-500">
        Any state or weights checkpoint can be a base: name its id in an experiment&apos;s base field. Evaluate one from its run&apos;s page.
        {exportCheckpoint.error && <span className="block text-red-700">Export: {exportCheckpoint.error.message}</span>}
      </p>
    </Card>
  );
}
