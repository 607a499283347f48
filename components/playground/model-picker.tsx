"use client";

import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/api";

export type BaseCatalog = inferRouterOutputs<AppRouter>["checkpoints"]["bases"];

const parameters = (shape: { parameters: number } | null) => (shape ? ` · ${(shape.parameters / 1e6).toFixed(2)}M params` : "");

/**
 * The built-in bases, the bases imported from Hugging Face, and the caller's checkpoints; a name from the link that is
 * none of them is kept as its own entry.
 */
export function ModelPicker({
  catalog,
  error,
  value,
  onChange,
}: {
  catalog: BaseCatalog | undefined;
  error: string | null;
  value: string;
  onChange(name: string): void;
}) {
  const builtin = catalog?.builtin.filter((base) => !base.imported) ?? [];
  const imported = catalog?.builtin.filter((base) => base.imported) ?? [];
  const known = new Set([...(catalog?.builtin.map((base) => base.name) ?? []), ...(catalog?.checkpoints.map((checkpoint) => checkpoint.id) ?? [])]);
  return (
    <label className="block text-sm">
      <span className="font-medium text-slate-700">Model</span>
      <select
        value={value}
        onChange={(event) => onChange(event.target.value)}
        className="mt-1 block w-full rounded-md border border-slate-300 bg-white px-2 py-1.5 text-sm"
      >
        {value !== "" && !known.has(value) && <option value={value}>{value}</option>}
        {[["Built-in bases", builtin] as const, ["Imported models", imported] as const].map(
          ([group, bases]) =>
            bases.length > 0 && (
              <optgroup key={group} label={group}>
                {bases.map((base) => (
                  <option key={base.name} value={base.name} title={base.origin}>
                    {base.name}
                    {parameters(base.shape)}
                  </option>
                ))}
              </optgroup>
            ),
        )}
        {catalog && catalog.checkpoints.length > 0 && (
          <optgroup label="Checkpoints of your runs">
            {catalog.checkpoints.map((checkpoint) => (
              <option key={checkpoint.id} value={checkpoint.id}>
                {checkpoint.experimentName} / {checkpoint.runName} · step {checkpoint.step}
                {checkpoint.kind === "sampler" ? " · weights" : ""}
                {checkpoint.mode === "lora" ? " (LoRA, merged)" : ""}
              </option>
            ))}
          </optgroup>
        )}
      </select>
      {error && (
        <span role="alert" className="mt-1 block text-xs text-red-700">
          Cannot list the models: {error}
        </span>
      )}
    </label>
  );
}
