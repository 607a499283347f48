/**
 * Datasets: an upload is validated (errors name the line), split into train and test, stored, listed and
 * previewed; conversations are told from rows; an SFT run names an uploaded dataset of conversations and queues
 * an "sft" job. Datasets belong to a project: names are unique in it, and runs read their own project's. A dataset
 * is renamed or deleted by its project's editors, never while an experiment's latest version or an unended run
 * names it (a rename only while no unended run reads it).
 */
import fs from "node:fs";
import type { ExperimentConfigInput } from "@/lib/sdk/experiment";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createProject, DEFAULT_PROJECT, setMember } from "@/server/auth/projects";
import { datasets, jobs, runs, users, type DatabaseHandle } from "@/server/db";
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

describe("renaming and deleting a dataset", () => {
  const capitals = '{"country": "France", "capital": "Paris"}\n{"country": "Peru", "capital": "Lima"}\n';
  const quizSource = (dataset: string) =>
    `import { defineEnvironment } from "tinkerlab";\nexport default defineEnvironment({ name: "quiz", data: { kind: "dataset", dataset: "${dataset}" } });\n`;
  const stored = async (id: string) => (await handle.db.select({ path: datasets.path, name: datasets.name }).from(datasets).where(eq(datasets.id, id)))[0];

  it("renames a dataset, refusing a name taken in the project, a built-in one and a malformed one", async () => {
    const caller = callerFor(handle);
    const made = await caller.datasets.upload({ name: "capitals", text: capitals });
    await caller.datasets.upload({ name: "countries", text: capitals });
    await expect(caller.datasets.rename({ id: made.id, name: "countries" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: "a dataset named 'countries' exists already in this project; choose another name",
    });
    await expect(caller.datasets.rename({ id: made.id, name: "word-problems" })).rejects.toThrow(/'word-problems' is a built-in dataset/);
    await expect(caller.datasets.rename({ id: made.id, name: "Capitals!" })).rejects.toThrow(/name: use 1-64 lowercase letters/);
    expect((await stored(made.id))!.name).toBe("capitals");

    // An experiment naming the old name is not changed, but named in the answer.
    const quiz = await caller.experiments.create({
      name: "quiz",
      files: { "environment.ts": quizSource("capitals") },
      config: { name: "quiz", environment: "custom", agent: { base: "arithmetic-base" } },
    });
    const renamed = await caller.datasets.rename({ id: made.id, name: "world-capitals" });
    expect(renamed).toEqual({ id: made.id, name: "world-capitals", stillNamedBy: [{ id: quiz.id, name: "quiz" }] });
    expect((await caller.datasets.list()).uploaded.map((d) => d.name)).toContain("world-capitals");
    expect((await caller.datasets.preview({ id: made.id, limit: 1 })).rows).toHaveLength(1);
    // Its old name is free again.
    await caller.datasets.upload({ name: "capitals", text: capitals });
  });

  it("refuses to delete a dataset an experiment's latest version names, saying which and what to do", async () => {
    const caller = callerFor(handle);
    const made = await caller.datasets.upload({ name: "atlas", text: capitals });
    const quiz = await caller.experiments.create({
      name: "atlas-quiz",
      files: { "environment.ts": quizSource("atlas") },
      config: { name: "q", environment: "custom", agent: { base: "arithmetic-base" } },
    });
    await expect(caller.datasets.delete({ id: made.id })).rejects.toMatchObject({
      code: "CONFLICT",
      message: `dataset 'atlas' is in use, so it was not deleted: experiment 'atlas-quiz' (${quiz.id}) names it in the latest version. Save each experiment naming another dataset, then delete it.`,
    });
    // A name that only contains the dataset's ('atlas-2') does not count; a later version that names none frees it.
    await caller.experiments.save({
      id: quiz.id,
      files: { "environment.ts": quizSource("atlas-2") },
      config: { name: "q", environment: "custom", agent: { base: "arithmetic-base" } },
    });
    const { path } = (await stored(made.id))!;
    expect(fs.existsSync(path)).toBe(true);
    expect(await caller.datasets.delete({ id: made.id })).toEqual({ id: made.id, name: "atlas" });
    expect(fs.existsSync(path)).toBe(false);
    expect((await caller.datasets.list()).uploaded.map((d) => d.name)).not.toContain("atlas");
    await expect(caller.datasets.delete({ id: made.id })).rejects.toMatchObject({ code: "NOT_FOUND", message: `No dataset with id '${made.id}'` });
  });

  it("refuses to delete or rename a dataset a queued run reads, until the run has ended", async () => {
    const caller = callerFor(handle);
    const made = await caller.datasets.upload({ name: "dialogues", text: conversations });
    const config: ExperimentConfigInput = {
      name: "imitate",
      environment: "arithmetic",
      agent: { base: "arithmetic-base", sampling: { maxTokens: 5 } },
      algorithm: { name: "sft", steps: 10 },
      sft: { data: "dataset", dataset: "dialogues" },
    };
    const experiment = await caller.experiments.create({ name: "imitate", config });
    const { runId } = await caller.runs.launch({ experimentId: experiment.id });
    // The experiment moves on to another dataset; the queued run still reads this one.
    await caller.experiments.save({ id: experiment.id, files: {}, config: { ...config, sft: { data: "demonstrator" } } });
    const [run] = await handle.db.select({ name: runs.name }).from(runs).where(eq(runs.id, runId));
    await expect(caller.datasets.delete({ id: made.id })).rejects.toMatchObject({
      code: "CONFLICT",
      message: `dataset 'dialogues' is in use, so it was not deleted: run '${run!.name}' (${runId}, queued) reads it. Cancel each run or let it end, then delete it.`,
    });
    await expect(caller.datasets.rename({ id: made.id, name: "talks" })).rejects.toMatchObject({
      code: "CONFLICT",
      message: expect.stringMatching(
        /^dataset 'dialogues' is read by run '.+' \(run_\w+, queued\), which looks it up by name when starting or resuming: cancel it/,
      ),
    });
    await caller.runs.control({ id: runId, action: "cancel" });
    expect(await caller.datasets.rename({ id: made.id, name: "talks" })).toEqual({ id: made.id, name: "talks", stillNamedBy: [] });
    await caller.datasets.delete({ id: made.id });
    expect((await caller.datasets.list()).uploaded.map((d) => d.name)).not.toContain("talks");
  });

  it("lets only the dataset's project's editors rename or delete it", async () => {
    const vera = { id: "usr_vera", name: "Vera", email: "vera@example.com" };
    await handle.db.insert(users).values(vera);
    const made = await callerFor(handle).datasets.upload({ name: "guarded", text: capitals });
    await setMember(handle.db, DEFAULT_PROJECT, vera.id, "viewer");
    const asVera = callerFor(handle, vera);
    expect((await asVera.datasets.list()).uploaded.find((d) => d.id === made.id)).toMatchObject({ mayEdit: false });
    await expect(asVera.datasets.delete({ id: made.id })).rejects.toMatchObject({ code: "FORBIDDEN" });
    await expect(asVera.datasets.rename({ id: made.id, name: "mine" })).rejects.toMatchObject({ code: "FORBIDDEN" });
    expect((await callerFor(handle).datasets.list()).uploaded.find((d) => d.id === made.id)).toMatchObject({ name: "guarded", mayEdit: true });
  });
});
