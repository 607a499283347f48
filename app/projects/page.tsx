import type { Metadata } from "next";
import { ProjectsView } from "@/components/projects/projects-view";
import { PageHeader } from "@/components/ui/card";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";
export const metadata: Metadata = { title: "Projects" };

export default async function ProjectsPage() {
  const projects = await (await serverCaller()).projects.list();
  return (
    <>
      <PageHeader title="Projects" subtitle="Experiments, runs and datasets belong to a project; its members see them, with the role they hold there." />
      <ProjectsView initialProjects={projects} />
    </>
  );
}
