/**
 * The command line's side of the runs table, against the API over HTTP: `runs ls --sort … --tag …` lists one
 * project's runs in the table's order with the sort column beside them, and `runs tag`, `rename`, `archive` and
 * `delete` change runs as the workbench's row menu does, refusals in one line with the CLI's exit code.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject } from "@/server/auth/projects";
import { type DatabaseHandle, LOCAL_USER, metricPoints, newId, runs, setDatabase } from "@/server/db";
import { testRunConfig } from "../support/run-config";
import { type ApiServer, startApiServer } from "./support/api-server";
import { callerFor, openTestDatabase } from "./support/database";

const ROOT = path.resolve(__dirname, "../..");
const home = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-cli-runs-"));

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let server: ApiServer;
let projectId: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  server = await startApiServer();
  projectId = (await createProject(handle.db, { name: "cli", ownerId: LOCAL_USER.id })).id;
  const experiment = await callerFor(handle).experiments.create({
    projectId,
    name: "cli-exp",
    config: { name: "cli-exp", environment: "arithmetic", agent: { base: "arithmetic-base" } },
  });
  for (const [i, [name, best]] of (
    [
      ["low", 0.2],
      ["high", 0.9],
      ["mid", 0.5],
    ] as const
  ).entries()) {
    const id = newId("run");
    ids[name] = id;
    await handle.db.insert(runs).values({
      id,
      projectId,
      experimentId: experiment.id,
      experimentVersionId: experiment.versionId,
      createdBy: LOCAL_USER.id,
      name,
      status: "completed",
      config: testRunConfig(),
      step: 2,
      totalSteps: 2,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, i)),
    });
    await handle.db.insert(metricPoints).values([
      { runId: id, name: "reward/mean", step: 1, value: best },
      { runId: id, name: "reward/mean", step: 2, value: best / 2 },
    ]);
  }
}, 120_000);
afterAll(async () => {
  await server?.close();
  await db?.close();
  fs.rmSync(home, { recursive: true, force: true });
});

/** Runs bin/tinkerlab against the test's API server; resolves with its exit code and output. */
function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "bin", "tinkerlab"), [...args, "--url", server.url], {
      env: { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"), NODE_ENV: "production" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

const namesIn = (stdout: string) => (JSON.parse(stdout) as { name: string }[]).map((r) => r.name);

describe("tinkerlab runs", () => {
  it("lists by a metric's best value and by tag, tags and renames runs", async () => {
    const sorted = await cli("runs", "ls", "--project", projectId, "--sort", "metric:max:reward/mean");
    expect(sorted.code).toBe(0);
    const lines = sorted.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^ID\s+NAME\s+STATUS\s+STEP\s+REWARD\/MEAN \(MAX\)\s+TAGS\s+CREATED$/);
    expect(lines.slice(1).map((line) => line.split(/\s+/)[1])).toEqual(["high", "mid", "low"]);
    expect(lines[1]).toContain("0.9");

    expect((await cli("runs", "tag", ids.low!, "keep", "baseline")).stdout.trim()).toBe(`${ids.low}: keep, baseline`);
    expect((await cli("runs", "tag", ids.high!, "keep")).code).toBe(0);
    expect((await cli("runs", "tag", ids.low!, "--remove", "baseline")).stdout.trim()).toBe(`${ids.low}: keep`);
    const tagged = await cli("runs", "ls", "--project", projectId, "--tag", "keep", "--sort", "metric:max:reward/mean", "--order", "asc", "--json");
    expect(namesIn(tagged.stdout)).toEqual(["low", "high"]);

    const bad = await cli("runs", "tag", ids.low!, "two words");
    expect([bad.code, bad.stderr.trim()]).toEqual([3, expect.stringMatching(/'two words' cannot be a tag/)]);

    expect((await cli("runs", "rename", ids.mid!, "middle")).stdout.trim()).toBe(`${ids.mid} is now named 'middle'.`);
    const taken = await cli("runs", "rename", ids.mid!, "high");
    expect(taken.code).toBe(3);
    expect(taken.stderr).toContain("is named 'high' already");
    const unknownColumn = await cli("runs", "ls", "--sort", "reward");
    expect([unknownColumn.code, unknownColumn.stderr]).toEqual([2, expect.stringContaining("--sort: 'reward' is not a column")]);
  }, 120_000);

  it("archives, and deletes only with the run's name as confirmation", async () => {
    expect((await cli("runs", "archive", ids.low!)).code).toBe(0);
    expect(namesIn((await cli("runs", "ls", "--project", projectId, "--sort", "name", "--order", "asc", "--json")).stdout)).toEqual(["high", "middle"]);
    expect((await cli("runs", "archive", ids.low!, "--undo")).code).toBe(0);

    const unconfirmed = await cli("runs", "delete", ids.low!);
    expect([unconfirmed.code, unconfirmed.stderr.trim()]).toEqual([
      2,
      "tinkerlab: to delete run 'low' and all it recorded, confirm with its name: --confirm 'low'",
    ]);
    const wrong = await cli("runs", "delete", ids.low!, "--confirm", "high");
    expect(wrong.code).toBe(3);
    expect((await cli("runs", "delete", ids.low!, "--confirm", "low")).stdout.trim()).toBe(`Deleted low (${ids.low}).`);
    expect(namesIn((await cli("runs", "ls", "--project", projectId, "--sort", "name", "--order", "asc", "--json")).stdout)).toEqual(["high", "middle"]);
  }, 120_000);
});
