"use client";

import { useQuery } from "@tanstack/react-query";
import { usePathname, useSearchParams } from "next/navigation";
import { useEffect, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc/provider";
import { Button } from "@/components/ui/button";
import { Card } from "@/components/ui/card";
import { EpisodePlayer } from "@/components/episode/episode-player";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { BACKEND_PREFERENCES, type BackendPreference, type BrowserBackend } from "./backend-choice";
import { BrowserPolicy, type Generation, exposePolicy, modelTokenizer } from "./browser-policy";
import { ModelPicker } from "./model-picker";
import { type ChatPrompt, PromptEditor } from "./prompt-editor";
import type { BackendInfo, GeneratedToken, GenerationSummary, LoadedModel } from "./protocol";
import { defaultSampling, SamplingControls, type SamplingForm, samplingSettings } from "./sampling-controls";
import { generateOnServer, type ServerGenerationSummary, type ServerWait } from "./server-generation";
import { completionText, type TokenLabels, tokenLabels } from "./token-label";
import { ProbabilityLegend, TokenList, TokenStream } from "./token-stream";
import { useBackendPreference } from "./use-backend-preference";
import { useCrossOriginIsolation } from "./use-cross-origin-isolation";

type Mode = "prompt" | "episode";
const modes: [Mode, string][] = [
  ["prompt", "Prompt"],
  ["episode", "Episode"],
];

type ModelState = { status: "idle" } | { status: "loading"; name: string } | { status: "ready"; model: LoadedModel } | { status: "failed"; message: string };

/**
 * The worker holding `name`'s model on the preferred backend, started once the page knows whether it is
 * cross-origin isolated and which backend it is asked for; another backend starts another worker.
 */
function useBrowserPolicy(name: string, isolationKnown: boolean, backend: BrowserBackend | null) {
  const [policy, setPolicy] = useState<BrowserPolicy | null>(null);
  const [state, setState] = useState<ModelState>({ status: "idle" });
  useEffect(() => {
    if (!name || !isolationKnown || backend === null) return;
    const created = new BrowserPolicy(name, backend);
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
  }, [name, isolationKnown, backend]);
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

const errorText = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * The loaded model's tokenizer, built from the spec in its file: the byte tokenizer, or an imported model's own.
 * Null while a model loads, so that nothing is rendered in a tokenizer that is not the model's.
 */
function useModelTokenizer(model: LoadedModel | null): { tokenizer: Tokenizer | null; error: string | null } {
  return useMemo(() => {
    if (!model) return { tokenizer: null, error: null };
    try {
      return { tokenizer: modelTokenizer(model), error: null };
    } catch (error) {
      return { tokenizer: null, error: `the model's tokenizer cannot be built: ${errorText(error)}` };
    }
  }, [model]);
}

/**
 * The generation shown: its chips' labels (the model's tokenizer, or the endpoint's names for a served one), its
 * text, and the prompt as the model read it when it ran in this browser. Kept apart from the model picked now, so
 * that its chips keep their labels if another model is picked meanwhile.
 */
type Shown = { labels: TokenLabels; text(tokens: readonly GeneratedToken[]): string; prompt: { tokens: number[]; tokenizer: Tokenizer } | null };

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
  const [backend, setBackend] = useBackendPreference();
  const onServer = backend === "server";
  const { policy, state } = useBrowserPolicy(modelName, isolation !== "pending", onServer ? null : backend);
  const model = state.status === "ready" ? state.model : null;
  const { tokenizer, error: tokenizerError } = useModelTokenizer(model);

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
  // The prompt in the model's own chat template; unknown until the model (and so its tokenizer) is loaded.
  const rendered = useMemo((): { tokens: number[] | null; error: string | null } => {
    if (!tokenizer) return { tokens: null, error: null };
    try {
      const messages = [
        { role: "system" as const, content: prompt.system },
        { role: "user" as const, content: prompt.user },
      ];
      return { tokens: tokenizer.encodeChat(messages, { addGenerationPrompt: true }), error: null };
    } catch (error) {
      return { tokens: null, error: `the prompt cannot be rendered in the model's chat template: ${errorText(error)}` };
    }
  }, [tokenizer, prompt]);
  const promptTokens = rendered.tokens;
  const stream = useTokenStream();
  const [shown, setShown] = useState<Shown | null>(null);
  const [generation, setGeneration] = useState<Generation | null>(null);
  // Counts generations; a generation's tokens and outcome are shown only while it is the latest (not after a model change).
  const latest = useRef(0);
  const [summary, setSummary] = useState<GenerationSummary | ServerGenerationSummary | null>(null);
  const [generationError, setGenerationError] = useState<string | null>(null);
  // A generation on the server that waits for a worker to load its model (the endpoint's 503).
  const [serverWait, setServerWait] = useState<ServerWait | null>(null);

  const setParam = (name: string, value: string) => {
    const query = new URLSearchParams(window.location.search);
    query.set(name, value);
    window.history.replaceState(null, "", `${pathname}?${query}`);
  };
  const chooseModel = (name: string) => {
    generation?.stop();
    latest.current += 1;
    stream.reset();
    setShown(null);
    setSummary(null);
    setGenerationError(null);
    setChosen(name);
    setParam("model", name);
  };
  const chooseBackend = (next: BackendPreference) => {
    generation?.stop();
    latest.current += 1;
    setServerWait(null);
    setSummary(null);
    setGenerationError(null);
    setBackend(next);
  };
  const chooseMode = (next: Mode) => {
    setMode(next);
    setParam("mode", next);
  };

  /** Starts a generation: in this browser on the loaded model, or on the server's `/v1/chat/completions`. */
  const start = (isLatest: () => boolean): Generation | null => {
    const onToken = (token: GeneratedToken) => isLatest() && stream.push(token);
    if (onServer) {
      if (!modelName) return null;
      const { stop: _stopTokens, ...settings } = samplingSettings(sampling, []);
      const messages = [
        { role: "system" as const, content: prompt.system },
        { role: "user" as const, content: prompt.user },
      ];
      const started = generateOnServer({ model: modelName, messages, settings }, { onToken, onWait: (wait) => isLatest() && setServerWait(wait) });
      setShown({ labels: started.labels, text: () => started.text(), prompt: null });
      return started;
    }
    if (!policy || !model || !tokenizer || !promptTokens) return null;
    setShown({
      labels: tokenLabels(tokenizer),
      text: (tokens) =>
        completionText(
          tokenizer,
          tokens.map((t) => t.token),
        ),
      prompt: { tokens: promptTokens, tokenizer },
    });
    return policy.generate(promptTokens, samplingSettings(sampling, [...tokenizer.stopTokens]), onToken);
  };

  const generate = () => {
    stream.reset();
    setSummary(null);
    setGenerationError(null);
    setServerWait(null);
    const number = ++latest.current;
    const isLatest = () => latest.current === number;
    const started = start(isLatest);
    if (!started) return;
    setGeneration(started);
    started.done
      .then(
        (result) => isLatest() && setSummary(result),
        (error: Error) => isLatest() && setGenerationError(error.message),
      )
      .finally(() => {
        if (isLatest()) stream.flush();
        setGeneration((current) => (current === started ? null : current));
      });
  };

  const contextLength = model?.config.contextLength ?? null;
  const roomLeft = contextLength !== null && promptTokens ? contextLength - promptTokens.length + 1 : null;
  const canGenerate = onServer ? modelName !== "" : model !== null && promptTokens !== null && (roomLeft === null || roomLeft >= 1);

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
            <PromptEditor
              value={prompt}
              onChange={setPrompt}
              runId={runId}
              promptTokens={onServer ? null : (promptTokens?.length ?? null)}
              promptError={onServer ? null : rendered.error}
              contextLength={onServer ? null : contextLength}
              onServer={onServer}
            />
          )}
          <SamplingControls value={sampling} onChange={setSampling} contextRoom={mode === "prompt" ? roomLeft : null} />
          {mode === "prompt" && (
            <div className="flex gap-2">
              <Button type="submit" disabled={!canGenerate || generation !== null}>
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
        <Card title="Runtime" actions={<BackendPicker value={backend} loaded={model?.backend ?? null} onChange={chooseBackend} />}>
          <RuntimeStatus
            server={onServer ? { model: modelName, wait: serverWait } : null}
            state={state}
            isolation={isolation}
            tokenizer={tokenizer}
            tokenizerError={tokenizerError}
            summary={summary}
            summaryTokenizer={shown?.prompt?.tokenizer ?? null}
            generating={generation !== null}
            count={stream.tokens.length}
          />
        </Card>
        {mode === "episode" && onServer ? (
          <Card title="Episode">
            <p className="p-4 text-sm text-slate-600">
              Episodes are played by the model in this browser. Pick Automatic, WebGPU or WebAssembly under Runtime to play one.
            </p>
          </Card>
        ) : mode === "episode" ? (
          <EpisodePlayer policy={policy} model={model} tokenizer={tokenizer} sampling={sampling} runId={runId} />
        ) : (
          <Card title="Output" actions={<ProbabilityLegend />}>
            <div className="space-y-4 p-4">
              {serverWait && generation ? (
                <ServerWaitNotice wait={serverWait} />
              ) : stream.tokens.length === 0 || !shown ? (
                <p className="text-sm text-slate-500">
                  {generation
                    ? "Waiting for the first token…"
                    : "Generated tokens appear here, coloured by their probability; hover or focus one for the alternatives."}
                </p>
              ) : (
                <TokenStream tokens={stream.tokens} labels={shown.labels} />
              )}
              {generationError && (
                <p role="alert" className="text-sm text-red-700">
                  {generationError}
                </p>
              )}
              {stream.tokens.length > 0 && shown && (
                <>
                  <div>
                    <h3 className="text-xs font-medium tracking-wide text-slate-500 uppercase">Text</h3>
                    <figure aria-label="Generated text" className="mt-1">
                      <pre className="font-mono text-sm whitespace-pre-wrap text-slate-900">{shown.text(stream.tokens)}</pre>
                    </figure>
                  </div>
                  {shown.prompt && (
                    <details>
                      <summary className="cursor-pointer text-xs font-medium tracking-wide text-slate-500 uppercase">
                        Prompt as the model read it · {shown.prompt.tokens.length} tokens
                      </summary>
                      <div className="mt-2">
                        <TokenList tokens={shown.prompt.tokens} labels={shown.labels} label="Prompt tokens" />
                      </div>
                    </details>
                  )}
                </>
              )}
            </div>
          </Card>
        )}
      </div>
    </div>
  );
}

const BACKEND_NAMES: Record<BackendPreference, string> = {
  auto: "Automatic (fastest here)",
  webgpu: "WebGPU",
  wasm: "WebAssembly",
  server: "Server (/v1)",
};

/** A served generation waiting for its model: a worker loads it (the endpoint's 503), or its job failed and is tried again. */
function ServerWaitNotice({ wait }: { wait: ServerWait }) {
  const retry = `Asking again in ${wait.retryInS} s.`;
  return wait.code === "model_loading" ? (
    <div role="status" className="space-y-1 text-sm">
      <p className="font-medium text-slate-800">Loading the model on a worker…</p>
      <p className="text-slate-500">{wait.message}</p>
    </div>
  ) : (
    <p role="status" className="text-sm text-amber-800">
      {wait.message} {retry}
    </p>
  );
}

/**
 * The backend to run on: automatic (WebGPU on a GPU's adapter, WASM when the only adapter is a software one), or
 * either by hand. WebGPU is offered only where the browser has an adapter.
 */
function BackendPicker({ value, loaded, onChange }: { value: BackendPreference | null; loaded: BackendInfo | null; onChange(next: BackendPreference): void }) {
  const webGpu = loaded?.webGpu ?? null;
  return (
    <label className="flex items-center gap-2 text-xs text-slate-600">
      Backend
      <select
        value={value ?? "auto"}
        disabled={value === null}
        onChange={(event) => onChange(event.target.value as BackendPreference)}
        className="rounded border border-slate-300 bg-white px-1 py-0.5 text-xs text-slate-800"
      >
        {BACKEND_PREFERENCES.map((option) => (
          <option
            key={option}
            value={option}
            disabled={option === "webgpu" && webGpu?.kind === "none" && value !== "webgpu"}
            title={option === "webgpu" && webGpu ? (webGpu.kind === "none" ? webGpu.reason : `${webGpu.kind} adapter: ${webGpu.name}`) : undefined}
          >
            {BACKEND_NAMES[option]}
            {option === "webgpu" && webGpu?.kind === "software" ? " (software adapter: slow)" : ""}
            {option === "webgpu" && webGpu?.kind === "none" ? " (none here)" : ""}
          </option>
        ))}
      </select>
    </label>
  );
}

/** The tokenizer in a few words: what kind, how many ids, where a reply ends. */
function describeTokenizer(tokenizer: Tokenizer): string {
  const kind = tokenizer.kind === "byte" ? "bytes and chat tokens" : "the model's own (Hugging Face)";
  const stops = tokenizer.stopTokens.map((token) => tokenizer.tokenText(token)).join(", ");
  return `${kind}, ${tokenizer.vocabSize} ids · replies end at ${stops || "the token limit"}`;
}

function RuntimeStatus({
  server,
  state,
  isolation,
  tokenizer,
  tokenizerError,
  summary,
  summaryTokenizer,
  generating,
  count,
}: {
  /** the model generates on the server's `/v1` (and what it waits for), not in this browser */
  server: { model: string; wait: ServerWait | null } | null;
  state: ModelState;
  isolation: ReturnType<typeof useCrossOriginIsolation>;
  tokenizer: Tokenizer | null;
  tokenizerError: string | null;
  summary: GenerationSummary | ServerGenerationSummary | null;
  /** the tokenizer of the generation summarized, to name the token it stopped at */
  summaryTokenizer: Tokenizer | null;
  generating: boolean;
  count: number;
}) {
  const model = state.status === "ready" ? state.model : null;
  const speed = generating
    ? server?.wait
      ? "Waiting for a worker to serve the model…"
      : `Generating… ${count} token${count === 1 ? "" : "s"}`
    : summary?.tokens.length === 0
      ? `no tokens, ${finishWords(summary, summaryTokenizer)}`
      : summary
        ? `${formatRate(summary.tokensPerSecond)} tokens/s · first token in ${summary.firstTokenMs.toFixed(0)} ms · ${summary.tokens.length} tokens, ${finishWords(summary, summaryTokenizer)}${"promptTokens" in summary && summary.promptTokens !== null ? ` · prompt ${summary.promptTokens} tokens` : ""}`
        : "—";
  const rows: [string, string][] = server
    ? [
        ["Backend", "Server: this workbench's /v1/chat/completions, decoded by an inference job on a worker"],
        ["Model", server.wait?.code === "model_loading" ? `${server.model}, loading on a worker…` : server.model],
        ["Tokenizer", "the served model's own: chips are its tokens as the endpoint names them"],
        ["Speed", speed],
      ]
    : [
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
            ? `${model.config.architecture === "llama" ? "Llama block, " : ""}${model.config.nLayers} layer${model.config.nLayers === 1 ? "" : "s"} × ${model.config.dModel} wide, context ${model.config.contextLength} · ${formatBytes(model.bytes)} loaded in ${(model.loadMs / 1000).toFixed(2)} s`
            : state.status === "loading"
              ? `Loading ${state.name}…`
              : "—",
        ],
        ["Tokenizer", tokenizer ? describeTokenizer(tokenizer) : state.status === "loading" ? "Read from the model's file once it is loaded…" : "—"],
        ["Speed", speed],
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
      {tokenizerError && (
        <p role="alert" className="mt-3 text-sm text-red-700">
          The model loaded, but {tokenizerError}
        </p>
      )}
    </div>
  );
}

/** Tokens per second with two significant digits below 10: a slow backend reads 0.42, not 0. */
const formatRate = (rate: number) => (rate < 10 ? rate.toPrecision(2) : rate.toFixed(0));

function finishWords(summary: GenerationSummary, tokenizer: Tokenizer | null): string {
  if (summary.finishReason === "length") return "cut at the token limit";
  if (summary.finishReason === "stopped") return "stopped";
  const last = summary.tokens.at(-1);
  return last !== undefined && tokenizer ? `ended at ${tokenizer.tokenText(last)}` : "ended at a stop token";
}
