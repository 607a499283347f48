/**
 * The tokenizer a run's tokens are read with, on the web server: the byte tokenizer for the project's own bases
 * (the browser reads those itself), else the imported model's, found through the run's base and its lineage and
 * kept once per base. Used to write token ids as text where the page shows them (rollout token strips).
 */
import fs from "node:fs";
import path from "node:path";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import type { Database } from "./db";
import { resolveBase } from "./jobs";
import { baseModelDir } from "./worker/base-catalog";

const byBase = new Map<string, { tokenizer: Tokenizer | null; mtimeMs: number }>();

/** The imported model's tokenizer the base descends from; null for a byte-tokenizer base or one that is gone. */
export async function importedTokenizerOf(db: Database, baseName: string): Promise<Tokenizer | null> {
  let root: string;
  try {
    let source = await resolveBase(db, baseName);
    while (source.kind === "checkpoint") source = source.parent;
    root = source.name;
  } catch {
    return null;
  }
  let file: string;
  try {
    file = path.join(baseModelDir(root), "tokenizer.json");
  } catch {
    return null;
  }
  const mtimeMs = fs.statSync(file, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const known = byBase.get(root);
  if (known && known.mtimeMs === mtimeMs) return known.tokenizer;
  let tokenizer: Tokenizer | null = null;
  try {
    const spec = JSON.parse(fs.readFileSync(file, "utf8"));
    tokenizer = spec.type === "byte" ? null : tokenizerFromSpec(spec, `base '${root}'`);
  } catch {
    tokenizer = null;
  }
  byBase.set(root, { tokenizer, mtimeMs });
  return tokenizer;
}

/**
 * The tokenizer spec a base's checkpoints store (the byte tokenizer's, or an imported model's files), as a
 * remote session's client needs it to render conversations as the worker's model reads them.
 */
export async function tokenizerSpecOfBase(db: Database, baseName: string): Promise<unknown> {
  const source = await resolveBase(db, baseName);
  const dir = source.kind === "checkpoint" ? source.path : baseModelDir(source.name);
  return JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
}
