"use client";

import quickjsPackage from "@jitl/quickjs-wasmfile-release-sync/package.json";
import { useQuery } from "@tanstack/react-query";
import { useEffect, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import type { BrowserPolicy } from "@/components/playground/browser-policy";
import type { GeneratedToken, LoadedModel } from "@/components/playground/protocol";
import { type SamplingForm, samplingSettings } from "@/components/playground/sampling-controls";
import { type TokenLabels, tokenLabels } from "@/components/playground/token-label";
import { TokenStream } from "@/components/playground/token-stream";
import { useCases } from "@/lib/envs";
import type { Tokenizer } from "@/lib/model/tokenizer";
import type { DatasetRow } from "@/lib/sdk/environment";
import { type ActRequest, type Protocol, type Trajectory, turnBased } from "@/lib/sdk/protocol";
import { EnvironmentClient } from "./environment-client";
import { agentColour } from "@/components/run/agent-colours";
import { describeEnd } from "./episode-end";
import type { EnvironmentOutline, EnvironmentSource, PlayedTurn } from "./protocol";

const QUICKJS_WASM_URL = `/quickjs/${quickjsPackage.version}/emscripten-module.wasm`;
/** The first held-out seed of a run with default settings: episodes no run trained on. */
const DEFAULT_HELD_OUT_SEED = 1_000_000;

type Controller = "policy" | "you";

/** Built-in environments a person can play without a run: those that read no dataset. */
const freeUseCases = Object.entries(useCases).filter(([, useCase]) => useCase.environment.data.kind === "free");

/** A played turn, with the policy's tokens when the policy played it. */
type ShownTurn = PlayedTurn & { by: Controller; tokens: GeneratedToken[] | null };

type EpisodeLimits = Parameters<typeof describeEnd>[1];

type EpisodeState =
  | { status: "idle" }
  | {
      status: "playing" | "finished" | "failed";
      episode: number;
      /** the policy's tokenizer when the episode started: its turns' chips are labelled in it */
      labels: TokenLabels | null;
      systemPrompt: string;
      start: { observation: string; render: string | null } | null;
      turns: ShownTurn[];
      /** the turn being answered: by the policy (its tokens so far) or by the person */
      pending: { request: ActRequest; by: Controller; tokens: GeneratedToken[] } | null;
      trajectory: Trajectory | null;
      message: string | null;
      /** what the outcome needs to say why the episode ended: its protocol, turn limit and the policy's context */
      limits: EpisodeLimits;
      /** the protocol's agents, in its order (each agent's colour) */
      agents: string[];
    };

/**
 * The environment worker for `source` (one per source: a change ends the old worker). `source` must keep its
 * identity while it means the same environment (the player memoizes it on the query's data, which react-query
 * keeps stable): it is compared by reference, never serialized, as the player re-renders on every streamed token.
 */
function useEnvironment(source: EnvironmentSource | null) {
  const [client, setClient] = useState<EnvironmentClient | null>(null);
  const [outline, setOutline] = useState<{ ok: true; outline: EnvironmentOutline } | { ok: false; message: string } | null>(null);
  useEffect(() => {
    if (!source) return;
    const created = new EnvironmentClient(source);
    let current = true;
    setClient(created);
    setOutline(null);
    created.ready.then(
      (loaded) => current && setOutline({ ok: true, outline: loaded }),
      (error: Error) => current && setOutline({ ok: false, message: error.message }),
    );
    return () => {
      current = false;
      created.dispose();
    };
  }, [source]);
  return { client, outline };
}

/**
 * Plays an episode of a run's environment (or a built-in one) in this browser: the environment in a worker, the
 * policy loaded in the playground, and the person for any side set to "You".
 */
export function EpisodePlayer({
  policy,
  model,
  tokenizer,
  sampling,
  runId,
}: {
  policy: BrowserPolicy | null;
  model: LoadedModel | null;
  /** the loaded model's tokenizer (null while it loads): prompts, stop tokens and actions are in its tokens */
  tokenizer: Tokenizer | null;
  sampling: SamplingForm;
  runId: string | null;
}) {
  const trpc = useTRPC();
  const playable = useQuery({ ...trpc.runs.playable.queryOptions({ runId: runId ?? "" }), enabled: runId !== null, retry: false });
  const [builtin, setBuiltin] = useState(freeUseCases[0]?.[0] ?? "");
  const [opponent, setOpponent] = useState<"scripted" | "player">("scripted");
  const [opens, setOpens] = useState(0);
  const [controllers, setControllers] = useState<Record<string, Controller>>({});
  const [seed, setSeed] = useState<number | null>(null);
  const [rowIndex, setRowIndex] = useState(0);

  const useCaseName = runId !== null ? (playable.data?.environment.kind === "builtin" ? playable.data.environment.name : null) : builtin;
  const duel = useCaseName ? useCases[useCaseName]?.duel : undefined;
  const twoPlayer = duel !== undefined && opponent === "player";

  const source = useMemo<EnvironmentSource | null>(() => {
    if (runId !== null) {
      const environment = playable.data?.environment;
      if (!environment) return null;
      if (environment.kind === "sandboxed") return { ...environment, quickjsWasmUrl: QUICKJS_WASM_URL };
      return { kind: "builtin", name: environment.name, duel: twoPlayer };
    }
    return builtin ? { kind: "builtin", name: builtin, duel: twoPlayer } : null;
  }, [runId, playable.data, builtin, twoPlayer]);
  const { client, outline } = useEnvironment(source);

  // The protocol the policy was trained under: the run's, or the built-in use case's.
  const trained: Protocol | null = runId !== null ? (playable.data?.protocol ?? null) : (useCases[builtin]?.protocol ?? null);
  // Two players take turns, each prompted as the trained protocol prompts (a board game's policy reads the latest
  // board only; a whole conversation would outgrow its context after its first move).
  const protocol: Protocol | null = twoPlayer
    ? { ...turnBased(opens === 0 ? duel.sides : [duel.sides[1], duel.sides[0]]), history: trained?.history ?? "full" }
    : trained;
  const agents = protocol?.agents ?? [];
  // The policy plays the side it was trained on unless set otherwise; a second player is the person by default.
  const controllerOf = (agent: string): Controller => controllers[agent] ?? (twoPlayer && agent !== duel.sides[0] ? "you" : "policy");
  const rowsQuery = useQuery({
    ...trpc.runs.playableRows.queryOptions({ runId: runId ?? "", dataset: outline?.ok ? (outline.outline.dataset ?? "") : "" }),
    enabled: runId !== null && playable.data?.dataset === null && outline?.ok === true && outline.outline.dataset !== null,
    retry: false,
  });
  const dataset = playable.data?.dataset ?? rowsQuery.data ?? null;
  const heldOutSeed = playable.data?.heldOutSeed ?? DEFAULT_HELD_OUT_SEED;
  const episodeSeed = seed ?? heldOutSeed;

  const [state, setState] = useState<EpisodeState>({ status: "idle" });
  const stateRef = useRef(state);
  stateRef.current = state;
  const generation = useRef<{ stop(): void } | null>(null);
  useEffect(() => () => generation.current?.stop(), []);
  // A change of environment ends the episode shown.
  // biome-ignore lint/correctness/useExhaustiveDependencies: reset when the worker changes
  useEffect(() => setState({ status: "idle" }), [client]);

  const needsPolicy = agents.some((agent) => controllerOf(agent) === "policy");
  const blocked =
    !client || outline?.ok !== true || !protocol
      ? "Loading the environment…"
      : needsPolicy && (!policy || !model || !tokenizer)
        ? "Waiting for the model to load…"
        : outline.outline.dataset !== null && !dataset
          ? `Loading rows of dataset '${outline.outline.dataset}'…`
          : null;

  const update = (episode: number, change: (current: Extract<EpisodeState, { episode: number }>) => EpisodeState) =>
    setState((current) => (current.status !== "idle" && current.episode === episode ? change(current) : current));

  const play = () => {
    if (!client || !protocol || blocked || outline?.ok !== true) return;
    generation.current?.stop();
    const sample: DatasetRow | undefined = twoPlayer
      ? { opens: duel.sides[opens]! }
      : dataset
        ? dataset.rows[rowIndex % Math.max(dataset.rows.length, 1)]
        : undefined;
    const bySide = Object.fromEntries(agents.map((agent) => [agent, controllerOf(agent)]));
    const policyTokens: GeneratedToken[][] = [];
    const policyPlays = Object.values(bySide).includes("policy") && model !== null && tokenizer !== null;
    const limits: EpisodeLimits = { protocol, maxTurns: outline.outline.maxTurns, contextLength: policyPlays ? model.config.contextLength : null };
    const episode = client.play(
      {
        protocol,
        seed: episodeSeed,
        sample,
        context: policyPlays
          ? { length: model.config.contextLength, tokenizer: model.tokenizer, agents: agents.filter((agent) => bySide[agent] === "policy") }
          : null,
      },
      {
        started: (start) => update(episode, (current) => ({ ...current, systemPrompt: start.systemPrompt, start })),
        act: (request) => {
          const by = bySide[request.agent] ?? "you";
          update(episode, (current) => ({ ...current, pending: { request, by, tokens: [] } }));
          if (by === "policy") actAsPolicy(episode, request, policyTokens);
        },
        stepped: (turn) =>
          update(episode, (current) => {
            const by = bySide[turn.agent] ?? "you";
            return { ...current, pending: null, turns: [...current.turns, { ...turn, by, tokens: by === "policy" ? (policyTokens.shift() ?? null) : null }] };
          }),
        finished: (trajectory) => update(episode, (current) => ({ ...current, status: "finished", pending: null, trajectory })),
        failed: (message) => update(episode, (current) => ({ ...current, status: "failed", pending: null, message })),
      },
    );
    setState({
      status: "playing",
      episode,
      labels: tokenizer ? tokenLabels(tokenizer) : null,
      systemPrompt: "",
      start: null,
      turns: [],
      pending: null,
      trajectory: null,
      message: null,
      limits,
      // A duel's sides keep their colours whichever opens.
      agents: twoPlayer ? [...duel.sides] : protocol.agents,
    });
  };

  const actAsPolicy = (episode: number, request: ActRequest, policyTokens: GeneratedToken[][]) => {
    if (!policy || !client) return;
    const fail = (message: string) =>
      update(episode, (current) => ({ ...current, status: "failed", pending: null, message: `the policy could not answer: ${message}` }));
    if (!tokenizer) return fail("its model is not loaded");
    let prompt: number[];
    try {
      prompt = tokenizer.encodeChat(request.messages, { addGenerationPrompt: true });
    } catch (error) {
      return fail(error instanceof Error ? error.message : String(error));
    }
    const drawn: GeneratedToken[] = [];
    const started = policy.generate(
      prompt,
      samplingSettings(sampling, [...tokenizer.stopTokens]),
      (token) => {
        drawn.push(token);
        update(episode, (current) => (current.pending ? { ...current, pending: { ...current.pending, tokens: [...drawn] } } : current));
      },
      request.legalActions ?? null,
    );
    generation.current = started;
    started.done.then(
      (summary) => {
        policyTokens.push(drawn);
        client.act(episode, { text: tokenizer.decode(summary.tokens, { skipSpecial: true }), tokens: summary.tokens });
      },
      (error: Error) => fail(error.message),
    );
  };

  const answer = (text: string) => {
    const current = stateRef.current;
    if (current.status !== "playing" || current.pending?.by !== "you" || !client) return;
    client.act(current.episode, { text });
  };

  const stop = () => {
    generation.current?.stop();
    client?.abandon();
    setState((current) => (current.status === "playing" ? { ...current, status: "failed", pending: null, message: "Stopped." } : current));
  };

  const fieldClass = "mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm";
  return (
    <div className="space-y-6">
      <Card title="Episode">
        <div className="space-y-4 p-4">
          <div className="grid gap-4 sm:grid-cols-2 lg:grid-cols-4">
            {runId === null ? (
              <label className="block text-sm">
                <span className="font-medium text-slate-700">Environment</span>
                <select aria-label="Environment" value={builtin} onChange={(event) => setBuiltin(event.target.value)} className={fieldClass}>
                  {freeUseCases.map(([name, useCase]) => (
                    <option key={name} value={name}>
                      {useCase.title}
                    </option>
                  ))}
                </select>
              </label>
            ) : (
              <div className="text-sm">
                <span className="font-medium text-slate-700">Environment</span>
                <p className="mt-1.5 text-slate-900">
                  {playable.error
                    ? `Cannot load run ${runId}'s environment: ${playable.error.message}`
                    : playable.data
                      ? `${outline?.ok ? outline.outline.name : "…"} of run ${runId}${playable.data.environment.kind === "sandboxed" ? " (its own code, sandboxed in this page)" : ""}`
                      : "Loading…"}
                </p>
              </div>
            )}
            {duel && (
              <label className="block text-sm">
                <span className="font-medium text-slate-700">Opponent</span>
                <select aria-label="Opponent" value={opponent} onChange={(event) => setOpponent(event.target.value as typeof opponent)} className={fieldClass}>
                  <option value="scripted">The environment's own (as trained)</option>
                  <option value="player">A second player ({duel.sides[1]})</option>
                </select>
              </label>
            )}
            {twoPlayer && (
              <label className="block text-sm">
                <span className="font-medium text-slate-700">First move</span>
                <select aria-label="First move" value={opens} onChange={(event) => setOpens(Number(event.target.value))} className={fieldClass}>
                  {duel.sides.map((side, i) => (
                    <option key={side} value={i}>
                      {side} opens
                    </option>
                  ))}
                </select>
              </label>
            )}
            {agents.map((agent) => (
              <label key={agent} className="block text-sm">
                <span className="font-medium text-slate-700">{agents.length > 1 ? `Plays ${agent}` : "Plays the agent"}</span>
                <select
                  aria-label={`Who plays ${agent}`}
                  value={controllerOf(agent)}
                  onChange={(event) => setControllers({ ...controllers, [agent]: event.target.value as Controller })}
                  className={fieldClass}
                >
                  <option value="policy">The policy</option>
                  <option value="you">You</option>
                </select>
              </label>
            ))}
            <label className="block text-sm">
              <span className="font-medium text-slate-700">Episode seed</span>
              <input
                aria-label="Episode seed"
                type="number"
                min={0}
                value={episodeSeed}
                onChange={(event) => setSeed(Number.isFinite(event.target.valueAsNumber) ? Math.max(0, Math.round(event.target.valueAsNumber)) : null)}
                className={fieldClass}
              />
              <span className="mt-1 block text-xs text-slate-500">{episodeSeed >= heldOutSeed ? "held out: no run trained on it" : "a training seed"}</span>
            </label>
            {dataset && (
              <label className="block text-sm">
                <span className="font-medium text-slate-700">Row of {dataset.name}</span>
                <select aria-label="Dataset row" value={rowIndex} onChange={(event) => setRowIndex(Number(event.target.value))} className={fieldClass}>
                  {dataset.rows.map((row, i) => (
                    <option key={i} value={i}>
                      {i + 1}: {JSON.stringify(row).slice(0, 60)}
                    </option>
                  ))}
                </select>
                <span className="mt-1 block text-xs text-slate-500">
                  the first {dataset.rows.length} of {dataset.total} held-out rows
                </span>
              </label>
            )}
          </div>
          {outline?.ok === false && (
            <p role="alert" className="text-sm text-red-700">
              The environment could not be loaded: {outline.message}
            </p>
          )}
          <div className="flex items-center gap-2">
            <Button type="button" onClick={play} disabled={blocked !== null}>
              {state.status === "idle" ? "Play an episode" : "Play again"}
            </Button>
            <Button type="button" variant="secondary" onClick={stop} disabled={state.status !== "playing"}>
              Stop
            </Button>
            {blocked && <span className="text-sm text-slate-500">{blocked}</span>}
          </div>
        </div>
      </Card>
      {state.status !== "idle" && <Transcript state={state} onAnswer={answer} />}
    </div>
  );
}

function Transcript({ state, onAnswer }: { state: Extract<EpisodeState, { episode: number }>; onAnswer(text: string): void }) {
  // Several agents: each turn in its agent's colour.
  const several = state.agents.length > 1;
  return (
    <Card title="Transcript">
      <ol aria-label="Turns" className="divide-y divide-slate-200">
        <li className="space-y-2 p-4">
          <h3 className="text-xs font-medium tracking-wide text-slate-500 uppercase">Start</h3>
          {state.trajectory?.systemPrompts
            ? // Agents prompted apart (a role in the prompt): each one's, once the episode is over.
              Object.entries(state.trajectory.systemPrompts).map(([agent, prompt]) => (
                <p key={agent} className="text-sm text-slate-600">
                  System prompt of <AgentName agents={state.agents} agent={agent} />: {prompt}
                </p>
              ))
            : state.systemPrompt && <p className="text-sm text-slate-600">System prompt: {state.systemPrompt}</p>}
          {state.start && <Board text={state.start.render ?? state.start.observation} label="Initial observation" />}
        </li>
        {state.turns.map((turn, i) => (
          <li key={i} className={`space-y-2 p-4 ${several ? `border-l-4 ${agentColour(state.agents, turn.agent).border}` : ""}`}>
            <h3 className="flex items-center gap-2 text-xs font-medium tracking-wide text-slate-500 uppercase">
              Turn {i + 1} · <AgentName agents={state.agents} agent={turn.agent} /> · {turn.by === "policy" ? "the policy" : "you"}
              {/* Once the episode is over, a step that paid several agents shows each one's reward. */}
              {state.trajectory?.turns[i]?.rewards ? (
                <span>
                  rewards{" "}
                  {Object.entries(state.trajectory.turns[i]!.rewards!)
                    .map(([agent, value]) => `${agent} ${formatReward(value)}`)
                    .join(" · ")}
                </span>
              ) : (
                <span className={turn.reward > 0 ? "text-emerald-700" : turn.reward < 0 ? "text-red-700" : ""}>reward {formatReward(turn.reward)}</span>
              )}
            </h3>
            {turn.tokens && state.labels ? (
              <TokenStream tokens={turn.tokens} labels={state.labels} />
            ) : (
              <p className="font-mono text-sm text-slate-900">{turn.action}</p>
            )}
            {typeof turn.info.invalid === "string" && <p className="text-sm text-red-700">Invalid: {turn.info.invalid}</p>}
            {turn.render !== null && <Board text={turn.render} label={`After turn ${i + 1}`} />}
          </li>
        ))}
        {state.pending && (
          <PendingTurn
            pending={state.pending}
            agents={state.agents}
            labels={state.labels}
            number={state.turns.length + 1}
            secret={state.limits.protocol.name === "simultaneous"}
            onAnswer={onAnswer}
          />
        )}
        {state.status === "finished" && state.trajectory && <Outcome trajectory={state.trajectory} limits={state.limits} />}
        {state.status === "failed" && (
          <li role="alert" className="p-4 text-sm text-red-700">
            {state.message}
          </li>
        )}
      </ol>
    </Card>
  );
}

function PendingTurn({
  pending,
  agents,
  labels,
  number,
  secret,
  onAnswer,
}: {
  pending: NonNullable<Extract<EpisodeState, { episode: number }>["pending"]>;
  agents: string[];
  /** a simultaneous round: the policy's answer stays hidden until every agent has answered */
  secret: boolean;
  labels: TokenLabels | null;
  number: number;
  onAnswer(text: string): void;
}) {
  const [text, setText] = useState("");
  const legal = pending.request.legalActions;
  const choices = legal && "actions" in legal && legal.actions.length <= 64 ? legal.actions : null;
  const observation = pending.request.messages.at(-1)?.content ?? "";
  const typed = pending.by !== "policy" && !choices;
  const actionInput = useRef<HTMLInputElement>(null);
  // The user's move: the field takes the focus, which would otherwise fall back to the page when the form of their
  // last move went away.
  useEffect(() => {
    if (typed) actionInput.current?.focus();
  }, [typed]);
  return (
    <li className={`space-y-2 bg-sky-50/60 p-4 ${agents.length > 1 ? `border-l-4 ${agentColour(agents, pending.request.agent).border}` : ""}`}>
      <h3 className="text-xs font-medium tracking-wide text-slate-500 uppercase">
        Turn {number} · <AgentName agents={agents} agent={pending.request.agent} /> · {pending.by === "policy" ? "the policy is thinking…" : "your move"}
      </h3>
      {pending.by === "policy" ? (
        secret ? (
          <p className="text-sm text-slate-500">Its answer shows once every agent has answered this round.</p>
        ) : (
          labels && <TokenStream tokens={pending.tokens} labels={labels} />
        )
      ) : (
        <>
          <Board text={observation} label="What you see" onWord={setText} />
          {!choices && <p className="text-xs text-slate-500">Type your action, or click a word above to take it.</p>}
          <form
            aria-label="Your move"
            className="flex flex-wrap items-center gap-2"
            onSubmit={(event) => {
              event.preventDefault();
              if (text.trim()) onAnswer(text);
            }}
          >
            {choices ? (
              choices.map((choice) => (
                <Button key={choice} type="button" variant="secondary" onClick={() => onAnswer(choice)}>
                  {choice}
                </Button>
              ))
            ) : (
              <>
                <input
                  ref={actionInput}
                  aria-label="Your action"
                  value={text}
                  onChange={(event) => setText(event.target.value)}
                  className="w-64 rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm"
                  placeholder={legal && "pattern" in legal ? `matching ${legal.pattern}` : "your action"}
                />
                <Button type="submit">Send</Button>
              </>
            )}
          </form>
        </>
      )}
    </li>
  );
}

function Outcome({ trajectory, limits }: { trajectory: Trajectory; limits: EpisodeLimits }) {
  const returns = Object.entries(trajectory.agentReturns);
  const end = describeEnd(trajectory, limits);
  return (
    <li className="space-y-1 p-4 text-sm">
      <h3 className="text-xs font-medium tracking-wide text-slate-500 uppercase">Episode over</h3>
      <output aria-label="Outcome" className="block text-slate-900">
        {trajectory.turns.length} turn{trajectory.turns.length === 1 ? "" : "s"}
        {end ? ` · ${end}` : ""}
        {returns.length > 1
          ? ` · returns: ${returns.map(([agent, value]) => `${agent} ${formatReward(value)}`).join(", ")}`
          : ` · return ${formatReward(trajectory.totalReward)}`}
        {` · score ${formatReward(trajectory.score)}`}
        {trajectory.invalidActions > 0 ? ` · ${trajectory.invalidActions} invalid` : ""}
      </output>
      {Object.keys(trajectory.metrics).length > 0 && (
        <p className="text-slate-600">
          {Object.entries(trajectory.metrics)
            .map(([name, value]) => `${name} ${formatReward(value)}`)
            .join(" · ")}
        </p>
      )}
    </li>
  );
}

/** An agent's name, in its colour when several agents play. */
function AgentName({ agents, agent }: { agents: string[]; agent: string }) {
  return agents.length > 1 ? <span className={`font-semibold ${agentColour(agents, agent).text}`}>{agent}</span> : agent;
}

/** An observation or render as the environment wrote it; with `onWord`, each word is a button that picks it. */
function Board({ text, label, onWord }: { text: string; label: string; onWord?(word: string): void }) {
  return (
    <figure aria-label={label} className="w-fit max-w-full">
      <pre className="overflow-x-auto rounded bg-slate-100 px-3 py-2 font-mono text-sm leading-snug whitespace-pre-wrap text-slate-900">
        {onWord
          ? text.split(/(\s+)/).map((part, i) =>
              part.trim() === "" ? (
                part
              ) : (
                <button key={i} type="button" onClick={() => onWord(part)} className="rounded hover:bg-sky-200 focus:bg-sky-200 focus:outline-none">
                  {part}
                </button>
              ),
            )
          : text}
      </pre>
    </figure>
  );
}

const formatReward = (value: number) => (Number.isInteger(value) ? String(value) : value.toFixed(3));
