"use client";

import { useQuery } from "@tanstack/react-query";
import { useEffect } from "react";
import { useTRPC } from "@/components/trpc/provider";

/**
 * Which project something new goes to: the projects the caller may edit in, the first chosen at the start. Shown
 * only when there is a choice; with none, it says how to get one.
 */
export function ProjectSelect({ value, onChange, className = "" }: { value: string; onChange(projectId: string): void; className?: string }) {
  const trpc = useTRPC();
  const projects = useQuery(trpc.projects.list.queryOptions());
  const editable = (projects.data ?? []).filter((p) => p.role === "editor" || p.role === "owner");
  const first = editable[0]?.id;
  useEffect(() => {
    if (first && !editable.some((p) => p.id === value)) onChange(first);
  }, [first, value, editable, onChange]);
  if (projects.isSuccess && editable.length === 0) {
    return <p className="text-xs text-amber-700">You may edit in no project yet: make one on the Projects page, or ask an owner to make you an editor.</p>;
  }
  if (editable.length < 2) return null;
  return (
    <label className={`block ${className}`}>
      <span className="text-sm font-medium text-slate-700">Project</span>
      <select
        name="project"
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className="mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm focus:border-brand-500 focus:outline-none"
      >
        {editable.map((p) => (
          <option key={p.id} value={p.id}>
            {p.name}
          </option>
        ))}
      </select>
    </label>
  );
}
