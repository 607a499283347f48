"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/provider";

export interface ChatPrompt {
  system: string;
  user: string;
}

/** The observations of a run's latest rollouts, each once, as prompts (with the system prompt the run used). */
function useRunObservations(runId: string | null) {
  const trpc = useTRPC();
  const rollouts = useQuery({ ...trpc.runs.rollouts.queryOptions({ runId: runId ?? "" }), enabled: runId !== null, retry: false });
  const seen = new Set<string>();
  const observations: { label: string; prompt: ChatPrompt }[] = [];
  for (const item of rollouts.data?.items ?? []) {
    item.turns.forEach((turn, t) => {
      const key = `${item.prompt}\u0000${turn.observation}`;
      if (seen.has(key)) return;
      seen.add(key);
      const where = `group ${item.groupIndex}, sample ${item.sampleIndex}${item.turns.length > 1 ? `, turn ${t + 1}` : ""}`;
      observations.push({ label: `${where}: ${turn.observation.replace(/\s+/g, " ").slice(0, 70)}`, prompt: { system: item.prompt, user: turn.observation } });
    });
  }
  return { observations, step: rollouts.data?.step ?? null, isLoading: rollouts.isLoading, error: rollouts.error };
}

const fieldClass = "mt-1 block w-full rounded-md border border-slate-300 px-2 py-1.5 font-mono text-sm";

/** A system prompt and a user message, typed or taken from one of the run's observations. */
export function PromptEditor({
  value,
  onChange,
  runId,
  promptTokens,
  promptError,
  contextLength,
  onServer = false,
}: {
  value: ChatPrompt;
  onChange(prompt: ChatPrompt): void;
  runId: string | null;
  /** the prompt's length in the model's chat template; null until the model (and its tokenizer) is loaded */
  promptTokens: number | null;
  /** why the prompt cannot be rendered in the model's chat template */
  promptError: string | null;
  contextLength: number | null;
  /** the prompt goes to the server, which counts its tokens (the model is not loaded here to count them) */
  onServer?: boolean;
}) {
  const run = useRunObservations(runId);
  const tooLong = contextLength !== null && promptTokens !== null && promptTokens > contextLength;
  return (
    <fieldset className="space-y-3">
      <legend className="text-sm font-medium text-slate-700">Prompt</legend>
      {runId !== null && (
        <div>
          <label className="block text-sm">
            <span className="text-slate-600">Observation from run {runId}</span>
            <select
              value=""
              onChange={(event) => {
                const picked = run.observations[Number(event.target.value)];
                if (picked) onChange(picked.prompt);
              }}
              disabled={run.observations.length === 0}
              className="mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
            >
              <option value="">
                {run.isLoading
                  ? "Loading the run's rollouts…"
                  : run.error
                    ? `Cannot read the run's rollouts: ${run.error.message}`
                    : run.observations.length === 0
                      ? "The run has no rollouts yet"
                      : `Pick one of ${run.observations.length} from step ${run.step}…`}
              </option>
              {run.observations.map((observation, i) => (
                <option key={i} value={i}>
                  {observation.label}
                </option>
              ))}
            </select>
          </label>
          <p className="mt-1 text-xs text-slate-500">The run's system prompt comes with it; earlier turns of a conversation do not.</p>
        </div>
      )}
      <label className="block text-sm">
        <span className="text-slate-600">System</span>
        <textarea rows={2} value={value.system} onChange={(event) => onChange({ ...value, system: event.target.value })} className={fieldClass} />
      </label>
      <label className="block text-sm">
        <span className="text-slate-600">User</span>
        <textarea rows={4} value={value.user} onChange={(event) => onChange({ ...value, user: event.target.value })} className={fieldClass} />
      </label>
      {promptError ? (
        <p role="alert" className="text-xs text-red-700">
          {promptError}
        </p>
      ) : onServer ? (
        <p className="text-xs text-slate-500">The server renders the prompt in the model's chat template and counts its tokens.</p>
      ) : promptTokens === null ? (
        <p className="text-xs text-slate-500">Prompt tokens are counted in the model's chat template once it is loaded.</p>
      ) : (
        <p className={`text-xs ${tooLong ? "text-red-700" : "text-slate-500"}`}>
          {promptTokens} prompt tokens in the chat template
          {contextLength !== null && ` of the model's ${contextLength}`}
          {tooLong && ": too long for this model"}
        </p>
      )}
    </fieldset>
  );
}
