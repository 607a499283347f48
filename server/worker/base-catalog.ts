/**
 * The catalogue of base models: the built-in bases shipped in TINKERLAB_BASES_DIR (lib/envs/bases by default,
 * made by bin/make-base-models.ts), one checkpoint folder each. Reads only their configs, so the web server can
 * check a launch without loading the runtime.
 */
import fs from "node:fs";
import path from "node:path";
import { countParameters, parseGPTConfig, type GPTConfig } from "@/lib/model/config";
import { serverEnv } from "../env";

const basesDir = () => path.resolve(serverEnv().TINKERLAB_BASES_DIR);

export function builtinBaseNames(): string[] {
  const dir = basesDir();
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => fs.existsSync(path.join(dir, name, "manifest.json")))
    .sort();
}

export function baseModelDir(name: string): string {
  if (!/^[a-z0-9][a-z0-9-]*$/.test(name) || !builtinBaseNames().includes(name)) {
    const known = builtinBaseNames();
    throw new Error(`No base model named '${name}'. Built-in bases: ${known.length ? known.join(", ") : "none (run: npx tsx bin/make-base-models.ts)"}.`);
  }
  return path.join(basesDir(), name);
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
