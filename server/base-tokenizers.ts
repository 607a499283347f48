/**
 * The tokenizer a run's tokens are read with, on the web server: the byte tokenizer for the project's own bases
 * (the browser reads those itself), else the imported model's, read from the base's (or checkpoint's) folder and
 * kept while its file is unchanged. Used to write token ids as text where the page shows them (rollout token strips).
 */
import fs from "node:fs";
import path from "node:path";
import type { Tokenizer } from "@/lib/model/tokenizer";
import { tokenizerFromSpec } from "@/lib/model/tokenizer-spec";
import type { Database } from "./db";
import { resolveBase } from "./jobs";
import { baseModelDir } from "./bases";

/** The tokenizer file of a base: a checkpoint's own (every checkpoint stores its model's), or a named base's. */
async function tokenizerFileOf(db: Database, baseName: string): Promise<string> {
  const source = await resolveBase(db, baseName);
  return path.join(source.kind === "checkpoint" ? source.path : baseModelDir(source.name), "tokenizer.json");
}

/** Tokenizers read, by file, kept while the file is unchanged. */
const byFile = new Map<string, { tokenizer: Tokenizer | null; mtimeMs: number }>();

/** The imported model's tokenizer of a base (or a checkpoint of one); null for the byte tokenizer or a base that is gone. */
export async function importedTokenizerOf(db: Database, baseName: string): Promise<Tokenizer | null> {
  let file: string;
  try {
    file = await tokenizerFileOf(db, baseName);
  } catch {
    return null;
  }
  // A file in the artifact store, found at run time: not one for Next's build to trace.
  const mtimeMs = fs.statSync(/* turbopackIgnore: true */ file, { throwIfNoEntry: false })?.mtimeMs ?? 0;
  const known = byFile.get(file);
  if (known && known.mtimeMs === mtimeMs) return known.tokenizer;
  let tokenizer: Tokenizer | null = null;
  try {
    const spec = JSON.parse(fs.readFileSync(/* turbopackIgnore: true */ file, "utf8"));
    tokenizer = spec.type === "byte" ? null : tokenizerFromSpec(spec, `base '${baseName}'`);
  } catch {
    tokenizer = null;
  }
  byFile.set(file, { tokenizer, mtimeMs });
  return tokenizer;
}

/**
 * The tokenizer spec a base's checkpoints store (the byte tokenizer's, or an imported model's files), as a
 * remote session's client needs it to render conversations as the worker's model reads them.
 */
export async function tokenizerSpecOfBase(db: Database, baseName: string): Promise<unknown> {
  return JSON.parse(fs.readFileSync(await tokenizerFileOf(db, baseName), "utf8"));
}
