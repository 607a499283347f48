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
import { EnvironmentSession, type DatasetRow, type Json } from "@/lib/sdk/environment";
import { type ActRequest, type ActResponse, runEpisodes } from "@/lib/sdk/protocol";
import type { EnvironmentEvent, EnvironmentOutline, EnvironmentRequest, EnvironmentSource } from "./protocol";
import { BrowserSandboxedSession } from "./sandboxed-session";

const scope = self as unknown as { postMessage(message: EnvironmentEvent): void; onmessage: ((event: MessageEvent<EnvironmentRequest>) => void) | null };
const post = (message: EnvironmentEvent) => scope.postMessage(message);
const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** A session `runEpisodes` drives: the SDK's own, or the sandboxed one (which plays one agent, turn by turn). */
type Session = EnvironmentSession | BrowserSandboxedSession;

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

async function play(
  episode: number,
  protocol: Parameters<typeof runEpisodes>[0],
  seed: number,
  sample: DatasetRow | undefined,
  contextLength: number | null,
  policyAgents: string[],
) {
  if (!newSession) throw new Error("no environment is loaded in this worker yet");
  const inner = newSession();
  /** The requests of the turn or round being played, by agent: each played turn's observation is its agent's. */
  const asked = new Map<string, ActRequest>();
  const played = (agent: string, action: string, step: { reward: number; info: Record<string, Json>; metrics: Record<string, number> }, done: boolean) =>
    post({
      type: "stepped",
      episode,
      turn: {
        agent,
        observation: asked.get(agent)?.messages.at(-1)?.content ?? "",
        action,
        reward: step.reward,
        done,
        render: inner.render() ?? null,
        info: step.info,
        metrics: step.metrics,
      },
    });
  // The session itself to runEpisodes (every method and argument passed on as they are), reporting each reset, step
  // and simultaneous round to the page as it happens.
  const session = new Proxy(inner, {
    get(target, property) {
      if (property === "reset") {
        return (...args: Parameters<Session["reset"]>) => {
          const observation = (target.reset as (...a: typeof args) => string)(...args);
          post({ type: "started", episode, systemPrompt: target.systemPrompt, observation, render: target.render() ?? null });
          return observation;
        };
      }
      if (property === "step") {
        return (text: string) => {
          const result = target.step(text);
          played(asked.values().next().value?.agent ?? "", text, result, result.done);
          return result;
        };
      }
      if (property === "stepTogether" && target instanceof EnvironmentSession) {
        // A round: one turn per agent, in the order they were asked; the round's rewards are its last turn's.
        return (actions: Record<string, string>) => {
          const result = target.stepTogether(actions);
          const agents = [...asked.keys()];
          for (const [i, agent] of agents.entries()) {
            const last = i === agents.length - 1;
            const invalid = result.invalid[agent];
            played(
              agent,
              actions[agent] ?? "",
              {
                reward: last ? (result.rewards[agent] ?? 0) : 0,
                info: { ...(last ? result.info : {}), ...(invalid === undefined ? {} : { invalid }) },
                metrics: last ? result.metrics : {},
              },
              last && result.done,
            );
          }
          return result;
        };
      }
      const value = Reflect.get(target, property, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  let fitsContext: ((messages: ChatMessage[], agent: string) => boolean) | undefined;
  if (contextLength !== null) {
    if (!policyTokenizer) throw new Error("the policy's tokenizer was not sent before the episode; the context check needs it");
    if ("error" in policyTokenizer) throw new Error(policyTokenizer.error);
    const { tokenizer } = policyTokenizer;
    // The conversation in the policy's own chat template, ready for its reply, must leave it room for a token.
    // Only the policy's prompts: a person's side is shown whole, however long.
    const policy = new Set(policyAgents);
    fitsContext = (messages, agent) => !policy.has(agent) || tokenizer.encodeChat(messages, { addGenerationPrompt: true }).length < contextLength;
  }
  const [trajectory] = await runEpisodes(
    protocol,
    [{ session: session as EnvironmentSession, seed, sample }],
    // One request a turn; one per agent a simultaneous round, answered one after the other.
    async (requests) => {
      asked.clear();
      const responses: ActResponse[] = [];
      for (const request of requests) {
        asked.set(request.agent, request);
        const response = new Promise<ActResponse>((resolve) => (waiting = { episode, resolve }));
        post({ type: "act", episode, request });
        responses.push(await response);
      }
      return responses;
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
    play(request.episode, request.protocol, request.seed, request.sample, request.contextLength, request.policyAgents).catch((error) =>
      post({ type: "failed", episode: request.episode, message: message(error) }),
    );
  } else if (request.type === "acted") {
    const turn = waiting;
    if (!turn || turn.episode !== request.episode) return;
    waiting = null;
    turn.resolve({ text: request.text, tokens: request.tokens, logprobs: request.logprobs });
  }
};
