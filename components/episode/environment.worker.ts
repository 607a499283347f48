/**
 * Plays episodes of one environment in a worker of the page, turn by turn, by the run's protocol (lib/sdk's
 * `runEpisodes`, as a run plays them): a built-in environment runs as in a run's worker; an experiment's own runs
 * in QuickJS under the run's sandbox limits (sandboxed-session.ts). Each turn's action is asked of the page
 * (`act`), which has the policy or the person answer; each step's outcome goes back as it happens.
 *
 * A new `play` abandons the episode in progress: its pending turn is never answered.
 */
import { useCases } from "@/lib/envs";
import type { ChatMessage } from "@/lib/model/chat";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import { EnvironmentSession, type DatasetRow } from "@/lib/sdk/environment";
import { type ActRequest, type ActResponse, runEpisodes } from "@/lib/sdk/protocol";
import type { EnvironmentEvent, EnvironmentOutline, EnvironmentRequest, EnvironmentSource } from "./protocol";
import { BrowserSandboxedSession } from "./sandboxed-session";

const scope = self as unknown as { postMessage(message: EnvironmentEvent): void; onmessage: ((event: MessageEvent<EnvironmentRequest>) => void) | null };
const post = (message: EnvironmentEvent) => scope.postMessage(message);
const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The surface of a session `runEpisodes` drives: the SDK's own, or the sandboxed one. */
type Session = Pick<EnvironmentSession, "systemPrompt" | "reset" | "step" | "render" | "legalActions" | "invalidActions" | "rewardBreakdown" | "score">;

let newSession: (() => Session) | null = null;
/** The policy's tokenizer (its last `tokenizer` message), or why it could not be built. */
let policyTokenizer: { tokenizer: Tokenizer } | { error: string } | null = null;

async function load(source: EnvironmentSource): Promise<EnvironmentOutline> {
  if (source.kind === "builtin") {
    const useCase = useCases[source.name];
    if (!useCase) throw new Error(`no built-in environment '${source.name}'; built in: ${Object.keys(useCases).join(", ")}`);
    const definition = source.duel ? useCase.duel?.environment : useCase.environment;
    if (!definition) throw new Error(`'${source.name}' has no two-player version`);
    newSession = () => new EnvironmentSession(definition);
    const { data } = definition;
    return {
      name: definition.name,
      description: definition.description ?? null,
      maxTurns: definition.maxTurns,
      dataset: data.kind === "dataset" ? data.dataset : null,
    };
  }
  const response = await fetch(source.quickjsWasmUrl);
  if (!response.ok) throw new Error(`GET ${source.quickjsWasmUrl} answered ${response.status}`);
  const wasmModule = await WebAssembly.compile(await response.arrayBuffer());
  const session = await BrowserSandboxedSession.load(source.code, source.limits, wasmModule);
  newSession = () => session;
  const { environment } = session;
  return {
    name: environment.name,
    description: environment.description,
    maxTurns: environment.maxTurns,
    dataset: environment.data.kind === "dataset" ? environment.data.dataset : null,
  };
}

/** The turn the page is answering: the episode it belongs to, and how to hand it the answer. */
let waiting: { episode: number; resolve(response: ActResponse): void } | null = null;

async function play(episode: number, protocol: Parameters<typeof runEpisodes>[0], seed: number, sample: DatasetRow | undefined, contextLength: number | null) {
  if (!newSession) throw new Error("no environment is loaded in this worker yet");
  const inner = newSession();
  let asked: ActRequest | null = null;
  // The SDK's session, reporting each reset and step to the page as it happens.
  const session: Session = {
    get systemPrompt() {
      return inner.systemPrompt;
    },
    reset(seed: number, sample?: DatasetRow) {
      const observation = inner.reset(seed, sample);
      post({ type: "started", episode, systemPrompt: inner.systemPrompt, observation, render: inner.render() ?? null });
      return observation;
    },
    step(text: string) {
      const result = inner.step(text);
      const observation = asked?.messages.at(-1)?.content ?? "";
      post({
        type: "stepped",
        episode,
        turn: {
          agent: asked?.agent ?? "",
          observation,
          action: text,
          reward: result.reward,
          done: result.done,
          render: inner.render() ?? null,
          info: result.info,
          metrics: result.metrics,
        },
      });
      return result;
    },
    render: () => inner.render(),
    legalActions: () => inner.legalActions(),
    get invalidActions() {
      return inner.invalidActions;
    },
    rewardBreakdown: () => inner.rewardBreakdown(),
    score: () => inner.score(),
  };
  let fitsContext: ((messages: ChatMessage[]) => boolean) | undefined;
  if (contextLength !== null) {
    if (!policyTokenizer) throw new Error("the policy's tokenizer was not sent before the episode; the context check needs it");
    if ("error" in policyTokenizer) throw new Error(policyTokenizer.error);
    const { tokenizer } = policyTokenizer;
    // The conversation in the policy's own chat template, ready for its reply, must leave it room for a token.
    fitsContext = (messages) => tokenizer.encodeChat(messages, { addGenerationPrompt: true }).length < contextLength;
  }
  const [trajectory] = await runEpisodes(
    protocol,
    [{ session: session as EnvironmentSession, seed, sample }],
    async ([request]) => {
      asked = request!;
      const response = new Promise<ActResponse>((resolve) => (waiting = { episode, resolve }));
      post({ type: "act", episode, request: request! });
      return [await response];
    },
    { fitsContext },
  );
  post({ type: "finished", episode, trajectory: trajectory! });
}

scope.onmessage = ({ data: request }) => {
  if (request.type === "load") {
    load(request.source).then(
      (outline) => post({ type: "loaded", outline }),
      (error) => post({ type: "load-failed", message: message(error) }),
    );
  } else if (request.type === "tokenizer") {
    try {
      policyTokenizer = { tokenizer: tokenizerFromSpec(request.spec, "the policy's tokenizer") };
    } catch (error) {
      policyTokenizer = { error: message(error) };
    }
  } else if (request.type === "play") {
    waiting = null; // the episode in progress, if any, is abandoned
    play(request.episode, request.protocol, request.seed, request.sample, request.contextLength).catch((error) =>
      post({ type: "failed", episode: request.episode, message: message(error) }),
    );
  } else if (request.type === "acted") {
    const turn = waiting;
    if (!turn || turn.episode !== request.episode) return;
    waiting = null;
    turn.resolve({ text: request.text, tokens: request.tokens, logprobs: request.logprobs });
  }
};
