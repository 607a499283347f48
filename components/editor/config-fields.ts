/**
 * The experiment config's form, read off its zod schema (lib/sdk/experiment.ts) with zod 4's introspection:
 * objects become fieldsets, numbers carry their range, enums their options, and every `.describe()` becomes help
 * text. A field added to the schema shows up in the editor without touching it.
 */
import { z } from "zod";

type Common = {
  /** Where the value sits in the config, e.g. ["algorithm", "learningRate"]. */
  path: string[];
  key: string;
  description: string | undefined;
  /** The value the schema fills in when the config leaves the field out; undefined when it has none. */
  defaultValue: unknown;
};

export type ConfigField = Common &
  (
    | { kind: "object"; fields: ConfigField[] }
    | { kind: "number"; min: number | null; max: number | null; integer: boolean }
    | { kind: "string" }
    | { kind: "boolean" }
    | { kind: "enum"; options: string[] }
    | { kind: "stringList" }
    | { kind: "enumList"; options: string[] }
    /** A discriminated union: a select for the discriminator, then the chosen option's own fields. */
    | { kind: "variant"; discriminator: string; options: { value: string; fields: ConfigField[] }[] }
    /** Anything the form has no input for; edited in the JSON view. */
    | { kind: "json" }
  );

type Schema = z.ZodType;

/** Peels defaults and optionals, keeping the outermost description and default. */
function unwrap(schema: Schema): { inner: Schema; description: string | undefined; defaultValue: unknown } {
  let inner = schema;
  let description = schema.description;
  let defaultValue: unknown;
  for (;;) {
    if (inner instanceof z.ZodDefault) {
      if (defaultValue === undefined) defaultValue = inner.def.defaultValue;
      inner = inner.unwrap() as Schema;
    } else if (inner instanceof z.ZodOptional || inner instanceof z.ZodNullable) {
      inner = inner.unwrap() as Schema;
    } else break;
    description ??= inner.description;
  }
  return { inner, description, defaultValue };
}

function objectFields(object: z.ZodObject, path: string[], skip?: string): ConfigField[] {
  return Object.entries(object.shape)
    .filter(([key]) => key !== skip)
    .map(([key, schema]) => describeField(schema as Schema, [...path, key]));
}

function describeField(schema: Schema, path: string[]): ConfigField {
  const { inner, description, defaultValue } = unwrap(schema);
  const common: Common = { path, key: path.at(-1) ?? "", description, defaultValue };
  if (inner instanceof z.ZodObject) return { ...common, kind: "object", fields: objectFields(inner, path) };
  if (inner instanceof z.ZodNumber) {
    const finite = (n: number | null) => (n !== null && Number.isFinite(n) && Math.abs(n) < Number.MAX_SAFE_INTEGER ? n : null);
    return { ...common, kind: "number", min: finite(inner.minValue), max: finite(inner.maxValue), integer: inner.isInt };
  }
  if (inner instanceof z.ZodString) return { ...common, kind: "string" };
  if (inner instanceof z.ZodBoolean) return { ...common, kind: "boolean" };
  if (inner instanceof z.ZodEnum) return { ...common, kind: "enum", options: inner.options.map(String) };
  if (inner instanceof z.ZodArray) {
    const element = unwrap(inner.element as Schema).inner;
    if (element instanceof z.ZodEnum) return { ...common, kind: "enumList", options: element.options.map(String) };
    if (element instanceof z.ZodString) return { ...common, kind: "stringList" };
  }
  if (inner instanceof z.ZodDiscriminatedUnion) {
    const discriminator = inner.def.discriminator;
    const options = (inner.options as Schema[]).flatMap((option) => {
      if (!(option instanceof z.ZodObject)) return [];
      const tag = option.shape[discriminator];
      if (!(tag instanceof z.ZodLiteral)) return [];
      return [{ value: String(tag.value), fields: objectFields(option, path, discriminator) }];
    });
    return { ...common, kind: "variant", discriminator, options };
  }
  return { ...common, kind: "json" };
}

/** The form of a whole config schema: its top-level fields. */
export function configFields(schema: z.ZodObject): ConfigField[] {
  return objectFields(schema, []);
}

/** Words the labels spell in capitals. */
const acronyms = new Set(["sft", "lr", "kl", "gae", "lora", "json", "id"]);

/** "learningRate" → "Learning rate", "klCoef" → "KL coef", "sft" → "SFT". */
export function fieldLabel(key: string): string {
  const words = key
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(" ")
    .map((word) => (acronyms.has(word) ? word.toUpperCase() : word))
    .join(" ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

export function valueAt(config: unknown, path: readonly string[]): unknown {
  let value = config;
  for (const key of path) {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

/** A copy of `config` with the value at `path` replaced (or removed when undefined, so the default applies). */
export function withValueAt(config: Record<string, unknown>, path: readonly string[], value: unknown): Record<string, unknown> {
  const [key, ...rest] = path;
  if (key === undefined) return config;
  const next = { ...config };
  if (rest.length === 0) {
    if (value === undefined) delete next[key];
    else next[key] = value;
    return next;
  }
  const child = next[key];
  const childObject = child !== null && typeof child === "object" && !Array.isArray(child) ? (child as Record<string, unknown>) : {};
  next[key] = withValueAt(childObject, rest, value);
  return next;
}

/** Every path the form draws an input for, so issues elsewhere can be listed apart. */
export function fieldPaths(fields: ConfigField[]): Set<string> {
  const paths = new Set<string>();
  const visit = (field: ConfigField) => {
    paths.add(field.path.join("."));
    if (field.kind === "object") field.fields.forEach(visit);
    if (field.kind === "variant") field.options.forEach((option) => option.fields.forEach(visit));
  };
  fields.forEach(visit);
  return paths;
}
