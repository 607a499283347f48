import { z } from "zod";

/**
 * Turns a zod error into one line per problem: the field's dotted path, what was given and what is accepted.
 * Used by every user-facing config (agent, experiment), so the editor and the API say the same thing.
 */
export function describeConfigError(error: z.ZodError, input: unknown): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.length ? pathText(issue.path) : "(config)";
      // A record's key that its key schema refused: that schema's own message, and the key itself.
      if (issue.code === "invalid_key") return `${path}: ${issue.issues[0]?.message ?? issue.message} (the key)`;
      const given = valueAt(input, issue.path);
      const shown = given === undefined ? "missing" : `got ${JSON.stringify(given)}`;
      return `${path}: ${issue.message} (${shown})`;
    })
    .join("\n");
}

/** A field's path as code would write it: `algorithm.steps`, `batch.tokens.0`, `files["../etc/passwd"]`. */
function pathText(path: readonly PropertyKey[]): string {
  return path
    .map((key, i) => {
      const text = String(key);
      if (typeof key === "number" || /^[A-Za-z_$][\w$]*$/.test(text)) return i === 0 ? text : `.${text}`;
      return `[${JSON.stringify(text)}]`;
    })
    .join("");
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const key of path) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** A number field with an inclusive range whose error message states the range. */
export function rangeMessage(min: number, max: number, integer = false) {
  return `must be ${integer ? "a whole number" : "a number"} from ${min} to ${max}`;
}

/** A number field from min to max whose every error states the range. */
export const rangedNumber = (min: number, max: number) => z.number(rangeMessage(min, max)).min(min, rangeMessage(min, max)).max(max, rangeMessage(min, max));

/** A whole-number field from min to max whose every error states the range. */
export const rangedInt = (min: number, max: number) =>
  z
    .number(rangeMessage(min, max, true))
    .int(rangeMessage(min, max, true))
    .min(min, rangeMessage(min, max, true))
    .max(max, rangeMessage(min, max, true));
