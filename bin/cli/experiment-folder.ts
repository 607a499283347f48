/**
 * An experiment as a folder, as the editor shows it: `experiment.json` (the config) and its source files
 * (environment.ts and whatever it imports: .ts, .js, .json, .md files, in subfolders too). `.tinkerlab.json`
 * remembers which experiment on which server the folder is, so `push` and `run` save new versions of it instead
 * of new experiments.
 */
import fs from "node:fs";
import path from "node:path";
import { type ExperimentConfig, parseExperiment } from "@/lib/sdk/experiment";
import { CliError, EXIT } from "./context";

const CONFIG_FILE = "experiment.json";
const LINK_FILE = ".tinkerlab.json";
const SOURCE = /\.(ts|tsx|js|mjs|json|md|txt)$/;
const SKIPPED = new Set(["node_modules", ".git"]);

/** A folder's experiment: its config parsed as the server parses it (a config without a name takes the folder's). */
export type ExperimentFolder = { dir: string; config: ExperimentConfig; files: Record<string, string> };
export type FolderLink = { url: string; experimentId: string; version: number };

/** Reads a folder, or a config file alone (an experiment of a built-in environment has no files). */
export function readExperiment(target: string): ExperimentFolder {
  const full = path.resolve(target);
  if (!fs.existsSync(full)) throw new CliError(`${target} does not exist; give a folder with ${CONFIG_FILE}, or a config .json file`, EXIT.usage);
  const isDir = fs.statSync(full).isDirectory();
  const dir = isDir ? full : path.dirname(full);
  const configPath = isDir ? path.join(full, CONFIG_FILE) : full;
  if (!fs.existsSync(configPath)) {
    throw new CliError(
      `${target} has no ${CONFIG_FILE}; write the experiment's config there (the editor's Config tab, or 'tinkerlab experiments pull <id> ${target}')`,
      EXIT.usage,
    );
  }
  let config: unknown;
  try {
    config = JSON.parse(fs.readFileSync(configPath, "utf8"));
  } catch (error) {
    throw new CliError(`${path.relative(process.cwd(), configPath) || configPath} is not valid JSON: ${(error as Error).message}`, EXIT.usage);
  }
  if (!config || typeof config !== "object" || Array.isArray(config))
    throw new CliError(`${CONFIG_FILE} must hold a JSON object (the experiment's config)`, EXIT.usage);
  const files: Record<string, string> = {};
  if (isDir) {
    const walk = (at: string) => {
      for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
        if (entry.name.startsWith(".") || SKIPPED.has(entry.name)) continue;
        const file = path.join(at, entry.name);
        if (entry.isDirectory()) walk(file);
        else if (SOURCE.test(entry.name) && file !== configPath) files[path.relative(full, file).split(path.sep).join("/")] = fs.readFileSync(file, "utf8");
      }
    };
    walk(full);
  }
  const given = config as Record<string, unknown>;
  const named = typeof given.name === "string" && given.name.trim() ? given : { ...given, name: path.basename(dir) };
  try {
    return { dir, config: parseExperiment(named), files };
  } catch (error) {
    throw new CliError(`${path.relative(process.cwd(), configPath) || configPath}: ${(error as Error).message}`, EXIT.usage);
  }
}

/** Writes an experiment's config and files into `dir` (files no longer in the experiment are left alone). */
export function writeExperiment(dir: string, config: unknown, files: Record<string, string>) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, CONFIG_FILE), `${JSON.stringify(config, null, 2)}\n`);
  for (const [name, text] of Object.entries(files)) {
    const file = path.resolve(dir, name);
    if (!file.startsWith(path.resolve(dir) + path.sep))
      throw new CliError(`the experiment's file '${name}' would be written outside ${dir}; refused`, EXIT.refused);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, text);
  }
}

export function readLink(dir: string): FolderLink | null {
  const file = path.join(dir, LINK_FILE);
  if (!fs.existsSync(file)) return null;
  try {
    const link = JSON.parse(fs.readFileSync(file, "utf8")) as Partial<FolderLink>;
    return typeof link.url === "string" && typeof link.experimentId === "string"
      ? { url: link.url, experimentId: link.experimentId, version: Number(link.version) || 0 }
      : null;
  } catch {
    return null;
  }
}

export function writeLink(dir: string, link: FolderLink) {
  fs.writeFileSync(path.join(dir, LINK_FILE), `${JSON.stringify(link, null, 2)}\n`);
}

/** Whether two experiments' contents are the same (config compared as JSON, files by name and text). */
export function sameContent(a: { config: unknown; files: Record<string, string> }, b: { config: unknown; files: Record<string, string> }): boolean {
  const sorted = (value: unknown): unknown =>
    value && typeof value === "object" && !Array.isArray(value)
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((key) => [key, sorted((value as Record<string, unknown>)[key])]),
        )
      : Array.isArray(value)
        ? value.map(sorted)
        : value;
  return JSON.stringify(sorted(a.config)) === JSON.stringify(sorted(b.config)) && JSON.stringify(sorted(a.files)) === JSON.stringify(sorted(b.files));
}
