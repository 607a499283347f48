"use client";

import { useId, useState } from "react";
import { BasePicker } from "./base-picker";
import { type ConfigField, fieldLabel, valueAt } from "./config-fields";

type Config = Record<string, unknown>;
type FieldProps = {
  field: ConfigField;
  config: Config;
  issues: Map<string, string[]>;
  onChange(path: string[], value: unknown): void;
};

const inputClass =
  "block w-full rounded-md border border-slate-300 bg-white px-2.5 py-1.5 text-sm focus:border-brand-500 focus:outline-none aria-[invalid=true]:border-red-400 aria-[invalid=true]:bg-red-50/40";

const numberFormat = new Intl.NumberFormat("en-US", { maximumSignificantDigits: 6 });
const formatNumber = (n: number) => (Math.abs(n) > 0 && Math.abs(n) < 1e-3 ? n.toExponential() : numberFormat.format(n));

/** The form for an experiment config, one input per schema field; edits go to `onChange(path, value)`. */
export function ConfigForm({
  fields,
  config,
  issues,
  onChange,
}: {
  fields: ConfigField[];
  config: Config;
  issues: Map<string, string[]>;
  onChange: FieldProps["onChange"];
}) {
  const leaves = fields.filter((f) => f.kind !== "object");
  const groups = fields.filter((f) => f.kind === "object");
  return (
    <div className="space-y-5">
      <div className="grid gap-x-5 gap-y-4 sm:grid-cols-2">
        {leaves.map((field) => (
          <Field key={field.path.join(".")} field={field} config={config} issues={issues} onChange={onChange} />
        ))}
      </div>
      {groups.map((field) => (
        <Field key={field.path.join(".")} field={field} config={config} issues={issues} onChange={onChange} />
      ))}
    </div>
  );
}

function Field(props: FieldProps) {
  const { field, config, issues, onChange } = props;
  if (field.kind === "object") {
    const leaves = field.fields.filter((f) => f.kind !== "object" && f.kind !== "variant");
    const nested = field.fields.filter((f) => f.kind === "object" || f.kind === "variant");
    return (
      <fieldset className="rounded-lg border border-slate-200 px-4 pb-4 pt-1">
        <legend className="px-1.5 text-sm font-semibold text-slate-800">
          {fieldLabel(field.key)}
          {field.description && <span className="ml-2 font-normal text-slate-500">{field.description}</span>}
        </legend>
        <Messages messages={issues.get(field.path.join("."))} />
        <div className="mt-2 grid gap-x-5 gap-y-4 sm:grid-cols-2">
          {leaves.map((child) => (
            <Field key={child.path.join(".")} {...props} field={child} />
          ))}
        </div>
        {nested.length > 0 && (
          <div className="mt-4 space-y-4">
            {nested.map((child) => (
              <Field key={child.path.join(".")} {...props} field={child} />
            ))}
          </div>
        )}
      </fieldset>
    );
  }
  if (field.kind === "variant") {
    const current = valueAt(config, field.path);
    const currentTag = String(valueAt(current, [field.discriminator]) ?? valueAt(field.defaultValue, [field.discriminator]) ?? "");
    const option = field.options.find((o) => o.value === currentTag);
    return (
      <fieldset className="rounded-lg border border-slate-200 px-4 pb-4 pt-1">
        <legend className="px-1.5 text-sm font-semibold text-slate-800">
          {fieldLabel(field.key)}
          {field.description && <span className="ml-2 font-normal text-slate-500">{field.description}</span>}
        </legend>
        <div className="mt-2 grid gap-x-5 gap-y-4 sm:grid-cols-2">
          <Labeled field={{ ...field, key: field.discriminator, description: undefined }} issues={issues.get([...field.path, field.discriminator].join("."))}>
            {(id, invalid) => (
              <select
                id={id}
                aria-invalid={invalid}
                className={inputClass}
                value={currentTag}
                // Another mode has other fields: start it from its defaults rather than carry the old ones over.
                onChange={(event) => onChange(field.path, { [field.discriminator]: event.target.value })}
              >
                {field.options.map((o) => (
                  <option key={o.value} value={o.value}>
                    {o.value}
                  </option>
                ))}
              </select>
            )}
          </Labeled>
          {option?.fields.map((child) => (
            <Field key={child.path.join(".")} {...props} field={child} />
          ))}
        </div>
      </fieldset>
    );
  }
  return <LeafField {...props} />;
}

function LeafField({ field, config, issues, onChange }: FieldProps) {
  const given = valueAt(config, field.path);
  const value = given ?? field.defaultValue;
  const messages = issues.get(field.path.join("."));
  const set = (next: unknown) => onChange(field.path, next);
  return (
    <Labeled field={field} issues={messages} isDefault={given === undefined && field.defaultValue !== undefined}>
      {(id, invalid) => {
        switch (field.kind) {
          case "number":
            return <NumberInput id={id} invalid={invalid} value={typeof value === "number" ? value : undefined} field={field} onChange={set} />;
          case "boolean":
            return (
              <input id={id} type="checkbox" className="size-4 accent-brand-600" checked={value === true} onChange={(event) => set(event.target.checked)} />
            );
          case "enum":
            return (
              <select
                id={id}
                aria-invalid={invalid}
                className={inputClass}
                value={typeof value === "string" ? value : ""}
                onChange={(event) => set(event.target.value || undefined)}
              >
                {value === undefined && <option value="">—</option>}
                {field.options.map((o) => (
                  <option key={o} value={o}>
                    {o}
                  </option>
                ))}
              </select>
            );
          case "enumList": {
            const chosen = Array.isArray(value) ? (value as string[]) : [];
            return (
              <fieldset id={id} aria-label={fieldLabel(field.key)} className="flex min-w-0 flex-wrap gap-x-4 gap-y-1 pt-1">
                {field.options.map((o) => (
                  <label key={o} className="inline-flex items-center gap-1.5 font-mono text-xs text-slate-700">
                    <input
                      type="checkbox"
                      className="size-3.5 accent-brand-600"
                      checked={chosen.includes(o)}
                      onChange={(event) => set(event.target.checked ? [...chosen, o] : chosen.filter((c) => c !== o))}
                    />
                    {o}
                  </label>
                ))}
              </fieldset>
            );
          }
          case "stringList":
            return <ListInput id={id} invalid={invalid} value={Array.isArray(value) ? (value as string[]) : []} onChange={set} />;
          case "string":
            if (field.path.join(".") === "agent.base")
              return <BasePicker id={id} invalid={invalid} value={typeof value === "string" ? value : ""} onChange={set} />;
            return (
              <input
                id={id}
                aria-invalid={invalid}
                className={inputClass}
                value={typeof value === "string" ? value : ""}
                onChange={(event) => set(event.target.value === "" && field.defaultValue !== undefined ? undefined : event.target.value)}
              />
            );
          default:
            return <p className="text-xs text-slate-500">Edit this field in the JSON view.</p>;
        }
      }}
    </Labeled>
  );
}

function Labeled({
  field,
  issues,
  isDefault = false,
  children,
}: {
  field: ConfigField;
  issues: string[] | undefined;
  isDefault?: boolean;
  children(id: string, invalid: boolean): React.ReactNode;
}) {
  const id = useId();
  const invalid = Boolean(issues?.length);
  const range = field.kind === "number" ? rangeHint(field) : null;
  const inline = field.kind === "boolean";
  return (
    <div className={inline ? "flex items-start gap-2 pt-5" : ""} data-field={field.path.join(".")}>
      {inline && children(id, invalid)}
      <div className="min-w-0 flex-1">
        <label htmlFor={id} className="flex items-baseline justify-between gap-2 text-sm font-medium text-slate-700">
          <span title={field.path.join(".")}>{fieldLabel(field.key)}</span>
          <span className="shrink-0 text-xs font-normal text-slate-400">
            {range}
            {range && isDefault && " · "}
            {isDefault && "default"}
          </span>
        </label>
        {!inline && <div className="mt-1">{children(id, invalid)}</div>}
        {field.description && <p className="mt-1 text-xs text-slate-500">{field.description}</p>}
        <Messages messages={issues} />
      </div>
    </div>
  );
}

function Messages({ messages }: { messages: string[] | undefined }) {
  if (!messages?.length) return null;
  return (
    <p role="alert" className="mt-1 text-xs text-red-600">
      {messages.join("; ")}
    </p>
  );
}

function rangeHint(field: Extract<ConfigField, { kind: "number" }>): string | null {
  const kind = field.integer ? "whole number" : null;
  if (field.min !== null && field.max !== null) return `${formatNumber(field.min)} – ${formatNumber(field.max)}${kind ? `, ${kind}` : ""}`;
  if (field.min !== null) return `≥ ${formatNumber(field.min)}`;
  if (field.max !== null) return `≤ ${formatNumber(field.max)}`;
  return kind;
}

/** A number input with the schema's range; a half-typed number ("1e-") is left alone until it reads as one. */
function NumberInput({
  id,
  invalid,
  value,
  field,
  onChange,
}: {
  id: string;
  invalid: boolean;
  value: number | undefined;
  field: Extract<ConfigField, { kind: "number" }>;
  onChange(value: number | undefined): void;
}) {
  const [draft, setDraft] = useState<string | null>(null);
  const [unreadable, setUnreadable] = useState(false);
  return (
    <>
      <input
        id={id}
        type="number"
        step={field.integer ? 1 : "any"}
        min={field.min ?? undefined}
        max={field.max ?? undefined}
        aria-invalid={invalid || unreadable}
        className={`${inputClass} font-mono tabular-nums`}
        value={draft ?? (value === undefined ? "" : String(value))}
        placeholder={field.defaultValue === undefined ? "" : String(field.defaultValue)}
        onChange={(event) => {
          const input = event.target;
          setDraft(input.value);
          setUnreadable(input.validity.badInput);
          if (input.validity.badInput) return;
          if (input.value.trim() === "") onChange(undefined);
          else if (Number.isFinite(input.valueAsNumber)) onChange(input.valueAsNumber);
        }}
        onBlur={() => setDraft(null)}
      />
      {unreadable && <p className="mt-1 text-xs text-red-600">not a number</p>}
    </>
  );
}

/** A list of names as one comma-separated input. */
function ListInput({ id, invalid, value, onChange }: { id: string; invalid: boolean; value: string[]; onChange(value: string[]): void }) {
  const [draft, setDraft] = useState<string | null>(null);
  return (
    <input
      id={id}
      aria-invalid={invalid}
      className={`${inputClass} font-mono`}
      value={draft ?? value.join(", ")}
      onChange={(event) => {
        setDraft(event.target.value);
        onChange(
          event.target.value
            .split(",")
            .map((s) => s.trim())
            .filter(Boolean),
        );
      }}
      onBlur={() => setDraft(null)}
    />
  );
}
