/**
 * Imports a Hugging Face model folder (config.json, model.safetensors or its shards with the index,
 * tokenizer.json, tokenizer_config.json with its chat template) as a base: the weights are converted once, in
 * full precision, into a checkpoint folder of this project's own format under ARTIFACTS_DIR/bases/<name>, with
 * the tokenizer's files inside it. From then on the base is named like a built-in one, and every job kind
 * (RL, SFT, sampling, sessions, evaluation, export) loads it the same way, on any worker that sees the artifacts.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { countParameters, type GPTConfig } from "@/lib/model/config";
import { loadHFModel } from "@/lib/model/hf/weights";
import { baseNameFromFolder } from "@/lib/model/hf/folder";
import { HFTokenizer } from "@/lib/model/hf/tokenizer";
import { tokenizerSpec } from "@/lib/model/tokenizer-spec";
import { listGPTParameters, parametersToTensorMap } from "@/lib/model/weights";
import { writeCheckpoint } from "../runtime";
import { baseNameProblem, builtinBaseNames, importedBasesDir } from "../bases";
import { workerCommand } from "./local-workers";

export interface ImportOptions {
  /** the base's name; default: the folder's name, lower-cased, other characters as '-' */
  name?: string;
  /** longest sequence the base will attend over; default min(the model's own limit, 2048) */
  contextLength?: number;
  /** replace an imported base of the same name */
  replace?: boolean;
  /** where the model came from, for the record; default: the folder's path */
  origin?: string;
}

export interface ImportRecord {
  name: string;
  source: string;
  modelType: string;
  importedAt: string;
  parameters: number;
  config: GPTConfig;
}

export function importHFBase(dir: string, options: ImportOptions = {}): ImportRecord {
  const source = path.resolve(dir);
  if (!fs.existsSync(source) || !fs.statSync(source).isDirectory()) {
    throw new Error(`'${dir}' is not a folder; give the folder of a Hugging Face model (config.json, model.safetensors, tokenizer.json)`);
  }
  const name = options.name ?? (baseNameFromFolder(path.basename(source)) || "imported-base");
  const problem = baseNameProblem(name);
  if (problem) throw new Error(problem);
  if (builtinBaseNames().includes(name)) throw new Error(`'${name}' is a built-in base; import under another name (--name)`);
  const target = path.join(importedBasesDir(), name);
  if (fs.existsSync(target) && !options.replace) {
    throw new Error(`a base named '${name}' was imported already; pick another name, or replace it (--replace)`);
  }

  const { config, weights, hfConfig } = loadHFModel(source, { contextLength: options.contextLength });
  const tokenizer = HFTokenizer.fromFolder(source);
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new Error(`the tokenizer has ${tokenizer.vocabSize} ids but the model embeds only ${config.vocabSize}; they are not one model's`);
  }
  const record: ImportRecord = {
    name,
    source: options.origin ?? source,
    modelType: String((hfConfig as { model_type?: unknown }).model_type),
    importedAt: new Date().toISOString(),
    parameters: countParameters(config),
    config,
  };
  writeCheckpoint(
    target,
    { kind: "sampler_weights", contents: "full", step: 0 },
    {
      "model_config.json": { kind: "json", value: config },
      "tokenizer.json": { kind: "json", value: tokenizerSpec(tokenizer) },
      "import.json": { kind: "json", value: record },
      "weights.safetensors": { kind: "tensors", tensors: parametersToTensorMap(listGPTParameters(weights, config)) },
    },
  );
  return record;
}

/**
 * `importHFBase` in a child process (`tinkerlab bases import --json`, run from the project folder as the server
 * is): what the web server's import route calls, so that it goes on answering while a model converts (seconds to
 * minutes) and the conversion's memory (about three times the model's float32 size at its peak) is the child's,
 * given back when it exits. Rejects with the import's own one-line refusal.
 */
export function importHFBaseApart(dir: string, options: ImportOptions = {}): Promise<ImportRecord> {
  const root = process.cwd();
  const args = ["bases", "import", path.resolve(dir), "--json"];
  if (options.name) args.push("--name", options.name);
  if (options.contextLength !== undefined) args.push("--context-length", String(options.contextLength));
  if (options.replace) args.push("--replace");
  if (options.origin) args.push("--origin", options.origin);
  const child = spawn(process.execPath, workerCommand(root, [], path.join(root, "bin", "tinkerlab.ts"), args), {
    cwd: root,
    env: process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => {
      if (code === 0) {
        try {
          resolve(JSON.parse(stdout.trim().split("\n").at(-1)!) as ImportRecord);
          return;
        } catch {
          // reported below, with what it printed
        }
      }
      const refusal = /tinkerlab: ([\s\S]*)$/.exec(stderr.trim())?.[1];
      reject(new Error(refusal ?? `the import process exited with ${code}: ${(stderr || stdout).trim().slice(-2000)}`));
    });
  });
}
