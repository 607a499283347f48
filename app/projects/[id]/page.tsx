import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { cache } from "react";
import { ProjectView } from "@/components/projects/project-view";
import { pageViewer, serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ id: string }> };

/** Cached for the request: the metadata and the page ask for the same project. */
const load = cache(async (id: string) => {
  const caller = await serverCaller();
  try {
    const project = await caller.projects.byId({ id });
    const [members, shareLinks, invitations] = await Promise.all([
      caller.projects.members({ projectId: id }),
      caller.shareLinks.ofProject({ projectId: id }),
      project.role === "owner" ? caller.projects.invitations({ projectId: id }) : null,
    ]);
    return { project, members, shareLinks, invitations };
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    throw error;
  }
});

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  return { title: (await load((await params).id)).project.name };
}

export default async function ProjectPage({ params }: Props) {
  const [data, viewer] = await Promise.all([load((await params).id), pageViewer()]);
  return (
    <ProjectView
      initial={data}
      viewerId={viewer.user?.id ?? null}
      // The local user owns every project whatever the member list says: leaving would change nothing.
      canLeave={viewer.kind === "person"}
    />
  );
}
