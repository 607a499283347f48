import { TRPCError } from "@trpc/server";
import type { Metadata } from "next";
import { notFound } from "next/navigation";
import { ExperimentEditor } from "@/components/editor/experiment-editor";
import { serverCaller } from "@/server/api/rsc";
import { exampleSource } from "@/server/experiments";

export const dynamic = "force-dynamic";

type Props = { params: Promise<{ id: string }> };

async function load(id: string) {
  const caller = await serverCaller();
  try {
    return await caller.experiments.byId({ id });
  } catch (error) {
    if (error instanceof TRPCError && error.code === "NOT_FOUND") notFound();
    throw error;
  }
}

/** The built-in environment's source, when the saved config runs one (the editor offers it while there are no files). */
function exampleOf(config: unknown) {
  const environment = (config as { environment?: unknown } | null | undefined)?.environment;
  if (typeof environment !== "string") return null;
  const source = exampleSource(environment);
  return source ? { environment, module: source.module, files: source.files } : null;
}

export async function generateMetadata({ params }: Props): Promise<Metadata> {
  const experiment = await load((await params).id);
  return { title: `Edit ${experiment.name}` };
}

export default async function EditExperimentPage({ params }: Props) {
  const experiment = await load((await params).id);
  return (
    <ExperimentEditor
      // A new saved version (router.refresh) keeps the editor and its undo history; another experiment starts afresh.
      key={experiment.id}
      experiment={{
        id: experiment.id,
        name: experiment.name,
        latestVersion: experiment.latestVersion,
        files: (experiment.latest?.files ?? {}) as Record<string, string>,
        config: (experiment.latest?.config ?? {}) as Record<string, unknown>,
        readOnly: experiment.role === "viewer",
        example: exampleOf(experiment.latest?.config),
      }}
    />
  );
}
