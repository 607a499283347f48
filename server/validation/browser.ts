/**
 * What may not be launched, decided in one place for every client: the experiment editor disables its Launch button
 * with it, and `runs.launch` refuses with it (server/api/routers/runs.ts), in the same words, so that a script, the
 * CLI or another page cannot launch what the editor refuses. It reads the config, the source files and the last
 * validation's report (experiments.validate); it has no Node.js in it, because the editor runs it in the browser.
 */
import { experimentSchema, imitates, LEARNER_BOTH_SEATS } from "@/lib/sdk/experiment";

/** The file a custom environment's run loads (server/worker/run-job.ts). */
export const CUSTOM_ENTRY = "environment.ts";

/** What the check reads of a validation's report (server/sandbox/validate.ts `ValidationReport`). */
export type SourceReport = {
  diagnostics: readonly { severity: "error" | "warning" | "info"; message: string; file: string | null; line: number | null; column: number | null }[];
  environment: { hasDemonstrator: boolean } | null;
};

export type LaunchContext = {
  /** The experiment's source files. */
  files: Readonly<Record<string, string>>;
  /** The last validation of those files, or null when there is none yet (the editor, while it validates). */
  report: SourceReport | null;
  /** The built-in environments' names; unknown, the environment's name is not checked. */
  builtInEnvironments?: readonly string[];
};

/**
 * The config's problems by dotted path ("" for the whole config): the schema's, and what the schema cannot know
 * (a built-in environment that does not exist, a custom one without its file, a demonstrator the environment does
 * not define). The editor shows each under its field.
 */
export function configIssues(config: unknown, { files, report, builtInEnvironments }: LaunchContext): Map<string, string[]> {
  const issues = new Map<string, string[]>();
  const add = (path: string, message: string) => issues.set(path, [...(issues.get(path) ?? []), message]);
  const parsed = experimentSchema.safeParse(config);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) add(issue.path.map(String).join("."), issue.message);
    return issues;
  }
  const { environment, protocol, algorithm } = parsed.data;
  // Fields that depend on each other across the config (the schema checks each part alone): what the worker
  // would refuse at the run's start (server/worker/job-setup.ts, lib/rl/league-training.ts) is refused here first.
  if (algorithm.league) {
    if (protocol.agents.length !== 2) {
      add(
        "algorithm.league",
        `a league needs a game of two agents (protocol.agents); got ${protocol.agents.length} (${protocol.agents.join(", ")}): set algorithm.league to null, or name two agents`,
      );
    } else if (algorithm.league.learner !== LEARNER_BOTH_SEATS && !protocol.agents.includes(algorithm.league.learner)) {
      add(
        "algorithm.league.learner",
        `'${algorithm.league.learner}' is not an agent of the protocol; accepted: ${[...protocol.agents, LEARNER_BOTH_SEATS].join(", ")}`,
      );
    }
    if (protocol.policies === "separate") {
      add("algorithm.league", 'a league trains one policy against its past selves: use protocol.policies "shared", or set algorithm.league to null');
    }
  }
  if (protocol.policies === "separate" && imitates(parsed.data) === "dataset") {
    add(
      "protocol.policies",
      `separate policies imitate each agent's own demonstrations, and an uploaded dataset's conversations name no agent: set sft.data to "demonstrator", sft.steps to 0, or protocol.policies "shared"`,
    );
  }
  if (environment === "custom") {
    if (!(CUSTOM_ENTRY in files)) {
      add(
        "environment",
        Object.keys(files).length === 0
          ? `'custom' runs the experiment's own ${CUSTOM_ENTRY}, and the experiment has no source files: write a custom environment, or name a built-in one`
          : `'custom' runs the experiment's own ${CUSTOM_ENTRY}, and there is no file of that name among ${Object.keys(files).join(", ")}`,
      );
    }
    if (report?.environment && !report.environment.hasDemonstrator && imitates(parsed.data) === "demonstrator") {
      add(
        "sft.data",
        "the run takes SFT steps on the environment's demonstrator, but environment.ts defines no demonstrate(state): add one, set sft.steps to 0 (and, to learn from the reward alone, algorithm.klCoef to 0 and algorithm.entropyCoef to 0.01: explore, not stay near the base), or imitate an uploaded dataset",
      );
    }
  } else if (builtInEnvironments && !builtInEnvironments.includes(environment)) {
    add(
      "environment",
      `no built-in environment '${environment}'; the built-in ones are ${builtInEnvironments.join(", ")}, or 'custom' for the experiment's own ${CUSTOM_ENTRY}`,
    );
  }
  return issues;
}

/** The errors of the source that the run would load: only a custom environment's (a built-in one runs no source). */
export function sourceErrors(config: unknown, report: SourceReport | null): SourceReport["diagnostics"] {
  const custom = typeof config === "object" && config !== null && (config as { environment?: unknown }).environment === "custom";
  return custom && report ? report.diagnostics.filter((d) => d.severity === "error") : [];
}

/** A diagnostic as the editor's Validation panel shows it: `file:line:column: message`. */
export function formatDiagnostic(d: SourceReport["diagnostics"][number]): string {
  const where = d.file ? `${d.file}${d.line !== null ? `:${d.line}${d.column !== null ? `:${d.column}` : ""}` : ""}: ` : "";
  return `${where}${d.message}`;
}

export type LaunchRefusal = {
  /** Why, in a few words: what the editor's Launch button says ("Fix first: …"). */
  reason: string;
  /** Each problem in one line: the config's as `path: message`, the source's as `file:line:column: message`. */
  problems: string[];
};

const count = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`;

/** Why the experiment may not be launched as it is, or null when it may. */
export function launchRefusal(config: unknown, context: LaunchContext): LaunchRefusal | null {
  const issues = configIssues(config, context);
  const errors = sourceErrors(config, context.report);
  if (issues.size === 0 && errors.length === 0) return null;
  const reason =
    issues.size > 0 && errors.length > 0
      ? `the config has ${count(issues.size, "error")} and the source ${errors.length}`
      : issues.size > 0
        ? `the config has ${count(issues.size, "error")}`
        : `the source has ${count(errors.length, "error")}`;
  const problems = [...[...issues].flatMap(([path, messages]) => messages.map((m) => `${path || "config"}: ${m}`)), ...errors.map(formatDiagnostic)];
  return { reason, problems };
}

/** The refusal as `runs.launch` words it: the reason on the first line, then one line per problem. */
export function refusalMessage(refusal: LaunchRefusal): string {
  return [`Fix first: ${refusal.reason}; nothing was launched`, ...refusal.problems].join("\n");
}
