"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import { useState } from "react";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { RelativeTime } from "@/components/ui/time";
import { useTRPC } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";
import type { BuiltInDataset } from "./built-in";
import { DatasetActions, type DatasetOutcome, RenameForm } from "./dataset-actions";
import { DatasetPreview } from "./dataset-preview";
import { count, formatBytes } from "./format";
import { UploadForm } from "./upload-form";

export type DatasetList = inferRouterOutputs<AppRouter>["datasets"]["list"];

const PREVIEW_ROWS = 20;

type Entry = {
  /** An uploaded dataset's id; null for a built-in one. */
  id: string | null;
  name: string;
  builtIn: boolean;
  description: string;
  kind: "rows" | "conversations" | null;
  rowCount: number | null;
  trainRows: number | null;
  testRows: number | null;
  fields: string[];
  sizeBytes: number | null;
  createdAt: Date | null;
  /** The caller may rename and delete it (an uploaded dataset, in a project it edits). */
  mayEdit: boolean;
};

const kindStyles = {
  rows: "bg-slate-100 text-slate-700 ring-slate-300",
  conversations: "bg-violet-50 text-violet-700 ring-violet-300",
};

export function DatasetsView({ builtIn, initialList }: { builtIn: { name: string; summary: BuiltInDataset | null }[]; initialList: DatasetList }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const list = useQuery({ ...trpc.datasets.list.queryOptions(), initialData: initialList });
  const [selected, setSelected] = useState<string | null>(null);
  const [outcome, setOutcome] = useState<DatasetOutcome | null>(null);
  /** The id of the dataset whose row shows the rename form. */
  const [renaming, setRenaming] = useState<string | null>(null);
  const onDone = (done: DatasetOutcome) => {
    setOutcome(done);
    if (done.kind === "refused") return;
    setRenaming(null);
    if (done.kind === "renamed" && selected === done.from) setSelected(done.renamed.name);
    if (done.kind === "deleted" && selected === done.name) setSelected(null);
    void queryClient.invalidateQueries({ queryKey: trpc.datasets.list.queryKey() });
  };

  const builtInByName = new Map(builtIn.map((b) => [b.name, b.summary]));
  const entries: Entry[] = [
    ...list.data.builtIn.map((name): Entry => {
      const summary = builtInByName.get(name) ?? null;
      return {
        name,
        builtIn: true,
        description: "Ships with Tinkerlab",
        kind: summary ? "rows" : null,
        rowCount: summary?.rowCount ?? null,
        trainRows: summary?.trainRows ?? null,
        testRows: summary?.testRows ?? null,
        fields: summary?.fields ?? [],
        sizeBytes: summary?.sizeBytes ?? null,
        createdAt: null,
        id: null,
        mayEdit: false,
      };
    }),
    ...list.data.uploaded.map((d): Entry => ({ ...d, builtIn: false })),
  ];
  const current = entries.find((e) => e.name === selected) ?? null;
  const uploadedPreview = useQuery({
    ...trpc.datasets.preview.queryOptions({ id: current?.id ?? "", limit: PREVIEW_ROWS }),
    enabled: current !== null && !current.builtIn,
    staleTime: Infinity,
  });
  const previewRows = current?.builtIn ? builtInByName.get(current.name)?.preview : uploadedPreview.data?.rows;
  const example = current?.name ?? "NAME";

  return (
    <div className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_22rem]">
      <div className="min-w-0 space-y-6">
        <Card title={`Datasets (${entries.length})`}>
          <div className="overflow-x-auto">
            <table className="w-full text-sm" aria-label="Datasets">
              <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
                <tr>
                  <th className="px-4 py-2 font-medium">Name</th>
                  <th className="px-4 py-2 font-medium">Kind</th>
                  <th className="px-4 py-2 text-right font-medium">Rows</th>
                  <th className="whitespace-nowrap px-4 py-2 text-right font-medium">Train / test</th>
                  <th className="px-4 py-2 text-right font-medium">Size</th>
                  <th className="px-4 py-2 font-medium">Created</th>
                  <th className="py-2 pr-4">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody className="divide-y divide-slate-100">
                {entries.map((entry) => {
                  const active = entry.name === selected;
                  return (
                    <tr
                      key={entry.name}
                      data-dataset={entry.name}
                      onClick={() => setSelected(active ? null : entry.name)}
                      className={`cursor-pointer align-top ${active ? "bg-brand-50" : "hover:bg-slate-50"}`}
                    >
                      <td className="px-4 py-2">
                        {entry.id !== null && renaming === entry.id ? (
                          // biome-ignore lint/a11y/noStaticElementInteractions: keeps the row's click (the preview) off the form
                          <div onClick={(event) => event.stopPropagation()} onKeyDown={(event) => event.stopPropagation()}>
                            <RenameForm id={entry.id} name={entry.name} onDone={onDone} onCancel={() => setRenaming(null)} />
                          </div>
                        ) : (
                          <div className="whitespace-nowrap">
                            <button
                              type="button"
                              aria-pressed={active}
                              onClick={(event) => {
                                event.stopPropagation();
                                setSelected(active ? null : entry.name);
                              }}
                              className={`font-mono font-medium hover:underline ${active ? "text-brand-700" : "text-slate-800 hover:text-brand-700"}`}
                            >
                              {entry.name}
                            </button>
                            {entry.builtIn && <span className="ml-2 rounded bg-slate-100 px-1.5 py-0.5 text-xs text-slate-500">built-in</span>}
                          </div>
                        )}
                        {entry.description && (
                          <p className="max-w-52 truncate text-xs text-slate-500" title={entry.description}>
                            {entry.description}
                          </p>
                        )}
                        {entry.fields.length > 0 && (
                          <p className="max-w-52 truncate font-mono text-xs text-slate-400" title={entry.fields.join(", ")}>
                            {entry.kind === "conversations" ? "roles" : "fields"}: {entry.fields.join(", ")}
                          </p>
                        )}
                      </td>
                      <td className="px-4 py-2">
                        {entry.kind ? (
                          <span className={`inline-flex rounded-full px-2 py-0.5 text-xs font-medium ring-1 ring-inset ${kindStyles[entry.kind]}`}>
                            {entry.kind}
                          </span>
                        ) : (
                          "—"
                        )}
                      </td>
                      <td className="px-4 py-2 text-right tabular-nums text-slate-700">{entry.rowCount !== null ? count(entry.rowCount) : "—"}</td>
                      <td className="whitespace-nowrap px-4 py-2 text-right tabular-nums text-slate-600">
                        {entry.trainRows !== null && entry.testRows !== null ? `${count(entry.trainRows)} / ${count(entry.testRows)}` : "—"}
                      </td>
                      <td className="whitespace-nowrap px-4 py-2 text-right tabular-nums text-slate-600">
                        {entry.sizeBytes !== null ? formatBytes(entry.sizeBytes) : "—"}
                      </td>
                      <td className="whitespace-nowrap px-4 py-2 text-slate-500">{entry.createdAt ? <RelativeTime date={entry.createdAt} /> : "—"}</td>
                      {/* Clicks here act on the dataset, not on the preview the row's click toggles. */}
                      <td className="py-2 pr-4 text-right" onClick={(event) => event.stopPropagation()} onKeyDown={(event) => event.stopPropagation()}>
                        {entry.id !== null && entry.mayEdit && (
                          <DatasetActions key={entry.id} id={entry.id} name={entry.name} onRename={() => setRenaming(entry.id)} onDone={onDone} />
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
          {outcome && <OutcomeNotice outcome={outcome} />}
          {list.data.uploaded.length === 0 && (
            <EmptyState title="No uploaded datasets yet">
              Upload a JSONL or CSV file to train an environment on your own rows, or an SFT run on your own conversations.
            </EmptyState>
          )}
        </Card>

        {current ? (
          <Card
            title={
              <>
                Preview · <span className="font-mono">{current.name}</span>
              </>
            }
            actions={
              <div className="flex items-center gap-3">
                <span className="text-xs text-slate-500">
                  {previewRows
                    ? `first ${previewRows.length} of ${current.rowCount !== null ? count(current.rowCount) : "?"} ${current.kind === "conversations" ? "conversations" : "rows"}`
                    : ""}
                </span>
                <Button variant="ghost" onClick={() => setSelected(null)}>
                  Close
                </Button>
              </div>
            }
          >
            {previewRows ? (
              <DatasetPreview kind={current.kind ?? "rows"} rows={previewRows} fields={current.fields} />
            ) : (
              <p className="px-4 py-6 text-sm text-slate-500">
                {current.builtIn ? "This built-in dataset could not be read." : uploadedPreview.error ? uploadedPreview.error.message : "Loading…"}
              </p>
            )}
          </Card>
        ) : (
          <p className="text-sm text-slate-500">Click a dataset to preview its first {PREVIEW_ROWS} rows.</p>
        )}
      </div>

      <div className="min-w-0 space-y-6">
        <Card title="Upload a dataset">
          <UploadForm
            onUploaded={(dataset) => {
              void queryClient.invalidateQueries({ queryKey: trpc.datasets.list.queryKey() });
              setSelected(dataset.name);
            }}
          />
        </Card>
        <Card title="Using a dataset">
          <div className="space-y-3 px-4 py-3 text-sm text-slate-600">
            <p>
              <span className="font-medium text-slate-800">Rows</span> feed an environment, one row per episode as its{" "}
              <code className="font-mono text-xs">sample</code>. Training draws the train rows; evaluation the test rows. In the environment:
            </p>
            <pre className="whitespace-pre-wrap break-words rounded-md bg-slate-50 px-3 py-2 font-mono text-xs text-slate-700">{`data: { kind: "dataset", dataset: "${example}" }`}</pre>
            <p>
              <span className="font-medium text-slate-800">Conversations</span> train an SFT run (algorithm <code className="font-mono text-xs">sft</code>) to
              imitate the assistant&apos;s messages. In the experiment&apos;s config:
            </p>
            <pre className="whitespace-pre-wrap break-words rounded-md bg-slate-50 px-3 py-2 font-mono text-xs text-slate-700">{`sft: { data: "dataset", dataset: "${example}" }`}</pre>
            <p>A JSONL file whose lines hold a messages array is read as conversations, one per line (wrapped here):</p>
            <pre className="overflow-x-auto rounded-md bg-slate-50 px-3 py-2 font-mono text-xs text-slate-700">{`{"messages": [
  {"role": "user", "content": "2+3?"},
  {"role": "assistant", "content": "5"}
]}`}</pre>
            <p>Anything else is rows: JSONL with one flat object per line (strings, numbers, booleans or null), or CSV with a header row.</p>
          </div>
        </Card>
      </div>
    </div>
  );
}

/** What the last rename or delete did, or the server's reason for refusing it. */
function OutcomeNotice({ outcome }: { outcome: DatasetOutcome }) {
  if (outcome.kind === "refused") {
    return (
      <p role="alert" className="border-t border-slate-100 px-4 py-2 text-sm text-red-700">
        {outcome.what}: {outcome.message}
      </p>
    );
  }
  if (outcome.kind === "deleted") {
    return (
      <p role="status" className="border-t border-slate-100 px-4 py-2 text-sm text-slate-600">
        Deleted {outcome.name}.
      </p>
    );
  }
  const { from, renamed } = outcome;
  return (
    <p role="status" className="border-t border-slate-100 px-4 py-2 text-sm text-slate-600">
      Renamed {from} to {renamed.name}.
      {renamed.stillNamedBy.length > 0 && (
        <span className="text-amber-700">
          {" "}
          Still naming <span className="font-mono">{from}</span>:{" "}
          {renamed.stillNamedBy.map((experiment, i) => (
            <span key={experiment.id}>
              {i > 0 && ", "}
              <Link className="font-medium underline" href={`/experiments/${experiment.id}/edit`}>
                {experiment.name}
              </Link>
            </span>
          ))}
          ; edit {renamed.stillNamedBy.length === 1 ? "it" : "them"} to name <span className="font-mono">{renamed.name}</span>.
        </span>
      )}
    </p>
  );
}
