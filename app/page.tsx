import Link from "next/link";
import { NewExperimentForm } from "@/components/new-experiment-form";
import { RunsTable } from "@/components/runs-table";
import { Card, PageHeader } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { RelativeTime } from "@/components/ui/time";
import { serverCaller } from "@/server/api/rsc";

export const dynamic = "force-dynamic";

export default async function HomePage() {
  const caller = await serverCaller();
  const [experiments, recent] = await Promise.all([caller.experiments.list(), caller.runs.list({ limit: 10 })]);

  if (experiments.length === 0) {
    return (
      <>
        <PageHeader title="Experiments" />
        <Card>
          <EmptyState title="No experiments yet" action={<NewExperimentForm />}>
            <p>An experiment pairs an agent with an environment and a training algorithm. To get started:</p>
            <ol className="mt-3 list-inside list-decimal space-y-1 text-left">
              <li>Create an experiment and give it a name.</li>
              <li>Write its environment and reward in TypeScript, or start from a built-in use case.</li>
              <li>Launch a run and watch the reward curve and the rollouts arrive live.</li>
            </ol>
          </EmptyState>
        </Card>
      </>
    );
  }

  return (
    <>
      <PageHeader title="Experiments" subtitle={`${experiments.length} experiment${experiments.length === 1 ? "" : "s"}`} actions={<NewExperimentForm />} />
      <Card className="mb-8">
        <ul className="divide-y divide-slate-100" aria-label="Experiments">
          {experiments.map((experiment) => (
            <li key={experiment.id}>
              <Link href={`/experiments/${experiment.id}`} className="flex items-center justify-between gap-4 px-4 py-3 hover:bg-slate-50">
                <div className="min-w-0">
                  <p className="truncate font-medium text-slate-900">{experiment.name}</p>
                  <p className="truncate text-sm text-slate-500">{experiment.description || "No description"}</p>
                </div>
                <div className="shrink-0 text-right text-sm text-slate-500">
                  <p>
                    {experiment.projectName} · {experiment.runCount} run{experiment.runCount === 1 ? "" : "s"} · v{experiment.latestVersion}
                  </p>
                  <p>
                    updated <RelativeTime date={experiment.updatedAt} />
                  </p>
                </div>
              </Link>
            </li>
          ))}
        </ul>
      </Card>
      <Card
        title="Recent runs"
        actions={
          <Link href="/runs" className="text-sm text-brand-700 hover:underline">
            All runs
          </Link>
        }
      >
        {recent.items.length > 0 ? (
          <RunsTable runs={recent.items} />
        ) : (
          <p className="px-4 py-6 text-sm text-slate-500">No runs yet. Open an experiment and launch one.</p>
        )}
      </Card>
    </>
  );
}
