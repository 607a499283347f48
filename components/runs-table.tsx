import Link from "next/link";
import { RunCheckbox, RunSelection } from "@/components/compare/run-selection";
import { RunStatus } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";

export type RunRow = {
  id: string;
  name: string;
  status: string;
  experimentId: string;
  experimentName: string;
  step: number;
  totalSteps: number;
  createdAt: Date;
  /** Health warnings (lib/rl/health.ts): the run may not be learning. */
  warnings: { code: string; message: string }[];
};

export function RunsTable({ runs }: { runs: RunRow[] }) {
  return (
    <RunSelection>
      <table className="w-full text-sm">
        <thead className="border-b border-slate-200 text-left text-xs uppercase tracking-wide text-slate-500">
          <tr>
            <th className="w-8 py-2 pl-4 font-medium">
              <span className="sr-only">Compare</span>
            </th>
            <th className="px-4 py-2 font-medium">Run</th>
            <th className="px-4 py-2 font-medium">Experiment</th>
            <th className="px-4 py-2 font-medium">Status</th>
            <th className="px-4 py-2 font-medium">Progress</th>
            <th className="px-4 py-2 font-medium">Created</th>
          </tr>
        </thead>
        <tbody className="divide-y divide-slate-100">
          {runs.map((run) => (
            <tr key={run.id} className="hover:bg-slate-50">
              <td className="py-2 pl-4">
                <RunCheckbox id={run.id} name={run.name} />
              </td>
              <td className="px-4 py-2 font-medium">
                <Link className="text-slate-800 hover:text-brand-700 hover:underline" href={`/runs/${run.id}`}>
                  {run.name}
                </Link>
              </td>
              <td className="px-4 py-2">
                <Link className="text-brand-700 hover:underline" href={`/experiments/${run.experimentId}`}>
                  {run.experimentName}
                </Link>
              </td>
              <td className="px-4 py-2">
                <RunStatus status={run.status} warnings={run.warnings} />
              </td>
              <td className="px-4 py-2 tabular-nums text-slate-600">
                {run.totalSteps > 0 ? `${run.step} / ${run.totalSteps}` : run.step > 0 ? `${run.step} steps` : "—"}
              </td>
              <td className="px-4 py-2 text-slate-500">
                <RelativeTime date={run.createdAt} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </RunSelection>
  );
}
