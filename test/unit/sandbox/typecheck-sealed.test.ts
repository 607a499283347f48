/**
 * The type checker sees only the experiment's files and the SDK's: an import of a file of the server's, by its
 * absolute path, by `../` out of the experiment or under node_modules, finds nothing, reads nothing, and answers as
 * an import of a file that does not exist does. Its messages name the SDK as the user imports it, never a path of
 * the server's.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import ts from "typescript";
import { afterAll, describe, expect, it } from "vitest";
import { starters } from "@/components/editor/starter";
import { validateExperimentSource } from "@/server/sandbox/validate";
import { typeCheckEnvironment } from "@/server/sandbox/typecheck";

const bait = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bait-"));
fs.writeFileSync(path.join(bait, "state.json"), JSON.stringify({ launchCodes: "0000", owner: "root" }));
fs.writeFileSync(path.join(bait, "secret.ts"), "export const secret = 1;\n");
const absent = path.join(bait, "absent");
afterAll(() => fs.rmSync(bait, { recursive: true, force: true }));

const environment = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, string>({
  name: "count",
  data: { kind: "free" },
  systemPrompt: "Say go.",
  maxTurns: 3,
  actions: ["go"],
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => ({ ok: true, action: text }),
  step: (state) => ({ state: { n: state.n + 1 }, observation: String(state.n + 1), reward: 1, done: state.n + 1 >= 3 }),
});
`;

/** Ways of naming a file outside the experiment in a type-check, for a folder `dir` on the server. */
const attacks = (dir: string) => ({
  "typeof import of a JSON file": `type Stolen = typeof import(${JSON.stringify(path.join(dir, "state.json"))});\nexport const probe: Stolen = 5;\n`,
  "import type of a module": `import type {} from ${JSON.stringify(path.join(dir, "secret"))};\n`,
  "../ out of the experiment": `import type {} from ${JSON.stringify(path.relative("/experiment", path.join(dir, "secret")))};\n`,
  "a reference path": `/// <reference path=${JSON.stringify(path.join(dir, "state.json"))} />\n`,
});

/** The messages of a type-check, with the folder named in them replaced. */
const messagesFor = (source: string, dir: string) =>
  typeCheckEnvironment({ "environment.ts": environment, "attack.ts": source }).map((d) => `${d.file}:${d.line}: ${d.message.replaceAll(dir, "<dir>")}`);

describe("the type checker is sealed", () => {
  // First in this file: the very first check of a process must read nothing either (the library was read at start).
  it("reads no file while it checks, even a path the code names", () => {
    const touched: string[] = [];
    // Every way Node's fs and TypeScript's own system object read a file or look at a folder, recorded.
    const restore: (() => void)[] = [];
    const watch = (label: string, holder: Record<string, unknown>, names: string[]) => {
      for (const name of names) {
        const original = holder[name];
        if (typeof original !== "function") continue;
        holder[name] = function (this: unknown, ...args: unknown[]) {
          touched.push(`${label}.${name} ${String(args[0])}`);
          return original.apply(this, args);
        };
        restore.push(() => (holder[name] = original));
      }
    };
    watch("fs", fs as unknown as Record<string, unknown>, [
      ...["readFile", "stat", "lstat", "exists", "open", "readdir", "realpath", "access"].flatMap((name) => [name, `${name}Sync`]),
      "createReadStream",
    ]);
    watch("fs.promises", fs.promises as unknown as Record<string, unknown>, ["readFile", "stat", "lstat", "open", "readdir", "realpath", "access"]);
    watch("ts.sys", ts.sys as unknown as Record<string, unknown>, [
      "readFile",
      "fileExists",
      "directoryExists",
      "getDirectories",
      "readDirectory",
      "realpath",
      "getFileSize",
      "getModifiedTime",
    ]);
    try {
      for (const source of Object.values(attacks(bait))) typeCheckEnvironment({ "environment.ts": environment, "attack.ts": source });
      typeCheckEnvironment({ "environment.ts": starters["single-turn"].source });
    } finally {
      for (const undo of restore) undo();
    }
    expect(touched).toEqual([]);
  });

  it("answers an import of a file outside the experiment as it answers one of a file that does not exist", () => {
    for (const [attack, source] of Object.entries(attacks(bait))) {
      const existing = messagesFor(source, bait);
      const missing = messagesFor(attacks(absent)[attack as keyof ReturnType<typeof attacks>], absent);
      expect(existing, attack).toEqual(missing);
      expect(existing.length, attack).toBeGreaterThan(0);
      expect(existing.join("\n"), attack).not.toMatch(/launchCodes|owner/);
    }
    // A package, or the compiler itself under node_modules, is not there either.
    for (const name of ["typescript", "node:fs", path.join(process.cwd(), "node_modules", "typescript", "lib", "typescript")]) {
      expect(messagesFor(`import type {} from ${JSON.stringify(name)};\n`, bait)).toEqual([
        `attack.ts:1: Cannot find module '${name}' or its corresponding type declarations.`,
      ]);
    }
  });

  it("names the SDK as the user imports it, and no file of the server's", () => {
    const diagnostics = typeCheckEnvironment({
      "environment.ts": `${environment}import * as sdk from "tinkerlab";\nexport const wrong: number = sdk;\nimport { nothing } from "tinkerlab";\n`,
    });
    const messages = diagnostics.map((d) => d.message);
    expect(messages).toContain(`Type 'typeof import("tinkerlab")' is not assignable to type 'number'.`);
    expect(messages).toContain(`Module '"tinkerlab"' has no exported member 'nothing'.`);
    expect(messages.join("\n")).not.toContain(process.cwd());
    expect(diagnostics.every((d) => d.file === "environment.ts")).toBe(true);
  });

  it("still checks an experiment's own files against each other and the SDK", async () => {
    for (const starter of Object.values(starters)) expect(typeCheckEnvironment({ "environment.ts": starter.source }), starter.kind).toEqual([]);
    const report = await validateExperimentSource(
      {
        "environment.ts": `import { double } from "./lib/math";\n${environment.replace("reward: 1", "reward: double(1)")}`,
        "lib/math.ts": `import { Rng } from "tinkerlab";\nexport const double = (n: number): number => n * 2;\nexport const seeded: Rng = new Rng(1);\nexport const bad: string = double(2);\n`,
      },
      { typeCheck: true, episodes: 1 },
    );
    expect(report.diagnostics.filter((d) => d.source === "type")).toEqual([
      { severity: "error", message: "Type 'number' is not assignable to type 'string'.", file: "lib/math.ts", line: 4, column: 14, source: "type" },
    ]);
  });
});
