/**
 * `experiments.validate`: compile, type-check, load, and dry-run a few episodes of the user's environment in the
 * sandbox with scripted or random actions, and return diagnostics for the editor without launching anything.
 */
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { builtInDatasets, readBuiltInDataset } from "@/lib/envs/datasets";
import { randomLegalAction } from "@/lib/sdk/action-space";
import { parseDataset } from "@/lib/sdk/dataset";
import type { DatasetRow, Seats } from "@/lib/sdk/environment";
import { type Protocol, hasSeveralAgents } from "@/lib/sdk/protocol";
import { Rng } from "@/lib/model/rng";
import { type SourceFiles, compileEnvironment } from "./compile";
import { SandboxError, SandboxLimitError, type SandboxDiagnostic, formatCount, runtimeName } from "./errors";
import type { SandboxLimitsInput } from "./limits";
import { SandboxedEnvironmentPool } from "./sandboxed-environment";
import { typeCheckEnvironment } from "./typecheck";
import type { EnvironmentDescription } from "./wire";

export type ValidateOptions = {
  /** The file that exports the environment; default environment.ts or the only file. */
  entry?: string;
  limits?: SandboxLimitsInput;
  /** Episodes to dry-run (default 3), with seeds 0, 1, 2, ... unless given. */
  episodes?: number;
  seeds?: number[];
  /** Actions to play in order (cycled); default: random picks from a small generic vocabulary. */
  actions?: string[];
  /** Dataset rows for a dataset environment's episodes (cycled); without them it is loaded but not dry-run. */
  samples?: DatasetRow[];
  /** Uploaded datasets' files by name: a dataset environment's rows are read from here (or the built-in ones). */
  datasetFiles?: Record<string, { path: string; kind: "rows" | "conversations" }>;
  /**
   * The experiment's protocol: the dry run plays its agents (turn by turn, or in simultaneous rounds). Default: one
   * agent.
   */
  protocol?: Pick<Protocol, "name" | "agents">;
  /** Steps per dry-run episode at most (default 20); a simultaneous round is one step. */
  maxSteps?: number;
  /**
   * CPU milliseconds the dry run's resets and steps may take in all (default `defaultDryRunCpuMs`, 10 s): the op
   * that exhausts it is stopped where it is, and validation fails naming `dryRunCpuMs` and the user's line, well
   * within the validation request's own time limit (60 s).
   */
  dryRunCpuMs?: number;
  /** Run the TypeScript checker (default true; about a second the first time, then much less). */
  typeCheck?: boolean;
  /**
   * The agent's model and sampling, when known: a first prompt that leaves fewer than `maxTokens` of the base's
   * `contextLength` for the reply is an error naming both lengths (no episode could take a turn).
   */
  context?: { base: string; contextLength: number; maxTokens: number };
};

export type ValidationReport = {
  /** No diagnostic of severity "error". */
  ok: boolean;
  diagnostics: SandboxDiagnostic[];
  environment: EnvironmentDescription | null;
  /**
   * The dry run's episodes; `promptTokens` is the first prompt's length in the chat template (byte tokens);
   * `difficulty`, the level played, for an environment that declares levels.
   */
  episodes: {
    seed: number;
    turns: number;
    totalReward: number;
    done: boolean;
    promptTokens: number;
    actions: "demonstrator" | "legal" | "probes";
    difficulty?: number;
  }[];
  /** What the code wrote with console.* during the dry run. */
  logs: string[];
};

/** The dry run's CPU budget unless a caller gives one (`ValidateOptions.dryRunCpuMs`). */
const defaultDryRunCpuMs = 10_000;

/** Actions that exercise parseAction's two branches in most environments. */
const probeActions = ["1", "2", "3", "0", "a", "b", "yes", "no", "up", "down", "left", "right", "look", "42", "A", "hello", ""];

export async function validateExperimentSource(files: SourceFiles, options: ValidateOptions = {}): Promise<ValidationReport> {
  const diagnostics: SandboxDiagnostic[] = [];
  const report = (): ValidationReport => ({
    ok: !diagnostics.some((d) => d.severity === "error"),
    diagnostics: diagnostics.map((d) => ({ ...d, message: withoutServerPaths(d.message) })),
    environment,
    episodes,
    logs,
  });
  let environment: EnvironmentDescription | null = null;
  const episodes: ValidationReport["episodes"] = [];
  let logs: string[] = [];

  const compiled = await compileEnvironment(files, { entry: options.entry });
  if (!compiled.ok) {
    diagnostics.push(...compiled.diagnostics);
    return report();
  }
  diagnostics.push(...compiled.warnings);
  if (options.typeCheck ?? true) diagnostics.push(...typeCheckEnvironment(compiled.compiled.files));

  let pool: SandboxedEnvironmentPool;
  /** Actions the dry run has played, and the episodes it plays. */
  let played = 0;
  let count = 0;
  try {
    pool = await SandboxedEnvironmentPool.create(compiled.compiled, { limits: options.limits, dryRunCpuMs: options.dryRunCpuMs ?? defaultDryRunCpuMs });
  } catch (error) {
    diagnostics.push(toDiagnostic(error));
    return report();
  }
  try {
    environment = pool.environment;
    if (environment.maxTurns > pool.limits.maxStepsPerEpisode) {
      diagnostics.push({
        severity: "warning",
        message: `maxTurns is ${environment.maxTurns} but the server stops an episode after maxStepsPerEpisode=${pool.limits.maxStepsPerEpisode} steps; an episode that runs that long will fail the run`,
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "limit",
      });
    }
    let samples = options.samples;
    if (environment.data.kind === "dataset" && !samples?.length) {
      const name = environment.data.dataset;
      try {
        samples = datasetRows(name, options.datasetFiles).slice(0, 20);
      } catch (error) {
        diagnostics.push({
          severity: "error",
          message: `data.dataset: ${(error as Error).message}`,
          file: compiled.compiled.entry,
          line: null,
          column: null,
          source: "runtime",
        });
        return report();
      }
    }
    if (environment.data.kind === "dataset" && !samples?.length) {
      diagnostics.push({
        severity: "info",
        message: `dataset environment '${environment.name}' was loaded but not dry-run: no sample rows were given`,
        file: null,
        line: null,
        column: null,
        source: "runtime",
      });
      return report();
    }
    const protocol = options.protocol;
    const seats: Seats | undefined = protocol ? { agents: protocol.agents, simultaneous: protocol.name === "simultaneous" } : undefined;
    const declared = Object.entries(environment.multiAgent)
      .filter(([, has]) => has)
      .map(([fn]) => fn);
    if (declared.length > 0 && !(protocol && hasSeveralAgents(protocol))) {
      diagnostics.push({
        severity: "info",
        message: `${declared.join(", ")} ${declared.length === 1 ? "counts" : "count"} only under a protocol with several agents (turn-based, simultaneous); this dry run played one agent`,
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "runtime",
      });
    }
    count = options.seeds?.length ?? options.episodes ?? 3;
    const seeds = options.seeds ?? Array.from({ length: count }, (_, i) => i);
    const rng = new Rng(12345);
    const maxSteps = Math.min(options.maxSteps ?? 20, pool.limits.maxStepsPerEpisode);
    let validSteps = 0;
    let longestPrompt: { tokens: number; seed: number; difficulty?: number } | null = null;
    // An environment with levels plays its hardest in the first episode (the demonstrator's, and usually the
    // longest prompt), its easiest in the second, and its evaluation level in the rest.
    const levels = environment.difficulty;
    const levelOf = (index: number) => (levels ? ([levels.max, levels.min][index] ?? levels.evaluation ?? levels.max) : undefined);
    // (a holder: TypeScript does not see the closure below assign it)
    const longest: { action: { text: string; bytes: number } | null } = { action: null };
    for (const [index, seed] of seeds.entries()) {
      const sample = samples?.length ? samples[index % samples.length] : undefined;
      const session = pool.session(index);
      const difficulty = levelOf(index);
      const observation = session.reset(seed, sample, difficulty, seats);
      const promptTokens = chatTokens(session.systemPrompt, observation);
      if (!longestPrompt || promptTokens > longestPrompt.tokens) longestPrompt = { tokens: promptTokens, seed, difficulty };
      // Actions that parse, so that step() runs on real actions: the demonstrator's in the first episode, legal
      // ones in the next; the last episode (of three or more) probes parseAction with generic guesses.
      const probing = options.actions?.length ? false : count > 2 && index === count - 1;
      const kind: ValidationReport["episodes"][number]["actions"] =
        !probing && index === 0 && environment.hasDemonstrator ? "demonstrator" : !probing && environment.actions !== null ? "legal" : "probes";
      let done = false;
      let turns = 0;
      let totalReward = 0;
      /** The dry run's next action for `agent` (default: the agent to act). */
      const pick = (agent?: string): string => {
        const declared = session.legalActions(agent);
        if (declared && "actions" in declared) {
          for (const text of declared.actions) {
            const bytes = Buffer.byteLength(text, "utf8");
            if (!longest.action || bytes > longest.action.bytes) longest.action = { text, bytes };
          }
        }
        const legal = kind === "legal" ? declared : null;
        const action = options.actions?.length
          ? options.actions[played % options.actions.length]!
          : kind === "demonstrator"
            ? (session.demonstrate(agent) ?? "")
            : legal
              ? randomLegalAction(legal, () => rng.uniform())
              : probeActions[Math.floor(rng.uniform() * probeActions.length)]!;
        played += 1;
        return action;
      };
      while (!done && turns < maxSteps) {
        if (seats?.simultaneous) {
          const actions: Record<string, string> = {};
          for (const agent of seats.agents) actions[agent] = pick(agent);
          const round = session.stepTogether(actions);
          validSteps += seats.agents.length - Object.keys(round.invalid).length;
          totalReward += round.reward;
          done = round.done;
        } else {
          const step = session.step(pick());
          if (step.info.invalid === undefined) validSteps += 1;
          // every agent's reward of the step, as a trajectory's totalReward counts it
          totalReward += step.rewards ? Object.values(step.rewards).reduce((sum, reward) => sum + reward, 0) : step.reward;
          done = step.done;
        }
        turns += 1;
      }
      if (done) session.score();
      episodes.push({ seed, turns, totalReward, done, promptTokens, actions: kind, ...(difficulty === undefined ? {} : { difficulty }) });
    }
    if (played > 0 && validSteps === 0) {
      diagnostics.push({
        severity: "warning",
        message:
          `none of the dry run's ${played} actions parsed, so step() never ran: declare the legal actions (actions: a list, ` +
          "a function of the state, or { pattern }) or a demonstrator (demonstrate(state)), and validation will play them",
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "runtime",
      });
    }
    // A step() that fits its per-call limit may still not fit a whole episode: say so now, not a run's minutes in.
    const { steps: timedSteps, ms: stepMs } = pool.stepCpu;
    const perStep = timedSteps > 0 ? stepMs / timedSteps : 0;
    if (perStep > 0 && perStep * environment.maxTurns > pool.limits.cpuMsPerEpisode) {
      const turns = Math.floor(pool.limits.cpuMsPerEpisode / perStep);
      diagnostics.push({
        severity: "warning",
        message:
          `step() took ${perStep.toFixed(1)} ms of CPU per call in the dry run: an episode of maxTurns=${environment.maxTurns} turns would need about ` +
          `${Math.round(perStep * environment.maxTurns).toLocaleString("en-US")} ms, over the limit of ${pool.limits.cpuMsPerEpisode.toLocaleString("en-US")} ms per episode ` +
          `(cpuMsPerEpisode), so a run would stop such an episode at about turn ${turns}. Make step() cheaper, or lower maxTurns`,
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "runtime",
      });
    }
    const context = options.context;
    const longestAction = longest.action;
    if (context && longestAction && longestAction.bytes + 1 > context.maxTokens) {
      diagnostics.push({
        severity: "warning",
        message:
          `the legal action ${JSON.stringify(longestAction.text)} is ${longestAction.bytes} tokens and its turn ends with one more, but agent.sampling.maxTokens is ${context.maxTokens}: ` +
          `the policy is cut off before it can finish it. Set maxTokens to at least ${longestAction.bytes + 1}`,
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "runtime",
      });
    }
    if (context && longestPrompt && longestPrompt.tokens + context.maxTokens > context.contextLength) {
      diagnostics.push({
        severity: "error",
        message:
          `the first prompt of episode seed ${longestPrompt.seed}${longestPrompt.difficulty === undefined ? "" : ` (difficulty ${longestPrompt.difficulty})`} is ${longestPrompt.tokens} tokens, and the agent writes up to ${context.maxTokens} ` +
          `(agent.sampling.maxTokens): ${longestPrompt.tokens + context.maxTokens} in all, but base '${context.base}' holds ${context.contextLength} tokens. ` +
          "Shorten the system prompt or the observation, lower maxTokens, or pick a base with a longer context",
        file: compiled.compiled.entry,
        line: null,
        column: null,
        source: "runtime",
      });
    }
  } catch (error) {
    const diagnostic = toDiagnostic(error);
    if (error instanceof SandboxLimitError && error.limit === "dryRunCpuMs" && played > 0 && error.reached !== null) {
      diagnostic.message +=
        `; it had played ${played} steps, in episode ${episodes.length + 1} of ${count}, about ${formatCount(error.reached / played)} ms each ` +
        "(validation's budget, not a run's: make the code faster, or dry-run fewer episodes)";
    }
    diagnostics.push(diagnostic);
  } finally {
    try {
      if (!pool.failure) logs = pool.drainLogs();
    } catch {
      // the logs are a convenience; the diagnostic above already says what failed
    }
    pool.dispose();
  }
  return report();
}

/** A dataset's rows by name: built in, or uploaded (its file). */
function datasetRows(name: string, files: ValidateOptions["datasetFiles"]): DatasetRow[] {
  if ((builtInDatasets as readonly string[]).includes(name)) return readBuiltInDataset(name);
  const file = files?.[name];
  if (!file) throw new Error(`no dataset named '${name}': the built-in datasets are ${builtInDatasets.join(", ")}; upload others on the Datasets page`);
  if (file.kind !== "rows") throw new Error(`'${name}' holds SFT conversations, not rows an environment can read`);
  let text: string;
  try {
    text = fs.readFileSync(file.path, "utf8");
  } catch (error) {
    // (the error names the file's place on the server)
    throw new Error(
      `the uploaded dataset '${name}' could not be read on the server (${(error as NodeJS.ErrnoException).code ?? "unknown error"}): upload it again`,
    );
  }
  return parseDataset(text, "jsonl", name);
}

/** Tokens of a first prompt in the chat template with the byte tokenizer: bos, system and user turns, the reply's role. */
function chatTokens(systemPrompt: string, observation: string): number {
  const bytes = (text: string) => Buffer.byteLength(text, "utf8");
  return 1 + (2 + bytes(systemPrompt)) + (2 + bytes(observation)) + 1;
}

function toDiagnostic(error: unknown): SandboxDiagnostic {
  if (error instanceof SandboxError) return error.toDiagnostic();
  // Not the user's code: a failure of the server's own, whose message may name its files (withoutServerPaths).
  const message = error instanceof Error ? error.message : String(error);
  return {
    severity: "error",
    message: `validation failed inside ${runtimeName}, not in your code: ${message}`,
    file: null,
    line: null,
    column: null,
    source: "runtime",
  };
}

/** The folder the server runs from (the repository), as a path and as a file: URL, without its last slash. */
const serverRoot = fileURLToPath(new URL("../../", import.meta.url)).replace(/\/$/, "");
const serverPath = new RegExp(`(?:file://)?${serverRoot.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?:/[^\\s'"()\`]*)?`, "g");

/**
 * `text` with every path into the server's installation replaced by "Tinkerlab's runtime": what validation says
 * leaves the server, and a failure of its own (a thread that would not start, a module it could not load) may name
 * its files. Applied to every diagnostic of a report and to a validation process's own errors (validate-cli.ts).
 */
export function withoutServerPaths(text: string): string {
  return text.replace(serverPath, runtimeName);
}
