"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useEffect, useRef, useState } from "react";
import { flushSync } from "react-dom";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card, PageHeader } from "@/components/ui/card";
import { ErrorMessage } from "@/components/ui/error-message";
import { RelativeTime } from "@/components/ui/time";
import { InvitationList, InviteForm } from "./invitations";
import { MembersCard } from "./members-card";
import { RoleBadge } from "./role-badge";
import { ROLE_WORDS, ROLES } from "./roles";
import { ShareLinksCard } from "./share-links-card";
import type { ProjectPageData } from "./types";

/**
 * One project: its name, members, invitation links and share links. Owners see the controls that change them;
 * everyone else sees the lists.
 */
export function ProjectView({ initial, viewerId, canLeave }: { initial: ProjectPageData; viewerId: string | null; canLeave: boolean }) {
  const trpc = useTRPC();
  const id = initial.project.id;
  const project = useQuery({ ...trpc.projects.byId.queryOptions({ id }), initialData: initial.project });
  const owner = project.data.role === "owner";
  const [renaming, setRenaming] = useState(false);
  const renameButton = useRef<HTMLButtonElement>(null);
  const doneRenaming = () => {
    // The Rename button comes back in place of the form: the focus returns to it rather than to the page.
    flushSync(() => setRenaming(false));
    renameButton.current?.focus();
  };
  const subtitle = (
    <>
      <Link href="/projects" className="text-brand-700 hover:underline">
        Projects
      </Link>{" "}
      · <span className="font-mono">{id}</span> · created <RelativeTime date={project.data.createdAt} /> · your role: <RoleBadge role={project.data.role} />
    </>
  );
  return (
    <>
      {renaming ? (
        <div className="mb-6">
          <RenameForm id={id} name={project.data.name} onDone={doneRenaming} />
          <p className="mt-1 text-sm text-slate-500">{subtitle}</p>
        </div>
      ) : (
        <PageHeader
          title={project.data.name}
          subtitle={subtitle}
          actions={
            owner && (
              <Button ref={renameButton} variant="secondary" onClick={() => setRenaming(true)}>
                Rename
              </Button>
            )
          }
        />
      )}
      <div className="grid gap-6 lg:grid-cols-[minmax(0,1fr)_22rem]">
        <div className="min-w-0 space-y-6">
          <MembersCard projectId={id} initialMembers={initial.members} owner={owner} viewerId={viewerId} canLeave={canLeave} />
          {owner && <InvitationList projectId={id} initialInvitations={initial.invitations ?? []} />}
          <ShareLinksCard projectId={id} initialLinks={initial.shareLinks} canRevoke={project.data.role !== "viewer"} />
        </div>
        <div className="min-w-0 space-y-6">
          {owner && (
            <Card title="Invite people">
              <InviteForm projectId={id} />
            </Card>
          )}
          <Card title="Roles">
            <dl className="space-y-2 px-4 py-3 text-sm">
              {ROLES.map((role) => (
                <div key={role}>
                  <dt className="inline font-medium text-slate-800">{role}:</dt> <dd className="inline text-slate-600">{ROLE_WORDS[role]}.</dd>
                </div>
              ))}
            </dl>
          </Card>
        </div>
      </div>
    </>
  );
}

function RenameForm({ id, name, onDone }: { id: string; name: string; onDone: () => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [value, setValue] = useState(name);
  const input = useRef<HTMLInputElement>(null);
  // The form opens in place of the focused Rename button: the name takes the focus, selected to be typed over.
  useEffect(() => input.current?.select(), []);
  const rename = useMutation(
    trpc.projects.rename.mutationOptions({
      onSuccess: async () => {
        await Promise.all([
          queryClient.invalidateQueries({ queryKey: trpc.projects.byId.queryKey({ id }) }),
          queryClient.invalidateQueries({ queryKey: trpc.projects.list.queryKey() }),
        ]);
        onDone();
      },
    }),
  );
  return (
    <form
      aria-label="Rename the project"
      className="flex flex-wrap items-center gap-2"
      onSubmit={(event) => {
        event.preventDefault();
        rename.mutate({ id, name: value });
      }}
    >
      <input
        ref={input}
        aria-label="Project name"
        value={value}
        maxLength={120}
        onChange={(event) => setValue(event.target.value)}
        className="rounded-md border border-slate-300 px-2.5 py-1 text-xl font-semibold tracking-tight text-slate-900 focus:border-brand-500 focus:outline-none"
      />
      <Button type="submit" disabled={rename.isPending}>
        Save
      </Button>
      <Button type="button" variant="ghost" onClick={onDone}>
        Cancel
      </Button>
      <ErrorMessage error={rename.error} className="basis-full" />
    </form>
  );
}
