/**
 * The catalogue of base models, one checkpoint folder each: the built-in bases shipped in TINKERLAB_BASES_DIR
 * (lib/envs/bases by default, made by bin/make-base-models.ts), and the bases imported from Hugging Face model
 * folders into ARTIFACTS_DIR/bases (base-import.ts). Reads only their configs, so the web server can check a
 * launch without loading the runtime.
 */
import fs from "node:fs";
import path from "node:path";
import { countParameters, parseGPTConfig, type GPTConfig } from "@/lib/model/config";
import { serverEnv } from "../env";

/** What a base may be called: it is part of URLs and file names. */
export const baseNameRule = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** Why `name` cannot name a base, or null when it can. */
export function baseNameProblem(name: string): string | null {
  return baseNameRule.test(name) ? null : `'${name}' cannot name a base: use 1–64 lower-case letters, digits and '-', starting with a letter or digit`;
}

const basesDir = () => path.resolve(serverEnv().TINKERLAB_BASES_DIR);
export const importedBasesDir = () => path.resolve(serverEnv().ARTIFACTS_DIR, "bases");

function basesIn(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => baseNameRule.test(name) && fs.existsSync(path.join(dir, name, "manifest.json")))
    .sort();
}

export function builtinBaseNames(): string[] {
  return basesIn(basesDir());
}

/** Imported bases; a name that is also a built-in one is the built-in one. */
export function importedBaseNames(): string[] {
  const builtin = new Set(builtinBaseNames());
  return basesIn(importedBasesDir()).filter((name) => !builtin.has(name));
}

/** Every base a run may name by name: built-in, then imported. */
export function baseNames(): string[] {
  return [...builtinBaseNames(), ...importedBaseNames()];
}

/** A base's folder: the built-in one of that name, else the imported one (a built-in name wins). */
export function baseModelDir(name: string): string {
  if (baseNameRule.test(name)) {
    for (const dir of [basesDir(), importedBasesDir()]) {
      if (fs.existsSync(path.join(dir, name, "manifest.json"))) return path.join(dir, name);
    }
  }
  const known = baseNames();
  throw new Error(`No base model named '${name}'. Bases: ${known.length ? known.join(", ") : "none (run: npx tsx bin/make-base-models.ts)"}.`);
}

/** What an imported base was imported from (its import.json), or null for a built-in base. */
export function importRecord(name: string): { source: string; modelType: string; importedAt: string } | null {
  const file = path.join(baseModelDir(name), "import.json");
  if (!fs.existsSync(file)) return null;
  return JSON.parse(fs.readFileSync(file, "utf8"));
}

/** The base's shape without loading its weights (for footprint estimates at submit time). */
export function baseModelShape(name: string): GPTConfig & { parameters: number } {
  const config = parseGPTConfig(JSON.parse(fs.readFileSync(path.join(baseModelDir(name), "model_config.json"), "utf8")));
  return { ...config, parameters: countParameters(config) };
}

/** The shape of a checkpoint's model (a run's checkpoint used as a base), read from its model_config.json. */
export function checkpointShape(dir: string): GPTConfig & { parameters: number } {
  const file = path.join(dir, "model_config.json");
  if (!fs.existsSync(file)) throw new Error(`the checkpoint folder '${dir}' has no model_config.json (was it deleted from the artifact store?)`);
  const config = parseGPTConfig(JSON.parse(fs.readFileSync(file, "utf8")));
  return { ...config, parameters: countParameters(config) };
}
