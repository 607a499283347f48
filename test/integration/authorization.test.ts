/**
 * Who may call what: every tRPC procedure and every route, called as nobody, a share link's holder, a viewer, an
 * editor and an owner of project P1, a member of another project only, and an editor's API key. The table below
 * states the allowed set of each; a procedure missing from it fails the test, so a new one gets an entry (and a
 * thought) before it lands. Objects of a project the caller is no member of answer 404, as if they did not exist;
 * a revoked or expired link or key says nothing of whether it ever existed; tokens are stored only hashed and never
 * appear in a log or an error.
 */
import { testRunConfig } from "../support/run-config";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { TRPCError } from "@trpc/server";
import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { GET as downloadExport } from "@/app/api/exports/[id]/route";
import { GET as healthRoute } from "@/app/api/health/route";
import { GET as metricStreamRoute } from "@/app/api/trpc/runs.metricStream/route";
import { GET as rolloutsJsonl } from "@/app/runs/[id]/rollouts.jsonl/route";
import { appRouter } from "@/server/api/root";
import type { Principal, User } from "@/server/auth/access";
import { createApiKey } from "@/server/auth/api-keys";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createInvitation, createProject, setMember } from "@/server/auth/projects";
import { createShareLink } from "@/server/auth/share-links";
import {
  apiKeys,
  checkpoints,
  jobs,
  type DatabaseHandle,
  metricPoints,
  newId,
  projectInvitations,
  projectMembers,
  rollouts,
  runs,
  setDatabase,
  shareLinks,
  users,
} from "@/server/db";
import { createDataset } from "@/server/datasets";
import { createReport } from "@/server/reports";
import { callerFor, openTestDatabase } from "./support/database";

// Routes read the mode from the environment: "apikey" makes a request without credentials anonymous, as on a team
// server (people's cookies are tested in accounts.test.ts; here API keys and share links stand for them).
process.env.TINKERLAB_AUTH = "apikey";

type Who = "anonymous" | "link" | "viewer" | "editor" | "owner" | "other" | "key";
const EVERYONE: Who[] = ["anonymous", "link", "viewer", "editor", "owner", "other", "key"];

// The allowed sets.
const ANYONE = EVERYONE;
const NOBODY: Who[] = []; // worker procedures: only worker processes, with the worker token
const SIGNED_IN: Who[] = ["viewer", "editor", "owner", "other", "key"];
const PEOPLE: Who[] = ["viewer", "editor", "owner", "other"]; // not an API key
const READERS: Who[] = ["viewer", "editor", "owner", "key"];
const SHARED_READERS: Who[] = ["link", ...READERS];
const EDITORS: Who[] = ["editor", "owner", "key"];
const OWNERS: Who[] = ["owner"];
const P1_PEOPLE: Who[] = ["viewer", "editor", "owner"];

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-authz-"));

const person = (id: string): User => ({ id, name: id.replace("usr_", ""), email: `${id.replace("usr_", "")}@lab.test` });
const alice = person("usr_alice"); // owner of P1
const bob = person("usr_bob"); // editor of P1
const vera = person("usr_vera"); // viewer of P1
const mallory = person("usr_mallory"); // owner of P2 only

const fx = {
  p1: "",
  p2: "",
  experiment: "",
  version: "",
  run: "",
  session: "",
  checkpoint: "",
  exportId: "",
  dataset: "",
  shareToken: "",
  report: "",
  bobKey: "",
  keys: {} as Record<"viewer" | "editor" | "owner" | "other", string>,
};
let baseline: { projectId: string; userId: string; role: "viewer" | "editor" | "owner" }[] = [];
const principals = {} as Record<Who, Principal>;
/** Every token and key handed out, which must never show in a log or an error. */
const secrets: string[] = [];

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  const d = handle.db;
  await d.insert(users).values([alice, bob, vera, mallory]);
  fx.p1 = (await createProject(d, { name: "P1", ownerId: alice.id })).id;
  fx.p2 = (await createProject(d, { name: "P2", ownerId: mallory.id })).id;
  await setMember(d, fx.p1, bob.id, "editor");
  await setMember(d, fx.p1, vera.id, "viewer");
  baseline = await d
    .select({ projectId: projectMembers.projectId, userId: projectMembers.userId, role: projectMembers.role })
    .from(projectMembers)
    .where(inArray(projectMembers.projectId, [fx.p1, fx.p2]));

  const experiment = await callerFor(handle, alice).experiments.create({ name: "adder", projectId: fx.p1, template: "arithmetic" });
  fx.experiment = experiment.id;
  fx.version = experiment.versionId;
  fx.run = newId("run");
  await d.insert(runs).values({
    id: fx.run,
    projectId: fx.p1,
    experimentId: fx.experiment,
    experimentVersionId: fx.version,
    createdBy: alice.id,
    name: "adder-run",
    status: "completed",
    config: testRunConfig({ agent: { base: "arithmetic-base", training: { mode: "lora" } }, evaluation: { episodes: 4 } }),
    totalSteps: 2,
    step: 2,
  });
  // Its (finished) job: control answers about it, and a cancel of a finished run is refused as a conflict, not for access.
  await d.insert(jobs).values({
    id: newId("job"),
    kind: "rl",
    runId: fx.run,
    userId: alice.id,
    status: "completed",
    footprint: { memoryMb: 1, computeSlots: 1 } as never,
  });
  // A remote session's run, ended: a call to it is answered "has ended" (a conflict), once access allows it.
  fx.session = newId("run");
  await d.insert(runs).values({
    id: fx.session,
    projectId: fx.p1,
    experimentId: fx.experiment,
    experimentVersionId: fx.version,
    createdBy: alice.id,
    name: "a-session",
    status: "completed",
    config: testRunConfig(),
    totalSteps: 0,
  });
  await d.insert(jobs).values({
    id: newId("job"),
    kind: "session",
    runId: fx.session,
    userId: alice.id,
    status: "completed",
    footprint: { memoryMb: 1, computeSlots: 1 } as never,
  });
  await d.insert(metricPoints).values([1, 2].map((step) => ({ runId: fx.run, step, name: "reward/mean", value: step / 2 })));
  await d
    .insert(rollouts)
    .values({ runId: fx.run, step: 2, groupIndex: 0, sampleIndex: 0, prompt: "1+1=", turns: [], rewards: { correct: 1 }, totalReward: 1 });
  const stateDir = path.join(folder, "state");
  fs.mkdirSync(stateDir, { recursive: true });
  fs.writeFileSync(path.join(stateDir, "model_config.json"), JSON.stringify({ vocabSize: 262, contextLength: 24, dModel: 64, nLayers: 2, nHeads: 4 }));
  fx.checkpoint = newId("ckpt");
  fx.exportId = newId("ckpt");
  const exportFile = path.join(folder, "model.safetensors");
  fs.writeFileSync(exportFile, "weights");
  await d.insert(checkpoints).values([
    { id: fx.checkpoint, runId: fx.run, step: 2, kind: "state", path: stateDir, sizeBytes: 10 },
    { id: fx.exportId, runId: fx.run, step: 2, kind: "export", path: exportFile, sizeBytes: 7 },
  ]);
  fx.dataset = (await createDataset(d, folder, { projectId: fx.p1, ownerId: alice.id, name: "sums", text: '{"q":"1+1","a":"2"}\n{"q":"2+2","a":"4"}\n' })).id;
  fx.shareToken = (
    await createShareLink(d, { projectId: fx.p1, kind: "run", runIds: [fx.run], view: {}, title: "adder-run", createdBy: alice.id, expiresAt: null })
  ).token;
  fx.report = (await freshReport()).id;
  const key = await createApiKey(d, { userId: bob.id, name: "ci", projectId: fx.p1, role: "editor" });
  fx.bobKey = key.key;
  for (const [who, user, projectId, role] of [
    ["viewer", vera, fx.p1, "viewer"],
    ["editor", bob, fx.p1, "editor"],
    ["owner", alice, fx.p1, "owner"],
    ["other", mallory, fx.p2, "owner"],
  ] as const) {
    fx.keys[who] = (await createApiKey(d, { userId: user.id, name: `${who} laptop`, projectId, role })).key;
  }
  secrets.push(fx.shareToken, fx.bobKey, ...Object.values(fx.keys));

  const linkLink = (await d.select({ id: shareLinks.id }).from(shareLinks))[0]!;
  Object.assign(principals, {
    anonymous: { kind: "anonymous" },
    link: { kind: "share", linkId: linkLink.id, projectId: fx.p1, runIds: [fx.run] },
    viewer: { kind: "person", user: vera, admin: false },
    editor: { kind: "person", user: bob, admin: false },
    owner: { kind: "person", user: alice, admin: false },
    other: { kind: "person", user: mallory, admin: false },
    key: { kind: "apikey", user: bob, keyId: key.id, projectId: fx.p1, role: "editor", admin: false },
  } satisfies Record<Who, Principal>);
});

afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

/** Puts the memberships back as they were (a call may have joined, left, or changed a role). */
async function restoreMembers() {
  await handle.db.delete(projectMembers).where(inArray(projectMembers.projectId, [fx.p1, fx.p2]));
  await handle.db.insert(projectMembers).values(baseline);
}

/** A user added to P1 as a viewer, for calls that change or remove a member. */
async function freshMember() {
  const user = person(newId("usr"));
  await handle.db.insert(users).values(user);
  await setMember(handle.db, fx.p1, user.id, "viewer");
  return user.id;
}

/** A dataset of P1's to rename or delete. */
async function freshDataset() {
  return (await createDataset(handle.db, folder, { projectId: fx.p1, ownerId: alice.id, name: `d-${newId("ds").slice(3)}`, text: '{"x":1}\n' })).id;
}

/** A report of P1's: a note and a panel over its run. */
function freshReport() {
  return createReport(handle.db, {
    projectId: fx.p1,
    title: "Adder notes",
    blocks: [
      { kind: "note", id: "n1", markdown: "It adds." },
      { kind: "panel", id: "p1", runIds: [fx.run], metric: "reward/mean", x: "step", smoothing: 0, group: null },
    ],
    createdBy: alice.id,
  });
}

type Entry = { allowed: Who[]; input: (who: Who) => unknown | Promise<unknown> };

const TABLE: Record<string, Entry> = {
  "health.check": { allowed: ANYONE, input: () => undefined },

  "experiments.templates": { allowed: SIGNED_IN, input: () => undefined },
  "experiments.list": { allowed: SIGNED_IN, input: () => ({}) },
  "experiments.byId": { allowed: READERS, input: () => ({ id: fx.experiment }) },
  "experiments.versions": { allowed: READERS, input: () => ({ id: fx.experiment }) },
  "experiments.version": { allowed: READERS, input: () => ({ id: fx.experiment, version: 1 }) },
  "experiments.create": { allowed: EDITORS, input: () => ({ name: "new", projectId: fx.p1 }) },
  "experiments.save": { allowed: EDITORS, input: () => ({ id: fx.experiment, files: {}, config: { name: "adder", environment: "arithmetic" } }) },
  "experiments.validate": {
    allowed: EDITORS,
    input: () => ({ experimentId: fx.experiment, files: { "environment.ts": "export const x = 1;\n" }, typeCheck: false, episodes: 1 }),
  },
  "experiments.rename": { allowed: EDITORS, input: () => ({ id: fx.experiment, name: "adder" }) },

  "runs.list": { allowed: SIGNED_IN, input: () => ({}) },
  "runs.launch": { allowed: EDITORS, input: () => ({ experimentId: fx.experiment }) },
  "runs.evaluate": { allowed: EDITORS, input: () => ({ checkpointId: fx.checkpoint }) },
  "runs.export": { allowed: EDITORS, input: () => ({ checkpointId: fx.checkpoint }) },
  "runs.control": { allowed: EDITORS, input: () => ({ id: fx.run, action: "cancel" }) },
  "runs.metrics": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "runs.metricRange": { allowed: SHARED_READERS, input: () => ({ runId: fx.run, name: "reward/mean", from: 0, to: 10 }) },
  "runs.metricStream": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "runs.metricSummary": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "runs.rollouts": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "runs.promptAcrossSteps": { allowed: SHARED_READERS, input: () => ({ runId: fx.run, prompt: "1+1=" }) },
  "runs.logs": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "runs.byId": { allowed: SHARED_READERS, input: () => ({ id: fx.run }) },
  "compare.series": { allowed: SHARED_READERS, input: () => ({ runIds: [fx.run], metrics: ["reward/mean"] }) },
  "compare.sources": { allowed: SHARED_READERS, input: () => ({ runIds: [fx.run] }) },
  "runs.playable": { allowed: READERS, input: () => ({ runId: fx.run }) },
  "runs.playableRows": { allowed: READERS, input: () => ({ runId: fx.run, dataset: "word-problems" }) },
  "runs.table": { allowed: READERS, input: () => ({ projectId: fx.p1 }) },
  "runs.tableChoices": { allowed: READERS, input: () => ({ projectId: fx.p1 }) },
  "runs.tag": { allowed: EDITORS, input: () => ({ id: fx.run, add: ["authz"] }) },
  "runs.setNotes": { allowed: EDITORS, input: () => ({ id: fx.run, notes: "" }) },
  "runs.rename": { allowed: EDITORS, input: () => ({ id: fx.run, name: "adder-run" }) },
  "runs.archive": { allowed: EDITORS, input: () => ({ id: fx.run, archived: false }) },
  // Refused for want of the run's name (the run stays): allowed past the access check, which is what counts here.
  "runs.delete": { allowed: EDITORS, input: () => ({ id: fx.run, confirmName: "not its name" }) },
  "runs.clone": { allowed: EDITORS, input: () => ({ id: fx.run }) },
  "runs.rerun": { allowed: EDITORS, input: () => ({ id: fx.run }) },

  "checkpoints.bases": { allowed: SIGNED_IN, input: () => ({}) },
  "checkpoints.list": { allowed: SIGNED_IN, input: () => ({}) },
  "checkpoints.ofRun": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "checkpoints.lineage": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },

  "derived.ofRun": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },
  "derived.sourceOf": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },

  "league.ofRun": { allowed: SHARED_READERS, input: () => ({ runId: fx.run }) },

  "datasets.list": { allowed: SIGNED_IN, input: () => undefined },
  "datasets.upload": { allowed: EDITORS, input: () => ({ name: `d-${newId("ds").slice(3)}`, projectId: fx.p1, text: '{"x":1}\n' }) },
  "datasets.preview": { allowed: READERS, input: () => ({ id: fx.dataset }) },
  "datasets.rename": { allowed: EDITORS, input: async () => ({ id: await freshDataset(), name: `r-${newId("ds").slice(3)}` }) },
  "datasets.delete": { allowed: EDITORS, input: async () => ({ id: await freshDataset() }) },

  "scheduler.overview": { allowed: SIGNED_IN, input: () => ({}) },

  "worker.register": { allowed: NOBODY, input: () => ({}) },
  "worker.heartbeat": { allowed: NOBODY, input: () => ({}) },
  "worker.claim": { allowed: NOBODY, input: () => ({}) },
  "worker.report": { allowed: NOBODY, input: () => ({}) },
  "worker.checkpoint": { allowed: NOBODY, input: () => ({}) },
  "worker.setAside": { allowed: NOBODY, input: () => ({}) },
  "worker.finish": { allowed: NOBODY, input: () => ({}) },
  "worker.leave": { allowed: NOBODY, input: () => ({ workerId: "wrk_x" }) },
  "worker.sessionExchange": { allowed: NOBODY, input: () => ({ workerId: "wrk_x", jobId: "job_x", answers: [], take: { waitMs: 0, max: 1 } }) },

  "projects.list": { allowed: SIGNED_IN, input: () => undefined },
  "projects.create": { allowed: PEOPLE, input: () => ({ name: "scratch" }) },
  "projects.byId": { allowed: READERS, input: () => ({ id: fx.p1 }) },
  "projects.rename": { allowed: OWNERS, input: () => ({ id: fx.p1, name: "P1" }) },
  "projects.members": { allowed: READERS, input: () => ({ projectId: fx.p1 }) },
  "projects.setRole": { allowed: OWNERS, input: async () => ({ projectId: fx.p1, userId: await freshMember(), role: "editor" }) },
  "projects.removeMember": { allowed: OWNERS, input: async () => ({ projectId: fx.p1, userId: await freshMember() }) },
  "projects.leave": { allowed: READERS, input: () => ({ projectId: fx.p1 }) },
  "projects.invitations": { allowed: OWNERS, input: () => ({ projectId: fx.p1 }) },
  "projects.invite": { allowed: OWNERS, input: () => ({ projectId: fx.p1, role: "viewer" }) },
  "projects.revokeInvitation": {
    allowed: OWNERS,
    input: async () => ({
      id: (await createInvitation(handle.db, { projectId: fx.p1, role: "viewer", createdBy: alice.id, expiresAt: new Date(Date.now() + 1e6) })).id,
    }),
  },
  "projects.invitation": {
    allowed: ANYONE,
    input: async () => ({
      token: (await createInvitation(handle.db, { projectId: fx.p1, role: "viewer", createdBy: alice.id, expiresAt: new Date(Date.now() + 1e6) })).token,
    }),
  },
  "projects.acceptInvitation": {
    allowed: PEOPLE,
    input: async () => ({
      token: (await createInvitation(handle.db, { projectId: fx.p1, role: "viewer", createdBy: alice.id, expiresAt: new Date(Date.now() + 1e6) })).token,
    }),
  },

  "shareLinks.create": { allowed: EDITORS, input: () => ({ kind: "run", runIds: [fx.run], view: { smooth: "0.8" } }) },
  "shareLinks.ofRun": { allowed: READERS, input: () => ({ runId: fx.run }) },
  "shareLinks.ofProject": { allowed: READERS, input: () => ({ projectId: fx.p1 }) },
  "shareLinks.revoke": {
    allowed: EDITORS,
    input: async () => ({
      id: (await createShareLink(handle.db, { projectId: fx.p1, kind: "run", runIds: [fx.run], view: {}, title: "t", createdBy: alice.id, expiresAt: null }))
        .id,
    }),
  },
  "reports.list": { allowed: SIGNED_IN, input: () => ({}) },
  "reports.byId": { allowed: READERS, input: () => ({ id: fx.report }) },
  "reports.create": { allowed: EDITORS, input: () => ({ projectId: fx.p1, title: "New" }) },
  "reports.update": { allowed: EDITORS, input: () => ({ id: fx.report, title: "Adder notes" }) },
  "reports.delete": { allowed: EDITORS, input: async () => ({ id: (await freshReport()).id }) },
  "reports.share": { allowed: EDITORS, input: () => ({ id: fx.report }) },
  "reports.links": { allowed: READERS, input: () => ({ id: fx.report }) },
  "sessions.create": { allowed: EDITORS, input: () => ({ base: "arithmetic-base", projectId: fx.p1 }) },
  "sessions.invoke": { allowed: EDITORS, input: () => ({ sessionId: fx.session, callId: "call-authorization", method: "forward", args: {}, waitMs: 0 }) },
  "sessions.invokeMany": {
    allowed: EDITORS,
    input: () => ({ sessionId: fx.session, calls: [{ callId: "call-authorization-many", method: "forward", argsJson: "{}" }], waitMs: 0 }),
  },
  "shareLinks.open": { allowed: ANYONE, input: () => ({ token: fx.shareToken }) },

  "apiKeys.list": { allowed: PEOPLE, input: () => undefined },
  "apiKeys.create": { allowed: [...P1_PEOPLE], input: () => ({ name: "script", projectId: fx.p1, role: "viewer" }) },
  "apiKeys.revoke": {
    allowed: PEOPLE,
    input: async (who) => {
      const owner = principals[who];
      const userId = "user" in owner ? owner.user.id : alice.id;
      const projectId = userId === mallory.id ? fx.p2 : fx.p1;
      return { id: (await createApiKey(handle.db, { userId, name: "to revoke", projectId, role: "viewer" })).id };
    },
  },
};

/** How a call ended: allowed (it ran, or failed for a reason other than access), or refused with its code. */
async function call(procedure: string, who: Who): Promise<"allowed" | "UNAUTHORIZED" | "FORBIDDEN" | "NOT_FOUND"> {
  const caller = callerFor(handle, principals[who]) as unknown as Record<string, Record<string, (input: unknown) => Promise<unknown>>>;
  const [router, name] = procedure.split(".") as [string, string];
  try {
    const result = await caller[router]![name]!(await TABLE[procedure]!.input(who));
    // A subscription answers an async iterable once it is allowed: close it.
    if (result && typeof result === "object" && Symbol.asyncIterator in result) {
      await (result as AsyncIterable<unknown>)[Symbol.asyncIterator]().return?.();
    }
    return "allowed";
  } catch (error) {
    if (error instanceof TRPCError && (error.code === "UNAUTHORIZED" || error.code === "FORBIDDEN" || error.code === "NOT_FOUND")) {
      // A worker procedure refuses for want of the worker token; the table's "nobody" covers it.
      return error.code;
    }
    return "allowed";
  } finally {
    await restoreMembers();
  }
}

const procedures = Object.keys((appRouter as unknown as { _def: { procedures: Record<string, unknown> } })._def.procedures).sort();

describe("the authorization table", () => {
  it("has an entry for every procedure, and no entry for one that does not exist", () => {
    expect(procedures.filter((p) => !(p in TABLE))).toEqual([]);
    expect(Object.keys(TABLE).filter((p) => !procedures.includes(p))).toEqual([]);
  });

  it("allows exactly the table's callers for every procedure; another project's member hears 404, as for nothing", async () => {
    const logged: string[] = [];
    for (const level of ["log", "info", "warn", "error"] as const) {
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void logged.push(args.map(String).join(" ")));
    }
    const mismatches: string[] = [];
    try {
      for (const procedure of procedures) {
        const entry = TABLE[procedure];
        if (!entry) continue;
        for (const who of EVERYONE) {
          const outcome = await call(procedure, who);
          const expected = entry.allowed.includes(who);
          if ((outcome === "allowed") !== expected) mismatches.push(`${procedure} as ${who}: ${outcome}, expected ${expected ? "allowed" : "refused"}`);
          // Refused objects of P1 look like nothing at all to a member of another project: 404, never 403.
          if (!expected && who === "other" && !procedure.startsWith("worker.") && !["projects.create", "apiKeys.list"].includes(procedure)) {
            if (outcome !== "NOT_FOUND") mismatches.push(`${procedure} as other: ${outcome}, expected NOT_FOUND`);
          }
          if (!expected && who === "anonymous" && !procedure.startsWith("worker.") && outcome !== "UNAUTHORIZED") {
            mismatches.push(`${procedure} as anonymous: ${outcome}, expected UNAUTHORIZED`);
          }
        }
      }
    } finally {
      vi.restoreAllMocks();
    }
    expect(mismatches).toEqual([]);
    for (const secret of secrets) expect(logged.join("\n")).not.toContain(secret);
  }, 240_000);
});

describe("routes", () => {
  const headersOf = (who: Who): Record<string, string> =>
    who === "anonymous"
      ? {}
      : who === "link"
        ? { [SHARE_HEADER]: fx.shareToken }
        : who === "key"
          ? { authorization: `Bearer ${fx.bobKey}` }
          : { authorization: `Bearer ${fx.keys[who]}` };
  const request = (url: string, who: Who) => new Request(`http://127.0.0.1:3000${url}`, { headers: headersOf(who) });

  it("GET /api/exports/<id>: members of the run's project download; a link holder hears 403, nobody 401; another project hears 404", async () => {
    const statuses: Partial<Record<Who, number>> = {};
    for (const who of EVERYONE) {
      const response = await downloadExport(request(`/api/exports/${fx.exportId}`, who), { params: Promise.resolve({ id: fx.exportId }) });
      statuses[who] = response.status;
      await response.body?.cancel();
    }
    expect(statuses).toEqual({ anonymous: 401, link: 403, viewer: 200, editor: 200, owner: 200, other: 404, key: 200 });
  });

  it("GET /runs/<id>/rollouts.jsonl: readers and the link holder; nobody 401, another project 404", async () => {
    const statuses: Partial<Record<Who, number>> = {};
    for (const who of EVERYONE) {
      const response = await rolloutsJsonl(request(`/runs/${fx.run}/rollouts.jsonl`, who), { params: Promise.resolve({ id: fx.run }) });
      statuses[who] = response.status;
      await response.text();
    }
    expect(statuses).toEqual({ anonymous: 401, link: 200, viewer: 200, editor: 200, owner: 200, other: 404, key: 200 });
  });

  it("the live metric stream: readers and the link holder (its token in connectionParams) get the points; others an error event", async () => {
    const input = encodeURIComponent(JSON.stringify({ json: { runId: fx.run } }));
    const outcomes: Partial<Record<Who, string>> = {};
    for (const who of EVERYONE) {
      const url =
        who === "link"
          ? `/api/trpc/runs.metricStream?input=${input}&connectionParams=${encodeURIComponent(JSON.stringify({ share: fx.shareToken }))}`
          : `/api/trpc/runs.metricStream?input=${input}`;
      const response = await metricStreamRoute(who === "link" ? new Request(`http://127.0.0.1:3000${url}`) : request(url, who));
      const text = await response.text();
      outcomes[who] = text.includes("reward/mean") ? "points" : (text.match(/"code":"?(-?\w+)/)?.[1] ?? text.slice(0, 80));
    }
    expect(outcomes.link).toBe("points");
    expect(outcomes.viewer).toBe("points");
    expect(outcomes.key).toBe("points");
    expect(outcomes.anonymous).not.toBe("points");
    expect(outcomes.other).not.toBe("points");
  });

  it("GET /api/health tells nobody where the database is or which hosts work; a member hears the details", async () => {
    const anonymous = await (await healthRoute(request("/api/health", "anonymous"))).json();
    expect(anonymous).toEqual({ status: "ok", database: { latencyMs: expect.any(Number) } });
    const member = await (await healthRoute(request("/api/health", "viewer"))).json();
    expect(member.database).toMatchObject({ kind: expect.any(String), location: expect.any(String) });
    expect(member.training).toHaveProperty("workers");
  });
});

describe("links, invitations and keys", () => {
  it("a revoked, an expired and a never-made share link answer the same 404", async () => {
    const d = handle.db;
    const make = (expiresAt: Date | null) =>
      createShareLink(d, { projectId: fx.p1, kind: "run", runIds: [fx.run], view: {}, title: "t", createdBy: alice.id, expiresAt });
    const revoked = await make(null);
    await d.update(shareLinks).set({ revokedAt: new Date() }).where(eq(shareLinks.id, revoked.id));
    const expired = await make(new Date(Date.now() - 1000));
    const never = `tls_${"A".repeat(43)}`;
    const messages: string[] = [];
    for (const token of [revoked.token, expired.token, never]) {
      const error = await callerFor(handle, null)
        .shareLinks.open({ token })
        .then(
          () => null,
          (e: TRPCError) => e,
        );
      expect(error?.code).toBe("NOT_FOUND");
      expect(error?.message).not.toContain(token);
      messages.push(error!.message);
      // And as a credential: the link's runs are as closed as anyone else's.
      const response = await rolloutsJsonl(new Request(`http://x/runs/${fx.run}/rollouts.jsonl`, { headers: { [SHARE_HEADER]: token } }), {
        params: Promise.resolve({ id: fx.run }),
      });
      expect(response.status).toBe(401);
    }
    expect(new Set(messages).size).toBe(1);
  });

  it("a link holder reads only the run its link names: another run of the same project is 404", async () => {
    const other = newId("run");
    await handle.db.insert(runs).values({
      id: other,
      projectId: fx.p1,
      experimentId: fx.experiment,
      experimentVersionId: fx.version,
      createdBy: alice.id,
      name: "private",
      config: testRunConfig(),
    });
    const error = await callerFor(handle, principals.link)
      .runs.byId({ id: other })
      .catch((e: TRPCError) => e);
    expect((error as TRPCError).code).toBe("NOT_FOUND");
  });

  it("a revoked or expired API key is refused as unknown, and a key never acts above its maker's current role", async () => {
    const d = handle.db;
    const revoked = await createApiKey(d, { userId: bob.id, name: "old", projectId: fx.p1, role: "editor" });
    await d.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.id, revoked.id));
    const expired = await createApiKey(d, { userId: bob.id, name: "old", projectId: fx.p1, role: "editor", expiresAt: new Date(Date.now() - 1000) });
    for (const key of [revoked.key, expired.key]) {
      const response = await rolloutsJsonl(new Request(`http://x/runs/${fx.run}/rollouts.jsonl`, { headers: { authorization: `Bearer ${key}` } }), {
        params: Promise.resolve({ id: fx.run }),
      });
      expect(response.status).toBe(401);
      expect(await response.text()).toMatch(/unknown, revoked or expired/);
    }
    // Bob's editor key, after bob is made a viewer: it reads, but no longer launches.
    await setMember(d, fx.p1, bob.id, "viewer");
    try {
      const viaKey = callerFor(handle, principals.key);
      await expect(viaKey.runs.byId({ id: fx.run })).resolves.toMatchObject({ id: fx.run, role: "viewer" });
      await expect(viaKey.runs.launch({ experimentId: fx.experiment })).rejects.toMatchObject({ code: "FORBIDDEN" });
    } finally {
      await restoreMembers();
    }
  });

  it("an invitation link joins with its role once per person, and a revoked one joins nobody", async () => {
    const d = handle.db;
    const stranger = person(newId("usr"));
    await d.insert(users).values(stranger);
    const invitation = await createInvitation(d, { projectId: fx.p1, role: "editor", createdBy: alice.id, expiresAt: new Date(Date.now() + 60_000) });
    await expect(callerFor(handle, stranger).projects.acceptInvitation({ token: invitation.token })).resolves.toMatchObject({
      projectId: fx.p1,
      role: "editor",
    });
    await expect(callerFor(handle, stranger).experiments.byId({ id: fx.experiment })).resolves.toMatchObject({ role: "editor" });
    await d.update(projectInvitations).set({ revokedAt: new Date() }).where(eq(projectInvitations.id, invitation.id));
    const late = person(newId("usr"));
    await d.insert(users).values(late);
    await expect(callerFor(handle, late).projects.acceptInvitation({ token: invitation.token })).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(callerFor(handle, late).experiments.byId({ id: fx.experiment })).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("stores share links, invitations and API keys only as hashes", async () => {
    const owner = callerFor(handle, alice);
    const link = await owner.shareLinks.create({ kind: "run", runIds: [fx.run] });
    const invitation = await owner.projects.invite({ projectId: fx.p1, role: "viewer" });
    const key = await owner.apiKeys.create({ name: "hash check", projectId: fx.p1, role: "viewer" });
    const dump = JSON.stringify([
      await handle.db.select().from(shareLinks),
      await handle.db.select().from(projectInvitations),
      await handle.db.select().from(apiKeys),
    ]);
    for (const secret of [link.token, invitation.token, key.key, fx.shareToken, fx.bobKey]) {
      expect(secret.length).toBeGreaterThanOrEqual(43); // 256 bits in base64url, after the prefix
      expect(dump).not.toContain(secret.slice(4));
    }
  });
});
