"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc/provider";

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });

type Shape = { parameters: number; contextLength: number } | null;
const describeShape = (shape: Shape) => (shape ? `${compact.format(shape.parameters)} params · context ${shape.contextLength}` : "folder missing");

/**
 * The agent's base: a built-in base, an imported Hugging Face model (`tinkerlab bases import`) or any run's checkpoint, each with its size, context length and what made it.
 * A name the list does not hold (typed in the JSON view) stays selectable, so nothing is changed behind the user.
 */
export function BasePicker({ id, invalid, value, onChange }: { id: string; invalid: boolean; value: string; onChange(value: string): void }) {
  const trpc = useTRPC();
  const bases = useQuery(trpc.checkpoints.bases.queryOptions());
  const builtin = bases.data?.builtin ?? [];
  const fromRuns = bases.data?.checkpoints ?? [];
  const known = builtin.some((b) => b.name === value) || fromRuns.some((c) => c.id === value);
  const chosenBuiltin = builtin.find((b) => b.name === value);
  const chosenCheckpoint = fromRuns.find((c) => c.id === value);
  return (
    <div className="space-y-1">
      <select
        id={id}
        aria-invalid={invalid}
        className="block w-full rounded-md border border-slate-300 bg-white px-2.5 py-1.5 text-sm focus:border-brand-500 focus:outline-none aria-[invalid=true]:border-red-400"
        value={value}
        onChange={(event) => onChange(event.target.value)}
      >
        {!known && <option value={value}>{value === "" ? "— choose a base —" : `${value} (not found)`}</option>}
        {[
          { label: "Built-in bases", items: builtin.filter((b) => !b.imported) },
          { label: "Imported models", items: builtin.filter((b) => b.imported) },
        ].map(
          (group) =>
            group.items.length > 0 && (
              <optgroup key={group.label} label={group.label}>
                {group.items.map((b) => (
                  <option key={b.name} value={b.name}>
                    {`${b.name} · ${describeShape(b.shape)}`}
                  </option>
                ))}
              </optgroup>
            ),
        )}
        {fromRuns.length > 0 && (
          <optgroup label="Checkpoints of runs">
            {fromRuns.map((c) => (
              <option key={c.id} value={c.id}>
                {`${c.runName} · step ${c.step}${c.kind === "sampler" ? " · weights" : ""} · ${describeShape(c.shape)}${c.mode === "lora" ? " · LoRA" : ""}`}
              </option>
            ))}
          </optgroup>
        )}
      </select>
      <p className="text-xs text-slate-500" data-testid="base-origin">
        {chosenBuiltin?.origin}
        {chosenCheckpoint &&
          `${chosenCheckpoint.id}: run ${chosenCheckpoint.runName} (${chosenCheckpoint.experimentName}) at step ${chosenCheckpoint.step}, trained from ${chosenCheckpoint.parentBase ?? "?"}`}
        {bases.error && `Could not list the bases: ${bases.error.message}`}
      </p>
    </div>
  );
}
