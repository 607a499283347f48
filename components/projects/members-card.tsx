"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { ErrorMessage } from "@/components/ui/error-message";
import { RelativeTime } from "@/components/ui/time";
import { RoleBadge } from "./role-badge";
import { ROLES, type ProjectRole } from "./roles";
import type { Member } from "./types";

/**
 * The members of a project. Owners change roles and remove members; anyone may leave (`canLeave`: a signed-in
 * person; the local user owns every project anyway). The server keeps a project's last owner.
 */
export function MembersCard({
  projectId,
  initialMembers,
  owner,
  viewerId,
  canLeave,
}: {
  projectId: string;
  initialMembers: Member[];
  owner: boolean;
  viewerId: string | null;
  canLeave: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const router = useRouter();
  const members = useQuery({ ...trpc.projects.members.queryOptions({ projectId }), initialData: initialMembers });
  const refresh = () =>
    Promise.all([
      queryClient.invalidateQueries({ queryKey: trpc.projects.members.queryKey({ projectId }) }),
      // One's own role may have changed, and with it what the page shows.
      queryClient.invalidateQueries({ queryKey: trpc.projects.byId.queryKey({ id: projectId }) }),
      queryClient.invalidateQueries({ queryKey: trpc.projects.list.queryKey() }),
    ]);
  const setRole = useMutation(trpc.projects.setRole.mutationOptions({ onSuccess: refresh }));
  const remove = useMutation(trpc.projects.removeMember.mutationOptions({ onSuccess: refresh }));
  const leave = useMutation(
    trpc.projects.leave.mutationOptions({
      onSuccess: async () => {
        await queryClient.invalidateQueries({ queryKey: trpc.projects.list.queryKey() });
        router.push("/projects");
      },
    }),
  );
  const failed = [setRole, remove, leave].find((mutation) => mutation.error)?.error;
  const reset = () => [setRole, remove, leave].forEach((mutation) => mutation.reset());
  const busy = setRole.isPending || remove.isPending || leave.isPending;

  const changeRole = (member: Member, role: ProjectRole) => {
    reset();
    if (member.userId === viewerId && member.role === "owner" && !window.confirm(`Make yourself ${role}? You will no longer manage this project.`)) return;
    setRole.mutate({ projectId, userId: member.userId, role });
  };

  return (
    <Card title={`Members (${members.data.length})`}>
      <div className="overflow-x-auto">
        <table className="w-full text-sm" aria-label="Members">
          <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
            <tr>
              <th className="px-4 py-2 font-medium">Name</th>
              <th className="px-4 py-2 font-medium">Email</th>
              <th className="px-4 py-2 font-medium">Role</th>
              <th className="px-4 py-2 font-medium">Since</th>
              <th className="px-4 py-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody className="divide-y divide-slate-100">
            {members.data.map((member) => {
              const you = member.userId === viewerId;
              return (
                <tr key={member.userId} data-member={member.userId}>
                  <td className="whitespace-nowrap px-4 py-2 font-medium text-slate-800">
                    {member.name}
                    {you && <span className="ml-1.5 text-xs font-normal text-slate-500">(you)</span>}
                  </td>
                  <td className="px-4 py-2 text-slate-600">{member.email}</td>
                  <td className="px-4 py-2">
                    {owner ? (
                      <select
                        aria-label={`Role of ${member.name}`}
                        value={member.role}
                        disabled={busy}
                        onChange={(event) => changeRole(member, event.target.value as ProjectRole)}
                        className="rounded-md border border-slate-300 bg-white px-2 py-1 text-sm focus:border-brand-500 focus:outline-none"
                      >
                        {ROLES.map((role) => (
                          <option key={role} value={role}>
                            {role}
                          </option>
                        ))}
                      </select>
                    ) : (
                      <RoleBadge role={member.role} />
                    )}
                  </td>
                  <td className="whitespace-nowrap px-4 py-2 text-slate-500">
                    <RelativeTime date={member.since} />
                  </td>
                  <td className="px-4 py-2 text-right">
                    {you
                      ? canLeave && (
                          <Button
                            variant="ghost"
                            disabled={busy}
                            onClick={() => {
                              reset();
                              if (window.confirm("Leave this project? You will need a new invitation to come back.")) leave.mutate({ projectId });
                            }}
                          >
                            Leave
                          </Button>
                        )
                      : owner && (
                          <Button
                            variant="ghost"
                            disabled={busy}
                            onClick={() => {
                              reset();
                              if (window.confirm(`Remove ${member.name} from this project?`)) remove.mutate({ projectId, userId: member.userId });
                            }}
                          >
                            Remove
                          </Button>
                        )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <ErrorMessage error={failed} className="border-t border-slate-100 px-4 py-2" />
    </Card>
  );
}
