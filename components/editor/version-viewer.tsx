"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { RelativeTime } from "@/components/ui/time";
import { CodeEditor } from "./code-editor";

export type SavedVersion = { version: number; files: Record<string, string>; config: Record<string, unknown>; message: string };

/**
 * An earlier version of an experiment, read-only: its files and config as they were saved. "Restore" puts them in
 * the editor as unsaved changes (saving makes them the newest version; nothing is overwritten).
 */
export function VersionViewer({
  experimentId,
  version,
  onRestore,
  onClose,
}: {
  experimentId: string;
  version: number;
  onRestore(saved: SavedVersion): void;
  onClose(): void;
}) {
  const trpc = useTRPC();
  const query = useQuery(trpc.experiments.version.queryOptions({ id: experimentId, version }));
  const [shown, setShown] = useState<string | null>(null);
  const data = query.data;
  const files = (data?.files ?? {}) as Record<string, string>;
  const names = Object.keys(files);
  const current = shown ?? names[0] ?? "config.json";
  const isConfig = current === "config.json";
  return (
    <Card
      className="flex min-w-0 flex-col overflow-hidden"
      title={
        <span>
          Version {version} <span className="font-normal text-slate-500">(read-only)</span>
        </span>
      }
      actions={
        <div className="flex items-center gap-2">
          <Button
            variant="secondary"
            disabled={!data}
            onClick={() =>
              data &&
              onRestore({
                version: data.version,
                files: data.files as Record<string, string>,
                config: data.config as Record<string, unknown>,
                message: data.message,
              })
            }
          >
            Restore this version
          </Button>
          <Button variant="ghost" onClick={onClose}>
            Back to editing
          </Button>
        </div>
      }
    >
      {query.error ? (
        <p role="alert" className="px-4 py-3 text-sm text-red-600">
          {query.error.message}
        </p>
      ) : !data ? (
        <p className="px-4 py-3 text-sm text-slate-500">Loading…</p>
      ) : (
        <>
          <p className="border-b border-slate-200 px-4 py-2 text-xs text-slate-500">
            Saved <RelativeTime date={data.createdAt} />
            {data.message && ` · ${data.message}`}
          </p>
          <div role="tablist" aria-label="Version parts" className="flex flex-wrap border-b border-slate-200 px-2">
            {[...names, "config.json"].map((name) => (
              <button
                key={name}
                type="button"
                role="tab"
                aria-selected={current === name}
                onClick={() => setShown(name)}
                className={`-mb-px border-b-2 px-3 py-2 font-mono text-sm ${current === name ? "border-brand-600 font-medium text-brand-700" : "border-transparent text-slate-600 hover:text-slate-900"}`}
              >
                {name}
              </button>
            ))}
          </div>
          <div className="h-[36rem]">
            <CodeEditor
              key={current}
              path={`v${version}/${current}`}
              value={isConfig ? JSON.stringify(data.config, null, 2) : (files[current] ?? "")}
              onChange={() => {}}
              language={isConfig ? "json" : "typescript"}
              label={`Version ${version} ${current}`}
              readOnly
            />
          </div>
        </>
      )}
    </Card>
  );
}
