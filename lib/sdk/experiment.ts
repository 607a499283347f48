/**
 * Experiments: an agent, an environment, a protocol and an algorithm with its hyperparameters. The schema's
 * descriptions drive the editor's forms and completions; `defineExperiment` rejects an invalid value with a
 * message naming the field and the accepted range.
 */
import { z } from "zod";
import { agentSchema } from "./agent";
import { describeConfigError, rangedInt, rangedNumber } from "./config-errors";
import { hasSeveralAgents, protocolNames } from "./protocol";

const ranged = rangedNumber;

export const algorithmNames = ["grpo", "grpo-per-turn", "ppo", "rloo", "reinforce", "sft"] as const;
export type AlgorithmName = (typeof algorithmNames)[number];
export const policyLosses = ["importance_sampling", "ppo", "cispo"] as const;
export const lrSchedules = ["constant", "cosine", "linear"] as const;

/** Where the learner sits in a league game: always at one agent, or each agent in turn, group by group. */
export const LEARNER_BOTH_SEATS = "both-seats-alternating";

const mixWeight = (what: string) => ranged(0, 1000).default(0).describe(what);

export const leagueSchema = z.object({
  every: rangedInt(1, 1_000_000).default(10).describe("snapshot the learner into the league every N steps (and after the last step)"),
  maxMembers: rangedInt(1, 256)
    .default(16)
    .describe(
      "the most snapshots the league keeps as opponents, each a policy in memory: past it the oldest is dropped (its policy and folder; its games stay in the ratings)",
    ),
  mix: z
    .object({
      latest: mixWeight("weight of the newest member (plain self-play against its latest frozen self)"),
      uniform: mixWeight("weight of every member alike (fictitious self-play: old strategies stay beaten)"),
      pfsp: mixWeight("weight of members by how often they beat the learner: (1 − p)², p its win rate against each (prioritised fictitious self-play)"),
    })
    .default({ latest: 0, uniform: 0, pfsp: 1 })
    .refine((mix) => mix.latest + mix.uniform + mix.pfsp > 0, "give at least one of latest, uniform, pfsp a weight above 0")
    .describe("how the learner's opponent is drawn for each training group: weights, normalised"),
  learner: z
    .string()
    .min(1, `name an agent, or "${LEARNER_BOTH_SEATS}"`)
    .max(64)
    .default(LEARNER_BOTH_SEATS)
    .describe(`the agent the learner plays, or "${LEARNER_BOTH_SEATS}" to take each agent in turn so it learns both`),
});
export type LeagueConfig = z.infer<typeof leagueSchema>;

export const policyModes = ["shared", "separate"] as const;

export const algorithmSchema = z.object({
  name: z
    .enum(algorithmNames, `must be one of ${algorithmNames.join(", ")}`)
    .default("grpo")
    .describe("the RL algorithm (or sft)"),
  steps: rangedInt(1, 1_000_000).default(100).describe("training steps (one optimizer update per step)"),
  groupSize: rangedInt(1, 1024).default(8).describe("episodes per prompt (seed); GRPO and RLOO compare within a group"),
  groupsPerStep: rangedInt(1, 4096).default(8).describe("prompts (groups) per training step"),
  learningRate: ranged(1e-7, 1).default(3e-3).describe("Adam learning rate (the peak, when a schedule is set)"),
  lrSchedule: z
    .enum(lrSchedules, `must be one of ${lrSchedules.join(", ")}`)
    .default("constant")
    .describe("learning rate over the run: constant, or decaying from the peak to minLrRatio × peak by the last step (cosine or linear)"),
  warmupSteps: rangedInt(0, 1_000_000).default(0).describe("steps of linear warm-up from 0 to the peak learning rate"),
  minLrRatio: ranged(0, 1).default(0.1).describe("the learning rate at the last step of a decaying schedule, as a share of the peak"),
  weightDecay: ranged(0, 1).default(0).describe("AdamW decoupled weight decay"),
  gradClip: ranged(0, 1e6).default(1).describe("clip the global gradient norm to this (0 = off)"),
  loss: z
    .enum(policyLosses, `must be one of ${policyLosses.join(", ")}`)
    .default("ppo")
    .describe("policy loss on the primitives"),
  clipRange: ranged(0, 10).default(0.2).describe("PPO clip range ε: ratios are clipped to [1-ε, 1+ε]"),
  klCoef: ranged(0, 100).default(0).describe("weight of the KL penalty against the reference policy"),
  entropyCoef: ranged(0, 10)
    .default(0)
    .describe("weight of an entropy bonus on the policy's tokens, which keeps it exploring (0 = off); entropy is always logged"),
  discount: ranged(0, 1).default(1).describe("discount γ of per-turn returns"),
  gaeLambda: ranged(0, 1).default(0.95).describe("GAE λ (PPO)"),
  valueCoef: ranged(0, 100).default(0.5).describe("weight of the value loss (PPO)"),
  epochs: rangedInt(1, 64).default(1).describe("optimizer passes over each batch of rollouts"),
  resampleRounds: rangedInt(0, 16)
    .default(0)
    .describe(
      "dynamic sampling (GRPO, RLOO): groups whose episodes all earned the same reward teach nothing, so up to this many extra rounds of fresh prompts are played per step until groupsPerStep groups differ; the step trains on those (0 = off)",
    ),
  exploreTemperature: ranged(0, 5)
    .default(0)
    .describe(
      "exploration: while steps find no group whose rewards differ, the sampling temperature rises step by step up to this, and settles back once most groups differ (0, or not above agent.sampling.temperature = off)",
    ),
  normalizeAdvantages: z.boolean().default(true).describe("divide group advantages by the group's standard deviation (GRPO)"),
  league: leagueSchema
    .nullable()
    .default(null)
    .describe(
      "self-play against a league of frozen past selves (two agents, shared policy): every `every` steps the learner is snapshotted into the league, and each training group seats it against a member drawn by `mix` (null = off: the policy plays itself)",
    ),
});
export type AlgorithmConfig = z.infer<typeof algorithmSchema>;

/** The learning rate of the optimizer step that ends training step `step` (0-based) of `config.steps`. */
export function learningRateAt(config: Pick<AlgorithmConfig, "learningRate" | "lrSchedule" | "warmupSteps" | "minLrRatio" | "steps">, step: number): number {
  const peak = config.learningRate;
  if (step < config.warmupSteps) return (peak * (step + 1)) / (config.warmupSteps + 1);
  if (config.lrSchedule === "constant") return peak;
  const span = Math.max(config.steps - 1 - config.warmupSteps, 1);
  const progress = Math.min(Math.max((step - config.warmupSteps) / span, 0), 1);
  const shape = config.lrSchedule === "cosine" ? 0.5 * (1 + Math.cos(Math.PI * progress)) : 1 - progress;
  return peak * (config.minLrRatio + (1 - config.minLrRatio) * shape);
}

export const experimentSchema = z.object({
  name: z.string().trim().min(1, "give the experiment a name").max(120).describe("the experiment's name"),
  environment: z.string().min(1, "name an environment").describe("a built-in environment or the experiment's own"),
  agent: agentSchema,
  protocol: z
    .object({
      name: z
        .enum(protocolNames, `must be one of ${protocolNames.join(", ")}`)
        .default("single-turn")
        .describe("who acts when: one action, one agent until done, several agents taking turns, or several acting at once each round"),
      agents: z
        .array(z.string().min(1, "an agent's name must not be empty").max(64, "an agent's name must be at most 64 characters"))
        .min(1, "name at least one agent")
        .default(["agent"])
        .describe("the agents: in the order they act (turn-based, unless the environment's toAct says), or who acts each round (simultaneous)"),
      history: z
        .enum(["full", "last"], "must be full or last")
        .default("full")
        .describe("full: prompts hold the whole conversation; last: only the latest observation"),
      policies: z
        .enum(policyModes, `must be one of ${policyModes.join(", ")}`)
        .default("shared")
        .describe("several agents: shared (one policy plays every agent, its role in the prompt) or separate (each agent its own policy on the shared base)"),
    })
    .superRefine((protocol, context) => {
      if (!hasSeveralAgents(protocol)) {
        if (protocol.policies === "separate") {
          context.addIssue({
            code: "custom",
            path: ["policies"],
            message: `separate policies need several agents (turn-based or simultaneous); ${protocol.name} has one`,
          });
        }
        return;
      }
      if (protocol.agents.length < 2) {
        context.addIssue({ code: "custom", path: ["agents"], message: `the ${protocol.name} protocol needs at least two agents, e.g. ["X", "O"]` });
      }
      const repeated = protocol.agents.filter((agent, i) => protocol.agents.indexOf(agent) !== i);
      if (repeated.length > 0) {
        context.addIssue({ code: "custom", path: ["agents"], message: `agents must have distinct names; '${repeated[0]}' appears more than once` });
      }
    })
    .default({ name: "single-turn", agents: ["agent"], history: "full", policies: "shared" })
    .describe("how the agent(s) and the environment take turns"),
  algorithm: algorithmSchema.default(algorithmSchema.parse({})),
  evaluation: z
    .object({
      every: rangedInt(0, 1_000_000).default(10).describe("evaluate every N steps (0 = only before and after)"),
      episodes: rangedInt(1, 100_000).default(64).describe("held-out episodes per evaluation"),
      seedOffset: rangedInt(0, 2 ** 30)
        .default(1_000_000)
        .describe("held-out seeds start here, apart from training seeds"),
      temperature: ranged(0, 5).default(0).describe("sampling temperature for evaluation (0 = greedy)"),
    })
    .default({ every: 10, episodes: 64, seedOffset: 1_000_000, temperature: 0 })
    .describe("evaluation on held-out seeds"),
  sft: z
    .object({
      data: z
        .enum(["demonstrator", "dataset"], "must be demonstrator or dataset")
        .default("demonstrator")
        .describe("what SFT imitates: the environment's demonstrate(state), or an uploaded dataset of conversations"),
      dataset: z
        .string()
        .max(200)
        .default("")
        .describe('the uploaded dataset of conversations (data: dataset): JSONL lines {"messages": [{"role", "content"}, …]}'),
      demonstrations: rangedInt(1, 100_000).default(2000).describe("demonstration episodes played once before training, then sampled into batches"),
      batchSize: rangedInt(1, 4096).default(32).describe("conversations per optimizer step"),
      steps: rangedInt(0, 1_000_000)
        .default(0)
        .describe(
          "RL runs: steps of SFT on sft.data before the first RL step (0 = none); RL then starts from the imitating policy, with a fresh optimizer, and the KL penalty's reference is that policy. An sft run trains algorithm.steps",
        ),
      learningRate: ranged(1e-7, 1).default(1e-3).describe("RL runs: the learning rate of the SFT steps before RL (an sft run uses algorithm.learningRate)"),
    })
    .default({ data: "demonstrator", dataset: "", demonstrations: 2000, batchSize: 32, steps: 0, learningRate: 1e-3 })
    .describe("supervised fine-tuning: what to imitate and how much at a time, in an sft run or in the SFT steps before an RL run's"),
  checkpointEvery: rangedInt(0, 1_000_000).default(25).describe("save a resumable checkpoint every N steps (0 = only at the end)"),
  checkpointMinutes: ranged(0, 24 * 60)
    .default(2)
    .describe("also save one when this many minutes of training have passed since the last, so a lost worker costs little (0 = by steps only)"),
  seed: rangedInt(0, 2 ** 31 - 1)
    .default(0)
    .describe("seed of the whole run: model init, sampling, environments"),
});

export type ExperimentConfig = z.infer<typeof experimentSchema>;
export type ExperimentConfigInput = z.input<typeof experimentSchema>;

export function defineExperiment(input: ExperimentConfigInput): ExperimentConfig {
  return parseExperiment(input);
}

/**
 * The one reader of a config from outside the type system (a request, a stored row, a file): parses it with the
 * schema's defaults and rules, or throws an error with one line per wrong field. A parsed config parses to itself.
 */
export function parseExperiment(value: unknown): ExperimentConfig {
  const parsed = experimentSchema.safeParse(value);
  if (!parsed.success) throw new Error(`Invalid experiment:\n${describeConfigError(parsed.error, value)}`);
  return completeExperiment(parsed.data);
}

/** What one field implies for another, which the schema cannot say: PPO needs the agent's value head. */
export function completeExperiment<T extends ExperimentConfig>(config: T): T {
  if (config.algorithm.name === "ppo" && !config.agent.valueHead) config.agent.valueHead = true;
  return config;
}

/** SFT steps an RL run takes before its first RL step (`sft.steps`); none for an sft run, whose steps are all SFT. */
export function sftStepsBeforeRl(config: ExperimentConfig): number {
  return config.algorithm.name === "sft" ? 0 : config.sft.steps;
}

/** The run's steps in all: an sft run's, or an RL run's SFT steps and then its RL steps. */
export function totalSteps(config: ExperimentConfig): number {
  return sftStepsBeforeRl(config) + config.algorithm.steps;
}

/** What the run imitates, if it takes any SFT step: the environment's demonstrator or an uploaded dataset. */
export function imitates(config: ExperimentConfig): "demonstrator" | "dataset" | null {
  return config.algorithm.name === "sft" || config.sft.steps > 0 ? config.sft.data : null;
}
