/**
 * Does RL learn when several agents play? Multi-agent games, each trained by the RL loop (`trainRl`) and measured
 * before and after:
 *
 * - self-play, tic-tac-toe for two (zero-sum), one policy in both seats, from the shipped tic-tac-toe base (trained
 *   as X only): the win rate against a scripted player that moves at random, over both seats; how often the final
 *   policy beats its initial self; and the Elo of snapshots taken during training, played against each other in a
 *   league (lib/rl/league.ts) and fitted with lib/rl/ratings.ts. `tic-tac-toe-duel-league` trains the same policy
 *   against a league of its frozen past selves instead (algorithm.league: PFSP, the learner in both seats in
 *   turn), measured the same way, so the two read side by side.
 * - cooperation, the signalling game: each role against its scripted partner, from the generalist base SFT'd on
 *   the role's demonstrator (which slips on gold); the success of the pair. Both roles in one policy is
 *   `signal-game`, left out of the default list (it stays at its base's success).
 * - mixed motives, split the pot, one policy as both players, from the generalist base without SFT: the two
 *   players' joint payoff and each one's own, and the same league as self-play.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { builtInBaseDir, builtInBases } from "../../lib/envs/bases";
import { freeCells, ticTacToeSelfPlay, type BoardState } from "../../lib/envs/board-games";
import { COLOURS, signalGame, signalListener, signalSpeaker } from "../../lib/envs/signal-game";
import { splitPotDuel } from "../../lib/envs/split-pot";
import { Rng } from "../../lib/model/rng";
import { evaluate } from "../../lib/rl/evaluate";
import { League, matchRecords, playMatch } from "../../lib/rl/league";
import { samplerSnapshots } from "../../lib/rl/league-training";
import type { PolicyModel } from "../../lib/rl/primitives";
import type { EpisodePlayer } from "../../lib/rl/rollouts";
import { demonstrationConversations, sftBatch, sftStep } from "../../lib/rl/sft";
import { evaluationSpecs, trainRl } from "../../lib/rl/train";
import { EnvironmentSession, type EnvironmentDefinition } from "../../lib/sdk/environment";
import { defineExperiment, type ExperimentConfig, type ExperimentConfigInput } from "../../lib/sdk/experiment";
import { runEpisodes, simultaneous, singleTurn, turnBased, type ActRequest, type ActResponse, type Protocol, type Trajectory } from "../../lib/sdk/protocol";
import { BaseModel, TrainingClient } from "../../server/runtime/index";

export type MultiAgentKind = "self-play" | "cooperation" | "mixed-motive";

/** One line of the bench's JSON: the headline figure before and after, and the league's verdict where one is kept. */
export type MultiAgentResult = {
  name: string;
  kind: MultiAgentKind;
  metric: string;
  before: number;
  after: number;
  /** Seconds of training (SFT and RL), without the measurements. */
  seconds: number;
  /** The share of games the final policy won against its initial self, seats swapped every game (null: cooperative). */
  beats_initial_self: number | null;
  /** Elo of the first snapshot (pinned at 1000) and of the last, with the last one's 95% bootstrap interval. */
  elo_first: number | null;
  elo_last: number | null;
  elo_ci: [number, number] | null;
  /** Every further figure, before and after. */
  more: Record<string, { before: number; after: number }>;
  steps: number;
};

/** A policy in training: the client that trains it, and the model the RL code samples from. */
type Trainee = { client: TrainingClient; policy: PolicyModel };

type MultiAgentCase = {
  kind: MultiAgentKind;
  environment: EnvironmentDefinition<any, any, any>;
  protocol: Protocol;
  /** The experiment: base, SFT steps on the game's demonstrator (sft.steps), the RL algorithm. */
  template: ExperimentConfigInput;
  /** The headline figure's name; `measure` returns it first. */
  metric: string;
  measure(policy: PolicyModel, config: ExperimentConfig): Promise<Record<string, number>>;
  /**
   * The league of snapshots, for two players with opposed interests (a win means something): how many snapshots
   * (the first before RL, the last after it) and how many games each pair of them plays, seats swapped every game.
   * Null: none (a cooperative game, where both players always score alike).
   */
  league: { snapshots: number; games: number } | null;
};

// ── measurement helpers ─────────────────────────────────────────────────────────────────────────────────────────

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);

/**
 * An episode player in which `agent` is played by a script that reads the episode's state (`move`, with an RNG of
 * the episode's own seed); every other agent's requests go to the policy's `act`. lib/ has no such seat yet.
 */
export function scriptedSeat<State>(
  environment: EnvironmentDefinition<State, any, any>,
  agent: string,
  move: (state: State, rng: Rng) => string,
): EpisodePlayer {
  return async (protocol, starts, act, options) => {
    const sessions = starts.map(() => new EnvironmentSession(environment));
    const rngs = starts.map((start) => new Rng(start.seed ^ 0x5eed));
    const scriptedAct = async (requests: ActRequest[]): Promise<ActResponse[]> => {
      const asked = requests.filter((request) => request.agent !== agent);
      const answers = asked.length > 0 ? await act(asked) : [];
      let k = 0;
      return requests.map((request) =>
        request.agent === agent ? { text: move(sessions[request.episode]!.summary().state, rngs[request.episode]!) } : answers[k++]!,
      );
    };
    return runEpisodes(
      protocol,
      starts.map((start, i) => ({ ...start, session: sessions[i]! })),
      scriptedAct,
      options,
    );
  };
}

/** Whether `agent` ended with more than every other agent. */
const won = (trajectory: Trajectory, agent: string) =>
  Object.entries(trajectory.agentReturns).every(([other, value]) => other === agent || trajectory.agentReturns[agent]! > value);

/** `count` held-out episodes (seeds from the evaluation offset on), one each. */
function heldOut(config: ExperimentConfig, count: number) {
  return evaluationSpecs({ ...config, evaluation: { ...config.evaluation, episodes: count } }, null);
}

/** The policy in every seat on held-out episodes, at `temperature` (0: greedy). */
async function selfPlayed(policy: PolicyModel, useCase: MultiAgentCase, config: ExperimentConfig, count: number, temperature: number) {
  const { trajectories } = await evaluate({
    policy,
    environment: useCase.environment,
    protocol: useCase.protocol,
    specs: heldOut(config, count),
    maxTokens: config.agent.sampling.maxTokens,
    temperature,
  });
  return trajectories;
}

// ── the games ───────────────────────────────────────────────────────────────────────────────────────────────────

/** The scripted tic-tac-toe player: a free cell at random (the opponent of the single-agent use case). */
const randomCell = (state: BoardState, rng: Rng) => {
  const free = freeCells(state);
  return free[Math.floor(rng.uniform() * free.length)]!;
};

/**
 * One role of the signalling game against its scripted partner, which keeps the fixed code (lib/envs/signal-game.ts):
 * `sftSteps` on the role's demonstrator, which confuses gold with blue three times in five, then GRPO.
 */
function scriptedPartner(name: string, environment: EnvironmentDefinition<any, any, any>, maxTokens: number, sftSteps: number): MultiAgentCase {
  const useCase: MultiAgentCase = {
    kind: "cooperation",
    environment,
    protocol: singleTurn(),
    template: {
      name: `${name}-scripted-partner`,
      environment: name,
      agent: { base: "generalist-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens } },
      protocol: { name: "single-turn", history: "last" },
      sft: { steps: sftSteps, demonstrations: 1000, learningRate: 1e-3 },
      algorithm: { name: "grpo", steps: 20, groupSize: 8, groupsPerStep: 16, learningRate: 3e-4, lrSchedule: "cosine" },
      evaluation: { every: 0, episodes: 1 },
    },
    metric: "success",
    league: null,
    async measure(policy, config) {
      const greedy = await selfPlayed(policy, useCase, config, 400, 0);
      const sampled = await selfPlayed(policy, useCase, config, 400, 1);
      return { success: mean(greedy.map((t) => t.score)), success_sampled: mean(sampled.map((t) => t.score)) };
    },
  };
  return useCase;
}

/** Games per seat against the scripted opponent. */
const SCRIPTED_GAMES = 200;

const cases: Record<string, MultiAgentCase> = {
  "tic-tac-toe-duel": {
    kind: "self-play",
    environment: ticTacToeSelfPlay,
    protocol: turnBased(["X", "O"], "last"),
    template: {
      name: "tic-tac-toe-self-play",
      environment: "tic-tac-toe-duel",
      agent: { base: "tic-tac-toe-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "turn-based", agents: ["X", "O"], history: "last" },
      // The single-agent recipe (PPO, GAE λ 0.5: each move credited mostly by the next position's value), 32 groups.
      algorithm: { name: "ppo", steps: 60, groupSize: 8, groupsPerStep: 32, learningRate: 1e-3, lrSchedule: "cosine", gaeLambda: 0.5 },
      evaluation: { every: 0, episodes: 1 },
    },
    metric: "win_rate",
    league: { snapshots: 7, games: 24 },
    // Greedy, as the single-agent use case is judged (the opponent's random moves vary the games), and sampled.
    async measure(policy, config) {
      const rates: Record<string, number> = {};
      for (const temperature of [0, 1]) {
        const suffix = temperature === 0 ? "" : "_sampled";
        for (const [seat, opponent] of [
          ["X", "O"],
          ["O", "X"],
        ] as const) {
          const { trajectories } = await evaluate({
            policy,
            environment: ticTacToeSelfPlay,
            protocol: cases["tic-tac-toe-duel"]!.protocol,
            specs: heldOut(config, SCRIPTED_GAMES),
            maxTokens: config.agent.sampling.maxTokens,
            temperature,
            playEpisodes: scriptedSeat(ticTacToeSelfPlay, opponent, randomCell),
          });
          rates[`win_${seat}${suffix}`] = mean(trajectories.map((t) => (won(t, seat) ? 1 : 0)));
          rates[`loss_${seat}${suffix}`] = mean(trajectories.map((t) => (won(t, opponent) ? 1 : 0)));
        }
      }
      const both = (key: string, suffix = "") => (rates[`${key}_X${suffix}`]! + rates[`${key}_O${suffix}`]!) / 2;
      return {
        win_rate: both("win"),
        loss_rate: both("loss"),
        win_rate_sampled: both("win", "_sampled"),
        loss_rate_sampled: both("loss", "_sampled"),
        ...rates,
      };
    },
  },
  "signal-game": {
    kind: "cooperation",
    environment: signalGame,
    protocol: turnBased(["speaker", "listener"], "last"),
    template: {
      name: "signal-game-self-play",
      environment: "signal-game",
      agent: { base: "generalist-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 6 } },
      protocol: { name: "turn-based", agents: ["speaker", "listener"], history: "last" },
      sft: { steps: 60, demonstrations: 1000, learningRate: 1e-3 },
      algorithm: { name: "grpo", steps: 40, groupSize: 8, groupsPerStep: 16, learningRate: 3e-4, lrSchedule: "cosine" },
      evaluation: { every: 0, episodes: 1 },
    },
    metric: "success",
    league: null,
    async measure(policy, config) {
      const greedy = await selfPlayed(policy, cases["signal-game"]!, config, 400, 0);
      const sampled = await selfPlayed(policy, cases["signal-game"]!, config, 400, 1);
      // By target: a code that pools two colours on one signal fails one of them every time.
      const byTarget = Object.fromEntries(
        COLOURS.map((colour) => [`success_${colour}`, mean(greedy.filter((t) => t.turns[0]!.observation.includes(`Target: ${colour}.`)).map((t) => t.score))]),
      );
      return { success: mean(greedy.map((t) => t.score)), success_sampled: mean(sampled.map((t) => t.score)), ...byTarget };
    },
  },
  // SFT steps by measurement: after 20 the speaker makes the gold slip greedily (0.728), the listener names colours at
  // chance (0.205), and 20 GRPO steps leave it there; after 60 the listener makes the slip greedily too (0.728).
  "signal-speaker": scriptedPartner("signal-speaker", signalSpeaker, 2, 20),
  "signal-listener": scriptedPartner("signal-listener", signalListener, 6, 60),
  "split-pot-duel": {
    kind: "mixed-motive",
    environment: splitPotDuel,
    protocol: simultaneous(["A", "B"], "last"),
    template: {
      name: "split-pot-self-play",
      environment: "split-pot-duel",
      agent: { base: "generalist-base", training: { mode: "full" }, sampling: { temperature: 1, maxTokens: 3 } },
      protocol: { name: "simultaneous", agents: ["A", "B"], history: "last" },
      // No SFT: the generalist base, which has never seen the game, asks for little (1 of 10 greedily), so both
      // payoffs start low; a demonstrator's fair split would leave RL nothing to raise.
      sft: { steps: 0 },
      algorithm: { name: "grpo", steps: 20, groupSize: 8, groupsPerStep: 16, learningRate: 3e-4, lrSchedule: "cosine" },
      evaluation: { every: 0, episodes: 1 },
    },
    metric: "joint_payoff",
    // Fewer and shorter than tic-tac-toe's: the generalist base samples slower than the tic-tac-toe base.
    league: { snapshots: 5, games: 16 },
    // Sampled, as the policy plays: greedy, both seats make the same demand in every game.
    async measure(policy, config) {
      const games = await selfPlayed(policy, cases["split-pot-duel"]!, config, 400, 1);
      const greedy = await selfPlayed(policy, cases["split-pot-duel"]!, config, 50, 0);
      const payoff = (agent: string, of: Trajectory[]) => mean(of.map((t) => t.agentReturns[agent]!));
      return {
        joint_payoff: payoff("A", games) + payoff("B", games),
        payoff_A: payoff("A", games),
        payoff_B: payoff("B", games),
        agreed: mean(games.map((t) => t.metrics.agreed ?? 0)),
        joint_payoff_greedy: payoff("A", greedy) + payoff("B", greedy),
      };
    },
  },
};

/**
 * Self-play against a league instead of the latest self: the same recipe, each group against a frozen past self
 * drawn by PFSP (a snapshot every 10 steps and at the last), the learner taking X and O in turn.
 */
function againstLeague(selfPlay: MultiAgentCase): MultiAgentCase {
  const { template } = selfPlay;
  return {
    ...selfPlay,
    template: {
      ...template,
      name: `${template.name}-league`,
      algorithm: { ...template.algorithm, league: { every: 10, mix: { pfsp: 1 }, learner: "both-seats-alternating" } },
    },
  };
}
cases["tic-tac-toe-duel-league"] = againstLeague(cases["tic-tac-toe-duel"]!);

/**
 * What `--multi-agent` runs unless told: the both-roles signalling game (`signal-game`) is left to `--only`, as it
 * stays where its base starts (see docs/LEARNING.md).
 */
export const multiAgentNames = ["tic-tac-toe-duel", "tic-tac-toe-duel-league", "signal-speaker", "signal-listener", "split-pot-duel"];

/**
 * A shipped base's folder: a use case's (builtInBaseDir), or the generalist base beside them, which
 * builtInBaseDir does not list.
 */
const baseDir = (name: string) =>
  name in builtInBases ? builtInBaseDir(name) : decodeURIComponent(new URL(`../../lib/envs/bases/${name}`, import.meta.url).pathname);

// ── policies, snapshots, SFT ────────────────────────────────────────────────────────────────────────────────────

function newTrainee(base: BaseModel, config: ExperimentConfig): Trainee {
  const training = config.agent.training;
  const client = new TrainingClient(base, {
    lora: training.mode === "lora" ? { rank: training.rank, alpha: training.alpha, dropout: training.dropout, targets: training.targets } : undefined,
    valueHead: config.agent.valueHead,
    seed: config.seed,
  });
  return { client, policy: { primitives: client, tokenizer: base.tokenizer, contextLength: base.config.contextLength } };
}

/**
 * A frozen copy of the policy as it is now: its weights saved for a sampler and loaded into a new client on the
 * same base (no optimizer state, no value head: it only samples).
 */
async function snapshot(trainee: Trainee, dir: string): Promise<PolicyModel> {
  await trainee.client.saveWeightsForSampler(dir, { merge: true });
  const copy = new TrainingClient(trainee.client.base);
  await copy.loadState(dir);
  return { ...trainee.policy, primitives: copy };
}

/** Conversations of the environment's demonstrator playing every seat, each agent's under its own system prompt. */
async function demonstrations(useCase: MultiAgentCase, count: number, seed: number) {
  const rng = new Rng(seed);
  const starts = Array.from({ length: count }, () => ({ session: new EnvironmentSession(useCase.environment), seed: rng.nextU32() % 1_000_000 }));
  const { conversations } = await demonstrationConversations(useCase.protocol, starts, (episode, agent) => starts[episode]!.session.demonstrate(agent));
  return conversations;
}

// ── the run ─────────────────────────────────────────────────────────────────────────────────────────────────────

export type MultiAgentOptions = {
  /** RL steps instead of the template's. */
  steps?: number;
  /** Applied to each template before it is parsed (bench/learn.ts's --set). */
  adjust?: (template: Record<string, any>) => void;
  log?: (line: string) => void;
  verbose?: boolean;
  /** Where the trained policy goes as sampler weights. */
  save?: string;
};

/** Games the final policy plays against its initial self, seats swapped every game. */
const VERSUS_INITIAL_GAMES = 200;

export async function runMultiAgentCase(name: string, options: MultiAgentOptions = {}): Promise<MultiAgentResult> {
  const useCase = cases[name];
  if (!useCase) throw new Error(`no multi-agent use case '${name}'; multi-agent use cases: ${Object.keys(cases).join(", ")}`);
  const log = options.log ?? ((line: string) => console.error(line));
  const template = structuredClone(useCase.template) as Record<string, any>;
  if (options.steps) template.algorithm = { ...template.algorithm, steps: options.steps };
  options.adjust?.(template);
  const config = defineExperiment(template as ExperimentConfigInput);
  const base = BaseModel.load(baseDir(config.agent.base));
  const trainee = newTrainee(base, config);
  const { environment, protocol } = useCase;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), `bench-${name}-`));
  const clock = { trained: 0 };
  const timed = async <T>(work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await work();
    } finally {
      clock.trained += (performance.now() - started) / 1000;
    }
  };

  try {
    const sftSteps = config.sft.steps;
    if (sftSteps > 0) {
      await timed(async () => {
        const conversations = await demonstrations(useCase, config.sft.demonstrations, config.seed);
        for (let step = 0; step < sftSteps; step++) {
          const metrics = await sftStep(trainee.policy, sftBatch(conversations, config.seed, step, config.sft.batchSize), {
            learningRate: config.sft.learningRate,
          });
          if (options.verbose && (step + 1) % 10 === 0) log(`  sft ${step + 1} loss ${metrics["loss/sft"]!.toFixed(3)}`);
        }
        // RL starts from the imitating policy with a fresh optimizer, as a worker's run does after its SFT steps.
        trainee.client.beginStage();
      });
      log(`${name}: ${sftSteps} SFT steps on the demonstrator (${clock.trained.toFixed(0)} s)`);
    }

    const before = await useCase.measure(trainee.policy, config);
    log(`${name} before: ${describe(before)}`);

    const steps = config.algorithm.steps;
    const snapshotEvery = useCase.league ? Math.max(1, Math.round(steps / (useCase.league.snapshots - 1))) : Infinity;
    const members: { id: string; step: number; policy: PolicyModel }[] = [];
    const keep = async (step: number) => {
      const policy = await snapshot(trainee, path.join(work, `step-${step}`));
      members.push({ id: `step-${step}`, step, policy });
    };
    if (useCase.league) await keep(0);

    const started = performance.now();
    /** A league run's frozen past selves: sampler weights in the work folder, each in a client of its own. */
    const trainingLeague = config.algorithm.league
      ? {
          snapshots: samplerSnapshots({
            dir: path.join(work, "training-league"),
            save: (at) => trainee.client.saveWeightsForSampler(at),
            async open(at, member) {
              const frozen = new TrainingClient(base, { seed: config.seed + 7_919 * (member.step + 1) });
              await frozen.loadState(at);
              return { ...trainee.policy, primitives: frozen };
            },
          }),
        }
      : undefined;
    const leagueFigures: string[] = [];
    const trained = await timed(() =>
      trainRl({
        config,
        policy: trainee.policy,
        environment,
        protocol,
        league: trainingLeague,
        hooks: {
          onMetrics: (step, metrics) => {
            if ("league/elo/latest" in metrics) {
              leagueFigures.push(
                `step ${step} ${metrics["league/elo/latest"]!.toFixed(0)} [${metrics["league/elo/latest_low"]!.toFixed(0)}, ${metrics["league/elo/latest_high"]!.toFixed(0)}] (won ${(metrics["league/win_rate/all"] ?? 0).toFixed(2)} of the step's games)`,
              );
            }
            if (!options.verbose || !("reward/mean" in metrics)) return;
            const shown = Object.keys(metrics).filter((k) => k.startsWith("reward/agent/") || k.startsWith("episode/win/") || k.startsWith("env/"));
            const figures = ["reward/mean", ...shown, "train/skipped", "perf/step_seconds"].filter((k) => k in metrics);
            log(`  ${step} ${figures.map((k) => `${k} ${metrics[k]!.toFixed(3)}`).join(" ")}`);
          },
          onRollouts: async (step, split) => {
            if (split !== "train") return;
            if (!options.verbose && step % 10 === 0) log(`${name} step ${step} (${((performance.now() - started) / 1000).toFixed(0)} s)`);
            if (useCase.league && (step % snapshotEvery === 0 || step === steps) && step > members.at(-1)!.step) await keep(step);
          },
        },
      }),
    );
    if (trained.league) {
      log(
        `${name}: training league of ${trained.league.members.length} members, ${trained.league.games.length} games; Elo of each snapshot as it joined: ${leagueFigures.join(", ")}`,
      );
    }
    if (options.save) {
      await trainee.client.saveWeightsForSampler(path.join(options.save, name), { merge: true });
      log(`${name}: trained weights saved to ${path.join(options.save, name)}`);
    }

    const after = await useCase.measure(trainee.policy, config);
    log(`${name} after: ${describe(after)}`);
    const result: MultiAgentResult = {
      name,
      kind: useCase.kind,
      metric: useCase.metric,
      before: before[useCase.metric]!,
      after: after[useCase.metric]!,
      seconds: clock.trained,
      beats_initial_self: null,
      elo_first: null,
      elo_last: null,
      elo_ci: null,
      more: Object.fromEntries(
        Object.keys(after)
          .filter((k) => k !== useCase.metric)
          .map((k) => [k, { before: before[k]!, after: after[k]! }]),
      ),
      steps,
    };
    if (!useCase.league) return result;
    const { games: gamesPerPairing } = useCase.league;

    const sampling = { temperature: 1, maxTokens: config.agent.sampling.maxTokens };
    // The final policy against the first snapshot, seats swapped every game.
    const versus = await playMatch({
      protocol,
      environment,
      seats: { [protocol.agents[0]!]: trainee.policy, [protocol.agents[1]!]: members[0]!.policy },
      sampling: { ...sampling, seed: 1 },
      seeds: heldOut(config, VERSUS_INITIAL_GAMES).map((spec) => spec.seed),
    });
    const finalSeat = protocol.agents[0]!;
    result.beats_initial_self = mean(versus.map((game) => (game.winner === finalSeat ? 1 : 0)));
    const lostToInitial = mean(versus.map((game) => (game.winner !== null && game.winner !== finalSeat ? 1 : 0)));
    log(`${name}: final against initial self: won ${result.beats_initial_self.toFixed(3)}, lost ${lostToInitial.toFixed(3)} of ${versus.length}`);

    // The league: every snapshot plays every other, as league.nextPairings schedules.
    const league = new League();
    for (const member of members) league.add({ id: member.id, label: `step ${member.step}`, step: member.step });
    const policyOf = new Map(members.map((member) => [member.id, member.policy]));
    const pairings = league.nextPairings({ minGames: gamesPerPairing * (members.length - 1), gamesPerPairing });
    for (const [p, [a, b]] of pairings.entries()) {
      const games = await playMatch({
        protocol,
        environment,
        seats: { [protocol.agents[0]!]: policyOf.get(a)!, [protocol.agents[1]!]: policyOf.get(b)! },
        sampling: { ...sampling, seed: 100 + p },
        seeds: heldOut(config, gamesPerPairing).map((spec) => spec.seed + 10_000 * (p + 1)),
      });
      league.record(matchRecords(games, { [protocol.agents[0]!]: a, [protocol.agents[1]!]: b }));
    }
    const ratings = league.ratings({ anchor: { to: "member", id: members[0]!.id }, seed: 0 });
    log(
      `${name} league (${pairings.length} pairings of ${gamesPerPairing} games): ${ratings.map((r) => `${r.label} ${r.rating.toFixed(0)} [${r.low.toFixed(0)}, ${r.high.toFixed(0)}]`).join(", ")}`,
    );
    const last = ratings.at(-1)!;
    result.elo_first = ratings[0]!.rating;
    result.elo_last = last.rating;
    result.elo_ci = [last.low, last.high];
    return result;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

function describe(figures: Record<string, number>): string {
  return Object.entries(figures)
    .map(([k, v]) => `${k} ${v.toFixed(3)}`)
    .join(", ");
}
