/** The messages between the episode player (episode-player.tsx) and its environment worker (environment.worker.ts). */
import type { TokenizerSpec } from "@/lib/model/tokenizer-spec";
import type { DatasetRow, Json } from "@/lib/sdk/environment";
import type { ActRequest, Protocol, Trajectory } from "@/lib/sdk/protocol";
import type { SandboxLimits } from "@/server/sandbox/browser";

/** The environment to play: a built-in use case (its own game, or its two-player `duel`), or a run's compiled sandbox bundle. */
export type EnvironmentSource =
  | { kind: "builtin"; name: string; duel?: boolean }
  | { kind: "sandboxed"; code: string; limits: SandboxLimits; quickjsWasmUrl: string };

/** What the worker tells the page of the environment once loaded. */
export interface EnvironmentOutline {
  name: string;
  description: string | null;
  maxTurns: number;
  /** the dataset a reset reads a row of, if any */
  dataset: string | null;
}

/** One turn as played: who acted, what they saw and did, and what the environment answered. */
export interface PlayedTurn {
  agent: string;
  observation: string;
  action: string;
  reward: number;
  done: boolean;
  /** the environment's render after the turn (null when it has none) */
  render: string | null;
  info: Record<string, Json>;
  metrics: Record<string, number>;
}

export type EnvironmentRequest =
  | { type: "load"; source: EnvironmentSource }
  /** the policy's tokenizer, which measures conversations against `contextLength`; sent when it changes, before a play */
  | { type: "tokenizer"; spec: TokenizerSpec }
  /**
   * `contextLength`: the policy's, so that a conversation outgrowing it ends the episode as in a run (null: no limit);
   * `policyAgents`: the agents the policy plays, whose prompts alone must fit it (a person's side has no context)
   */
  | { type: "play"; episode: number; protocol: Protocol; seed: number; sample?: DatasetRow; contextLength: number | null; policyAgents: string[] }
  | { type: "acted"; episode: number; text: string; tokens?: number[]; logprobs?: number[] };

export type EnvironmentEvent =
  | { type: "loaded"; outline: EnvironmentOutline }
  | { type: "load-failed"; message: string }
  | { type: "started"; episode: number; systemPrompt: string; observation: string; render: string | null }
  | { type: "act"; episode: number; request: ActRequest }
  | { type: "stepped"; episode: number; turn: PlayedTurn }
  | { type: "finished"; episode: number; trajectory: Trajectory }
  | { type: "failed"; episode: number; message: string };
