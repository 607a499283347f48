"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { DEFAULT_METRIC, DEFAULT_SMOOTHING } from "@/components/compare/compare-state";
import { ShareButton } from "@/components/share/share-button";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { MAX_BLOCKS, MAX_PANEL_RUNS, type NoteBlock, type PanelBlock, type ReportBlock } from "@/lib/reports/blocks";
import { Markdown } from "./markdown";
import { ReportPanel } from "./report-panel";

export type ReportData = { id: string; title: string; blocks: ReportBlock[]; mayEdit: boolean };

const blockId = () => Math.random().toString(36).slice(2, 10);

/** A report's blocks, read-only (its page for viewers, a share link's page). */
export function ReportBlocks({ blocks }: { blocks: ReportBlock[] }) {
  if (blocks.length === 0) return <p className="text-sm text-slate-500">This report is empty.</p>;
  return (
    <div className="space-y-4">
      {blocks.map((block) =>
        block.kind === "note" ? (
          <article key={block.id} aria-label="note" className="rounded-lg border border-slate-200 bg-white px-4 py-3">
            <Markdown text={block.markdown} />
          </article>
        ) : (
          <ReportPanel key={block.id} block={block} />
        ),
      )}
    </div>
  );
}

/**
 * A report's page: its blocks, each panel live; its editors switch to edit mode to add, remove and reorder blocks,
 * write notes (a textarea beside its rendered preview) and choose each panel's runs, metric, x-axis and smoothing.
 */
export function ReportView({ report }: { report: ReportData }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const [editing, setEditing] = useState(false);
  const [title, setTitle] = useState(report.title);
  const [blocks, setBlocks] = useState(report.blocks);
  const [saved, setSaved] = useState({ title: report.title, blocks: report.blocks });
  const save = useMutation(
    trpc.reports.update.mutationOptions({
      onSuccess: () => {
        setSaved({ title, blocks });
        setEditing(false);
        void queryClient.invalidateQueries({ queryKey: trpc.reports.pathKey() });
        router.refresh();
      },
    }),
  );
  const remove = useMutation(trpc.reports.delete.mutationOptions({ onSuccess: () => router.push("/reports") }));
  const setBlock = (index: number, block: ReportBlock) => setBlocks(blocks.map((b, i) => (i === index ? block : b)));
  const move = (index: number, by: number) => {
    const next = [...blocks];
    const [moved] = next.splice(index, 1);
    next.splice(index + by, 0, moved!);
    setBlocks(next);
  };
  const lastRuns = blocks.findLast((b): b is PanelBlock => b.kind === "panel")?.runIds ?? [];
  const add = (kind: "note" | "panel") =>
    setBlocks([
      ...blocks,
      kind === "note"
        ? { kind: "note", id: blockId(), markdown: "" }
        : { kind: "panel", id: blockId(), runIds: lastRuns, metric: DEFAULT_METRIC, x: "step", smoothing: DEFAULT_SMOOTHING, group: null },
    ]);

  return (
    <div className="space-y-4">
      <div className="flex flex-wrap items-center gap-2">
        {editing ? (
          <label className="flex min-w-0 flex-1 items-center gap-2 text-sm">
            <span className="font-medium text-slate-700">Title</span>
            <input
              aria-label="Report title"
              value={title}
              onChange={(event) => setTitle(event.target.value)}
              className="min-w-0 flex-1 rounded-md border border-slate-300 px-2 py-1.5"
            />
          </label>
        ) : (
          <span className="flex-1" />
        )}
        {report.mayEdit && !editing && (
          <>
            <ShareButton kind="report" reportId={report.id} runIds={[]} canCreate />
            <Button variant="secondary" onClick={() => setEditing(true)}>
              Edit
            </Button>
          </>
        )}
        {editing && (
          <>
            <Button
              variant="ghost"
              onClick={() => {
                setTitle(saved.title);
                setBlocks(saved.blocks);
                setEditing(false);
                save.reset();
              }}
            >
              Cancel
            </Button>
            <Button
              variant="ghost"
              className="text-red-700"
              disabled={remove.isPending}
              onClick={() => window.confirm(`Delete the report "${saved.title}"? Its share links stop working.`) && remove.mutate({ id: report.id })}
            >
              Delete
            </Button>
            <Button disabled={save.isPending} onClick={() => save.mutate({ id: report.id, title, blocks })}>
              {save.isPending ? "Saving…" : "Save"}
            </Button>
          </>
        )}
      </div>
      {(save.error ?? remove.error) && (
        <p role="alert" className="whitespace-pre-line text-sm text-red-600">
          {(save.error ?? remove.error)?.message}
        </p>
      )}
      {!editing ? (
        <ReportBlocks blocks={saved.blocks} />
      ) : (
        <ol className="space-y-4" aria-label="Blocks">
          {blocks.map((block, index) => (
            <li key={block.id} className="rounded-lg border border-dashed border-slate-300 bg-slate-50/50 p-3">
              <div className="mb-2 flex items-center gap-1 text-xs">
                <span className="font-medium uppercase tracking-wide text-slate-500">{block.kind}</span>
                <span className="flex-1" />
                <Button variant="ghost" aria-label={`Move block ${index + 1} up`} disabled={index === 0} onClick={() => move(index, -1)}>
                  ↑
                </Button>
                <Button variant="ghost" aria-label={`Move block ${index + 1} down`} disabled={index === blocks.length - 1} onClick={() => move(index, 1)}>
                  ↓
                </Button>
                <Button variant="ghost" aria-label={`Remove block ${index + 1}`} onClick={() => setBlocks(blocks.filter((_, i) => i !== index))}>
                  ×
                </Button>
              </div>
              {block.kind === "note" ? (
                <NoteEditor block={block} onChange={(next) => setBlock(index, next)} />
              ) : (
                <PanelEditor block={block} onChange={(next) => setBlock(index, next)} />
              )}
            </li>
          ))}
          <li className="flex gap-2">
            <Button variant="secondary" disabled={blocks.length >= MAX_BLOCKS} onClick={() => add("note")}>
              Add note
            </Button>
            <Button variant="secondary" disabled={blocks.length >= MAX_BLOCKS} onClick={() => add("panel")}>
              Add panel
            </Button>
          </li>
        </ol>
      )}
    </div>
  );
}

function NoteEditor({ block, onChange }: { block: NoteBlock; onChange(block: NoteBlock): void }) {
  return (
    <div className="grid gap-3 md:grid-cols-2">
      <textarea
        aria-label="Note (markdown)"
        value={block.markdown}
        onChange={(event) => onChange({ ...block, markdown: event.target.value })}
        rows={8}
        placeholder="# Heading, paragraphs, - lists, **bold**, `code`, [links](https://…)"
        className="w-full rounded-md border border-slate-300 bg-white p-2 font-mono text-xs"
      />
      <section aria-label="Preview" className="rounded-md border border-slate-200 bg-white p-3">
        {block.markdown.trim() ? <Markdown text={block.markdown} /> : <p className="text-xs text-slate-400">The preview shows here.</p>}
      </section>
    </div>
  );
}

function PanelEditor({ block, onChange }: { block: PanelBlock; onChange(block: PanelBlock): void }) {
  const trpc = useTRPC();
  const recent = useQuery(trpc.runs.list.queryOptions({ limit: 100 }));
  const runs = recent.data?.items ?? [];
  const toggle = (id: string) =>
    onChange({ ...block, runIds: block.runIds.includes(id) ? block.runIds.filter((r) => r !== id) : [...block.runIds, id].slice(0, MAX_PANEL_RUNS) });
  const input = "rounded-md border border-slate-300 bg-white px-2 py-1 text-sm";
  return (
    <div className="space-y-3">
      <div className="flex flex-wrap items-end gap-3 text-sm">
        <label className="flex flex-col gap-1">
          <span className="text-xs text-slate-600">Metric</span>
          <input
            aria-label="Metric"
            value={block.metric}
            onChange={(event) => onChange({ ...block, metric: event.target.value })}
            className={`${input} font-mono`}
          />
        </label>
        <label className="flex flex-col gap-1">
          <span className="text-xs text-slate-600">x-axis</span>
          <select
            aria-label="x-axis"
            value={block.x.startsWith("metric:") ? "step" : block.x}
            onChange={(event) => onChange({ ...block, x: event.target.value as PanelBlock["x"] })}
            className={input}
          >
            <option value="step">step</option>
            <option value="time">wall time</option>
            <option value="tokens">tokens</option>
          </select>
        </label>
        <label className="flex flex-col gap-1">
          <span className="text-xs text-slate-600">Smoothing {block.smoothing}</span>
          <input
            aria-label="Smoothing"
            type="range"
            min={0}
            max={0.99}
            step={0.01}
            value={block.smoothing}
            onChange={(event) => onChange({ ...block, smoothing: Number(event.target.value) })}
          />
        </label>
        <label className="flex flex-col gap-1">
          <span className="text-xs text-slate-600">Group by config field</span>
          <input
            aria-label="Group by"
            placeholder="e.g. seed"
            value={block.group ?? ""}
            onChange={(event) => onChange({ ...block, group: event.target.value.trim() || null })}
            className={`${input} font-mono`}
          />
        </label>
      </div>
      <fieldset>
        <legend className="text-xs text-slate-600">
          Runs ({block.runIds.length} of at most {MAX_PANEL_RUNS})
        </legend>
        <div className="mt-1 flex max-h-40 flex-wrap gap-x-4 gap-y-1 overflow-auto text-sm">
          {[...block.runIds.filter((id) => !runs.some((r) => r.id === id)).map((id) => ({ id, name: id, status: "" })), ...runs].map((run) => (
            <label key={run.id} className="inline-flex items-center gap-1.5">
              <input type="checkbox" checked={block.runIds.includes(run.id)} onChange={() => toggle(run.id)} />
              {run.name}
              {run.status && <span className="text-xs text-slate-400">{run.status}</span>}
            </label>
          ))}
          {recent.isSuccess && runs.length === 0 && <span className="text-slate-500">No runs yet.</span>}
        </div>
      </fieldset>
      {block.runIds.length > 0 && block.metric && <ReportPanel block={block} />}
    </div>
  );
}
