import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let experimentId: string;
beforeAll(async () => {
  db = await openTestDatabase();
  experimentId = (await callerFor(db.handle).experiments.create({ name: "validated" })).id;
});
afterAll(() => db.close());

const good = `import { defineEnvironment } from "tinkerlab";
export default defineEnvironment<{ n: number }, number>({
  name: "count",
  data: { kind: "free" },
  systemPrompt: "Say a number.",
  maxTurns: 3,
  reset: () => ({ state: { n: 0 }, observation: "0" }),
  parseAction: (text) => (/^\\d+$/.test(text) ? { ok: true, action: Number(text) } : { ok: false, error: "a number" }),
  step: (state, action) => ({ state: { n: state.n + action }, reward: 1, done: state.n + action > 2, observation: String(state.n + action) }),
});
`;

describe("experiments.validate", () => {
  it("dry-runs a sound environment and reports no errors", async () => {
    const report = await callerFor(db.handle).experiments.validate({ experimentId, files: { "environment.ts": good }, typeCheck: false });
    expect(report.ok).toBe(true);
    expect(report.episodes.length).toBeGreaterThan(0);
    expect(report.environment?.name).toBe("count");
  });

  it("points a runtime error and a bad reward at the user's own line", async () => {
    const broken = good.replace("reward: 1,", 'reward: "1" as unknown as number,');
    const report = await callerFor(db.handle).experiments.validate({ experimentId, files: { "environment.ts": broken }, typeCheck: false });
    expect(report.ok).toBe(false);
    const diagnostic = report.diagnostics.find((d) => d.severity === "error")!;
    expect(diagnostic.message).toMatch(/reward/);
    expect(diagnostic.file).toBe("environment.ts");
  });

  it("reports a syntax error with its file, line and column", async () => {
    const report = await callerFor(db.handle).experiments.validate({ experimentId, files: { "environment.ts": "export default {\n  name: ,\n};\n" }, typeCheck: false });
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]).toMatchObject({ source: "syntax", file: "environment.ts", line: 2 });
  });
});
