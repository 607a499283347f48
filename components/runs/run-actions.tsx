"use client";

import { useMutation } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import { ErrorMessage } from "@/components/ui/error-message";
import { tagProblem } from "@/lib/runs-table";
import { Dialog } from "./dialog";

/** What the actions need of a row. */
export type ActionRun = {
  id: string;
  name: string;
  status: string;
  kind: string | null;
  tags: string[];
  notes: string;
  archived: boolean;
  experimentName: string;
};

export type RunAction = "rename" | "tags" | "notes" | "clone" | "rerun" | "archive" | "unarchive" | "delete";

const FINISHED = ["completed", "failed", "cancelled"];
const isTraining = (run: ActionRun) => run.kind === null || run.kind === "rl" || run.kind === "sft";

/**
 * A row's menu of what an editor may do with its run; each item opens its dialog (`onPick`). Its items are made
 * when it opens: a page of 1,000 rows would otherwise hold 8,000 buttons nobody sees.
 */
export function RunActionsMenu({ run, onPick }: { run: ActionRun; onPick(action: RunAction): void }) {
  const [open, setOpen] = useState(false);
  const items: [RunAction, string][] = [
    ["rename", "Rename…"],
    ["tags", "Tags…"],
    ["notes", "Notes…"],
    ...(isTraining(run)
      ? ([
          ["clone", "Clone to editor…"],
          ["rerun", "Re-run with another seed…"],
        ] as [RunAction, string][])
      : []),
    run.archived ? ["unarchive", "Unarchive"] : ["archive", "Archive…"],
    ["delete", "Delete…"],
  ];
  return (
    <details className="relative inline-block text-left [&[open]>summary]:bg-slate-100" onToggle={(event) => setOpen(event.currentTarget.open)}>
      <summary
        aria-label={`Actions for ${run.name}`}
        className="cursor-pointer list-none rounded-md px-2 py-0.5 text-slate-500 hover:bg-slate-100 hover:text-slate-800 [&::-webkit-details-marker]:hidden"
      >
        ⋯
      </summary>
      <menu className="absolute right-0 z-20 mt-1 w-52 rounded-md border border-slate-200 bg-white py-1 text-sm shadow-lg">
        {(open ? items : []).map(([action, label]) => (
          <li key={action}>
            <button
              type="button"
              className={`block w-full px-3 py-1.5 text-left hover:bg-slate-50 ${action === "delete" ? "text-red-700" : "text-slate-700"}`}
              onClick={(event) => {
                event.currentTarget.closest("details")?.removeAttribute("open");
                onPick(action);
              }}
            >
              {label}
            </button>
          </li>
        ))}
      </menu>
    </details>
  );
}

/** The dialog of one action on one run; `onDone` runs after it succeeded (the table then reloads), with a message. */
export function RunActionDialog({
  run,
  action,
  onClose,
  onDone,
}: {
  run: ActionRun;
  action: RunAction;
  onClose(): void;
  onDone(message?: React.ReactNode): void;
}) {
  switch (action) {
    case "rename":
      return <RenameDialog run={run} onClose={onClose} onDone={onDone} />;
    case "tags":
      return <TagsDialog run={run} onClose={onClose} onDone={onDone} />;
    case "notes":
      return <NotesDialog run={run} onClose={onClose} onDone={onDone} />;
    case "clone":
      return <CloneDialog run={run} onClose={onClose} />;
    case "rerun":
      return <RerunDialog run={run} onClose={onClose} onDone={onDone} />;
    case "archive":
    case "unarchive":
      return <ArchiveDialog run={run} archive={action === "archive"} onClose={onClose} onDone={onDone} />;
    case "delete":
      return <DeleteDialog run={run} onClose={onClose} onDone={onDone} />;
  }
}

type Props = { run: ActionRun; onClose(): void; onDone(message?: React.ReactNode): void };

const inputClass = "block w-full rounded-md border border-slate-300 bg-white px-2.5 py-1.5 text-sm focus:border-brand-500 focus:outline-none";

function RenameDialog({ run, onClose, onDone }: Props) {
  const trpc = useTRPC();
  const [name, setName] = useState(run.name);
  const rename = useMutation(trpc.runs.rename.mutationOptions({ onSuccess: () => onDone() }));
  return (
    <Dialog
      title={`Rename ${run.name}`}
      submitLabel="Rename"
      submitDisabled={name.trim() === "" || name.trim() === run.name}
      pending={rename.isPending}
      onClose={onClose}
      onSubmit={() => rename.mutate({ id: run.id, name })}
    >
      <label className="block">
        <span className="font-medium">Name</span>
        <input className={`mt-1 ${inputClass}`} value={name} maxLength={200} onChange={(e) => setName(e.target.value)} />
      </label>
      <p className="text-xs text-slate-500">Names are unique in a project, so a comparison's legend tells runs apart.</p>
      <ErrorMessage error={rename.error} />
    </Dialog>
  );
}

function TagsDialog({ run, onClose, onDone }: Props) {
  const trpc = useTRPC();
  const [tags, setTags] = useState(run.tags);
  const [draft, setDraft] = useState("");
  const typed = draft.split(/[\s,]+/).filter(Boolean);
  const problem = typed.map(tagProblem).find(Boolean) ?? null;
  const tag = useMutation(trpc.runs.tag.mutationOptions({ onSuccess: () => onDone() }));
  const next = [...new Set([...tags, ...typed])];
  return (
    <Dialog
      title={`Tags of ${run.name}`}
      submitLabel="Save tags"
      submitDisabled={problem !== null}
      pending={tag.isPending}
      onClose={onClose}
      onSubmit={() => tag.mutate({ id: run.id, add: next.filter((t) => !run.tags.includes(t)), remove: run.tags.filter((t) => !next.includes(t)) })}
    >
      <ul aria-label="Tags" className="flex min-h-7 flex-wrap gap-1.5">
        {tags.length === 0 && <li className="text-slate-400">No tags yet.</li>}
        {tags.map((t) => (
          <li key={t} className="inline-flex items-center gap-1 rounded-full bg-brand-50 px-2 py-0.5 text-xs text-brand-700">
            {t}
            <button
              type="button"
              aria-label={`Remove tag ${t}`}
              className="text-brand-600 hover:text-slate-900"
              onClick={() => setTags(tags.filter((x) => x !== t))}
            >
              ×
            </button>
          </li>
        ))}
      </ul>
      <label className="block">
        <span className="font-medium">Add tags</span>
        <input className={`mt-1 ${inputClass}`} value={draft} placeholder="baseline lr-sweep" onChange={(e) => setDraft(e.target.value)} />
      </label>
      {problem ? <p className="text-xs text-red-700">{problem}</p> : <p className="text-xs text-slate-500">Separate tags with spaces or commas.</p>}
      <ErrorMessage error={tag.error} />
    </Dialog>
  );
}

function NotesDialog({ run, onClose, onDone }: Props) {
  const trpc = useTRPC();
  const [notes, setNotes] = useState(run.notes);
  const save = useMutation(trpc.runs.setNotes.mutationOptions({ onSuccess: () => onDone() }));
  return (
    <Dialog
      title={`Notes on ${run.name}`}
      submitLabel="Save notes"
      pending={save.isPending}
      onClose={onClose}
      onSubmit={() => save.mutate({ id: run.id, notes })}
    >
      <label className="block">
        <span className="sr-only">Notes</span>
        <textarea className={`h-32 ${inputClass}`} value={notes} maxLength={10_000} onChange={(e) => setNotes(e.target.value)} />
      </label>
      <ErrorMessage error={save.error} />
    </Dialog>
  );
}

function CloneDialog({ run, onClose }: Omit<Props, "onDone">) {
  const trpc = useTRPC();
  const router = useRouter();
  const clone = useKeyedMutation(trpc.runs.clone.mutationOptions({ onSuccess: ({ experimentId }) => router.push(`/experiments/${experimentId}`) }));
  return (
    <Dialog title={`Clone ${run.name}`} submitLabel="Clone and open" pending={clone.isPending} onClose={onClose} onSubmit={() => clone.mutate({ id: run.id })}>
      <p>
        Saves the exact source and config this run ran with as the next version of <strong>{run.experimentName}</strong>, and opens it in the editor to change
        and launch.
      </p>
      <ErrorMessage error={clone.error} />
    </Dialog>
  );
}

function RerunDialog({ run, onClose, onDone }: Props) {
  const trpc = useTRPC();
  const [seed, setSeed] = useState("");
  const rerun = useKeyedMutation(
    trpc.runs.rerun.mutationOptions({
      onSuccess: ({ runId, seed }) =>
        onDone(
          <>
            Launched{" "}
            <Link className="font-medium text-brand-700 hover:underline" href={`/runs/${runId}`}>
              a re-run with seed {seed}
            </Link>
            .
          </>,
        ),
    }),
  );
  const seedValue = seed.trim() === "" ? undefined : Number(seed);
  const badSeed = seedValue !== undefined && !(Number.isInteger(seedValue) && seedValue >= 0);
  return (
    <Dialog
      title={`Re-run ${run.name}`}
      submitLabel="Launch"
      submitDisabled={badSeed}
      pending={rerun.isPending}
      onClose={onClose}
      onSubmit={() => rerun.mutate({ id: run.id, ...(seedValue !== undefined ? { seed: seedValue } : {}) })}
    >
      <p>Launches this run's experiment version again, with the same source and config and another seed.</p>
      <label className="block">
        <span className="font-medium">Seed</span>
        <input className={`mt-1 ${inputClass}`} inputMode="numeric" value={seed} placeholder="the next unused one" onChange={(e) => setSeed(e.target.value)} />
      </label>
      {badSeed && <p className="text-xs text-red-700">A seed is a whole number, 0 or more.</p>}
      <ErrorMessage error={rerun.error} />
    </Dialog>
  );
}

function ArchiveDialog({ run, archive, onClose, onDone }: Props & { archive: boolean }) {
  const trpc = useTRPC();
  const mutation = useMutation(trpc.runs.archive.mutationOptions({ onSuccess: () => onDone() }));
  return (
    <Dialog
      title={`${archive ? "Archive" : "Unarchive"} ${run.name}`}
      submitLabel={archive ? "Archive" : "Unarchive"}
      pending={mutation.isPending}
      onClose={onClose}
      onSubmit={() => mutation.mutate({ id: run.id, archived: archive })}
    >
      <p>
        {archive ? "The run leaves the table (tick “Archived” to see it again); its page, metrics and checkpoints stay." : "The run comes back to the table."}
      </p>
      <ErrorMessage error={mutation.error} />
    </Dialog>
  );
}

function DeleteDialog({ run, onClose, onDone }: Props) {
  const trpc = useTRPC();
  const [typed, setTyped] = useState("");
  const remove = useMutation(
    trpc.runs.delete.mutationOptions({
      onSuccess: ({ withIt }) =>
        onDone(
          `Deleted ${run.name}${withIt.length ? ` and its ${withIt.length === 1 ? "evaluation or export" : `${withIt.length} evaluations and exports`}` : ""}.`,
        ),
    }),
  );
  const finished = FINISHED.includes(run.status);
  return (
    <Dialog
      title={`Delete ${run.name}`}
      submitLabel="Delete for good"
      danger
      submitDisabled={typed !== run.name || !finished}
      pending={remove.isPending}
      onClose={onClose}
      onSubmit={() => remove.mutate({ id: run.id, confirmName: typed })}
    >
      {finished ? (
        <>
          <p>
            Deletes the run with its metrics, rollouts, logs and checkpoints, and its evaluations and exports. This cannot be undone; archiving hides a run and
            keeps it.
          </p>
          <label className="block">
            <span className="font-medium">Type the run's name to confirm</span>
            <input className={`mt-1 font-mono ${inputClass}`} value={typed} autoComplete="off" onChange={(e) => setTyped(e.target.value)} />
          </label>
        </>
      ) : (
        <p role="alert" className="text-red-700">
          The run is {run.status}: cancel it on its page first, then delete it.
        </p>
      )}
      <ErrorMessage error={remove.error} />
    </Dialog>
  );
}
