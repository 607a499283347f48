/**
 * Reports: a project's editors make, edit, reorder and delete them; its viewers read them and are refused edits;
 * another project's member finds none; a malformed block is refused naming its path; a panel's runs must be the
 * project's. A report's share link reads the report and exactly the runs its panels show now, until revoked.
 */
import { testRunConfig } from "../support/run-config";
import { TRPCError } from "@trpc/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { User } from "@/server/auth/access";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createProject, setMember } from "@/server/auth/projects";
import { authenticate } from "@/server/auth/request";
import { openShareLink } from "@/server/auth/share-links";
import { type DatabaseHandle, metricPoints, newId, runs, users } from "@/server/db";
import { reportOfShareLink } from "@/server/reports";
import { callerFor, openTestDatabase } from "./support/database";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const ada: User = { id: "usr_ada", name: "Ada", email: "ada@lab.test" }; // owner of P
const ed: User = { id: "usr_ed", name: "Ed", email: "ed@lab.test" }; // editor of P
const val: User = { id: "usr_val", name: "Val", email: "val@lab.test" }; // viewer of P
const oz: User = { id: "usr_oz", name: "Oz", email: "oz@lab.test" }; // owner of Q only
const fx = { p: "", q: "", runA: "", runB: "", theirs: "" };

async function insertRun(projectId: string, owner: User, name: string) {
  const experiment = await callerFor(handle, owner).experiments.create({ name: `${name}-exp`, projectId, template: "arithmetic" });
  const id = newId("run");
  await handle.db.insert(runs).values({
    id,
    projectId,
    experimentId: experiment.id,
    experimentVersionId: experiment.versionId,
    createdBy: owner.id,
    name,
    status: "completed",
    config: testRunConfig(),
    totalSteps: 3,
    step: 3,
  });
  await handle.db.insert(metricPoints).values([1, 2, 3].map((step) => ({ runId: id, step, name: "reward/mean", value: step / 4 })));
  return id;
}

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  await handle.db.insert(users).values([ada, ed, val, oz]);
  fx.p = (await createProject(handle.db, { name: "P", ownerId: ada.id })).id;
  fx.q = (await createProject(handle.db, { name: "Q", ownerId: oz.id })).id;
  await setMember(handle.db, fx.p, ed.id, "editor");
  await setMember(handle.db, fx.p, val.id, "viewer");
  fx.runA = await insertRun(fx.p, ada, "run-a");
  fx.runB = await insertRun(fx.p, ada, "run-b");
  fx.theirs = await insertRun(fx.q, oz, "their-run");
});
afterAll(() => db.close());

const note = (id: string, markdown: string) => ({ kind: "note" as const, id, markdown });
const panel = (id: string, runIds: string[], metric = "reward/mean") => ({ kind: "panel" as const, id, runIds, metric, x: "step" as const, smoothing: 0.5 });

async function refusal(call: Promise<unknown>): Promise<TRPCError> {
  const error = await call.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TRPCError);
  return error as TRPCError;
}

describe("reports", () => {
  it("an editor makes one with a note and a panel, reorders and edits it; a viewer reads it as saved", async () => {
    const { id } = await callerFor(handle, ed).reports.create({
      projectId: fx.p,
      title: "Learning rate sweep",
      blocks: [note("n1", "# Findings\nrun-b learns **faster**."), panel("p1", [fx.runA, fx.runB])],
    });
    const made = await callerFor(handle, val).reports.byId({ id });
    expect(made).toMatchObject({ title: "Learning rate sweep", createdBy: "Ed", mayEdit: false });
    expect(made.blocks.map((b) => b.kind)).toEqual(["note", "panel"]);
    // Defaults filled by the schema: no grouping.
    expect(made.blocks[1]).toMatchObject({ runIds: [fx.runA, fx.runB], metric: "reward/mean", x: "step", smoothing: 0.5, group: null });

    await callerFor(handle, ed).reports.update({ id, title: "LR sweep", blocks: [made.blocks[1]!, note("n1", "Both converge."), note("n2", "Next: seeds.")] });
    const edited = await callerFor(handle, val).reports.byId({ id });
    expect(edited.title).toBe("LR sweep");
    expect(edited.blocks.map((b) => b.id)).toEqual(["p1", "n1", "n2"]);
    expect(edited.blocks[1]).toMatchObject({ markdown: "Both converge." });
    expect(edited.updatedAt.getTime()).toBeGreaterThanOrEqual(made.updatedAt.getTime());

    // Named no project, a report of runs goes to theirs.
    const fromRuns = await callerFor(handle, ed).reports.create({ title: "From runs", blocks: [panel("p1", [fx.runB])] });
    expect((await callerFor(handle, val).reports.byId({ id: fromRuns.id })).projectId).toBe(fx.p);

    const listed = await callerFor(handle, val).reports.list({ projectId: fx.p });
    expect(listed.find((r) => r.id === id)).toMatchObject({ title: "LR sweep", panels: 1, notes: 2, runs: 2, mayEdit: false });
    expect((await callerFor(handle, ed).reports.list({})).find((r) => r.id === id)?.mayEdit).toBe(true);
  });

  it("a viewer cannot edit, delete or share it; another project's member cannot read it", async () => {
    const { id } = await callerFor(handle, ada).reports.create({ projectId: fx.p, title: "Private", blocks: [note("n1", "secret")] });
    const viewer = callerFor(handle, val);
    for (const call of [
      () => viewer.reports.update({ id, title: "Mine now" }),
      () => viewer.reports.delete({ id }),
      () => viewer.reports.share({ id }),
      () => viewer.reports.create({ projectId: fx.p, title: "Mine" }),
    ]) {
      const error = await refusal(call());
      expect(error.code).toBe("FORBIDDEN");
      expect(error.message).toContain("editor");
    }
    const hidden = await refusal(callerFor(handle, oz).reports.byId({ id }));
    expect(hidden.code).toBe("NOT_FOUND");
    expect(hidden.message).toBe(`No report with id '${id}'`);
    expect((await callerFor(handle, oz).reports.list({})).map((r) => r.id)).not.toContain(id);
    expect((await callerFor(handle, val).reports.byId({ id })).title).toBe("Private");
  });

  it("refuses a malformed block, naming the field, and a panel over another project's run", async () => {
    const ed_ = callerFor(handle, ed);
    const empty = await refusal(ed_.reports.create({ projectId: fx.p, title: "Bad", blocks: [note("n1", "ok"), { ...panel("p1", []) }] }));
    expect(empty.code).toBe("BAD_REQUEST");
    expect(empty.message).toContain("blocks.1.runIds");
    expect(empty.message).toContain("at least one run");
    const kind = await refusal(ed_.reports.create({ projectId: fx.p, title: "Bad", blocks: [{ kind: "chart", id: "c1" } as never] }));
    expect(kind.message).toContain("blocks.0");
    expect(kind.message).toContain("'note' or 'panel'");
    const x = await refusal(ed_.reports.create({ projectId: fx.p, title: "Bad", blocks: [{ ...panel("p1", [fx.runA]), x: "epoch" as never }] }));
    expect(x.message).toContain("blocks.0.x");
    const title = await refusal(ed_.reports.create({ projectId: fx.p, title: "  " }));
    expect(title.message).toContain("title");
    const foreign = await refusal(ed_.reports.create({ projectId: fx.p, title: "Bad", blocks: [panel("p1", [fx.runA]), panel("p2", [fx.runB, fx.theirs])] }));
    expect(foreign.code).toBe("BAD_REQUEST");
    expect(foreign.message).toBe(`blocks.1.runIds: no run with id '${fx.theirs}' in this report's project`);
    expect((await callerFor(handle, ed).reports.list({ projectId: fx.p })).map((r) => r.title)).not.toContain("Bad");
  });

  it("a share link opens the report and reads exactly its panels' runs, following edits, until revoked", async () => {
    const editor = callerFor(handle, ed);
    const { id } = await editor.reports.create({ projectId: fx.p, title: "Shared", blocks: [note("n1", "Look"), panel("p1", [fx.runA])] });
    const { token, path } = await editor.reports.share({ id, expiresInDays: 7 });
    expect(path).toBe(`/s/${token}`);
    const holder = async () => callerFor(handle, await authenticate(handle.db, new Headers({ [SHARE_HEADER]: token }), "team"));

    const link = await openShareLink(handle.db, token);
    expect(link).toMatchObject({ kind: "report", runIds: [fx.runA], title: "Shared" });
    expect((await reportOfShareLink(handle.db, link!))?.blocks.map((b) => b.id)).toEqual(["n1", "p1"]);
    const series = await (await holder()).compare.series({ runIds: [fx.runA], metrics: ["reward/mean"] });
    expect(series.runs[0]!.series["reward/mean"]!.values).toEqual([0.25, 0.5, 0.75]);
    expect((await refusal((await holder()).runs.byId({ id: fx.runB }))).code).toBe("NOT_FOUND");
    // The holder reads no other procedure of the report, and edits nothing.
    expect((await refusal((await holder()).reports.byId({ id }))).code).toBe("FORBIDDEN");

    // A panel over run-b added: the link reads it from then on.
    await editor.reports.update({ id, blocks: [note("n1", "Look"), panel("p1", [fx.runA, fx.runB])] });
    expect((await (await holder()).runs.byId({ id: fx.runB })).name).toBe("run-b");
    expect((await editor.reports.links({ id })).map((l) => l.kind)).toEqual(["report"]);

    const [listed] = await editor.reports.links({ id });
    await editor.shareLinks.revoke({ id: listed!.id });
    expect(await openShareLink(handle.db, token)).toBeNull();
    expect((await authenticate(handle.db, new Headers({ [SHARE_HEADER]: token }), "team")).kind).not.toBe("share");
  });

  it("a link of another kind opens no report, and deleting a report ends its links", async () => {
    const editor = callerFor(handle, ed);
    const refused = await refusal(editor.shareLinks.create({ kind: "report", runIds: [fx.runA], view: { report: "rep_x" } }));
    expect(refused.message).toContain("reports.share");
    const { id } = await editor.reports.create({ projectId: fx.p, title: "Doomed", blocks: [panel("p1", [fx.runA])] });
    const { token } = await editor.reports.share({ id });
    await editor.reports.delete({ id });
    expect(await openShareLink(handle.db, token)).toBeNull();
    expect((await refusal(editor.reports.byId({ id }))).code).toBe("NOT_FOUND");
  });
});
