/**
 * "Open the example's source": a built-in environment's own TypeScript (lib/envs), as files an experiment can hold
 * and the sandbox runs as a custom environment. The entry file is the module that defines the environment, with a
 * default export naming it (a module may define several, as board-games.ts does); the files it imports by a
 * relative path come along under their own names. Its imports of the SDK by repository path (`@/lib/sdk/environment`,
 * `@/lib/model/rng`) become `tinkerlab`, the name a user's code imports the SDK by; the sandbox answers both.
 */
import fs from "node:fs";
import path from "node:path";
import { useCases } from "@/lib/envs";
import * as arithmetic from "@/lib/envs/arithmetic";
import * as boardGames from "@/lib/envs/board-games";
import * as guessNumber from "@/lib/envs/guess-number";
import * as kuhnPoker from "@/lib/envs/kuhn-poker";
import * as signalGame from "@/lib/envs/signal-game";
import * as splitPot from "@/lib/envs/split-pot";
import * as textWorld from "@/lib/envs/text-world";
import * as toolUse from "@/lib/envs/tool-use";

/** The file an experiment's environment starts from (components/editor/starter.ts's STARTER_ENTRY). */
export const EXAMPLE_ENTRY = "environment.ts";

/** The modules of lib/envs that define the built-in environments, by file name. */
const MODULES: Record<string, Record<string, unknown>> = {
  "arithmetic.ts": arithmetic,
  "board-games.ts": boardGames,
  "guess-number.ts": guessNumber,
  "kuhn-poker.ts": kuhnPoker,
  "signal-game.ts": signalGame,
  "split-pot.ts": splitPot,
  "text-world.ts": textWorld,
  "tool-use.ts": toolUse,
};

/** lib/envs in the checkout the server runs from (its working directory, as for the migrations and the validators). */
const envsDir = () => path.join(/* turbopackIgnore: true */ process.cwd(), "lib", "envs");

/** The SDK's modules as the built-in environments import them, and the name a user's files import them by. */
const SDK_IMPORT = /from "@\/lib\/(?:sdk\/environment|model\/rng)"/g;
/** A relative import of another file of lib/envs: `from "./tool-use"`. */
const RELATIVE_IMPORT = /from "\.\/([a-z0-9-]+)"/g;

/** Where an example's environment is defined: its module's file and the export that holds it. */
function definitionOf(environment: string): { file: string; exportName: string } | null {
  const useCase = useCases[environment];
  if (!useCase) return null;
  for (const [file, module] of Object.entries(MODULES)) {
    const exportName = Object.keys(module).find((key) => module[key] === useCase.environment);
    if (exportName) return { file, exportName };
  }
  return null;
}

/**
 * The files of an editable copy of the built-in environment `environment` (a use case's name, as its template's
 * config names it), or null when there is no such built-in environment.
 */
export function exampleSource(environment: string): { files: Record<string, string>; exportName: string; module: string } | null {
  const definition = definitionOf(environment);
  if (!definition) return null;
  const files: Record<string, string> = {};
  const read = (file: string) => fs.readFileSync(path.join(envsDir(), file), "utf8").replace(SDK_IMPORT, 'from "tinkerlab"');
  // The entry, then every file it reaches by a relative import, each once.
  const pending = [...read(definition.file).matchAll(RELATIVE_IMPORT)].map((m) => `${m[1]}.ts`);
  files[EXAMPLE_ENTRY] =
    `${read(definition.file).trimEnd()}\n\n// The environment this experiment runs (lib/envs/${definition.file} defines it as ${definition.exportName}).\n` +
    `export default ${definition.exportName};\n`;
  while (pending.length > 0) {
    const file = pending.shift()!;
    if (file in files || file === definition.file) continue;
    const text = read(file);
    files[file] = text;
    for (const m of text.matchAll(RELATIVE_IMPORT)) pending.push(`${m[1]}.ts`);
  }
  return { files, exportName: definition.exportName, module: `lib/envs/${definition.file}` };
}
