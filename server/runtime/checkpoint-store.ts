/**
 * Checkpoint folders on disk, written atomically: every file goes into a hidden temporary folder next to the
 * target, is fsynced, and only then is the folder renamed into place. A process killed at any point leaves
 * either the previous checkpoint or the new one under the target name, never a half-written one.
 * The format is described in docs/CHECKPOINTS.md.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, mkdtempSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import { decodeSafetensors, safetensorsParts, type TensorMap } from "@/lib/model/safetensors";

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
  /**
   * Each file's size and SHA-256 (hex), checked whenever the checkpoint is opened. Absent from checkpoints written
   * before checksums existed, which are read unchecked.
   */
  checksums?: Record<string, { bytes: number; sha256: string }>;
}

/** A checkpoint that is gone, or whose files are not what its manifest says (truncated, altered, unreadable). */
export class CheckpointCorruptError extends Error {
  override name = "CheckpointCorruptError";
  constructor(
    readonly dir: string,
    problem: string,
  ) {
    super(`checkpoint '${dir}' cannot be used: ${problem}`);
  }
}

const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");

export type CheckpointFile = { kind: "json"; value: unknown } | { kind: "tensors"; tensors: TensorMap };

export interface WriteHooks {
  /** called after each file is durable in the temporary folder (tests use it to stop a writer mid-way) */
  afterFile?: (name: string) => void;
}

/** Writes the pieces one after another and syncs the file; returns its size and SHA-256, taken as it is written. */
function writeDurable(path: string, parts: Uint8Array[]): { bytes: number; sha256: string } {
  const fd = openSync(path, "w");
  const hash = createHash("sha256");
  let bytes = 0;
  try {
    for (const part of parts) {
      let written = 0;
      while (written < part.length) written += writeSync(fd, part, written, part.length - written);
      hash.update(part);
      bytes += part.length;
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return { bytes, sha256: hash.digest("hex") };
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
  const checksums: Record<string, { bytes: number; sha256: string }> = {};
  try {
    for (const [file, content] of Object.entries(files)) {
      // A tensors file goes out tensor by tensor, never held whole (a 0.5B model's state is 6 GB).
      const parts = content.kind === "json" ? [new TextEncoder().encode(JSON.stringify(content.value, null, 2) + "\n")] : safetensorsParts(content.tensors);
      checksums[file] = writeDurable(join(tmp, file), parts);
      hooks.afterFile?.(file);
    }
    const full: CheckpointManifest = {
      format: checkpointFormat,
      version: checkpointVersion,
      ...manifest,
      createdAt: new Date().toISOString(),
      files: Object.keys(files),
      checksums,
    };
    writeDurable(join(tmp, "manifest.json"), [new TextEncoder().encode(JSON.stringify(full, null, 2) + "\n")]);
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
  /** A safetensors file's tensors; with `views`, float32 ones are views of the bytes read (handed over, not copied). */
  tensors(file: string, options?: { views?: boolean }): TensorMap;
  has(file: string): boolean;
}

/**
 * A file's bytes as read, without copying them when the buffer is the file's own (a large read); a small read may
 * sit in Node's shared pool, and is copied out of it.
 */
function ownBytes(buffer: Buffer): Uint8Array {
  return buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength ? new Uint8Array(buffer.buffer) : new Uint8Array(buffer);
}

/**
 * Opens a checkpoint folder, checking that it is complete, of a format this code reads, and that every file has
 * the size and checksum its manifest records (CheckpointCorruptError otherwise, naming the file).
 */
export function readCheckpoint(dir: string): CheckpointReader {
  let folder = resolve(dir);
  if (!existsSync(folder)) {
    const parent = dirname(folder);
    const stepAside = existsSync(parent) ? readdirSync(parent).find((f) => f.startsWith(`.${basename(folder)}.old-`)) : undefined;
    if (!stepAside) throw new CheckpointCorruptError(dir, "its folder does not exist");
    folder = join(parent, stepAside);
  }
  const manifestPath = join(folder, "manifest.json");
  if (!existsSync(manifestPath)) throw new CheckpointCorruptError(dir, "it has no manifest.json (not a checkpoint, or one whose writing never finished)");
  let manifest: CheckpointManifest;
  try {
    manifest = JSON.parse(readFileSync(manifestPath, "utf8")) as CheckpointManifest;
  } catch (error) {
    throw new CheckpointCorruptError(dir, `manifest.json does not parse: ${(error as Error).message}`);
  }
  if (manifest.format !== checkpointFormat || manifest.version !== checkpointVersion) {
    throw new Error(`'${dir}' has format ${manifest.format} v${manifest.version}; this code reads ${checkpointFormat} v${checkpointVersion}`);
  }
  const contents = new Map<string, Uint8Array>();
  for (const file of manifest.files) {
    if (!existsSync(join(folder, file))) throw new CheckpointCorruptError(dir, `${file} is missing (the manifest lists it)`);
    const expected = manifest.checksums?.[file];
    if (!expected) continue;
    const bytes = ownBytes(readFileSync(join(folder, file)));
    if (bytes.length !== expected.bytes)
      throw new CheckpointCorruptError(dir, `${file} is ${bytes.length} bytes; the manifest says ${expected.bytes} (truncated?)`);
    if (sha256(bytes) !== expected.sha256) throw new CheckpointCorruptError(dir, `${file} does not match the checksum in the manifest (altered or damaged)`);
    contents.set(file, bytes); // read once: verified bytes are what the caller decodes
  }
  const read = (file: string) => contents.get(file) ?? ownBytes(readFileSync(join(folder, file)));
  return {
    dir: folder,
    manifest,
    has: (file) => manifest.files.includes(file),
    json: (file) => {
      try {
        return JSON.parse(new TextDecoder().decode(read(file)));
      } catch (error) {
        throw new CheckpointCorruptError(dir, `${file} does not parse: ${(error as Error).message}`);
      }
    },
    tensors: (file, options = {}) => {
      try {
        return decodeSafetensors(read(file), options).tensors;
      } catch (error) {
        throw new CheckpointCorruptError(dir, `${file} cannot be read as safetensors: ${(error as Error).message}`);
      }
    },
  };
}
