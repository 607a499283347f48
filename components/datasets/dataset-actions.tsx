"use client";

import { useMutation } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";

export type Renamed = inferRouterOutputs<AppRouter>["datasets"]["rename"];

/** What the last rename or delete did, or why the server refused it, for the notice under the table. */
export type DatasetOutcome =
  | { kind: "renamed"; from: string; renamed: Renamed }
  | { kind: "deleted"; name: string }
  | { kind: "refused"; what: string; message: string };

const action = "text-xs font-medium text-brand-700 hover:underline disabled:text-slate-400";

/** The form that takes a dataset's name's place in its row while it is renamed. */
export function RenameForm({ id, name, onDone, onCancel }: { id: string; name: string; onDone: (outcome: DatasetOutcome) => void; onCancel: () => void }) {
  const trpc = useTRPC();
  const [draft, setDraft] = useState(name);
  const rename = useMutation(
    trpc.datasets.rename.mutationOptions({
      onSuccess: (renamed) => onDone({ kind: "renamed", from: name, renamed }),
      onError: (error) => onDone({ kind: "refused", what: `Rename ${name}`, message: error.message }),
    }),
  );
  return (
    <form
      aria-label={`Rename ${name}`}
      className="flex items-center gap-1"
      onSubmit={(event) => {
        event.preventDefault();
        rename.mutate({ id, name: draft.trim() });
      }}
    >
      <input
        aria-label="New name"
        className="w-40 rounded-md border border-slate-300 px-2 py-1 font-mono text-xs"
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
        // biome-ignore lint/a11y/noAutofocus: the field the Rename click asked for
        autoFocus
      />
      <button
        type="submit"
        className="rounded-md border border-slate-300 bg-white px-2 py-1 text-xs font-medium text-slate-800 hover:bg-slate-50 disabled:text-slate-400"
        disabled={rename.isPending || draft.trim() === ""}
      >
        Save
      </button>
      <button type="button" className="rounded-md px-2 py-1 text-xs font-medium text-slate-600 hover:bg-slate-100" onClick={onCancel}>
        Cancel
      </button>
    </form>
  );
}

/**
 * An uploaded dataset's Rename (which asks its row for the form) and Delete (after a confirmation naming the
 * dataset). `onDone` hears a delete's outcome, a refusal included, in the server's words.
 */
export function DatasetActions({ id, name, onRename, onDone }: { id: string; name: string; onRename: () => void; onDone: (outcome: DatasetOutcome) => void }) {
  const trpc = useTRPC();
  const remove = useMutation(
    trpc.datasets.delete.mutationOptions({
      onSuccess: (deleted) => onDone({ kind: "deleted", name: deleted.name }),
      onError: (error) => onDone({ kind: "refused", what: `Delete ${name}`, message: error.message }),
    }),
  );
  return (
    <span className="flex flex-col items-end gap-1">
      <button type="button" className={action} title={`Rename ${name}`} onClick={onRename}>
        Rename
      </button>
      <button
        type="button"
        className={action}
        title={`Delete ${name} and its stored rows`}
        disabled={remove.isPending}
        onClick={() => {
          if (window.confirm(`Delete the dataset '${name}' and its stored rows? This cannot be undone.`)) remove.mutate({ id });
        }}
      >
        Delete
      </button>
    </span>
  );
}
