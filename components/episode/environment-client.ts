/**
 * An environment running in a worker of this page (environment.worker.ts): the episode player talks to it through
 * this class only. Switching environments ends the worker (and its QuickJS instance) and starts another.
 */
import type { TokenizerSpec } from "@/lib/model/tokenizer-spec";
import type { DatasetRow } from "@/lib/sdk/environment";
import type { ActRequest, Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { EnvironmentEvent, EnvironmentOutline, EnvironmentRequest, EnvironmentSource, PlayedTurn } from "./protocol";

/** What an episode reports as it is played. */
export interface EpisodeListener {
  started(start: { systemPrompt: string; observation: string; render: string | null }): void;
  /** a turn to answer: the agent, its conversation as the policy would see it, and the turn's legal actions */
  act(request: ActRequest): void;
  stepped(turn: PlayedTurn): void;
  finished(trajectory: Trajectory): void;
  failed(message: string): void;
}

export class EnvironmentClient {
  readonly ready: Promise<EnvironmentOutline>;
  private readonly worker: Worker;
  private episode = 0;
  private listener: EpisodeListener | null = null;
  /** the tokenizer spec the worker holds, by identity: an imported model's is large, so it is sent once per model */
  private sentTokenizer: TokenizerSpec | null = null;

  constructor(source: EnvironmentSource) {
    this.worker = new Worker(new URL("./environment.worker.ts", import.meta.url), { type: "module" });
    this.ready = new Promise<EnvironmentOutline>((resolve, reject) => {
      this.worker.onmessage = ({ data }: MessageEvent<EnvironmentEvent>) => {
        if (data.type === "loaded") resolve(data.outline);
        else if (data.type === "load-failed") reject(new Error(data.message));
        else this.receive(data);
      };
      this.worker.onerror = (event) => {
        const message = `the environment's worker failed: ${event.message || "it could not be started"}`;
        reject(new Error(message));
        this.listener?.failed(message);
      };
    });
    this.ready.catch(() => {});
    this.send({ type: "load", source });
  }

  /**
   * Starts an episode (abandoning the one in progress); its events go to `listener`. Returns its number. With
   * `context` (the policy's context length and tokenizer), a conversation that outgrows it ends the episode.
   */
  play(
    options: {
      protocol: Protocol;
      seed: number;
      sample?: DatasetRow;
      /** The policy's context, and the agents it plays (only their prompts must fit it); null when no policy plays. */
      context: { length: number; tokenizer: TokenizerSpec; agents: string[] } | null;
    },
    listener: EpisodeListener,
  ): number {
    const { context, ...rest } = options;
    this.episode += 1;
    this.listener = listener;
    if (context && context.tokenizer !== this.sentTokenizer) {
      this.send({ type: "tokenizer", spec: context.tokenizer });
      this.sentTokenizer = context.tokenizer;
    }
    this.send({ type: "play", episode: this.episode, ...rest, contextLength: context?.length ?? null, policyAgents: context?.agents ?? [] });
    return this.episode;
  }

  /** Answers the turn episode `episode` is waiting on. */
  act(episode: number, response: { text: string; tokens?: number[]; logprobs?: number[] }) {
    this.send({ type: "acted", episode, ...response });
  }

  /** Stops listening to the episode in progress. */
  abandon() {
    this.episode += 1;
    this.listener = null;
  }

  dispose() {
    this.worker.terminate();
    this.listener = null;
  }

  private send(request: EnvironmentRequest) {
    this.worker.postMessage(request);
  }

  private receive(event: Exclude<EnvironmentEvent, { type: "loaded" | "load-failed" }>) {
    const listener = this.listener;
    if (!listener || event.episode !== this.episode) return;
    if (event.type === "started") listener.started(event);
    else if (event.type === "act") listener.act(event.request);
    else if (event.type === "stepped") listener.stepped(event.turn);
    else if (event.type === "finished") listener.finished(event.trajectory);
    else listener.failed(event.message);
  }
}
