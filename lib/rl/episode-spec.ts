/** What an episode starts from, apart from the code that plays it (rollouts, seats and the curriculum all name it). */
import type { DatasetRow } from "@/lib/sdk/environment";

/**
 * One episode's prompt: its seed, dataset row and, for an environment that declares levels, its level of
 * difficulty (the curriculum's, lib/rl/curriculum.ts; left out, the environment's evaluation level).
 */
export type EpisodeSpec = { seed: number; sample?: DatasetRow; difficulty?: number };
