/**
 * Datasets: an upload is validated (errors name the line), split into train and test, stored, listed and
 * previewed; conversations are told from rows; an SFT run names an uploaded dataset of conversations and queues
 * an "sft" job. Datasets belong to a project: names are unique in it, and runs read their own project's.
 */
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject, DEFAULT_PROJECT } from "@/server/auth/projects";
import { jobs, users, type DatabaseHandle } from "@/server/db";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
});
afterAll(() => db.close());

const rows = Array.from({ length: 50 }, (_, i) => JSON.stringify({ question: `${i}+1`, answer: i + 1 })).join("\n");
const conversations = ["a", "b"]
  .map((c) =>
    JSON.stringify({
      messages: [
        { role: "user", content: c },
        { role: "assistant", content: c.toUpperCase() },
      ],
    }),
  )
  .join("\n");

describe("datasets", () => {
  it("stores rows split 80/20 (rows that name their split keep it), lists and previews them", async () => {
    const caller = callerFor(handle);
    const made = await caller.datasets.upload({ name: "sums", text: rows });
    expect(made).toMatchObject({ name: "sums", kind: "rows", rowCount: 50, trainRows: 40, testRows: 10, fields: ["question", "answer"] });
    const { uploaded, builtIn } = await caller.datasets.list();
    expect(builtIn).toContain("word-problems");
    expect(uploaded.map((d) => d.name)).toContain("sums");
    expect(uploaded[0]).not.toHaveProperty("path");
    expect(made.projectId).toBe(DEFAULT_PROJECT);
    const preview = await caller.datasets.preview({ id: made.id, limit: 3 });
    expect(preview.rows).toHaveLength(3);
    expect(preview.rows[0]).toMatchObject({ question: "0+1", answer: 1, split: expect.stringMatching(/^(train|test)$/) });
    const named = await caller.datasets.upload({ name: "named", text: '{"q": 1, "split": "test"}\n{"q": 2, "split": "train"}\n{"q": 3}', testShare: 0 });
    expect(named).toMatchObject({ trainRows: 2, testRows: 1 });
  });

  it("refuses bad input naming the line, a taken name and a bad name; nothing is stored", async () => {
    const caller = callerFor(handle);
    await expect(caller.datasets.upload({ name: "broken", text: '{"a": 1}\n{"a": [1, 2]}' })).rejects.toThrow(
      /broken:2: field 'a' must be a string, number, boolean or null; got an array/,
    );
    await expect(caller.datasets.upload({ name: "sums", text: rows })).rejects.toThrow(/a dataset named 'sums' exists already in this project/);
    await expect(caller.datasets.upload({ name: "Bad Name", text: rows })).rejects.toThrow(/name: use 1-64 lowercase letters/);
    await expect(caller.datasets.upload({ name: "word-problems", text: rows })).rejects.toThrow(/is a built-in dataset/);
    await expect(caller.datasets.upload({ name: "badsplit", text: '{"a": 1, "split": "dev"}' })).rejects.toThrow(/split "dev"; a split is "train" or "test"/);
    await expect(caller.datasets.upload({ name: "chats", text: '{"messages": [{"role": "robot", "content": "x"}]}' })).rejects.toThrow(
      /chats:1: messages\[0\].role must be system, user or assistant/,
    );
    expect((await caller.datasets.list()).uploaded.map((d) => d.name).sort()).toEqual(["named", "sums"]);
  });

  it("launches an SFT run on an uploaded dataset of conversations as an sft job, and names a wrong one", async () => {
    const caller = callerFor(handle);
    await caller.datasets.upload({ name: "chats", text: conversations });
    const config: ExperimentConfigInput = {
      name: "sft",
      environment: "arithmetic",
      agent: { base: "arithmetic-base", sampling: { maxTokens: 5 } },
      algorithm: { name: "sft", steps: 10 },
      sft: { data: "dataset", dataset: "chats" },
    };
    const experiment = await caller.experiments.create({ name: "sft", config });
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    const [job] = await handle.db.select({ kind: jobs.kind }).from(jobs).where(eq(jobs.runId, runId));
    expect(job!.kind).toBe("sft");
    const wrong = await caller.experiments.create({ name: "sft-rows", config: { ...config, sft: { data: "dataset", dataset: "sums" } } });
    await expect(caller.runs.launch({ experimentId: wrong.id })).rejects.toThrow(/'sums' holds rows, not conversations/);
  });

  it("keeps each project's datasets to itself: names are unique per project, others' datasets are not found", async () => {
    const bob = { id: "usr_bob", name: "Bob", email: "bob@example.com" };
    await handle.db.insert(users).values(bob);
    const { id: bobsProject } = await createProject(handle.db, { name: "Bob's", ownerId: bob.id });
    const asBob = callerFor(handle, bob);
    // The same name as the default project's dataset, in another project.
    const bobsSums = await asBob.datasets.upload({ name: "sums", text: rows });
    expect(bobsSums.projectId).toBe(bobsProject);
    expect((await asBob.datasets.list()).uploaded.map((d) => d.name)).toEqual(["sums"]);
    expect((await asBob.datasets.preview({ id: bobsSums.id, limit: 1 })).rows).toHaveLength(1);
    const [localSums] = (await callerFor(handle).datasets.list()).uploaded.filter((d) => d.name === "sums" && d.projectId === DEFAULT_PROJECT);
    await expect(asBob.datasets.preview({ id: localSums!.id })).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(asBob.datasets.upload({ name: "elsewhere", text: rows, projectId: DEFAULT_PROJECT })).rejects.toMatchObject({ code: "NOT_FOUND" });
    // The local user sees every project's datasets.
    expect(
      (await callerFor(handle).datasets.list()).uploaded
        .filter((d) => d.name === "sums")
        .map((d) => d.projectId)
        .sort(),
    ).toEqual([DEFAULT_PROJECT, bobsProject].sort());
    // An SFT run reads its own project's datasets only: 'chats' lives in the default project.
    const experiment = await asBob.experiments.create({
      name: "sft",
      config: {
        name: "sft",
        environment: "arithmetic",
        agent: { base: "arithmetic-base", sampling: { maxTokens: 5 } },
        algorithm: { name: "sft", steps: 10 },
        sft: { data: "dataset", dataset: "chats" },
      },
    });
    await expect(asBob.runs.launch({ experimentId: experiment.id })).rejects.toThrow(/this project has no uploaded dataset named 'chats'/);
  });
});
