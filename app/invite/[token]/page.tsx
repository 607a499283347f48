import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { JoinInvitation } from "@/components/projects/join-invitation";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { pageViewer, serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Invitation" };

type Props = { params: Promise<{ token: string }> };

/** What the link offers, or null when it does not work (unknown, expired, revoked or malformed alike). */
async function offer(token: string) {
  try {
    return await (await serverCaller()).projects.invitation({ token });
  } catch (error) {
    if (error instanceof TRPCError && (error.code === "NOT_FOUND" || error.code === "BAD_REQUEST")) return null;
    throw error;
  }
}

export default async function InvitePage({ params }: Props) {
  const token = (await params).token;
  const [invitation, viewer] = await Promise.all([offer(token), pageViewer()]);
  return (
    <div className="mx-auto max-w-md">
      {invitation ? (
        <JoinInvitation
          token={token}
          projectName={invitation.projectName}
          role={invitation.role}
          expiresAt={invitation.expiresAt}
          // The local user and a signed-in person can join at once; anyone else first makes an account or signs in.
          signedIn={viewer.kind === "local" || viewer.kind === "person"}
        />
      ) : (
        <Card>
          <EmptyState title="This invitation link does not work">It may be mistyped, expired or revoked. Ask a project owner for a new one.</EmptyState>
        </Card>
      )}
    </div>
  );
}
