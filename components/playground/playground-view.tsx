"use client";

import { useQuery } from "@tanstack/react-query";
import { usePathname, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EpisodePlayer } from "@/components/episode/episode-player";
import { renderChat } from "@/lib/model/chat";
import { ByteTokenizer, specialTokens } from "@/lib/model/tokenizer";
import { BrowserPolicy, type Generation, exposePolicy } from "./browser-policy";
import { ModelPicker } from "./model-picker";
import { type ChatPrompt, PromptEditor } from "./prompt-editor";
import type { GeneratedToken, GenerationSummary, LoadedModel } from "./protocol";
import { defaultSampling, SamplingControls, type SamplingForm, samplingSettings } from "./sampling-controls";
import { completionText } from "./token-label";
import { ProbabilityLegend, TokenStream } from "./token-stream";
import { useCrossOriginIsolation } from "./use-cross-origin-isolation";

const tokenizer = new ByteTokenizer();

type Mode = "prompt" | "episode";
const modes: [Mode, string][] = [
  ["prompt", "Prompt"],
  ["episode", "Episode"],
];

type ModelState = { status: "idle" } | { status: "loading"; name: string } | { status: "ready"; model: LoadedModel } | { status: "failed"; message: string };

/** The worker holding `name`'s model, started once the page knows whether it is cross-origin isolated. */
function useBrowserPolicy(name: string, isolationKnown: boolean) {
  const [policy, setPolicy] = useState<BrowserPolicy | null>(null);
  const [state, setState] = useState<ModelState>({ status: "idle" });
  useEffect(() => {
    if (!name || !isolationKnown) return;
    const created = new BrowserPolicy(name);
    const hide = exposePolicy(created);
    let current = true;
    setPolicy(created);
    setState({ status: "loading", name });
    created.ready.then(
      (model) => current && setState({ status: "ready", model }),
      (error: Error) => current && setState({ status: "failed", message: error.message }),
    );
    return () => {
      current = false;
      hide();
      created.dispose();
    };
  }, [name, isolationKnown]);
  return { policy, state };
}

/** Generated tokens as they stream in, drawn at most once per frame. */
function useTokenStream() {
  const [tokens, setTokens] = useState<GeneratedToken[]>([]);
  const buffer = useRef<GeneratedToken[]>([]);
  const frame = useRef(0);
  useEffect(() => () => cancelAnimationFrame(frame.current), []);
  return {
    tokens,
    reset() {
      buffer.current = [];
      setTokens([]);
    },
    push(token: GeneratedToken) {
      buffer.current.push(token);
      frame.current ||= requestAnimationFrame(() => {
        frame.current = 0;
        setTokens([...buffer.current]);
      });
    },
    /** draws what has arrived now (at the end, so the chips and the summary appear together) */
    flush() {
      cancelAnimationFrame(frame.current);
      frame.current = 0;
      setTokens([...buffer.current]);
    },
  };
}

const formatBytes = (bytes: number) => (bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.round(bytes / 1e3)} kB`);

export function PlaygroundView() {
  const trpc = useTRPC();
  const pathname = usePathname();
  const params = useSearchParams();
  const runId = params.get("run");
  const catalog = useQuery(trpc.checkpoints.bases.queryOptions());
  const [chosen, setChosen] = useState<string | null>(params.get("model"));
  const modelName = chosen ?? catalog.data?.builtin[0]?.name ?? "";
  const isolation = useCrossOriginIsolation();
  const { policy, state } = useBrowserPolicy(modelName, isolation !== "pending");
  const model = state.status === "ready" ? state.model : null;

  const [mode, setMode] = useState<Mode>(params.get("mode") === "episode" ? "episode" : "prompt");
  const [prompt, setPrompt] = useState<ChatPrompt>({ system: "Answer briefly.", user: "What is 12 + 7?" });
  const [sampling, setSampling] = useState<SamplingForm>(defaultSampling);
  // A run's episodes are played with the run's own sampling, until the form is changed. Asked only in the Episode tab
  // (the episode player asks the same query): it compiles an experiment's own environment on the server.
  const playable = useQuery({ ...trpc.runs.playable.queryOptions({ runId: runId ?? "" }), enabled: runId !== null && mode === "episode", retry: false });
  const runSampling = playable.data?.sampling;
  useEffect(() => {
    if (runSampling) setSampling((current) => ({ ...current, ...runSampling }));
  }, [runSampling]);
  const promptTokens = useMemo(
    () =>
      renderChat(
        tokenizer,
        [
          { role: "system", content: prompt.system },
          { role: "user", content: prompt.user },
        ],
        { addGenerationPrompt: true },
      ).tokens,
    [prompt],
  );
  const stream = useTokenStream();
  const [generation, setGeneration] = useState<Generation | null>(null);
  const [summary, setSummary] = useState<GenerationSummary | null>(null);
  const [generationError, setGenerationError] = useState<string | null>(null);

  const setParam = (name: string, value: string) => {
    const query = new URLSearchParams(window.location.search);
    query.set(name, value);
    window.history.replaceState(null, "", `${pathname}?${query}`);
  };
  const chooseModel = (name: string) => {
    generation?.stop();
    setChosen(name);
    setParam("model", name);
  };
  const chooseMode = (next: Mode) => {
    setMode(next);
    setParam("mode", next);
  };

  const generate = () => {
    if (!policy || !model) return;
    stream.reset();
    setSummary(null);
    setGenerationError(null);
    const started = policy.generate(promptTokens, samplingSettings(sampling, [specialTokens.endOfTurn]), stream.push);
    setGeneration(started);
    started.done
      .then(setSummary, (error: Error) => setGenerationError(error.message))
      .finally(() => {
        stream.flush();
        setGeneration((current) => (current === started ? null : current));
      });
  };

  const contextLength = model?.config.contextLength ?? null;
  const roomLeft = contextLength !== null ? contextLength - promptTokens.length + 1 : null;
  const text = completionText(stream.tokens.map((t) => t.token));

  return (
    <div className="grid gap-6 lg:grid-cols-[22rem_1fr]">
      <Card>
        <div role="tablist" aria-label="What to try" className="flex border-b border-slate-200 px-4 pt-3 text-sm">
          {modes.map(([value, label]) => (
            <button
              key={value}
              type="button"
              role="tab"
              aria-selected={mode === value}
              onClick={() => chooseMode(value)}
              className={`-mb-px border-b-2 px-3 pb-2 font-medium ${mode === value ? "border-slate-900 text-slate-900" : "border-transparent text-slate-500 hover:text-slate-800"}`}
            >
              {label}
            </button>
          ))}
        </div>
        <form
          aria-label="Generate"
          className="space-y-5 p-4"
          onSubmit={(event) => {
            event.preventDefault();
            generate();
          }}
        >
          <ModelPicker catalog={catalog.data} error={catalog.error?.message ?? null} value={modelName} onChange={chooseModel} />
          {mode === "prompt" && (
            <PromptEditor value={prompt} onChange={setPrompt} runId={runId} promptTokens={promptTokens.length} contextLength={contextLength} />
          )}
          <SamplingControls value={sampling} onChange={setSampling} contextRoom={mode === "prompt" ? roomLeft : null} />
          {mode === "prompt" && (
            <div className="flex gap-2">
              <Button type="submit" disabled={!model || generation !== null || (roomLeft !== null && roomLeft < 1)}>
                Generate
              </Button>
              <Button type="button" variant="secondary" disabled={generation === null} onClick={() => generation?.stop()}>
                Stop
              </Button>
            </div>
          )}
        </form>
      </Card>

      <div className="min-w-0 space-y-6">
        <Card title="Runtime">
          <RuntimeStatus state={state} isolation={isolation} summary={summary} generating={generation !== null} count={stream.tokens.length} />
        </Card>
        {mode === "episode" ? (
          <EpisodePlayer policy={policy} model={model} sampling={sampling} runId={runId} />
        ) : (
          <Card title="Output" actions={<ProbabilityLegend />}>
            <div className="space-y-4 p-4">
              {stream.tokens.length === 0 ? (
                <p className="text-sm text-slate-500">
                  {generation
                    ? "Waiting for the first token…"
                    : "Generated tokens appear here, coloured by their probability; hover or focus one for the alternatives."}
                </p>
              ) : (
                <TokenStream tokens={stream.tokens} />
              )}
              {generationError && (
                <p role="alert" className="text-sm text-red-700">
                  {generationError}
                </p>
              )}
              {stream.tokens.length > 0 && (
                <div>
                  <h3 className="text-xs font-medium tracking-wide text-slate-500 uppercase">Text</h3>
                  <pre aria-label="Generated text" className="mt-1 font-mono text-sm whitespace-pre-wrap text-slate-900">
                    {text}
                  </pre>
                </div>
              )}
            </div>
          </Card>
        )}
      </div>
    </div>
  );
}

function RuntimeStatus({
  state,
  isolation,
  summary,
  generating,
  count,
}: {
  state: ModelState;
  isolation: ReturnType<typeof useCrossOriginIsolation>;
  summary: GenerationSummary | null;
  generating: boolean;
  count: number;
}) {
  const model = state.status === "ready" ? state.model : null;
  const rows: [string, string][] = [
    [
      "Backend",
      model
        ? model.backend.label
        : isolation === "pending"
          ? "Checking cross-origin isolation…"
          : state.status === "failed"
            ? "—"
            : "Starting onnxruntime-web…",
    ],
    [
      "Model",
      model
        ? `${model.config.nLayers} layers × ${model.config.dModel} wide, context ${model.config.contextLength} · ${formatBytes(model.bytes)} loaded in ${(model.loadMs / 1000).toFixed(2)} s`
        : state.status === "loading"
          ? `Loading ${state.name}…`
          : "—",
    ],
    [
      "Speed",
      generating
        ? `Generating… ${count} token${count === 1 ? "" : "s"}`
        : summary
          ? `${summary.tokensPerSecond.toFixed(0)} tokens/s · first token in ${summary.firstTokenMs.toFixed(0)} ms · ${summary.tokens.length} tokens, ${finishWords[summary.finishReason]}`
          : "—",
    ],
  ];
  return (
    <div className="p-4">
      <dl aria-label="Runtime" className="grid grid-cols-[6rem_1fr] gap-x-4 gap-y-1.5 text-sm">
        {rows.map(([term, detail]) => (
          <div key={term} className="contents">
            <dt className="text-slate-500">{term}</dt>
            <dd className="text-slate-900">{detail}</dd>
          </div>
        ))}
      </dl>
      {state.status === "failed" && (
        <p role="alert" className="mt-3 text-sm text-red-700">
          The model could not be loaded: {state.message}
        </p>
      )}
    </div>
  );
}

const finishWords: Record<GenerationSummary["finishReason"], string> = {
  stop: "ended at <|end|>",
  length: "cut at the token limit",
  stopped: "stopped",
};
