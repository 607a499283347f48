/**
 * The boundaries the layout promises (docs/ARCHITECTURE.md): only server/jobs writes the runs and jobs tables, and a
 * server module that has a public index.ts is imported through it from other modules. Read from the sources, so a change
 * that crosses a boundary fails here, naming the file and the line.
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const root = path.resolve(__dirname, "../..");
const sourceRoots = ["server", "lib", "app", "components", "bin", "bench"];

function sourceFiles(): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!["node_modules", ".next", "bases", "data"].includes(entry.name)) walk(rel);
      } else if (/\.(ts|tsx|mts|mjs)$/.test(entry.name)) files.push(rel);
    }
  };
  sourceRoots.forEach(walk);
  return files;
}

/** A module is a folder directly under server/, lib/ or components/. */
function moduleOf(file: string): string | null {
  const parts = file.split("/");
  return parts.length > 2 && ["server", "lib", "components"].includes(parts[0]!) ? parts.slice(0, 2).join("/") : null;
}

/** The second entries a module publishes besides its index (browser.ts unless named here). */
const SECOND_ENTRIES: Record<string, string[]> = { "server/auth": ["constants"], "server/api": ["rsc"] };

const lineOf = (text: string, index: number) => text.slice(0, index).split("\n").length;

describe("architecture", () => {
  it("only server/jobs writes the runs and jobs tables", () => {
    const writes = /\.(insert|update|delete)\(\s*(runs|jobs)\s*\)|\b(insert\s+into|update|delete\s+from)\s+\$\{\s*(runs|jobs)\s*\}/gi;
    const offenders: string[] = [];
    for (const file of sourceFiles()) {
      if (file.startsWith("server/jobs/")) continue;
      const text = fs.readFileSync(path.join(root, file), "utf8");
      for (const match of text.matchAll(writes)) offenders.push(`${file}:${lineOf(text, match.index!)}: ${match[0]}`);
    }
    expect(offenders).toEqual([]);
  });

  /**
   * Server modules only: lib/ is imported file by file on purpose, as its importers include the sandbox's guest
   * bundle and the browser, where an index would bring in code they must not carry (zod, node:fs, every built-in
   * environment).
   */
  it("a server module with an index.ts is imported through it (or its browser.ts) from other modules", () => {
    const indexed = new Set(
      sourceFiles()
        .filter((file) => /^server\/[^/]+\/index\.tsx?$/.test(file))
        .map((file) => path.dirname(file)),
    );
    const offenders: string[] = [];
    for (const file of sourceFiles()) {
      const text = fs.readFileSync(path.join(root, file), "utf8");
      for (const match of text.matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)) {
        const spec = match[1]!;
        let target: string;
        if (spec.startsWith("@/")) target = spec.slice(2);
        else if (spec.startsWith(".")) target = path.normalize(path.join(path.dirname(file), spec));
        else continue;
        const targetModule = moduleOf(`${target}/x`) ?? moduleOf(target);
        const targetParts = target.split("/");
        if (!targetModule || !indexed.has(targetModule) || moduleOf(file) === targetModule) continue;
        // A module may publish a second entry for code that cannot load the whole module: browser.ts (no Node.js in
        // it), auth's constants (read by the browser and Next's proxy), api's rsc.ts (server components).
        const entry = targetParts[2]?.replace(/\.tsx?$/, "");
        if (targetParts.length > 2 && entry !== "index" && !(SECOND_ENTRIES[targetModule] ?? ["browser"]).includes(entry!))
          offenders.push(`${file}:${lineOf(text, match.index!)}: imports ${spec}, past ${targetModule}/index.ts`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
