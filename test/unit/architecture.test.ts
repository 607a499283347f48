/**
 * The boundaries the layout promises (docs/ARCHITECTURE.md): only server/jobs writes the runs and jobs tables; every
 * server module has an index.ts and is imported through it (or a second entry it names) from other modules; no
 * file imports itself round a cycle; imports point one way (UI → server's browser entries, lib → nothing of server
 * or the UI, server → nothing of the UI); and no value is cast `as never`. Read from the sources, so a change that
 * crosses a boundary fails here, naming the file and the line.
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
const SECOND_ENTRIES: Record<string, string[]> = {
  "server/auth": ["constants"],
  "server/api": ["rsc"],
  // Kept out of the worker's index, which the web server loads: these load the model code (run-job: a job run in
  // this process, as bench:newcomer does).
  "server/worker": ["worker-process", "base-models", "base-import", "run-job"],
  // What a serving job on a worker and the web server's hub say to each other, without loading the hub.
  "server/serving": ["protocol"],
};

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

  it("every server module has an index.ts, and other modules import it through that or a second entry it names", () => {
    const modules = fs
      .readdirSync(path.join(root, "server"), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => `server/${entry.name}`);
    expect(modules.filter((dir) => !fs.existsSync(path.join(root, dir, "index.ts")))).toEqual([]);
    const offenders: string[] = [];
    for (const edge of importEdges()) {
      const targetModule = moduleOf(edge.target);
      if (!targetModule?.startsWith("server/") || moduleOf(edge.file) === targetModule) continue;
      const entry = edge.target.split("/")[2];
      if (entry !== undefined && entry !== "index" && !(SECOND_ENTRIES[targetModule] ?? ["browser"]).includes(entry))
        offenders.push(`${edge.file}:${edge.line}: imports ${edge.spec}, past ${targetModule}/index.ts`);
    }
    expect(offenders).toEqual([]);
  });

  it("no file of server/, lib/ or bin/ imports itself round a cycle (imports of values, as loaded)", () => {
    const graph = new Map<string, Set<string>>();
    for (const edge of importEdges()) {
      if (edge.typeOnly || edge.dynamic || !/^(server|lib|bin)\//.test(edge.file)) continue;
      const target = fileOf(edge.target);
      if (target && /^(server|lib|bin)\//.test(target)) graph.set(edge.file, (graph.get(edge.file) ?? new Set()).add(target));
    }
    expect(cyclesOf(graph)).toEqual([]);
  });

  it("imports point one way: the UI reaches the server only through its browser entries, lib/ and server/ never the UI", () => {
    const offenders: string[] = [];
    for (const edge of importEdges()) {
      const from = edge.file.split("/")[0]!;
      const to = edge.target.split("/")[0]!;
      const where = `${edge.file}:${edge.line}: imports ${edge.spec}`;
      if ((from === "server" || from === "lib") && (to === "components" || to === "app")) offenders.push(`${where} (the UI)`);
      if (from === "lib" && to === "server" && !edge.typeOnly) offenders.push(`${where} (lib/ takes only types from server/)`);
      if (from === "components" && to === "server" && !edge.typeOnly && !BROWSER_ENTRIES.some((entry) => edge.target === entry))
        offenders.push(`${where} (the UI takes values only from ${BROWSER_ENTRIES.join(", ")})`);
    }
    expect(offenders).toEqual([]);
  });

  it("casts nothing `as never`: a config or a call's arguments are parsed by their schema instead", () => {
    const offenders: string[] = [];
    for (const file of sourceFiles()) {
      const text = fs.readFileSync(path.join(root, file), "utf8");
      for (const match of text.matchAll(/\bas never\b/g)) offenders.push(`${file}:${lineOf(text, match.index!)}`);
    }
    expect(offenders).toEqual([]);
  });
});

/** The server files the UI may import values from: code made to run in a browser. */
const BROWSER_ENTRIES = ["server/sandbox/browser", "server/validation/browser", "server/auth/constants"];

type ImportEdge = { file: string; line: number; spec: string; target: string; typeOnly: boolean; dynamic: boolean };

/** Every import and re-export of the project's own files (`@/…` or relative), with its target as a path without extension. */
function importEdges(): ImportEdge[] {
  const edges: ImportEdge[] = [];
  const statement = /\b(import|export)\s+(type\s+)?(?:([\w*\s{},$]*?)\s+from\s+)?"([^"]+)"|\bimport\(\s*"([^"]+)"\s*\)/g;
  for (const file of sourceFiles()) {
    const text = fs.readFileSync(path.join(root, file), "utf8");
    for (const match of text.matchAll(statement)) {
      const spec = match[4] ?? match[5]!;
      let target: string;
      if (spec.startsWith("@/")) target = spec.slice(2);
      else if (spec.startsWith(".")) target = path.normalize(path.join(path.dirname(file), spec));
      else continue;
      const names = match[3]?.trim() ?? "";
      const allTyped =
        names.startsWith("{") &&
        names
          .slice(1, -1)
          .split(",")
          .every((name) => name.trim() === "" || name.trim().startsWith("type "));
      edges.push({
        file,
        line: lineOf(text, match.index!),
        spec,
        target: target.replace(/\.(ts|tsx|mts|mjs)$/, ""),
        typeOnly: match[2] !== undefined || (allTyped && names !== "{}"),
        dynamic: match[5] !== undefined,
      });
    }
  }
  return edges;
}

/** The source file an import's target names, or null (a package, an asset). */
function fileOf(target: string): string | null {
  for (const candidate of [`${target}.ts`, `${target}.tsx`, `${target}.mts`, `${target}.mjs`, `${target}/index.ts`]) {
    if (fs.existsSync(path.join(root, candidate))) return candidate;
  }
  return null;
}

/** Each cycle of the graph, as its files joined by arrows (Tarjan's strongly connected components of more than one file). */
function cyclesOf(graph: Map<string, Set<string>>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[] = [];
  let next = 0;
  const visit = (node: string) => {
    index.set(node, next);
    low.set(node, next++);
    stack.push(node);
    onStack.add(node);
    for (const to of graph.get(node) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(node, Math.min(low.get(node)!, low.get(to)!));
      } else if (onStack.has(to)) low.set(node, Math.min(low.get(node)!, index.get(to)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1) cycles.push(component.sort().join(" → "));
    }
  };
  for (const node of graph.keys()) if (!index.has(node)) visit(node);
  return cycles;
}
