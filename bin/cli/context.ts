/**
 * What every client command of the CLI shares: which server and key to use (flags, then the environment, then the
 * file `tinkerlab login` writes, then http://localhost:3000 with no key), the client, and how results are printed
 * (a table for people, `--json` for scripts).
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createClient, TinkerlabError, type TinkerlabClient } from "../../lib/client";

const DEFAULT_URL = "http://localhost:3000";

/** Exit codes: a run's outcome for `run`, and the CLI's own failures. */
export const EXIT = { ok: 0, runFailed: 1, usage: 2, refused: 3, runCancelled: 4, unreachable: 5 } as const;

export interface GlobalOptions {
  url?: string;
  key?: string;
  json?: boolean;
}

/** Where `tinkerlab login` keeps the server and key: $XDG_CONFIG_HOME/tinkerlab/credentials.json (else ~/.config). */
function credentialsFile(): string {
  const base = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), ".config");
  return path.join(base, "tinkerlab", "credentials.json");
}

export type Credentials = { url: string; apiKey?: string };

function readCredentials(): Credentials | null {
  const file = credentialsFile();
  if (!fs.existsSync(file)) return null;
  try {
    const parsed = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<Credentials>;
    return typeof parsed.url === "string" ? { url: parsed.url, apiKey: typeof parsed.apiKey === "string" ? parsed.apiKey : undefined } : null;
  } catch {
    throw new CliError(`${file} is not valid JSON; run 'tinkerlab login' again`, EXIT.usage);
  }
}

export function writeCredentials(credentials: Credentials): string {
  const file = credentialsFile();
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  fs.writeFileSync(file, `${JSON.stringify(credentials, null, 2)}\n`, { mode: 0o600 });
  return file;
}

/** The server and key a command talks to. */
export function resolveServer(options: GlobalOptions): Credentials {
  const saved = readCredentials();
  const url = options.url ?? process.env.TINKERLAB_URL ?? saved?.url ?? DEFAULT_URL;
  // A saved key belongs to the saved server only.
  const apiKey = options.key ?? process.env.TINKERLAB_API_KEY ?? (saved && saved.url === url ? saved.apiKey : undefined);
  return { url, apiKey };
}

export function clientFor(options: GlobalOptions): TinkerlabClient {
  const { url, apiKey } = resolveServer(options);
  try {
    return createClient({ url, apiKey });
  } catch (error) {
    throw new CliError((error as Error).message, EXIT.usage);
  }
}

/** A failure the CLI reports in one line and exits with `code`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly code: number,
  ) {
    super(message);
  }
}

/** A client's refusal as a CliError: unreachable, refused (not found, unauthorized, bad input). */
export function cliErrorOf(error: unknown): CliError | null {
  if (error instanceof CliError) return error;
  if (error instanceof TinkerlabError) return new CliError(error.message, error.code === "UNREACHABLE" ? EXIT.unreachable : EXIT.refused);
  return null;
}

/** `--context-length`'s value: absent, or a whole number of tokens above 0. */
export function parseContextLength(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const tokens = Number(value);
  if (!(Number.isInteger(tokens) && tokens > 0)) throw new CliError(`--context-length must be a whole number of tokens above 0, got '${value}'`, EXIT.usage);
  return tokens;
}

const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumSignificantDigits: 3 });
/** A count as people read it: 27.9K, 135M. */
export const compactCount = (n: number) => compact.format(n);

/** Prints rows as an aligned table (people) or as JSON (scripts). */
export function printTable(rows: Record<string, string | number | null>[], columns: string[], json: boolean | undefined) {
  if (json) {
    console.log(JSON.stringify(rows, null, 2));
    return;
  }
  if (rows.length === 0) {
    console.log("(none)");
    return;
  }
  const cell = (value: string | number | null | undefined) => (value === null || value === undefined ? "—" : String(value));
  const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => cell(row[column]).length)));
  const line = (values: string[]) =>
    values
      .map((value, i) => value.padEnd(widths[i]!))
      .join("  ")
      .trimEnd();
  console.log(line(columns.map((column) => column.toUpperCase())));
  for (const row of rows) console.log(line(columns.map((column) => cell(row[column]))));
}

export function printJson(value: unknown) {
  console.log(JSON.stringify(value, null, 2));
}
