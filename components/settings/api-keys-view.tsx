"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import type { inferRouterOutputs } from "@trpc/server";
import Link from "next/link";
import { useState } from "react";
import { RoleBadge } from "@/components/projects/role-badge";
import { rolesUpTo } from "@/components/projects/roles";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { CopyField } from "@/components/ui/copy-field";
import { DataTable, RevokeCell, StatusCell, TimeCell } from "@/components/ui/data-table";
import { EmptyState } from "@/components/ui/empty-state";
import { ErrorMessage } from "@/components/ui/error-message";
import { accessStatus } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";
import type { ApiKeyRole } from "@/lib/lifecycle/roles";
import type { AppRouter } from "@/server/api";

type Outputs = inferRouterOutputs<AppRouter>;
type ApiKey = Outputs["apiKeys"]["list"][number];
type Project = Outputs["projects"]["list"][number];

const field = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm font-normal focus:border-brand-500 focus:outline-none";
const EXPIRIES = [
  { value: "30", label: "30 days" },
  { value: "90", label: "90 days" },
  { value: "365", label: "365 days" },
  { value: "never", label: "never" },
];

/** What the admin role gives a key, beside the role list and in the key table. */
const ADMIN_WORDS = "its project's owner, and acts for the whole server (importing bases) while you are the admin";

/**
 * The caller's API keys, and a form to make one (shown once, with how to send it). The server's admin may also make
 * keys with the admin role.
 */
export function ApiKeysView({
  initialKeys,
  projects,
  localServer,
  serverAdmin,
}: {
  initialKeys: ApiKey[];
  projects: Project[];
  localServer: boolean;
  serverAdmin: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const keys = useQuery({ ...trpc.apiKeys.list.queryOptions(), initialData: initialKeys });
  const revoke = useMutation(
    trpc.apiKeys.revoke.mutationOptions({ onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.apiKeys.list.queryKey() }) }),
  );
  return (
    <div className="space-y-6">
      <div className="grid items-start gap-6 lg:grid-cols-2">
        <Card title="Make an API key">
          <NewKeyForm projects={projects} serverAdmin={serverAdmin} />
        </Card>
        <Card title="Using a key">
          <div className="space-y-2 px-4 py-3 text-sm text-slate-600">
            <p>Send the key in a header with each request; it acts for you, in its project only, with its role (never more than yours there now).</p>
            <pre className="overflow-x-auto rounded-md bg-slate-50 px-3 py-2 font-mono text-xs text-slate-700">Authorization: Bearer tl_…</pre>
            {serverAdmin && (
              <p>
                What acts for the whole server, such as importing a base (<code className="font-mono text-xs">tinkerlab bases push</code>), takes a key made
                with the admin role; keys with other roles are refused it, even yours.
              </p>
            )}
            {localServer && (
              <p>
                This server runs without accounts (<code className="font-mono text-xs">TINKERLAB_AUTH=local</code>): it answers every request as the local user,
                so nothing here needs a key. Keys are for team servers and for scripts that call one from elsewhere.
              </p>
            )}
          </div>
        </Card>
      </div>
      <Card title={`Your API keys (${keys.data.length})`}>
        {keys.data.length === 0 ? (
          <EmptyState title="No API keys yet">Make one for each place that calls this server: a laptop, a CI job, a remote worker.</EmptyState>
        ) : (
          <DataTable label="API keys" columns={["Name", "Key", "Project", "Role", "Created", { name: "Last used", nowrap: true }, "Expires", "Status"]}>
            {keys.data.map((key) => {
              const status = accessStatus(key);
              return (
                <tr key={key.id} data-api-key={key.id}>
                  <td className="px-4 py-2 font-medium text-slate-800">{key.name}</td>
                  <td className="whitespace-nowrap px-4 py-2 font-mono text-xs text-slate-600">{key.prefix}…</td>
                  <td className="whitespace-nowrap px-4 py-2">
                    <Link href={`/projects/${key.projectId}`} className="text-slate-700 hover:text-brand-700 hover:underline">
                      {key.projectName}
                    </Link>
                  </td>
                  <td className="px-4 py-2">
                    {key.role === "admin" ? (
                      <span
                        title={ADMIN_WORDS}
                        className="inline-flex rounded-full bg-amber-50 px-2 py-0.5 text-xs font-medium text-amber-800 ring-1 ring-inset ring-amber-500/30"
                      >
                        admin
                      </span>
                    ) : (
                      <RoleBadge role={key.role} />
                    )}
                  </td>
                  <TimeCell date={key.createdAt} />
                  <TimeCell date={key.lastUsedAt} />
                  <TimeCell date={key.expiresAt} />
                  <StatusCell status={status} />
                  <RevokeCell
                    show={status === "active"}
                    message={`Revoke the key "${key.name}"? Whatever uses it stops working at once.`}
                    pending={revoke.isPending}
                    onRevoke={() => revoke.mutate({ id: key.id })}
                  />
                </tr>
              );
            })}
          </DataTable>
        )}
        <ErrorMessage error={revoke.error} className="border-t border-slate-100 px-4 py-2" />
      </Card>
    </div>
  );
}

function NewKeyForm({ projects, serverAdmin }: { projects: Project[]; serverAdmin: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [name, setName] = useState("");
  const [projectId, setProjectId] = useState(projects[0]?.id ?? "");
  const [role, setRole] = useState<ApiKeyRole>("editor");
  const [expiry, setExpiry] = useState("90");
  const create = useMutation(
    trpc.apiKeys.create.mutationOptions({
      onSuccess: () => {
        setName("");
        return queryClient.invalidateQueries({ queryKey: trpc.apiKeys.list.queryKey() });
      },
    }),
  );
  const project = projects.find((p) => p.id === projectId);
  // A key's role is at most the maker's role in its project: a weaker project clamps the choice. The admin role is
  // an owner's, for the server's admin only.
  const roles: ApiKeyRole[] = project ? [...rolesUpTo(project.role), ...(serverAdmin && project.role === "owner" ? (["admin"] as const) : [])] : [];
  const chosenRole = roles.includes(role) ? role : (roles.at(-1) ?? role);
  const made = create.data;

  if (projects.length === 0) {
    return (
      <p className="px-4 py-3 text-sm text-slate-600">
        A key works in one project, and you belong to none yet.{" "}
        <Link href="/projects" className="text-brand-700 hover:underline">
          Make a project
        </Link>{" "}
        first.
      </p>
    );
  }
  return (
    <form
      aria-label="Make an API key"
      className="space-y-3 px-4 py-3"
      onSubmit={(event) => {
        event.preventDefault();
        create.mutate({ name, projectId, role: chosenRole, expiresInDays: expiry === "never" ? null : Number(expiry) });
      }}
    >
      <label className="block text-sm font-medium text-slate-700">
        Name
        <input
          name="name"
          value={name}
          maxLength={120}
          onChange={(event) => setName(event.target.value)}
          placeholder="where it is used: a laptop, a CI job"
          className={field}
        />
      </label>
      <label className="block text-sm font-medium text-slate-700">
        Project
        <select name="projectId" value={projectId} onChange={(event) => setProjectId(event.target.value)} className={field}>
          {projects.map((p) => (
            <option key={p.id} value={p.id}>
              {p.name} ({p.role})
            </option>
          ))}
        </select>
      </label>
      <div className="grid grid-cols-2 gap-3">
        <label className="block text-sm font-medium text-slate-700">
          Role
          <select name="role" value={chosenRole} onChange={(event) => setRole(event.target.value as ApiKeyRole)} className={field}>
            {roles.map((r) => (
              <option key={r} value={r} title={r === "admin" ? ADMIN_WORDS : undefined}>
                {r === "admin" ? "admin (server-wide)" : r}
              </option>
            ))}
          </select>
        </label>
        <label className="block text-sm font-medium text-slate-700">
          Expires after
          <select name="expiry" value={expiry} onChange={(event) => setExpiry(event.target.value)} className={field}>
            {EXPIRIES.map((option) => (
              <option key={option.value} value={option.value}>
                {option.label}
              </option>
            ))}
          </select>
        </label>
      </div>
      <ErrorMessage error={create.error} />
      <Button type="submit" disabled={create.isPending}>
        {create.isPending ? "Making…" : "Make key"}
      </Button>
      {made && (
        <div className="space-y-2 rounded-md border border-amber-300 bg-amber-50 px-3 py-2.5" data-new-api-key={made.id}>
          <p className="text-sm text-amber-900">
            <span className="font-medium">Shown once:</span> copy the key now; the server keeps only its hash.
            {made.expiresAt ? (
              <>
                {" "}
                It expires <RelativeTime date={made.expiresAt} />.
              </>
            ) : (
              " It works until revoked."
            )}
          </p>
          <CopyField label="API key" value={made.key} />
          <p className="text-sm text-amber-900">Try it: this lists the key&apos;s project.</p>
          <pre className="whitespace-pre-wrap break-all rounded bg-white/70 px-2 py-1.5 font-mono text-xs text-slate-700">{`curl -H "Authorization: Bearer ${made.key}" ${window.location.origin}/api/trpc/projects.list`}</pre>
        </div>
      )}
    </form>
  );
}
