/**
 * A diagnostic names only the user's files (with their lines), or the SDK by the name the user imports it with, or
 * "Tinkerlab's runtime": never a file of the server's code, nor a folder of the server's.
 */
import { describe, expect, it } from "vitest";
import type { SandboxDiagnostic } from "@/server/sandbox";
import { validateExperimentSource } from "@/server/sandbox/validate";

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

/** Anything in a diagnostic that names a place on the server: its folder, or a file of its code. */
function serverPlaces(diagnostics: SandboxDiagnostic[]): string[] {
  const text = diagnostics.map((d) => `${d.file ?? ""} ${d.message}`).join("\n");
  const files = text.match(/\b(server|lib|node_modules)\/[\w./-]+\.[cm]?[jt]s\b/g) ?? [];
  return [...files, ...[process.cwd(), "/tmp/"].filter((folder) => text.includes(folder))];
}

describe("diagnostics name no file of the server's", () => {
  it("answers an import out of the experiment ('../') at the user's line, as it answers a missing file", async () => {
    const outside = await validateExperimentSource({ "environment.ts": `import { secret } from "../../server/env";\nsecret();\n${environment}` });
    const missing = await validateExperimentSource({ "environment.ts": `import { secret } from "./server/env";\nsecret();\n${environment}` });
    expect(outside.diagnostics).toEqual([
      {
        severity: "error",
        message: "cannot find '../../server/env' among your files (environment.ts)",
        file: "environment.ts",
        line: 1,
        column: 24,
        source: "syntax",
      },
    ]);
    expect(missing.diagnostics).toEqual([{ ...outside.diagnostics[0], message: "cannot find './server/env' among your files (environment.ts)" }]);

    // From a file in a folder, one level up is still inside the experiment; two are not.
    const nested = await validateExperimentSource({
      "environment.ts": `import { two } from "./lib/a";\ntwo();\n${environment}`,
      "lib/a.ts": `import { one } from "../b";\nimport { none } from "../../b";\nexport const two = () => one() + none();\n`,
      "b.ts": "export const one = () => 1;\n",
    });
    expect(nested.diagnostics).toEqual([
      {
        severity: "error",
        message: "cannot find '../../b' among your files (environment.ts, lib/a.ts, b.ts)",
        file: "lib/a.ts",
        line: 2,
        column: 22,
        source: "syntax",
      },
    ]);
  });

  it("names the SDK by its module name when an import is not among its exports", async () => {
    const report = await validateExperimentSource(
      { "environment.ts": `import { nothing } from "tinkerlab";\nimport { alsoNothing } from "@/lib/sdk/environment";\nnothing(alsoNothing);\n${environment}` },
      { typeCheck: false },
    );
    expect(report.diagnostics.map((d) => `${d.file}:${d.line}: ${d.message}`)).toEqual([
      `environment.ts:1: No matching export in 'tinkerlab' for import "nothing"`,
      `environment.ts:2: No matching export in '@/lib/sdk/environment' for import "alsoNothing"`,
    ]);
    expect(serverPlaces(report.diagnostics)).toEqual([]);
  });

  it("says an uploaded dataset could not be read without naming where it is kept", async () => {
    const fromRows = environment.replace('data: { kind: "free" },', 'data: { kind: "dataset", dataset: "counts" },');
    const report = await validateExperimentSource(
      { "environment.ts": fromRows },
      { typeCheck: false, datasetFiles: { counts: { path: "/tmp/tinkerlab-artifacts-gone/datasets/counts.jsonl", kind: "rows" } } },
    );
    expect(report.diagnostics).toContainEqual(
      expect.objectContaining({
        severity: "error",
        message: "data.dataset: the uploaded dataset 'counts' could not be read on the server (ENOENT): upload it again",
      }),
    );
    expect(serverPlaces(report.diagnostics)).toEqual([]);
  });
});
