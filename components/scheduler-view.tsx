"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { Area, AreaChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Card } from "@/components/ui/card";
import { EmptyState } from "@/components/ui/empty-state";
import { StatusBadge } from "@/components/ui/status-badge";
import { RelativeTime } from "@/components/ui/time";
import { useTRPC } from "@/components/trpc/provider";

const duration = (seconds: number) =>
  seconds >= 3600 ? `${(seconds / 3600).toFixed(1)} h` : seconds >= 60 ? `${Math.round(seconds / 60)} min` : `${Math.round(seconds)} s`;
const mb = (n: number) => (n >= 1024 ? `${(n / 1024).toFixed(1)} GiB` : `${n} MiB`);

export function SchedulerView() {
  const trpc = useTRPC();
  const { data, error } = useQuery({ ...trpc.scheduler.overview.queryOptions({ windowMinutes: 60 }), refetchInterval: 2000 });
  if (!data) return <p className="text-sm text-slate-500">{error ? error.message : "Loading…"}</p>;
  return (
    <div className="space-y-6">
      <Card title={`Devices (${data.devices.length}, ${data.totalSlots} compute slot${data.totalSlots === 1 ? "" : "s"})`}>
        {data.devices.length === 0 ? (
          <EmptyState title="No workers are connected">
            Start the workbench with TINKERLAB_LOCAL_WORKERS ≥ 1, or join a worker with `tinkerlab worker`.
          </EmptyState>
        ) : (
          <ul className="divide-y divide-slate-100" aria-label="Devices">
            {data.devices.map((device) => {
              return (
                <li key={device.id} className="px-4 py-3">
                  <div className="flex flex-wrap items-baseline justify-between gap-2">
                    <p className="font-mono text-sm text-slate-800">{device.name}</p>
                    <p className="text-xs text-slate-500">
                      {device.kind.toUpperCase()} · {mb(device.memoryMb)} · {device.computeSlots} slot{device.computeSlots === 1 ? "" : "s"} · backend{" "}
                      {device.backend} · heartbeat <RelativeTime date={device.heartbeatAt} />
                    </p>
                  </div>
                  {device.jobs.length === 0 ? (
                    <p className="mt-1 text-sm text-slate-400">idle</p>
                  ) : (
                    <ul className="mt-2 space-y-1">
                      {device.jobs.map((job) => (
                        <li key={job.id} className="flex items-center gap-3 text-sm">
                          <StatusBadge status={job.status} />
                          {job.runId ? (
                            <Link className="text-brand-700 hover:underline" href={`/runs/${job.runId}`}>
                              {job.runName}
                            </Link>
                          ) : (
                            <span className="text-slate-500">{job.hidden ? "another project's job" : job.id}</span>
                          )}
                          <span className="text-xs text-slate-500">
                            {job.kind} · {job.mode} · step {job.step ?? 0}/{job.totalSteps ?? 0} · {mb(job.footprint.ownMemoryMb)}
                            {job.footprint.sharedBase ? ` + shared base ${job.footprint.sharedBase}` : ""}
                          </span>
                        </li>
                      ))}
                    </ul>
                  )}
                </li>
              );
            })}
          </ul>
        )}
      </Card>
      <div className="grid gap-6 lg:grid-cols-2">
        <Card title={`Queue (${data.queue.length}), with estimated starts`}>
          {data.queue.length === 0 ? (
            <p className="px-4 py-6 text-sm text-slate-500">Nothing is waiting.</p>
          ) : (
            <ol className="divide-y divide-slate-100" aria-label="Queue">
              {data.queue.map((job) => (
                <li key={job.id} className="flex items-center justify-between gap-3 px-4 py-2 text-sm">
                  <span>
                    <span className="mr-2 tabular-nums text-slate-400">#{job.position}</span>
                    {job.runId ? (
                      <Link className="text-brand-700 hover:underline" href={`/runs/${job.runId}`}>
                        {job.runName}
                      </Link>
                    ) : (
                      <span className="text-slate-500">{job.hidden ? "another project's job" : job.id}</span>
                    )}
                  </span>
                  <span className="text-right text-xs text-slate-500">
                    <span className="block font-medium text-slate-700" data-testid="estimated-start">
                      {job.estimatedStartAt ? (
                        <>starts {job.estimatedStartAt.getTime() - Date.now() < 5_000 ? "now" : <RelativeTime date={job.estimatedStartAt} />}</>
                      ) : (
                        "start unknown"
                      )}
                    </span>
                    priority {job.priority} · waiting since <RelativeTime date={job.submittedAt} />
                    {job.workLeftSeconds !== null ? ` · ${duration(job.workLeftSeconds)} of work` : " · length unknown"}
                    {job.reason ? ` · ${job.reason}` : ""}
                  </span>
                </li>
              ))}
            </ol>
          )}
        </Card>
        <Card title="Utilisation, last hour">
          <figure className="h-48 p-3" aria-label="Utilisation chart">
            <ResponsiveContainer width="100%" height="100%">
              <AreaChart data={data.utilization} margin={{ top: 4, right: 20, bottom: 0, left: -16 }}>
                <CartesianGrid stroke="#e2e8f0" strokeDasharray="3 3" />
                <XAxis dataKey="minute" tick={{ fontSize: 10 }} interval={9} />
                <YAxis domain={[0, 1]} tickFormatter={(v) => `${Math.round(v * 100)}%`} tick={{ fontSize: 10 }} />
                <Tooltip formatter={(v) => `${Math.round(Number(v) * 100)}%`} contentStyle={{ fontSize: 12 }} />
                <Area dataKey="utilization" stroke="#3b57e0" fill="#dbe7ff" isAnimationActive={false} />
              </AreaChart>
            </ResponsiveContainer>
          </figure>
        </Card>
      </div>
    </div>
  );
}
