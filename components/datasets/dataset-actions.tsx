"use client";

import { useMutation } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import { useState } from "react";
import { Button } from "@/components/ui/button";
import { useTRPC } from "@/components/trpc/provider";
import type { AppRouter } from "@/server/api";

export type Renamed = inferRouterOutputs<AppRouter>["datasets"]["rename"];

/** What the last rename or delete did, or why the server refused it, for the notice under the table. */
export type DatasetOutcome =
  | { kind: "renamed"; from: string; renamed: Renamed }
  | { kind: "deleted"; name: string }
  | { kind: "refused"; what: string; message: string };

/**
 * An uploaded dataset's Rename and Delete buttons. Rename opens a small form in place of the buttons; Delete asks
 * for confirmation, naming the dataset. `onDone` hears each outcome, a refusal included, in the server's words.
 */
export function DatasetActions({ id, name, onDone }: { id: string; name: string; onDone: (outcome: DatasetOutcome) => void }) {
  const trpc = useTRPC();
  const [renaming, setRenaming] = useState(false);
  const [draft, setDraft] = useState(name);
  const rename = useMutation(
    trpc.datasets.rename.mutationOptions({
      onSuccess: (renamed) => {
        setRenaming(false);
        onDone({ kind: "renamed", from: name, renamed });
      },
      onError: (error) => onDone({ kind: "refused", what: `Rename ${name}`, message: error.message }),
    }),
  );
  const remove = useMutation(
    trpc.datasets.delete.mutationOptions({
      onSuccess: (deleted) => onDone({ kind: "deleted", name: deleted.name }),
      onError: (error) => onDone({ kind: "refused", what: `Delete ${name}`, message: error.message }),
    }),
  );

  if (renaming) {
    return (
      <form
        aria-label={`Rename ${name}`}
        className="flex items-center justify-end gap-1"
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
        <Button type="submit" variant="secondary" disabled={rename.isPending || draft.trim() === ""}>
          Save
        </Button>
        <Button variant="ghost" onClick={() => setRenaming(false)}>
          Cancel
        </Button>
      </form>
    );
  }
  return (
    <span className="flex justify-end gap-1">
      <Button
        variant="ghost"
        aria-label={`Rename ${name}`}
        onClick={() => {
          setDraft(name);
          setRenaming(true);
        }}
      >
        Rename
      </Button>
      <Button
        variant="ghost"
        aria-label={`Delete ${name}`}
        disabled={remove.isPending}
        onClick={() => {
          if (window.confirm(`Delete the dataset '${name}' and its stored rows? This cannot be undone.`)) remove.mutate({ id });
        }}
      >
        Delete
      </Button>
    </span>
  );
}
