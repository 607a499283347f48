"use client";

import type { SamplingSettings } from "./protocol";

export type SamplingForm = Omit<SamplingSettings, "stop">;

export const defaultSampling: SamplingForm = { temperature: 0.7, topK: 0, topP: 1, maxTokens: 64 };

/** The form's values brought into the ranges the sampler accepts (a field may hold anything while being typed in). */
export function samplingSettings(form: SamplingForm, stop: number[]): SamplingSettings {
  const clamp = (x: number, low: number, high: number) => Math.min(high, Math.max(low, x));
  return {
    temperature: clamp(form.temperature, 0, 5),
    topK: Math.max(0, Math.round(form.topK)),
    topP: clamp(form.topP, 0.01, 1),
    maxTokens: Math.max(1, Math.round(form.maxTokens)),
    stop,
    ...(form.seed === undefined ? {} : { seed: Math.max(0, Math.round(form.seed)) }),
  };
}

function NumberField({
  label,
  hint,
  value,
  min,
  max,
  step,
  onChange,
}: {
  label: string;
  hint: string;
  value: number | undefined;
  min: number;
  max?: number;
  /** the granularity of the field; "any" for a real number */
  step: number | "any";
  onChange(value: number | undefined): void;
}) {
  return (
    <label className="block text-sm">
      <span className="text-slate-600">{label}</span>
      <input
        type="number"
        value={value ?? ""}
        min={min}
        max={max}
        step={step}
        onChange={(event) => {
          const parsed = event.target.value === "" ? undefined : Number(event.target.value);
          onChange(parsed === undefined || Number.isNaN(parsed) ? undefined : parsed);
        }}
        className="mt-1 block w-full rounded-md border border-slate-300 px-2 py-1 text-sm tabular-nums"
      />
      <span className="mt-0.5 block text-xs text-slate-500">{hint}</span>
    </label>
  );
}

/** Temperature, top-k, top-p, max tokens and an optional seed, read as the server's sampler reads them. */
/** `contextRoom`: how many tokens fit after the prompt (generation stops there whatever the maximum, as on the server). */
export function SamplingControls({ value, onChange, contextRoom }: { value: SamplingForm; onChange(value: SamplingForm): void; contextRoom: number | null }) {
  return (
    <fieldset className="grid grid-cols-2 gap-3">
      <legend className="col-span-2 mb-1 text-sm font-medium text-slate-700">Sampling</legend>
      <NumberField
        label="Temperature"
        hint="0 takes the most likely token"
        value={value.temperature}
        min={0}
        max={5}
        step="any"
        onChange={(temperature) => onChange({ ...value, temperature: temperature ?? 0 })}
      />
      <NumberField label="Top-k" hint="0 keeps every token" value={value.topK} min={0} step={1} onChange={(topK) => onChange({ ...value, topK: topK ?? 0 })} />
      <NumberField
        label="Top-p"
        hint="smallest set reaching this mass"
        value={value.topP}
        min={0.01}
        max={1}
        step="any"
        onChange={(topP) => onChange({ ...value, topP: topP ?? 1 })}
      />
      <NumberField
        label="Max tokens"
        hint={contextRoom !== null ? `the context has room for ${contextRoom}` : "new tokens at most"}
        value={value.maxTokens}
        min={1}
        step={1}
        onChange={(tokens) => onChange({ ...value, maxTokens: tokens ?? 1 })}
      />
      <NumberField label="Seed" hint="empty: new draws each time" value={value.seed} min={0} step={1} onChange={(seed) => onChange({ ...value, seed })} />
    </fieldset>
  );
}
