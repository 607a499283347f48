"use client";

import { useQuery } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useRef, useState } from "react";
import { flushSync } from "react-dom";
import { Button } from "@/components/ui/button";
import { STARTER_ENTRY, starters, type StarterKind } from "@/components/editor/starter";
import { useKeyedMutation } from "@/components/trpc/keyed-mutation";
import { useTRPC } from "@/components/trpc/provider";
import { ProjectSelect } from "@/components/ui/project-select";

/** Template values that start the user's own environment from the starter of that kind. */
const CUSTOM = "custom:";

/** A button that opens an inline form; creating the experiment takes the user to its page. */
export function NewExperimentForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const [open, setOpen] = useState(false);
  const nameInput = useRef<HTMLInputElement>(null);
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [template, setTemplate] = useState("arithmetic");
  const [projectId, setProjectId] = useState("");
  const templates = useQuery({ ...trpc.experiments.templates.queryOptions(), enabled: open });
  const create = useKeyedMutation(
    trpc.experiments.create.mutationOptions({
      onSuccess: ({ id }) => router.push(`/experiments/${id}`),
    }),
  );
  const fieldErrors = (create.error?.data as { zodError?: { fieldErrors?: Record<string, string[]> } } | undefined)?.zodError?.fieldErrors;

  if (!open) {
    const start = () => {
      // The form replaces the focused button: the focus goes to its first field rather than back to the page.
      flushSync(() => setOpen(true));
      nameInput.current?.focus();
    };
    return <Button onClick={start}>New experiment</Button>;
  }
  return (
    <form
      aria-label="New experiment"
      className="w-full max-w-lg space-y-3 rounded-lg border border-slate-200 bg-white p-4 text-left shadow-sm"
      onSubmit={(event) => {
        event.preventDefault();
        if (template.startsWith(CUSTOM)) {
          const starter = starters[template.slice(CUSTOM.length) as StarterKind];
          create.mutate({ name, description, projectId: projectId || undefined, files: { [STARTER_ENTRY]: starter.source }, config: starter.config(name) });
        } else {
          create.mutate({ name, description, projectId: projectId || undefined, template });
        }
      }}
    >
      <label className="block">
        <span className="text-sm font-medium text-slate-700">Name</span>
        <input
          ref={nameInput}
          name="name"
          value={name}
          onChange={(event) => setName(event.target.value)}
          placeholder="e.g. arithmetic-grpo"
          className="mt-1 block w-full rounded-md border border-slate-300 px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
        />
        {fieldErrors?.name && <span className="mt-1 block text-xs text-red-600">{fieldErrors.name.join(", ")}</span>}
      </label>
      <ProjectSelect value={projectId} onChange={setProjectId} />
      <label className="block">
        <span className="text-sm font-medium text-slate-700">Start from</span>
        <select
          name="template"
          value={template}
          onChange={(event) => setTemplate(event.target.value)}
          className="mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
        >
          {(templates.data ?? [{ key: "arithmetic", title: "Two-digit addition (single turn)", algorithm: "grpo" }]).map((t) => (
            <option key={t.key} value={t.key}>
              {t.title} · {t.algorithm}
            </option>
          ))}
          <optgroup label="Your own environment (TypeScript, from the generalist base)">
            {Object.values(starters).map((starter) => (
              <option key={starter.kind} value={`${CUSTOM}${starter.kind}`}>
                {starter.title}
              </option>
            ))}
          </optgroup>
        </select>
      </label>
      <label className="block">
        <span className="text-sm font-medium text-slate-700">Description</span>
        <textarea
          name="description"
          value={description}
          onChange={(event) => setDescription(event.target.value)}
          rows={2}
          placeholder="What are you trying to learn?"
          className="mt-1 block w-full rounded-md border border-slate-300 px-3 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
        />
      </label>
      {create.error && !fieldErrors && <p className="text-sm text-red-600">{create.error.message}</p>}
      <div className="flex justify-end gap-2">
        <Button type="button" variant="secondary" onClick={() => setOpen(false)}>
          Cancel
        </Button>
        <Button type="submit" disabled={create.isPending}>
          {create.isPending ? "Creating…" : "Create experiment"}
        </Button>
      </div>
    </form>
  );
}
