"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useTRPC } from "@/components/trpc/provider";
import { Button, ButtonLink } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { ErrorMessage } from "@/components/ui/error-message";
import { RelativeTime } from "@/components/ui/time";
import { ROLE_WORDS, type ProjectRole } from "./roles";

/** The page an invitation link opens: what it offers, and a way to accept it (signed in) or to get an account first. */
export function JoinInvitation({
  token,
  projectName,
  role,
  expiresAt,
  signedIn,
}: {
  token: string;
  projectName: string;
  role: ProjectRole;
  expiresAt: Date;
  signedIn: boolean;
}) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const accept = useMutation(
    trpc.projects.acceptInvitation.mutationOptions({
      onSuccess: async ({ projectId }) => {
        await queryClient.invalidateQueries({ queryKey: trpc.projects.list.queryKey() });
        router.push(`/projects/${projectId}`);
      },
    }),
  );
  return (
    <Card title="Invitation">
      <div className="space-y-4 px-4 py-4">
        <div>
          <p className="text-lg font-semibold text-slate-900">
            Join {projectName} as {role}
          </p>
          <p className="mt-1 text-sm text-slate-600">
            {role}: {ROLE_WORDS[role]}. The link expires <RelativeTime date={expiresAt} />.
          </p>
        </div>
        {signedIn ? (
          <>
            <ErrorMessage error={accept.error} />
            <Button onClick={() => accept.mutate({ token })} disabled={accept.isPending || accept.isSuccess}>
              {accept.isPending || accept.isSuccess ? "Joining…" : `Join ${projectName}`}
            </Button>
          </>
        ) : (
          <div className="space-y-2">
            <div className="flex flex-wrap items-center gap-2">
              <ButtonLink href={`/sign-up?invite=${encodeURIComponent(token)}&next=/projects`}>Make an account and join</ButtonLink>
              <ButtonLink variant="secondary" href={`/sign-in?next=${encodeURIComponent(`/invite/${token}`)}`}>
                Sign in
              </ButtonLink>
            </div>
            <p className="text-xs text-slate-500">Have an account on this server already? Sign in, and you come back here to join.</p>
          </div>
        )}
      </div>
    </Card>
  );
}
