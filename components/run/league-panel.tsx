"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { type ReactNode, useEffect } from "react";
import { Area, CartesianGrid, ComposedChart, Line, ResponsiveContainer, Tooltip, XAxis, YAxis } from "recharts";
import { Card } from "@/components/ui/card";
import { useTRPC } from "@/components/trpc/provider";
import type { LeagueTable } from "@/lib/rl/league-table";

/** Training periods shown as columns of the table: the newest ones (older ones stay in the run's league.json). */
const PERIOD_COLUMNS = 8;

/**
 * A league run's league (lib/rl/league-table.ts): each member's Elo with its 95% interval over the snapshot steps,
 * a table of members with their records and the learner's score against each in each training period, the newest
 * period being the current policy's. `children`: the run's league/* metric charts, drawn beside the Elo chart.
 */
export function LeaguePanel({ runId, live, children }: { runId: string; live: boolean; children?: ReactNode }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const league = useQuery({ ...trpc.league.ofRun.queryOptions({ runId }), refetchInterval: live ? 5000 : false });
  // The run's last checkpoint (and its league) lands as it ends, after the last poll: read it once more then.
  useEffect(() => {
    if (!live) void queryClient.invalidateQueries({ queryKey: trpc.league.ofRun.queryKey({ runId }) });
  }, [live, runId, queryClient, trpc]);
  const table = league.data;
  return (
    <section aria-label="League">
      <Card
        title="League"
        actions={
          table && (
            <span className="text-xs tabular-nums text-slate-500">
              {table.members.filter((m) => !m.training && !m.dropped).length} snapshots
              {table.members.some((m) => m.dropped) && ` (${table.members.filter((m) => m.dropped).length} dropped)`} · {table.games.toLocaleString("en-US")}{" "}
              games · as of the checkpoint of step {table.checkpointStep}
            </span>
          )
        }
      >
        {league.error ? (
          <p className="px-4 py-3 text-sm text-red-600">League: {league.error.message}</p>
        ) : !table ? (
          <p className="px-4 py-6 text-center text-sm text-slate-500">
            {league.isPending ? "Loading…" : "No league yet: the run saves its league with each checkpoint (config.checkpointEvery steps, and at its end)."}
          </p>
        ) : (
          <div className="space-y-4 p-4">
            <div className="grid gap-3 sm:grid-cols-2 xl:grid-cols-4">
              <EloChart table={table} />
              {children}
            </div>
            <MembersTable table={table} />
            <p className="text-xs text-slate-500">
              Elo from a Bradley–Terry fit over every recorded game, the first member pinned at 1000, with a 95% bootstrap interval. A score is the learner's
              points per game against the member in one training period (a draw counts half): the learner's games are recorded under the snapshot it becomes at
              the period's end.
            </p>
          </div>
        )}
      </Card>
    </section>
  );
}

/** Each member's Elo against its snapshot step, its 95% interval as a band. */
function EloChart({ table }: { table: LeagueTable }) {
  const data = table.members.map((m) => ({ step: m.step, rating: Math.round(m.rating), band: [Math.round(m.low), Math.round(m.high)], label: m.label }));
  return (
    <figure className="rounded-lg border border-slate-200 bg-white p-3" aria-label="chart league Elo by snapshot">
      <figcaption className="mb-1 flex items-baseline justify-between text-xs">
        <span className="font-medium text-slate-700">Elo by snapshot step</span>
        <span className="tabular-nums text-slate-500">{data.at(-1) ? `${data.at(-1)!.rating} (${data.at(-1)!.label})` : ""}</span>
      </figcaption>
      <div className="h-36">
        <ResponsiveContainer width="100%" height="100%">
          <ComposedChart data={data} margin={{ top: 4, right: 8, bottom: 0, left: 0 }}>
            <CartesianGrid stroke="#e2e8f0" vertical={false} />
            <XAxis dataKey="step" type="number" domain={["dataMin", "dataMax"]} tick={{ fontSize: 10 }} allowDecimals={false} />
            <YAxis tick={{ fontSize: 10 }} width={44} domain={["auto", "auto"]} />
            <Tooltip
              contentStyle={{ fontSize: 11 }}
              labelFormatter={(step) => `snapshot at step ${step}`}
              formatter={(value, name) => (name === "band" && Array.isArray(value) ? [`${value[0]} – ${value[1]}`, "95% interval"] : [value as number, "Elo"])}
            />
            <Area dataKey="band" stroke="none" fill="#c7d2fe" fillOpacity={0.6} isAnimationActive={false} />
            <Line dataKey="rating" stroke="#4f46e5" strokeWidth={1.5} dot={{ r: 2 }} isAnimationActive={false} />
          </ComposedChart>
        </ResponsiveContainer>
      </div>
    </figure>
  );
}

/** Members, newest first, with the learner's score against each in the newest training periods. */
function MembersTable({ table }: { table: LeagueTable }) {
  const periods = table.periods.slice(-PERIOD_COLUMNS);
  const current = table.periods.at(-1)?.learner;
  return (
    <div className="overflow-x-auto">
      <table className="w-full text-xs" aria-label="League members">
        <thead>
          <tr className="border-b border-slate-200 text-left text-slate-500">
            <th className="py-1 pr-3 font-medium">Member</th>
            <th className="py-1 pr-3 text-right font-medium">Step</th>
            <th className="py-1 pr-3 text-right font-medium">Elo</th>
            <th className="py-1 pr-3 font-medium">95% interval</th>
            <th className="py-1 pr-3 text-right font-medium" title="wins – draws – losses over every recorded game">
              Record
            </th>
            {periods.length > 0 && (
              <th className="py-1 pr-3 font-medium" colSpan={periods.length}>
                Learner's score against it, by training period
                {table.periods.length > periods.length && (
                  <span className="font-normal">
                    {" "}
                    (last {periods.length} of {table.periods.length})
                  </span>
                )}
              </th>
            )}
          </tr>
          {periods.length > 0 && (
            <tr className="border-b border-slate-200 text-slate-400">
              <th colSpan={5} />
              {periods.map((p) => (
                <th
                  key={p.learner}
                  className="px-1 py-0.5 text-center font-normal tabular-nums"
                  title={`the learner's games until its snapshot at step ${p.step}`}
                >
                  {p.learner === current ? `now (→${p.step})` : `→${p.step}`}
                </th>
              ))}
            </tr>
          )}
        </thead>
        <tbody>
          {[...table.members].reverse().map((m) => (
            <tr key={m.id} className="border-b border-slate-100" data-member={m.id}>
              <td className="py-1 pr-3 text-slate-800">
                {m.label}
                {m.training && <span className="ml-1 rounded bg-brand-50 px-1 text-brand-700">training</span>}
                {m.dropped && (
                  <span
                    className="ml-1 rounded bg-slate-100 px-1 text-slate-500"
                    title="dropped past the league's cap (algorithm.league.maxMembers): no longer an opponent; its games still count"
                  >
                    dropped
                  </span>
                )}
              </td>
              <td className="py-1 pr-3 text-right tabular-nums text-slate-600">{m.step}</td>
              <td className="py-1 pr-3 text-right font-medium tabular-nums text-slate-900">{Math.round(m.rating)}</td>
              <td className="py-1 pr-3 tabular-nums text-slate-600">
                <IntervalBar table={table} low={m.low} high={m.high} rating={m.rating} />
              </td>
              <td className="py-1 pr-3 text-right tabular-nums text-slate-600">
                {m.wins}–{m.draws}–{m.losses}
              </td>
              {periods.map((p) => {
                const score = p.scores[m.id];
                return (
                  <td key={p.learner} className="px-1 py-0.5 text-center tabular-nums">
                    {score ? (
                      <span
                        className="inline-block w-10 rounded px-1"
                        style={{ background: scoreColour(score.score) }}
                        title={`${(score.score * 100).toFixed(0)}% over ${score.games} game${score.games === 1 ? "" : "s"}`}
                      >
                        {score.score.toFixed(2)}
                      </span>
                    ) : (
                      <span className="text-slate-300">·</span>
                    )}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** "low – high" and a whisker on a scale shared by every row, so intervals compare at a glance. */
function IntervalBar({ table, low, high, rating }: { table: LeagueTable; low: number; high: number; rating: number }) {
  const min = Math.min(...table.members.map((m) => m.low));
  const max = Math.max(...table.members.map((m) => m.high));
  const at = (v: number) => (max > min ? (100 * (v - min)) / (max - min) : 50);
  return (
    <span className="flex items-center gap-2">
      <span className="w-20 shrink-0">
        {Math.round(low)} – {Math.round(high)}
      </span>
      <span className="relative hidden h-2 w-28 rounded bg-slate-100 sm:inline-block" aria-hidden>
        <span className="absolute top-0 h-2 rounded bg-brand-500/30" style={{ left: `${at(low)}%`, width: `${Math.max(1, at(high) - at(low))}%` }} />
        <span className="absolute top-0 h-2 w-0.5 bg-brand-700" style={{ left: `${at(rating)}%` }} />
      </span>
    </span>
  );
}

/** Red for a learner that loses to the member, green for one that beats it, pale around an even score. */
function scoreColour(score: number): string {
  const hue = Math.round(120 * Math.min(1, Math.max(0, score)));
  return `hsl(${hue} 70% 88%)`;
}
