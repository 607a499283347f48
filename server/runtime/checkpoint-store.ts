/**
 * Checkpoint folders on disk, written atomically: every file goes into a hidden temporary folder next to the
 * target, is fsynced, and only then is the folder renamed into place. A process killed at any point leaves
 * either the previous checkpoint or the new one under the target name, never a half-written one.
 * The format is described in docs/CHECKPOINTS.md.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { decodeSafetensors, encodeSafetensors, type TensorMap } from "@/lib/model/safetensors";

export const checkpointFormat = "tinkerlab.checkpoint";
export const checkpointVersion = 1;

export interface CheckpointManifest {
  format: typeof checkpointFormat;
  version: number;
  /** training_state: weights or adapter plus optimizer and RNG; sampler_weights: weights only */
  kind: "training_state" | "sampler_weights";
  /** full: every model tensor; lora: adapter tensors (needs the base model); merged: adapter folded into the base */
  contents: "full" | "lora" | "merged";
  step: number;
  createdAt: string;
  files: string[];
}

export type CheckpointFile = { kind: "json"; value: unknown } | { kind: "tensors"; tensors: TensorMap };

export interface WriteHooks {
  /** called after each file is durable in the temporary folder (tests use it to stop a writer mid-way) */
  afterFile?: (name: string) => void;
}

function writeDurable(path: string, bytes: Uint8Array): void {
  const fd = openSync(path, "w");
  try {
    let written = 0;
    while (written < bytes.length) written += writeSync(fd, bytes, written, bytes.length - written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function fsyncDirectory(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `files` plus manifest.json (last) as the folder `dir`, replacing any checkpoint already there. */
export function writeCheckpoint(
  dir: string,
  manifest: Omit<CheckpointManifest, "format" | "version" | "files" | "createdAt">,
  files: Record<string, CheckpointFile>,
  hooks: WriteHooks = {},
): void {
  const target = resolve(dir);
  const parent = dirname(target);
  const name = basename(target);
  mkdirSync(parent, { recursive: true });
  const tmp = mkdtempSync(join(parent, `.${name}.tmp-`));
  let previous: string | null = null;
  try {
    for (const [file, content] of Object.entries(files)) {
      const bytes = content.kind === "json" ? new TextEncoder().encode(JSON.stringify(content.value, null, 2) + "\n") : encodeSafetensors(content.tensors);
      writeDurable(join(tmp, file), bytes);
      hooks.afterFile?.(file);
    }
    const full: CheckpointManifest = {
      format: checkpointFormat,
      version: checkpointVersion,
      ...manifest,
      createdAt: new Date().toISOString(),
      files: Object.keys(files),
    };
    writeDurable(join(tmp, "manifest.json"), new TextEncoder().encode(JSON.stringify(full, null, 2) + "\n"));
    hooks.afterFile?.("manifest.json");
    fsyncDirectory(tmp);
    if (existsSync(target)) {
      // rename() cannot replace a non-empty folder, so the old one steps aside first; the reader falls back to
      // it if a crash lands between the two renames.
      previous = join(parent, `.${name}.old-${randomBytes(4).toString("hex")}`);
      renameSync(target, previous);
    }
    renameSync(tmp, target);
    fsyncDirectory(parent);
  } catch (error) {
    rmSync(tmp, { recursive: true, force: true });
    throw error;
  }
  if (previous) rmSync(previous, { recursive: true, force: true });
}

export interface CheckpointReader {
  dir: string;
  manifest: CheckpointManifest;
  json<T = unknown>(file: string): T;
  tensors(file: string): TensorMap;
  has(file: string): boolean;
}

/** Opens a checkpoint folder, checking that it is complete and of a format this code reads. */
export function readCheckpoint(dir: string): CheckpointReader {
  let folder = resolve(dir);
  if (!existsSync(folder)) {
    const parent = dirname(folder);
    const stepAside = existsSync(parent) ? readdirSync(parent).find((f) => f.startsWith(`.${basename(folder)}.old-`)) : undefined;
    if (!stepAside) throw new Error(`no checkpoint at '${dir}'`);
    folder = join(parent, stepAside);
  }
  const manifestPath = join(folder, "manifest.json");
  if (!existsSync(manifestPath)) throw new Error(`'${dir}' is not a checkpoint: it has no manifest.json`);
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as CheckpointManifest;
  if (manifest.format !== checkpointFormat || manifest.version !== checkpointVersion) {
    throw new Error(`'${dir}' has format ${manifest.format} v${manifest.version}; this code reads ${checkpointFormat} v${checkpointVersion}`);
  }
  for (const file of manifest.files) {
    if (!existsSync(join(folder, file))) throw new Error(`checkpoint '${dir}' lists ${file} but it is missing`);
  }
  return {
    dir: folder,
    manifest,
    has: (file) => manifest.files.includes(file),
    json: (file) => JSON.parse(readFileSync(join(folder, file), "utf8")),
    tensors: (file) => decodeSafetensors(new Uint8Array(readFileSync(join(folder, file)))).tensors,
  };
}
