/**
 * "Open the example's source" (server/experiments/example-source.ts): every built-in example's environment, copied
 * out of lib/envs as an experiment's files, compiles and type-checks in the sandbox as a custom environment, and is
 * the example's own code (not the starter).
 */
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { useCases } from "@/lib/envs";
import { EXAMPLE_ENTRY, exampleSource } from "@/server/experiments";
import { compileEnvironment } from "@/server/sandbox/compile";
import { typeCheckEnvironment } from "@/server/sandbox/typecheck";

const root = path.resolve(import.meta.dirname, "../../..");

describe("an example's source", () => {
  it.each(Object.keys(useCases))("%s: its own module, with a default export, compiles and type-checks", async (name) => {
    const source = exampleSource(name)!;
    expect(source).not.toBeNull();
    const entry = source.files[EXAMPLE_ENTRY]!;
    // The module's own text (the SDK imported as 'tinkerlab'), ending in the default export of this example's environment.
    const original = fs.readFileSync(path.join(root, source.module), "utf8");
    const body = original.replace(/from "@\/lib\/(?:sdk\/environment|model\/rng)"/g, 'from "tinkerlab"').trimEnd();
    expect(entry.startsWith(body)).toBe(true);
    expect(entry.trimEnd().endsWith(`export default ${source.exportName};`)).toBe(true);
    expect(entry).not.toContain("@/lib/");

    const compiled = await compileEnvironment(source.files);
    expect(compiled.ok ? [] : compiled.diagnostics).toEqual([]);
    expect(typeCheckEnvironment(source.files).filter((d) => d.severity === "error")).toEqual([]);
  });

  it("has none for a name that is no built-in environment", () => {
    expect(exampleSource("custom")).toBeNull();
    expect(exampleSource("no-such-example")).toBeNull();
  });
});
