"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { ErrorMessage } from "@/components/ui/error-message";
import { RelativeTime } from "@/components/ui/time";
import type { AppRouter } from "@/server/api";
import { RoleBadge } from "./role-badge";

type ProjectList = inferRouterOutputs<AppRouter>["projects"]["list"];

/** The caller's projects, and a form to make one (its maker owns it). */
export function ProjectsView({ initialProjects }: { initialProjects: ProjectList }) {
  const trpc = useTRPC();
  const projects = useQuery({ ...trpc.projects.list.queryOptions(), initialData: initialProjects });
  return (
    <div className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_22rem]">
      <Card title={`Your projects (${projects.data.length})`} className="min-w-0">
        {projects.data.length === 0 ? (
          <EmptyState title="No projects yet">Make one, or open an invitation link a project owner sent you.</EmptyState>
        ) : (
          <div className="overflow-x-auto">
            <table className="w-full text-sm" aria-label="Projects">
              <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
                <tr>
                  <th className="px-4 py-2 font-medium">Name</th>
                  <th className="px-4 py-2 font-medium">Your role</th>
                  <th className="px-4 py-2 text-right font-medium">Members</th>
                  <th className="px-4 py-2 font-medium">Created</th>
                </tr>
              </thead>
              <tbody className="divide-y divide-slate-100">
                {projects.data.map((project) => (
                  <tr key={project.id} data-project={project.id} className="hover:bg-slate-50">
                    <td className="px-4 py-2">
                      <Link href={`/projects/${project.id}`} className="font-medium text-slate-800 hover:text-brand-700 hover:underline">
                        {project.name}
                      </Link>
                      <span className="ml-2 font-mono text-xs text-slate-400">{project.id}</span>
                    </td>
                    <td className="px-4 py-2">
                      <RoleBadge role={project.role} />
                    </td>
                    <td className="px-4 py-2 text-right tabular-nums text-slate-700">{project.members}</td>
                    <td className="whitespace-nowrap px-4 py-2 text-slate-500">
                      <RelativeTime date={project.createdAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Card>
      <Card title="Make a project" className="min-w-0">
        <NewProjectForm />
      </Card>
    </div>
  );
}

function NewProjectForm() {
  const trpc = useTRPC();
  const router = useRouter();
  const [name, setName] = useState("");
  const create = useMutation(trpc.projects.create.mutationOptions({ onSuccess: ({ id }) => router.push(`/projects/${id}`) }));
  return (
    <form
      aria-label="Make a project"
      className="space-y-3 px-4 py-3"
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate({ name });
      }}
    >
      <label className="block text-sm font-medium text-slate-700">
        Name
        <input
          name="name"
          value={name}
          onChange={(event) => setName(event.target.value)}
          maxLength={120}
          placeholder="e.g. tool-use agents"
          className="mt-1 block w-full rounded-md border border-slate-300 px-3 py-1.5 text-sm font-normal focus:border-brand-500 focus:outline-none"
        />
      </label>
      <ErrorMessage error={create.error} />
      <div className="flex items-center justify-between gap-3">
        <p className="text-xs text-slate-500">You become its owner and can invite others.</p>
        <Button type="submit" className="shrink-0" disabled={create.isPending || create.isSuccess}>
          {create.isPending ? "Making…" : "Make project"}
        </Button>
      </div>
    </form>
  );
}
