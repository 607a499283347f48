import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject, DEFAULT_PROJECT, setMember } from "@/server/auth/projects";
import { users } from "@/server/db";
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
    const report = await callerFor(db.handle).experiments.validate({
      experimentId,
      files: { "environment.ts": "export default {\n  name: ,\n};\n" },
      typeCheck: false,
    });
    expect(report.ok).toBe(false);
    expect(report.diagnostics[0]).toMatchObject({ source: "syntax", file: "environment.ts", line: 2 });
  });

  it("type-checks without reaching the server's files: a file outside the experiment is as absent as a missing one", async () => {
    const bait = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-bait-"));
    fs.writeFileSync(path.join(bait, "state.json"), JSON.stringify({ launchCodes: "0000" }));
    fs.writeFileSync(path.join(bait, "secret.ts"), "export const secret = 1;\n");
    const attack = (dir: string) =>
      `${good}type Stolen = typeof import(${JSON.stringify(path.join(dir, "state.json"))});\nexport const probe: Stolen = 5;\nimport type {} from ${JSON.stringify(path.join(dir, "secret"))};\n`;
    const messages = async (dir: string) => {
      const report = await callerFor(db.handle).experiments.validate({ experimentId, files: { "environment.ts": attack(dir) }, typeCheck: true, episodes: 1 });
      return report.diagnostics.map((d) => `${d.file}:${d.line}: ${d.message.replaceAll(dir, "<dir>")}`);
    };
    try {
      const existing = await messages(bait);
      expect(existing).toEqual(await messages(path.join(bait, "absent")));
      expect(existing).toEqual([
        "environment.ts:11: Cannot find module '<dir>/state.json' or its corresponding type declarations.",
        "environment.ts:13: Cannot find module '<dir>/secret' or its corresponding type declarations.",
      ]);
    } finally {
      fs.rmSync(bait, { recursive: true, force: true });
    }
  });

  it("lets the environment read the datasets of the experiment's project, and no other's", async () => {
    const fromRows = good
      .replace('data: { kind: "free" },', 'data: { kind: "dataset", dataset: "counts" },')
      .replace(
        'reset: () => ({ state: { n: 0 }, observation: "0" }),',
        "reset: ({ sample }) => ({ state: { n: Number(sample!.start) }, observation: String(sample!.start) }),",
      );
    expect(fromRows).toContain("sample!.start");
    const local = callerFor(db.handle);
    await local.datasets.upload({ name: "counts", text: [0, 1, 2].map((start) => JSON.stringify({ start })).join("\n") });
    const report = await local.experiments.validate({ experimentId, files: { "environment.ts": fromRows }, typeCheck: false });
    expect(report.diagnostics.filter((d) => d.severity === "error")).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.episodes.length).toBeGreaterThan(0);

    // The same source in another project's experiment: that project has no dataset 'counts'.
    const cleo = { id: "usr_cleo", name: "Cleo", email: "cleo@example.com" };
    await db.handle.db.insert(users).values(cleo);
    const { id: projectId } = await createProject(db.handle.db, { name: "Cleo's", ownerId: cleo.id });
    const asCleo = callerFor(db.handle, cleo);
    const { id: cleosExperiment } = await asCleo.experiments.create({ name: "cleo's", projectId });
    const elsewhere = await asCleo.experiments.validate({ experimentId: cleosExperiment, files: { "environment.ts": fromRows }, typeCheck: false });
    expect(elsewhere.ok).toBe(false);
    expect(elsewhere.diagnostics).toContainEqual(
      expect.objectContaining({ severity: "error", message: expect.stringMatching(/^data\.dataset: no dataset named 'counts'/) }),
    );

    // Validating runs code for an experiment: a stranger to its project does not find it, a viewer may not.
    await expect(asCleo.experiments.validate({ experimentId, files: { "environment.ts": good }, typeCheck: false })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    await setMember(db.handle.db, DEFAULT_PROJECT, cleo.id, "viewer");
    await expect(callerFor(db.handle, cleo).experiments.validate({ experimentId, files: { "environment.ts": good }, typeCheck: false })).rejects.toMatchObject({
      code: "FORBIDDEN",
    });
  });
});
