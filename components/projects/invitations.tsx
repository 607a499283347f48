"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { CopyField } from "@/components/ui/copy-field";
import { DataTable, RevokeCell, StatusCell } from "@/components/ui/data-table";
import { EmptyState } from "@/components/ui/empty-state";
import { ErrorMessage } from "@/components/ui/error-message";
import { accessStatus } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";
import { RoleBadge } from "./role-badge";
import { ROLE_WORDS, ROLES, type ProjectRole } from "./roles";
import type { Invitation } from "./types";

const field = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm font-normal focus:border-brand-500 focus:outline-none";
/** The server accepts 1 to 30 days. */
const MAX_DAYS = 30;

/** Makes an invitation link (owners) and shows it once, whole, to copy. */
export function InviteForm({ projectId }: { projectId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [role, setRole] = useState<ProjectRole>("editor");
  const [days, setDays] = useState("7");
  const invite = useMutation(
    trpc.projects.invite.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.projects.invitations.queryKey({ projectId }) }),
    }),
  );
  const made = invite.data;
  return (
    <form
      aria-label="Invite people"
      className="space-y-3 px-4 py-3"
      onSubmit={(event) => {
        event.preventDefault();
        invite.mutate({ projectId, role, expiresInDays: Number(days) });
      }}
    >
      <p className="text-sm text-slate-600">Anyone who opens the link before it expires joins the project with its role.</p>
      <div className="grid grid-cols-[1fr_7rem] gap-3">
        <label className="block text-sm font-medium text-slate-700">
          Role
          <select name="role" value={role} onChange={(event) => setRole(event.target.value as ProjectRole)} className={field}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </label>
        <label className="block text-sm font-medium text-slate-700">
          Days valid
          <input
            name="expiresInDays"
            type="number"
            min={1}
            max={MAX_DAYS}
            required
            value={days}
            onChange={(event) => setDays(event.target.value)}
            className={field}
          />
        </label>
      </div>
      <p className="text-xs text-slate-500">
        {role}: {ROLE_WORDS[role]}. A link works for 1 to {MAX_DAYS} days, for as many people as open it.
      </p>
      <ErrorMessage error={invite.error} />
      <Button type="submit" disabled={invite.isPending}>
        {invite.isPending ? "Making…" : "Make invitation link"}
      </Button>
      {made && (
        <div className="space-y-2 rounded-md border border-amber-300 bg-amber-50 px-3 py-2.5" data-invitation={made.id}>
          <p className="text-sm text-amber-900">
            <span className="font-medium">Shown once:</span> copy the link now and send it to the people to invite. It expires{" "}
            <RelativeTime date={made.expiresAt} />.
          </p>
          <CopyField label="Invitation link" value={`${window.location.origin}${made.path}`} />
        </div>
      )}
    </form>
  );
}

/** A project's invitation links (owners): whom each lets in, whether it still works, how many joined. */
export function InvitationList({ projectId, initialInvitations }: { projectId: string; initialInvitations: Invitation[] }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const invitations = useQuery({ ...trpc.projects.invitations.queryOptions({ projectId }), initialData: initialInvitations });
  const revoke = useMutation(
    trpc.projects.revokeInvitation.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.projects.invitations.queryKey({ projectId }) }),
    }),
  );
  return (
    <Card title={`Invitation links (${invitations.data.length})`}>
      {invitations.data.length === 0 ? (
        <EmptyState title="No invitation links">Make one under Invite people; its link is shown once, when it is made.</EmptyState>
      ) : (
        <DataTable label="Invitation links" columns={["Role", "Status", { name: "Joined", align: "right" }, "Made", "Expires"]}>
          {invitations.data.map((invitation) => {
            const status = accessStatus(invitation);
            return (
              <tr key={invitation.id} data-invitation={invitation.id}>
                <td className="px-4 py-2">
                  <RoleBadge role={invitation.role} />
                </td>
                <StatusCell status={status} />
                <td className="px-4 py-2 text-right tabular-nums text-slate-700">{invitation.accepted}</td>
                <td className="whitespace-nowrap px-4 py-2 text-slate-500">
                  <span className="text-slate-600">{invitation.createdBy}</span>, <RelativeTime date={invitation.createdAt} />
                </td>
                <td className="whitespace-nowrap px-4 py-2 text-slate-500">
                  {invitation.revokedAt ? (
                    <>
                      revoked <RelativeTime date={invitation.revokedAt} />
                    </>
                  ) : (
                    <RelativeTime date={invitation.expiresAt} />
                  )}
                </td>
                <RevokeCell
                  show={status === "active"}
                  message="Revoke this invitation link? Nobody else can join with it; those who joined stay."
                  pending={revoke.isPending}
                  onRevoke={() => revoke.mutate({ id: invitation.id })}
                />
              </tr>
            );
          })}
        </DataTable>
      )}
      <ErrorMessage error={revoke.error} className="border-t border-slate-100 px-4 py-2" />
    </Card>
  );
}
