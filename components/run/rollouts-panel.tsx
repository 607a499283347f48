"use client";

import { useQuery } from "@tanstack/react-query";
import { Fragment, useEffect, useId, useMemo, useRef, useState } from "react";
import { ShareButton } from "@/components/share/share-button";
import { Card } from "@/components/ui/card";
import { RadioGroup } from "@/components/ui/radio-group";
import { useTRPC } from "@/components/trpc/provider";
import { specialTokens } from "@/lib/model/tokenizer";
import { describeConstraint } from "@/lib/sdk/action-space";
import { useViewParams } from "./view-params";
import { agentColour } from "./agent-colours";
import {
  agentReturnsOf,
  agentsOf,
  algorithmOf,
  filterAndSort,
  protocolAgentsOf,
  returnsOf,
  SORTS,
  tokenTurns,
  turnAdvantages,
  type AlgorithmSettings,
  type RolloutItem,
  type SortKey,
} from "./trajectory";

/** A reward bound as typed: a number, or null for none. */
const bound = (text: string) => (text.trim() === "" || !Number.isFinite(Number(text)) ? null : Number(text));
const keyOf = (item: { groupIndex: number; sampleIndex: number }) => `${item.groupIndex}/${item.sampleIndex}`;
const fixed = (v: number | null | undefined, digits = 2) => (v === null || v === undefined ? "—" : v.toFixed(digits));
const formatSigned = (v: number) => (v > 0 ? `+${fixed(v)}` : fixed(v));
const isTyping = (target: EventTarget | null) =>
  target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName) || !!target.closest(".cm-editor"));

/**
 * The trajectory viewer: one training step's groups and samples (any step, the latest by default), filtered and
 * sorted by reward, each opening to its turns with reward, return and advantage, its tokens coloured by logprob or
 * advantage, and the same prompt across steps. Keys: j/k (or ↓/↑ in the list) between samples, [ and ] between
 * steps.
 */
export function RolloutsPanel({
  runId,
  live,
  config,
  initialSplit = "train",
  shared = false,
  canShare = false,
}: {
  runId: string;
  live: boolean;
  config: unknown;
  /** The split shown first: an evaluation run has only "eval" rollouts. */
  initialSplit?: "train" | "eval";
  /** Seen through a share link: no downloads. */
  shared?: boolean;
  /** The caller may make a link to the open trajectory. */
  canShare?: boolean;
}) {
  const trpc = useTRPC();
  const algorithm = useMemo(() => algorithmOf(config), [config]);
  const protocolAgents = useMemo(() => protocolAgentsOf(config), [config]);
  // The split, step, open sample and sort live in the URL (a reload or a link opens the same trajectory).
  const [view, setView] = useViewParams();
  const split: "train" | "eval" = view.get("split") === "eval" || view.get("split") === "train" ? (view.get("split") as "train" | "eval") : initialSplit;
  const setSplit = (value: "train" | "eval") => setView({ split: value === initialSplit ? null : value, step: null, sample: null });
  /** null: follow the latest step. */
  const stepParam = view.get("step");
  const step = stepParam !== null && /^\d+$/.test(stepParam) ? Number(stepParam) : null;
  const setStep = (value: number | null) => setView({ step: value === null ? null : String(value) });
  const selected = view.get("sample");
  const setSelected = (key: string | null) => setView({ sample: key });
  const sortParam = view.get("sort") ?? "";
  const sort = (Object.hasOwn(SORTS, sortParam) ? sortParam : "sample") as SortKey;
  const setSort = (value: SortKey) => setView({ sort: value === "sample" ? null : value });
  const [minReward, setMinReward] = useState("");
  const [maxReward, setMaxReward] = useState("");
  const rollouts = useQuery({
    ...trpc.runs.rollouts.queryOptions({ runId, split, step: step ?? undefined }),
    refetchInterval: live && step === null ? 4000 : false,
    placeholderData: (previous) => previous,
  });
  const data = rollouts.data;
  const items = useMemo(() => (data?.items ?? []) as RolloutItem[], [data]);
  const visible = useMemo(() => filterAndSort(items, { min: bound(minReward), max: bound(maxReward), sort }), [items, minReward, maxReward, sort]);
  const open = items.find((item) => keyOf(item) === selected) ?? null;
  const list = useRef<HTMLDivElement>(null);
  const keysHelp = useId();
  const shownRows = visible.slice(0, 500);
  // The list is one tab stop: the selected row's button (the first row's while none is selected).
  const tabStop = shownRows.some((item) => keyOf(item) === selected) ? selected : shownRows[0] && keyOf(shownRows[0]);

  const move = (by: number) => {
    if (visible.length === 0) return;
    const at = visible.findIndex((item) => keyOf(item) === selected);
    const next = at < 0 ? (by > 0 ? 0 : visible.length - 1) : Math.min(visible.length - 1, Math.max(0, at + by));
    setSelected(keyOf(visible[next]!));
  };
  const goToStep = (to: number | null | undefined) => {
    if (to === null || to === undefined) return;
    setStep(to === data?.lastStep && live ? null : to);
  };
  // j/k anywhere on the page (unless typing), [ and ] for steps; ↓/↑ inside the list.
  const keys = useRef({ move, goToStep, data });
  keys.current = { move, goToStep, data };
  useEffect(() => {
    const onKey = (event: KeyboardEvent) => {
      if (event.ctrlKey || event.metaKey || event.altKey || isTyping(event.target)) return;
      const inList = list.current?.contains(event.target as Node) ?? false;
      const { move, goToStep, data } = keys.current;
      if (event.key === "j" || (inList && event.key === "ArrowDown")) move(1);
      else if (event.key === "k" || (inList && event.key === "ArrowUp")) move(-1);
      else if (event.key === "[") goToStep(data?.prevStep);
      else if (event.key === "]") goToStep(data?.nextStep);
      else return;
      event.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
  useEffect(() => {
    const row = selected ? list.current?.querySelector(`[data-sample="${selected}"]`) : null;
    row?.scrollIntoView({ block: "nearest" });
    // Inside the list (↓/↑) the focus follows the selection; j/k elsewhere on the page leave it where it is.
    if (list.current?.contains(document.activeElement)) row?.querySelector("button")?.focus();
  }, [selected]);

  const exportHref = data?.step != null ? `/runs/${encodeURIComponent(runId)}/rollouts.jsonl?split=${split}&step=${data.step}` : null;
  const navButton = "rounded px-1.5 py-0.5 text-slate-600 hover:bg-slate-100 disabled:opacity-40 disabled:hover:bg-transparent";
  return (
    <Card
      title={data?.step != null ? `Rollouts · ${split} · step ${data.step}` : "Rollouts"}
      actions={
        <div className="flex flex-wrap items-center gap-3 text-xs">
          {data?.step != null && (
            <fieldset className="flex items-center gap-1" aria-label="Step">
              <button type="button" className={navButton} disabled={data.prevStep === null} onClick={() => goToStep(data.prevStep)} aria-label="Previous step">
                ◀
              </button>
              <span className="tabular-nums text-slate-600">
                step {data.step} of {data.lastStep}
              </span>
              <button type="button" className={navButton} disabled={data.nextStep === null} onClick={() => goToStep(data.nextStep)} aria-label="Next step">
                ▶
              </button>
              {step !== null && data.step !== data.lastStep && (
                <button type="button" className={navButton} onClick={() => setStep(null)}>
                  latest
                </button>
              )}
            </fieldset>
          )}
          {canShare && open && data?.step != null && (
            <ShareButton
              kind="trajectory"
              runIds={[runId]}
              canCreate
              label="Share trajectory"
              compact
              view={{ split, step: String(data.step), sample: keyOf(open) }}
            />
          )}
          {exportHref && !shared && (
            <a href={exportHref} download className="rounded border border-slate-300 px-2 py-0.5 text-slate-700 hover:bg-slate-50">
              Export JSONL
            </a>
          )}
          <div className="flex gap-1" role="tablist">
            {(["train", "eval"] as const).map((s) => (
              <button
                key={s}
                type="button"
                role="tab"
                aria-selected={split === s}
                onClick={() => setSplit(s)}
                className={`rounded px-2 py-1 ${split === s ? "bg-brand-50 text-brand-700" : "text-slate-600 hover:bg-slate-100"}`}
              >
                {s}
              </button>
            ))}
          </div>
        </div>
      }
    >
      {items.length === 0 ? (
        <p className="px-4 py-6 text-sm text-slate-500">{rollouts.isLoading ? "Loading…" : "No rollouts yet."}</p>
      ) : (
        <>
          <div className="flex flex-wrap items-center gap-4 border-b border-slate-200 px-4 py-2 text-xs text-slate-600">
            <label className="flex items-center gap-1.5">
              Sort by
              <select value={sort} onChange={(e) => setSort(e.target.value as SortKey)} className="rounded border border-slate-300 bg-white px-1 py-0.5">
                {Object.entries(SORTS).map(([value, label]) => (
                  <option key={value} value={value}>
                    {label}
                  </option>
                ))}
              </select>
            </label>
            <label className="flex items-center gap-1.5">
              Reward ≥
              <input
                type="number"
                step="any"
                value={minReward}
                onChange={(e) => setMinReward(e.target.value)}
                className="w-16 rounded border border-slate-300 px-1 py-0.5"
                aria-label="Minimum reward"
              />
            </label>
            <label className="flex items-center gap-1.5">
              ≤
              <input
                type="number"
                step="any"
                value={maxReward}
                onChange={(e) => setMaxReward(e.target.value)}
                className="w-16 rounded border border-slate-300 px-1 py-0.5"
                aria-label="Maximum reward"
              />
            </label>
            <output className="tabular-nums" aria-label="Samples shown">
              {visible.length} of {items.length} samples
            </output>
            <span id={keysHelp} role="note" className="ml-auto text-slate-500" aria-label="Keyboard shortcuts">
              Keys: <kbd className="font-mono">j</kbd>/<kbd className="font-mono">k</kbd> (or <kbd>↓</kbd>/<kbd>↑</kbd> in the list) next/previous sample ·{" "}
              <kbd className="font-mono">[</kbd>/<kbd className="font-mono">]</kbd> previous/next step
            </span>
          </div>
          <div className="grid lg:grid-cols-[minmax(0,2fr)_minmax(0,3fr)]">
            <div ref={list} className="max-h-[32rem] overflow-auto">
              <table className="w-full text-sm" aria-label="Samples" aria-describedby={keysHelp}>
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
                  {shownRows.map((item) => {
                    const key = keyOf(item);
                    return (
                      <tr
                        key={key}
                        data-sample={key}
                        aria-selected={selected === key}
                        onClick={() => setSelected(key)}
                        className={`cursor-pointer ${selected === key ? "bg-brand-50" : "hover:bg-slate-50"}`}
                      >
                        <td className="px-4 py-1.5 tabular-nums">
                          {/* The row's keyboard handle; a click anywhere on the row selects it. */}
                          <button
                            type="button"
                            tabIndex={key === tabStop ? 0 : -1}
                            aria-label={`group ${item.groupIndex}, sample ${item.sampleIndex}`}
                            className="rounded-sm focus:outline-none focus-visible:outline-2 focus-visible:outline-offset-2 focus-visible:outline-brand-500"
                          >
                            {item.groupIndex}
                          </button>
                        </td>
                        <td className="px-2 py-1.5 tabular-nums">{item.sampleIndex}</td>
                        <td className="px-2 py-1.5 tabular-nums">{item.turns.length}</td>
                        <td className="px-2 py-1.5 text-right tabular-nums">{item.totalReward.toFixed(2)}</td>
                        <td className="px-4 py-1.5 text-right tabular-nums">{fixed(item.advantage)}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
              {visible.length === 0 && <p className="px-4 py-4 text-sm text-slate-500">No sample of this step has a reward in that range.</p>}
            </div>
            <div className="max-h-[32rem] overflow-auto border-t border-slate-200 p-4 lg:border-l lg:border-t-0">
              {open ? (
                <SampleView
                  item={open}
                  group={items.filter((i) => i.groupIndex === open.groupIndex)}
                  algorithm={algorithm}
                  protocolAgents={protocolAgents}
                  runId={runId}
                  split={split}
                  step={data!.step!}
                  onPick={(to, key) => (setStep(to === data?.lastStep && live ? null : to), setSelected(key))}
                />
              ) : (
                <p className="text-sm text-slate-500">Select a sample to see its turns (or press j).</p>
              )}
            </div>
          </div>
        </>
      )}
    </Card>
  );
}

function SampleView({
  item,
  group,
  algorithm,
  protocolAgents,
  runId,
  split,
  step,
  onPick,
}: {
  item: RolloutItem;
  group: RolloutItem[];
  algorithm: AlgorithmSettings;
  /** the run's agents in the protocol's order: each agent's colour */
  protocolAgents: string[];
  runId: string;
  split: "train" | "eval";
  step: number;
  onPick: (step: number, key: string) => void;
}) {
  const returns = returnsOf(item, algorithm.discount);
  const advantages = turnAdvantages(item, group, algorithm);
  const rewardNames = Object.entries(item.rewards);
  // Several agents: each turn is its acting agent's, in the agent's colour, and each agent's return is shown.
  const agents = agentsOf(item, protocolAgents);
  const agentReturns = agents && agentReturnsOf(item, agents);
  return (
    <section className="space-y-4" aria-label="Sample">
      <div className="flex flex-wrap items-baseline gap-x-4 gap-y-1 text-xs text-slate-600">
        <span className="font-medium text-slate-800">
          group {item.groupIndex} · sample {item.sampleIndex}
        </span>
        <span className="tabular-nums">reward {item.totalReward.toFixed(3)}</span>
        <span className="tabular-nums">advantage {fixed(item.advantage, 3)}</span>
        {rewardNames.length > 1 && rewardNames.map(([name, value]) => <span key={name} className="tabular-nums">{`${name} ${value.toFixed(3)}`}</span>)}
      </div>
      {agents && agentReturns && (
        <ul aria-label="Each agent's return" className="flex flex-wrap items-center gap-2 text-xs">
          {agents.map((agent) => (
            <li key={agent} className={`rounded-full px-2 py-0.5 font-medium tabular-nums ring-1 ring-inset ${agentColour(agents, agent).chip}`}>
              {agent} {agentReturns[agent]!.toFixed(3)}
            </li>
          ))}
        </ul>
      )}
      {item.prompt && (
        <pre className="max-h-24 overflow-auto rounded bg-slate-50 px-3 py-1.5 font-mono text-xs whitespace-pre-wrap text-slate-500">{item.prompt}</pre>
      )}
      <ol className="space-y-3 text-sm" aria-label="Turns">
        {item.turns.map((turn, t) => (
          <li
            key={t}
            aria-label={agents && turn.agent !== undefined ? `turn ${t + 1} by ${turn.agent}` : undefined}
            className={`rounded-md border border-slate-200 ${agents && turn.agent !== undefined ? `border-l-4 ${agentColour(agents, turn.agent).border}` : ""}`}
          >
            {agents && turn.agent !== undefined && (
              <div className="flex flex-wrap items-baseline gap-x-3 border-b border-slate-100 px-3 py-1 text-xs">
                <span className={`font-semibold ${agentColour(agents, turn.agent).text}`}>{turn.agent}</span>
                <span className="text-slate-500">turn {t + 1}</span>
                {turn.rewards && (
                  <output className="ml-auto tabular-nums text-slate-500" aria-label={`turn ${t + 1} rewards by agent`}>
                    rewards:
                    {agents
                      .filter((agent) => agent in turn.rewards!)
                      .map((agent, i) => (
                        <Fragment key={agent}>
                          {i > 0 ? " ·" : ""} <span className={agentColour(agents, agent).text}>{`${agent} ${formatSigned(turn.rewards![agent]!)}`}</span>
                        </Fragment>
                      ))}
                  </output>
                )}
              </div>
            )}
            <div className="border-b border-slate-100 bg-slate-50 px-3 py-1.5 font-mono text-xs whitespace-pre-wrap text-slate-700">{turn.observation}</div>
            <div className="flex items-start justify-between gap-3 px-3 py-1.5">
              <span className="font-mono text-xs whitespace-pre-wrap text-brand-700">{turn.action || "∅"}</span>
              {/* The return and advantage are computed here, from the rewards and the algorithm's settings. */}
              <output className="shrink-0 font-mono text-xs tabular-nums text-slate-500" aria-label={`turn ${t + 1} values`}>
                r={fixed(turn.reward)} G={fixed(returns[t])} A={fixed(advantages[t])}
              </output>
            </div>
            {turn.legalActions && (
              <div className="border-t border-slate-100 px-3 py-1 text-xs text-slate-500">
                legal: <span className="font-mono">{describeConstraint(turn.legalActions)}</span>
              </div>
            )}
            {turn.render && <pre className="border-t border-slate-100 px-3 py-1.5 font-mono text-xs text-slate-600">{turn.render}</pre>}
          </li>
        ))}
      </ol>
      <p className="text-xs text-slate-500">
        {agents ? "r: the acting agent's reward · G: its own return" : "r: the turn's reward · G: its return"} (γ = {algorithm.discount}) · A: its advantage (
        {algorithm.name}
        {algorithm.name === "ppo" ? "; later turns' come from the value head, which is not stored" : ""})
      </p>
      {item.tokens && item.tokenLogprobs && item.tokens.length > 0 && <TokenStrip item={item} advantages={advantages} />}
      <PromptAcrossSteps runId={runId} split={split} item={item} step={step} onPick={onPick} />
    </section>
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

const COLOUR_BY = [
  ["logprob", "logprob"],
  ["advantage", "advantage"],
] as const;

/**
 * The policy's action tokens coloured by the sampler's probability (green near 1, red near 0) or by their turn's
 * advantage (green above 0, red below, stronger further from 0); hover or focus a token for its values.
 */
function TokenStrip({ item, advantages }: { item: RolloutItem; advantages: (number | null)[] }) {
  const [by, setBy] = useState<"logprob" | "advantage">("logprob");
  const [hovered, setHovered] = useState<number | null>(null);
  const tokens = item.tokens!;
  const logprobs = item.tokenLogprobs!;
  const textOf = (i: number) => item.tokenTexts?.[i] ?? tokenText(tokens[i]!);
  const turnOf = useMemo(() => tokenTurns(item), [item]);
  const tokenAdvantage = (i: number) => (turnOf ? (advantages[turnOf[i]!] ?? null) : item.advantage);
  const scale = Math.max(1e-9, ...tokens.map((_, i) => Math.abs(tokenAdvantage(i) ?? 0)));
  const colour = (i: number) => {
    if (by === "logprob") return `hsl(${Math.round(Math.exp(logprobs[i] ?? 0) * 120)} 70% 85%)`;
    const a = tokenAdvantage(i);
    if (a === null) return "hsl(0 0% 92%)";
    return `hsl(${a >= 0 ? 120 : 0} 70% ${Math.round(96 - 24 * Math.min(1, Math.abs(a) / scale))}%)`;
  };
  const describe = (i: number) => {
    const logprob = logprobs[i] ?? 0;
    const a = tokenAdvantage(i);
    return `${textOf(i)} · id ${tokens[i]} · logprob ${logprob.toFixed(3)} · p ${Math.exp(logprob).toFixed(3)} · advantage ${a === null ? "—" : a.toFixed(3)}${turnOf ? ` · turn ${turnOf[i]! + 1}` : ""}`;
  };
  return (
    <div>
      <div className="mb-1 flex items-center justify-between gap-2">
        <p className="text-xs font-medium text-slate-600">Action tokens by {by === "logprob" ? "probability" : "advantage"}</p>
        <RadioGroup label="Colour tokens by" options={COLOUR_BY} value={by} onChange={setBy} className="gap-1 text-xs" optionClassName="rounded px-2 py-0.5" />
      </div>
      {/* One tab stop: ←/→ (Home, End) move between the tokens, and the focused one's values are shown below. */}
      <div
        role="listbox"
        aria-label="Action tokens"
        aria-orientation="horizontal"
        onKeyDown={(event) => {
          const last = tokens.length - 1;
          const at = hovered ?? 0;
          const to = { ArrowRight: Math.min(last, at + 1), ArrowLeft: Math.max(0, at - 1), Home: 0, End: last }[event.key];
          if (to === undefined) return;
          event.preventDefault();
          (event.currentTarget.children[to] as HTMLElement | undefined)?.focus();
        }}
        onMouseLeave={() => setHovered(null)}
        className="flex flex-wrap gap-px font-mono text-xs"
      >
        {tokens.map((_, i) => (
          <span
            key={i}
            role="option"
            tabIndex={i === (hovered ?? 0) ? 0 : -1}
            aria-selected={hovered === i}
            title={describe(i)}
            data-by={by}
            onMouseEnter={() => setHovered(i)}
            onFocus={() => setHovered(i)}
            className={`rounded-sm px-0.5 text-slate-900 focus:outline-none focus-visible:outline-2 focus-visible:outline-brand-500 ${hovered === i ? "ring-1 ring-slate-500" : ""}`}
            style={{ backgroundColor: colour(i) }}
          >
            {textOf(i)}
          </span>
        ))}
      </div>
      <output className="mt-1 block h-4 font-mono text-xs text-slate-600" aria-label="Token values">
        {hovered !== null ? describe(hovered) : "Hover or focus a token for its values."}
      </output>
      {by === "advantage" && !turnOf && (
        <p className="text-xs text-amber-700">The tokens do not spell the turns&apos; actions in order; each is coloured by the sample&apos;s advantage.</p>
      )}
    </div>
  );
}

/** The samples of other steps that had this sample's prompt and task: how the policy's answers to it changed. */
function PromptAcrossSteps({
  runId,
  split,
  item,
  step,
  onPick,
}: {
  runId: string;
  split: "train" | "eval";
  item: RolloutItem;
  step: number;
  onPick: (step: number, key: string) => void;
}) {
  const trpc = useTRPC();
  const observation = item.turns[0]?.observation ?? "";
  const history = useQuery(trpc.runs.promptAcrossSteps.queryOptions({ runId, split, prompt: item.prompt, observation }));
  const steps = history.data?.steps ?? [];
  return (
    <section aria-label="Same prompt across steps">
      <h3 className="mb-1 text-xs font-medium text-slate-600">
        This prompt across steps {steps.length > 0 && <span className="font-normal text-slate-500">({steps.length} steps)</span>}
      </h3>
      {history.isLoading ? (
        <p className="text-xs text-slate-500">Loading…</p>
      ) : steps.length <= 1 ? (
        <p className="text-xs text-slate-500">No other step sampled this prompt.</p>
      ) : (
        <table className="w-full text-xs">
          <thead className="text-left text-slate-500">
            <tr>
              <th className="py-1 pr-2 font-medium">Step</th>
              <th className="py-1 pr-2 text-right font-medium">Mean reward</th>
              <th className="py-1 font-medium">Samples (reward: first action)</th>
            </tr>
          </thead>
          <tbody className="divide-y divide-slate-100">
            {steps.map((s) => (
              <tr key={s.step} className={s.step === step ? "bg-brand-50" : ""}>
                <td className="py-1 pr-2 tabular-nums">{s.step}</td>
                <td className="py-1 pr-2 text-right tabular-nums">{s.meanReward.toFixed(2)}</td>
                <td className="py-1">
                  <div className="flex flex-wrap gap-1">
                    {s.samples.map((sample) => (
                      <button
                        key={keyOf(sample)}
                        type="button"
                        onClick={() => onPick(s.step, keyOf(sample))}
                        title={`step ${s.step} · group ${sample.groupIndex} · sample ${sample.sampleIndex}`}
                        className="max-w-48 truncate rounded border border-slate-200 px-1 font-mono hover:bg-slate-100"
                      >
                        {sample.totalReward.toFixed(1)}: {sample.action || "∅"}
                      </button>
                    ))}
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
