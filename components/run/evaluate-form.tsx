"use client";

import { type FormEvent, useState } from "react";
import { Button } from "@/components/ui/button";
import { EVALUATION_LIMITS } from "@/lib/trpc/limits";

export type EvaluationSettings = { episodes: number; temperature: number };

/**
 * What an evaluation of one checkpoint plays, asked before it starts: its held-out episodes and sampling temperature,
 * from the run's own evaluation settings, within what `runs.evaluate` accepts (EVALUATION_LIMITS).
 */
export function EvaluateForm({
  step,
  defaults,
  pending,
  onStart,
  onCancel,
}: {
  step: number;
  defaults: EvaluationSettings;
  pending: boolean;
  onStart(settings: EvaluationSettings): void;
  onCancel(): void;
}) {
  const [episodes, setEpisodes] = useState(String(defaults.episodes));
  const [temperature, setTemperature] = useState(String(defaults.temperature));
  const episodesError = problemWith(episodes, 1, EVALUATION_LIMITS.episodes, true);
  const temperatureError = problemWith(temperature, 0, EVALUATION_LIMITS.temperature, false);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (episodesError || temperatureError) return;
    onStart({ episodes: Number(episodes), temperature: Number(temperature) });
  };
  const input = "w-24 rounded-md border border-slate-300 px-2 py-1 text-xs tabular-nums focus:border-brand-500 focus:outline-none aria-invalid:border-red-400";
  return (
    <form aria-label={`Evaluate step ${step}`} onSubmit={submit} className="my-1 space-y-2 rounded-md border border-slate-200 bg-slate-50 px-3 py-2">
      <p className="text-slate-600">Play this run's held-out episodes with the policy of step {step}, as a run of its own.</p>
      <div className="flex flex-wrap items-start gap-4">
        <label className="space-y-0.5">
          <span className="block font-medium text-slate-700">Episodes</span>
          <input
            type="number"
            inputMode="numeric"
            min={1}
            max={EVALUATION_LIMITS.episodes}
            step={1}
            value={episodes}
            onChange={(event) => setEpisodes(event.target.value)}
            aria-invalid={episodesError !== null}
            className={input}
          />
          <span className={`block ${episodesError ? "text-red-700" : "text-slate-500"}`}>
            {episodesError ?? `1 – ${EVALUATION_LIMITS.episodes.toLocaleString("en-US")}; the run's: ${defaults.episodes}`}
          </span>
        </label>
        <label className="space-y-0.5">
          <span className="block font-medium text-slate-700">Temperature</span>
          <input
            type="number"
            inputMode="decimal"
            min={0}
            max={EVALUATION_LIMITS.temperature}
            step="any"
            value={temperature}
            onChange={(event) => setTemperature(event.target.value)}
            aria-invalid={temperatureError !== null}
            className={input}
          />
          <span className={`block ${temperatureError ? "text-red-700" : "text-slate-500"}`}>
            {temperatureError ?? `0 (greedy) – ${EVALUATION_LIMITS.temperature}; the run's: ${defaults.temperature}`}
          </span>
        </label>
      </div>
      <div className="flex gap-2">
        <Button type="submit" className="px-2 py-1 text-xs" disabled={pending || episodesError !== null || temperatureError !== null}>
          {pending ? "Starting…" : "Start evaluation"}
        </Button>
        <Button variant="ghost" className="px-2 py-1 text-xs" onClick={onCancel}>
          Cancel
        </Button>
      </div>
    </form>
  );
}

/** What is wrong with a typed number, saying what is accepted; null when it is fine. */
function problemWith(text: string, min: number, max: number, whole: boolean): string | null {
  const value = Number(text);
  const accepted = `${whole ? "a whole number" : "a number"} from ${min} to ${max.toLocaleString("en-US")}`;
  if (text.trim() === "" || !Number.isFinite(value)) return `Enter ${accepted}`;
  if ((whole && !Number.isInteger(value)) || value < min || value > max) return `${text} is not ${accepted}`;
  return null;
}
