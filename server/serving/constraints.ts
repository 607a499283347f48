/**
 * Constrained output: a request's `response_format` (json_object, json_schema) or its extension fields
 * `guided_regex` and `guided_choice` (the names vLLM gives them), as a legal-action constraint: the same byte
 * automaton that holds a policy to its environment's legal actions (lib/sdk/action-space.ts) holds the reply to
 * the format. A JSON schema becomes a pattern of that automaton's syntax, compact JSON (no whitespace), every
 * property the schema lists written in its order (as OpenAI's strict structured outputs require of a schema).
 */
import { type ActionConstraint, automatonFor } from "@/lib/sdk/action-space";

/** A constraint that cannot be compiled: its words say what was given and what is accepted. */
export class ConstraintError extends Error {
  constructor(
    message: string,
    readonly param: string,
  ) {
    super(message);
  }
}

/** Numbers are held to this many digits before and after the point, so a reply cannot write digits forever. */
const MAX_DIGITS = 15;
const SPECIAL = /[\\.^$|?*+()[\]{}\-/]/g;
const literal = (text: string) => text.replace(SPECIAL, (c) => `\\${c}`);

/** A JSON string's character: printable ASCII but the quote and backslash, or an escape. */
const STRING_CHAR = '([ !#-\\[\\]-~]|\\\\["\\\\/bfnrt])';
const STRING = `"${STRING_CHAR}*"`;
const INTEGER = `-?(0|[1-9]\\d{0,${MAX_DIGITS - 1}})`;
const NUMBER = `${INTEGER}(\\.\\d{1,${MAX_DIGITS}})?`;
const SCALAR = `(${STRING}|${NUMBER}|true|false|null)`;
const FLAT = `(${SCALAR}|\\[(${SCALAR}(,${SCALAR})*)?\\])`;
/**
 * json_object: an object whose values are scalars or lists of scalars. One level: the automaton takes patterns of
 * at most 1,000 characters, and a second level of objects writes every value's pattern out twice more.
 */
const ANY_OBJECT = `\\{(${STRING}:${FLAT}(,${STRING}:${FLAT})*)?\\}`;

const UNSUPPORTED = ["$ref", "$defs", "definitions", "allOf", "not", "if", "then", "else", "patternProperties", "dependentSchemas", "pattern", "format"];

/** A JSON schema as a pattern; refuses what it cannot hold (recursion, pattern keywords). */
export function schemaPattern(schema: unknown, where = "schema"): string {
  if (schema === true || (typeof schema === "object" && schema !== null && Object.keys(schema).length === 0)) return FLAT;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema))
    throw new ConstraintError(`${where} must be a JSON schema object`, "response_format");
  const s = schema as Record<string, unknown>;
  for (const keyword of UNSUPPORTED) {
    if (keyword in s) {
      throw new ConstraintError(
        `${where}: '${keyword}' is not supported; a schema may use type, properties, required, items, minItems, maxItems, enum, const, anyOf, oneOf, minLength and maxLength`,
        "response_format",
      );
    }
  }
  if (Array.isArray(s.enum)) {
    if (s.enum.length === 0) throw new ConstraintError(`${where}: enum is empty`, "response_format");
    return `(${s.enum.map((value) => literal(JSON.stringify(value))).join("|")})`;
  }
  if ("const" in s) return literal(JSON.stringify(s.const));
  const options = (s.anyOf ?? s.oneOf) as unknown;
  if (options !== undefined) {
    if (!Array.isArray(options) || options.length === 0)
      throw new ConstraintError(`${where}: anyOf/oneOf must be a non-empty list of schemas`, "response_format");
    return `(${options.map((option, i) => schemaPattern(option, `${where}.anyOf[${i}]`)).join("|")})`;
  }
  if (Array.isArray(s.type)) return `(${s.type.map((type) => schemaPattern({ ...s, type }, where)).join("|")})`;
  switch (s.type) {
    case "string": {
      const min = typeof s.minLength === "number" ? s.minLength : 0;
      const max = typeof s.maxLength === "number" ? s.maxLength : null;
      if (min === 0 && max === null) return STRING;
      if (max !== null && (max < min || max > 256))
        throw new ConstraintError(`${where}: maxLength must be at least minLength and at most 256`, "response_format");
      return `"${STRING_CHAR}{${min},${max ?? ""}}"`;
    }
    case "integer":
      return INTEGER;
    case "number":
      return NUMBER;
    case "boolean":
      return "(true|false)";
    case "null":
      return "null";
    case "array": {
      const item = s.items === undefined ? FLAT : schemaPattern(s.items, `${where}.items`);
      const min = typeof s.minItems === "number" ? s.minItems : 0;
      const max = typeof s.maxItems === "number" ? s.maxItems : null;
      if (max !== null && max < min) throw new ConstraintError(`${where}: maxItems is less than minItems`, "response_format");
      if (max === 0) return "\\[\\]";
      const rest = `(,${item}){${Math.max(0, min - 1)},${max === null ? "" : max - 1}}`;
      return min === 0 ? `\\[(${item}${rest})?\\]` : `\\[${item}${rest}\\]`;
    }
    case "object":
    case undefined: {
      const properties = s.properties as Record<string, unknown> | undefined;
      if (properties === undefined) {
        if (s.type === undefined)
          throw new ConstraintError(`${where}: give a type (object, array, string, number, integer, boolean, null), enum, const or anyOf`, "response_format");
        return ANY_OBJECT;
      }
      if (typeof properties !== "object" || properties === null) throw new ConstraintError(`${where}.properties must be an object`, "response_format");
      const parts = Object.entries(properties).map(([key, value]) => `${literal(JSON.stringify(key))}:${schemaPattern(value, `${where}.properties.${key}`)}`);
      return `\\{${parts.join(",")}\\}`;
    }
    default:
      throw new ConstraintError(`${where}: type ${JSON.stringify(s.type)} is not a JSON schema type`, "response_format");
  }
}

/** What a request's format fields ask for, as a constraint (null: free text); compiled now, so a bad one is refused before any work. */
export function requestConstraint(body: { response_format?: unknown; guided_regex?: unknown; guided_choice?: unknown }): ActionConstraint | null {
  let constraint: ActionConstraint | null = null;
  let param = "response_format";
  const format = body.response_format as { type?: unknown; json_schema?: { schema?: unknown; name?: unknown } } | undefined;
  if (format !== undefined && format !== null) {
    if (format.type === "json_object") constraint = { pattern: ANY_OBJECT };
    else if (format.type === "json_schema") {
      if (!format.json_schema || typeof format.json_schema !== "object")
        throw new ConstraintError("response_format.json_schema must be an object with a 'schema'", "response_format");
      constraint = { pattern: schemaPattern(format.json_schema.schema ?? {}, "response_format.json_schema.schema") };
    } else if (format.type !== "text") {
      throw new ConstraintError(`response_format.type must be text, json_object or json_schema; got ${JSON.stringify(format.type)}`, "response_format");
    }
  }
  if (body.guided_regex !== undefined) {
    if (constraint) throw new ConstraintError("give one of response_format, guided_regex and guided_choice", "guided_regex");
    if (typeof body.guided_regex !== "string") throw new ConstraintError("guided_regex must be a string", "guided_regex");
    constraint = { pattern: body.guided_regex };
    param = "guided_regex";
  }
  if (body.guided_choice !== undefined) {
    if (constraint) throw new ConstraintError("give one of response_format, guided_regex and guided_choice", "guided_choice");
    if (!Array.isArray(body.guided_choice)) throw new ConstraintError("guided_choice must be a list of strings", "guided_choice");
    constraint = { actions: body.guided_choice as string[] };
    param = "guided_choice";
  }
  if (!constraint) return null;
  try {
    automatonFor(constraint);
  } catch (failure) {
    const message = (failure as Error).message;
    throw new ConstraintError(
      param === "response_format"
        ? `response_format: the automaton cannot hold this format: ${message}; simplify the schema (fewer or shorter properties)`
        : `${param}: ${message}`,
      param,
    );
  }
  return constraint;
}
