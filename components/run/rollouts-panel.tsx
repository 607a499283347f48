"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { Card } from "@/components/ui/card";
import { useTRPC } from "@/components/trpc/provider";
import { specialTokens } from "@/lib/model/tokenizer";

/** The latest step's rollouts: groups of samples, each opening to its turns. */
export function RolloutsPanel({ runId, live }: { runId: string; live: boolean }) {
  const trpc = useTRPC();
  const [split, setSplit] = useState<"train" | "eval">("train");
  const [selected, setSelected] = useState<string | null>(null);
  const rollouts = useQuery({ ...trpc.runs.rollouts.queryOptions({ runId, split }), refetchInterval: live ? 4000 : false });
  const items = rollouts.data?.items ?? [];
  const open = items.find((item) => `${item.groupIndex}/${item.sampleIndex}` === selected) ?? null;
  return (
    <Card
      title={rollouts.data?.step != null ? `Rollouts · ${split} · step ${rollouts.data.step}` : "Rollouts"}
      actions={
        <div className="flex gap-1 text-xs" role="tablist">
          {(["train", "eval"] as const).map((s) => (
            <button key={s} role="tab" aria-selected={split === s} onClick={() => setSplit(s)} className={`rounded px-2 py-1 ${split === s ? "bg-brand-50 text-brand-700" : "text-slate-600 hover:bg-slate-100"}`}>
              {s}
            </button>
          ))}
        </div>
      }
    >
      {items.length === 0 ? (
        <p className="px-4 py-6 text-sm text-slate-500">No rollouts yet.</p>
      ) : (
        <div className="grid lg:grid-cols-[minmax(0,2fr)_minmax(0,3fr)]">
          <div className="max-h-[28rem] overflow-auto">
          <table className="w-full text-sm">
            <thead className="sticky top-0 border-b border-slate-200 bg-white text-left text-xs uppercase tracking-wide text-slate-500">
              <tr>
                <th className="px-4 py-2 font-medium">Group</th>
                <th className="px-2 py-2 font-medium">Sample</th>
                <th className="px-2 py-2 font-medium">Turns</th>
                <th className="px-2 py-2 text-right font-medium">Reward</th>
                <th className="px-4 py-2 text-right font-medium">Advantage</th>
              </tr>
            </thead>
            <tbody className="divide-y divide-slate-100">
              {items.slice(0, 200).map((item) => {
                const key = `${item.groupIndex}/${item.sampleIndex}`;
                return (
                  <tr key={key} onClick={() => setSelected(key)} className={`cursor-pointer ${selected === key ? "bg-brand-50" : "hover:bg-slate-50"}`}>
                    <td className="px-4 py-1.5 tabular-nums">{item.groupIndex}</td>
                    <td className="px-2 py-1.5 tabular-nums">{item.sampleIndex}</td>
                    <td className="px-2 py-1.5 tabular-nums">{item.turns.length}</td>
                    <td className="px-2 py-1.5 text-right tabular-nums">{item.totalReward.toFixed(2)}</td>
                    <td className="px-4 py-1.5 text-right tabular-nums">{item.advantage === null ? "—" : item.advantage.toFixed(2)}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
          </div>
          <div className="max-h-[28rem] overflow-auto border-t border-slate-200 p-4 lg:border-l lg:border-t-0">
            {open ? (
              <ol className="space-y-3 text-sm" aria-label="Turns">
                {open.turns.map((turn, t) => (
                  <li key={t} className="rounded-md border border-slate-200">
                    <div className="border-b border-slate-100 bg-slate-50 px-3 py-1.5 font-mono text-xs whitespace-pre-wrap text-slate-700">{turn.observation}</div>
                    <div className="flex items-start justify-between gap-3 px-3 py-1.5">
                      <span className="font-mono text-xs whitespace-pre-wrap text-brand-700">{turn.action || "∅"}</span>
                      <span className="shrink-0 font-mono text-xs tabular-nums text-slate-500">r={turn.reward?.toFixed(2) ?? "—"}</span>
                    </div>
                    {turn.render && <pre className="border-t border-slate-100 px-3 py-1.5 font-mono text-xs text-slate-600">{turn.render}</pre>}
                  </li>
                ))}
              </ol>
            ) : (
              <p className="text-sm text-slate-500">Select a sample to see its turns.</p>
            )}
            {open?.tokens && open.tokenLogprobs && open.tokens.length > 0 && <TokenStrip tokens={open.tokens} logprobs={open.tokenLogprobs} />}
          </div>
        </div>
      )}
    </Card>
  );
}

/** The tokenizer's special tokens by id, named as the tokenizer names them. */
const SPECIAL: Record<number, string> = Object.fromEntries(Object.entries(specialTokens).map(([name, id]) => [id, `<${name}>`]));

/** The byte tokenizer's id as something printable: the character, a special token's name, or the byte in hex. */
function tokenText(id: number): string {
  if (SPECIAL[id]) return SPECIAL[id]!;
  if (id === 32) return "␣";
  if (id > 32 && id < 127) return String.fromCharCode(id);
  return `\\x${id.toString(16).padStart(2, "0")}`;
}

/**
 * The policy's tokens coloured by how likely the policy found them (the sampler's logprob): green near 1, red
 * near 0; hover for the values.
 */
function TokenStrip({ tokens, logprobs }: { tokens: number[]; logprobs: number[] }) {
  return (
    <div className="mt-4">
      <p className="mb-1 text-xs font-medium text-slate-600">Action tokens by probability</p>
      <div className="flex flex-wrap gap-px font-mono text-xs" aria-label="Action tokens">
        {tokens.map((token, i) => {
          const logprob = logprobs[i] ?? 0;
          const p = Math.exp(logprob);
          return (
            <span
              key={i}
              title={`${tokenText(token)} · id ${token} · logprob ${logprob.toFixed(3)} · p ${p.toFixed(3)}`}
              className="rounded-sm px-0.5 text-slate-900"
              style={{ backgroundColor: `hsl(${Math.round(p * 120)} 70% 85%)` }}
            >
              {tokenText(token)}
            </span>
          );
        })}
      </div>
    </div>
  );
}
