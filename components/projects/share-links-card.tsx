"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc/provider";
import { Card } from "@/components/ui/card";
import { DataTable, RevokeCell, StatusCell, TimeCell } from "@/components/ui/data-table";
import { EmptyState } from "@/components/ui/empty-state";
import { ErrorMessage } from "@/components/ui/error-message";
import { accessStatus } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";
import type { ShareLink } from "./types";

/** Where a member sees what a link shows: the run's page, or the comparison of its runs. */
function membersPage(link: ShareLink): string {
  return link.kind === "compare" ? `/compare?runs=${link.runIds.join(",")}` : `/runs/${link.runIds[0]}`;
}

/** The project's share links (view-only links to runs): who made each, whether it works, when it was last opened. */
export function ShareLinksCard({ projectId, initialLinks, canRevoke }: { projectId: string; initialLinks: ShareLink[]; canRevoke: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const links = useQuery({ ...trpc.shareLinks.ofProject.queryOptions({ projectId }), initialData: initialLinks });
  const revoke = useMutation(
    trpc.shareLinks.revoke.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.shareLinks.ofProject.queryKey({ projectId }) }),
    }),
  );
  return (
    <Card title={`Share links (${links.data.length})`}>
      {links.data.length === 0 ? (
        <EmptyState title="No share links">
          Editors make view-only links to a run, a trajectory or a comparison from its page; whoever holds one sees that view without an account.
        </EmptyState>
      ) : (
        <DataTable label="Share links" columns={["Title", "Kind", "Made", "Expires", { name: "Last opened", nowrap: true }, "Status"]}>
          {links.data.map((link) => {
            const status = accessStatus(link);
            return (
              <tr key={link.id} data-share-link={link.id}>
                <td className="min-w-48 px-4 py-2">
                  <Link href={membersPage(link)} className="break-words font-medium text-slate-800 hover:text-brand-700 hover:underline">
                    {link.title}
                  </Link>
                </td>
                <td className="px-4 py-2 text-slate-600">{link.kind}</td>
                <td className="whitespace-nowrap px-4 py-2 text-slate-500">
                  <span className="text-slate-600">{link.createdBy}</span>, <RelativeTime date={link.createdAt} />
                </td>
                <TimeCell date={link.expiresAt} />
                <TimeCell date={link.lastOpenedAt} />
                <StatusCell status={status} />
                <RevokeCell
                  show={canRevoke && status === "active"}
                  message={`Revoke the link "${link.title}"? Whoever holds it can no longer open it.`}
                  pending={revoke.isPending}
                  onRevoke={() => revoke.mutate({ id: link.id })}
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
