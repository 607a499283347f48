/**
 * Revocation reaches open live streams (TINKERLAB_AUTH=team): a run's metric stream, served as the web server serves
 * it, ends within 5 s of its credential's revocation with the error event a fresh open would get — a share link
 * revoked or expired, an API key revoked, a session signed out or deleted, a membership removed — whether the
 * revocation was made in this process (it announces itself) or by another process on the same database (a row
 * changed, found by the stream's re-check). A stream whose credential stays valid keeps going. The in-process
 * subscription (runs.metricStream through a caller) ends the same way.
 */
import { testRunConfig } from "../support/run-config";
import { mkdtempSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { eq } from "drizzle-orm";
import superjson from "superjson";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { accountsFor, type Accounts } from "@/server/auth/accounts";
import { createApiKey, revokeApiKey } from "@/server/auth/api-keys";
import { CLIENT_IP_HEADER } from "@/server/auth/constants";
import { createInvitation, createProject, removeMember } from "@/server/auth/projects";
import { createShareLink, revokeShareLink } from "@/server/auth/share-links";
import { apiKeys, metricPoints, newId, runs, sessions, setDatabase, shareLinks, users } from "@/server/db";
import { isMetricStreamRequest, serveMetricStream } from "@/server/metrics/stream-sse";
import { announceRunData } from "@/server/metrics/run-events";
import { callerFor, openTestDatabase } from "./support/database";

process.env.TINKERLAB_AUTH = "team";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let auth: Accounts;
let server: http.Server;
let base: string;
let projectId: string;
let runId: string;
const ada = { id: "", name: "Ada", email: "ada@example.com", password: "correct horse battery staple" };
const bob = { id: "", name: "Bob", email: "bob@example.com", password: "another long password" };
const ORIGIN = "http://127.0.0.1:3000";

beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
  const secretFile = path.join(mkdtempSync(path.join(os.tmpdir(), "tinkerlab-secret-")), "auth-secret");
  auth = await accountsFor(db.handle.db, { secret: undefined, secretFile, host: "127.0.0.1", port: 3000 });
  expect((await authPost("/sign-up/email", ada)).status).toBe(200);
  ada.id = (await db.handle.db.select({ id: users.id }).from(users).where(eq(users.email, ada.email)))[0]!.id;
  projectId = (await createProject(db.handle.db, { name: "Ada's", ownerId: ada.id })).id;
  const invitation = await createInvitation(db.handle.db, { projectId, role: "viewer", createdBy: ada.id, expiresAt: new Date(Date.now() + 3_600_000) });
  expect((await authPost(`/sign-up/email?invite=${invitation.token}`, bob)).status).toBe(200);
  bob.id = (await db.handle.db.select({ id: users.id }).from(users).where(eq(users.email, bob.email)))[0]!.id;

  // A run that stays open: running, so its stream sends pings and new points until something ends it.
  const experiment = await callerFor(db.handle, { kind: "person", user: ada, admin: true }).experiments.create({ name: "streamed", projectId });
  runId = newId("run");
  await db.handle.db.insert(runs).values({
    id: runId,
    projectId,
    experimentId: experiment.id,
    experimentVersionId: experiment.versionId,
    createdBy: ada.id,
    name: "streamed",
    status: "running",
    config: testRunConfig(),
    seed: 1,
    totalSteps: 1000,
  });

  server = http.createServer((req, res) => {
    if (isMetricStreamRequest(req.method, req.url)) void serveMetricStream(req, res);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await db.close();
});

async function authPost(route: string, body: unknown, cookie?: string) {
  const response = await auth.handler(
    new Request(`${ORIGIN}/api/auth${route}`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: ORIGIN, [CLIENT_IP_HEADER]: "10.0.0.1", ...(cookie ? { cookie } : {}) },
      body: JSON.stringify(body),
    }),
  );
  return {
    status: response.status,
    cookie: response.headers
      .getSetCookie()
      .find((c) => c.startsWith("tinkerlab.session_token="))
      ?.split(";")[0],
  };
}

async function signIn(who: { email: string; password: string }): Promise<string> {
  const signedIn = await authPost("/sign-in/email", { email: who.email, password: who.password });
  expect(signedIn.status).toBe(200);
  return signedIn.cookie!;
}

type StreamError = { message: string; data: { code: string; httpStatus: number } };

/** A viewer of the run's stream with some credential: the loss steps it received, the error event that ended it. */
function viewer(credential: { headers?: Record<string, string>; share?: string }) {
  const steps: number[] = [];
  let error: StreamError | null = null;
  let connected = false;
  let ended = false;
  const params = credential.share ? `&connectionParams=${encodeURIComponent(JSON.stringify({ share: credential.share }))}` : "";
  const url = `${base}/api/trpc/runs.metricStream?input=${encodeURIComponent(JSON.stringify({ json: { runId } }))}${params}`;
  const request = http.get(url, { headers: credential.headers ?? {} }, (response) => {
    response.setEncoding("utf8");
    let buffer = "";
    response.on("data", (chunk: string) => {
      buffer += chunk;
      let cut: number;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const lines = buffer.slice(0, cut).split("\n");
        buffer = buffer.slice(cut + 2);
        const field = (name: string) => lines.find((l) => l.startsWith(`${name}: `))?.slice(name.length + 2) ?? "";
        const data = field("data");
        const type = field("event") || "message";
        if (type === "connected") connected = true;
        if (type === "serialized-error") error = superjson.deserialize(JSON.parse(data));
        if (type === "message") {
          const event = superjson.deserialize<{ series: { name: string; steps: number[] }[] }>(JSON.parse(data));
          steps.push(...event.series.filter((s) => s.name === "loss").flatMap((s) => s.steps));
        }
      }
    });
    response.on("end", () => (ended = true));
  });
  request.on("error", () => {});
  return {
    steps,
    close: () => request.destroy(),
    get error() {
      return error;
    },
    get connected() {
      return connected;
    },
    get ended() {
      return ended;
    },
  };
}

const until = async (check: () => boolean, ms: number, what: string) => {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** Opens a stream, revokes, and expects it to end within 5 s with `code` (as a fresh open would get). */
async function expectEndedByRevocation(stream: ReturnType<typeof viewer>, revoke: () => Promise<unknown>, code: string, message: RegExp) {
  await until(() => stream.connected, 10_000, "the stream opens");
  expect(stream.ended).toBe(false);
  await revoke();
  await until(() => stream.ended, 5000, "the stream ends after the revocation");
  expect(stream.error).toMatchObject({ data: { code } });
  expect(stream.error!.message).toMatch(message);
}

let seq = 0;
async function report() {
  const step = ++seq;
  await db.handle.db.insert(metricPoints).values({ runId, name: "loss", step, value: step });
  announceRunData(runId);
  return step;
}

const SIGNED_OUT = /^Sign in required/;
const KEY_GONE = /^The API key in the Authorization header is unknown, revoked or expired/;

describe("live streams after a revocation", () => {
  let steady: ReturnType<typeof viewer>;
  beforeAll(async () => {
    // Ada's own stream, whose session stays valid throughout: it keeps receiving.
    steady = viewer({ headers: { cookie: await signIn(ada) } });
    await until(() => steady.connected, 10_000, "the steady stream opens");
  });

  it("ends a share link's stream when the link is revoked, and one whose link expires", async () => {
    const link = await createShareLink(db.handle.db, { projectId, kind: "run", runIds: [runId], view: {}, title: "t", createdBy: ada.id, expiresAt: null });
    await expectEndedByRevocation(viewer({ share: link.token }), () => revokeShareLink(db.handle.db, link.id), "UNAUTHORIZED", SIGNED_OUT);
    const expiring = await createShareLink(db.handle.db, { projectId, kind: "run", runIds: [runId], view: {}, title: "t", createdBy: ada.id, expiresAt: null });
    await expectEndedByRevocation(
      viewer({ share: expiring.token }),
      () =>
        db.handle.db
          .update(shareLinks)
          .set({ expiresAt: new Date(Date.now() - 1000) })
          .where(eq(shareLinks.id, expiring.id)),
      "UNAUTHORIZED",
      SIGNED_OUT,
    );
  });

  it("ends an API key's stream when the key is revoked, here or by another server process", async () => {
    const here = await createApiKey(db.handle.db, { userId: bob.id, name: "laptop", projectId, role: "viewer" });
    await expectEndedByRevocation(
      viewer({ headers: { authorization: `Bearer ${here.key}` } }),
      () => revokeApiKey(db.handle.db, bob.id, here.id),
      "UNAUTHORIZED",
      KEY_GONE,
    );
    // Another process revokes it in the shared database: no announcement reaches this one, its re-check does.
    const elsewhere = await createApiKey(db.handle.db, { userId: bob.id, name: "desktop", projectId, role: "viewer" });
    await expectEndedByRevocation(
      viewer({ headers: { authorization: `Bearer ${elsewhere.key}` } }),
      () => db.handle.db.update(apiKeys).set({ revokedAt: new Date() }).where(eq(apiKeys.id, elsewhere.id)),
      "UNAUTHORIZED",
      KEY_GONE,
    );
  });

  it("ends a session's stream when it signs out, or when its session is deleted", async () => {
    const cookie = await signIn(ada);
    await expectEndedByRevocation(viewer({ headers: { cookie } }), () => authPost("/sign-out", {}, cookie), "UNAUTHORIZED", SIGNED_OUT);
    // Another process deletes the session's row (its token is the cookie's value before the signature).
    const other = await signIn(ada);
    const token = decodeURIComponent(other.split("=")[1]!).split(".")[0]!;
    await expectEndedByRevocation(
      viewer({ headers: { cookie: other } }),
      () => db.handle.db.delete(sessions).where(eq(sessions.token, token)),
      "UNAUTHORIZED",
      SIGNED_OUT,
    );
  });

  it("ends a member's stream, and its keys' streams, when the member is removed", async () => {
    const key = await createApiKey(db.handle.db, { userId: bob.id, name: "script", projectId, role: "viewer" });
    const byKey = viewer({ headers: { authorization: `Bearer ${key.key}` } });
    await until(() => byKey.connected, 10_000, "the key's stream opens");
    await expectEndedByRevocation(
      viewer({ headers: { cookie: await signIn(bob) } }),
      () => removeMember(db.handle.db, projectId, bob.id),
      "NOT_FOUND",
      new RegExp(`^No run with id '${runId}'$`),
    );
    await until(() => byKey.ended, 5000, "the key's stream ends");
    expect(byKey.error).toMatchObject({ data: { code: "NOT_FOUND" } });
  });

  it("ends the in-process subscription with the error a fresh call would get", async () => {
    const link = await createShareLink(db.handle.db, { projectId, kind: "run", runIds: [runId], view: {}, title: "t", createdBy: ada.id, expiresAt: null });
    const caller = callerFor(db.handle, { kind: "share", linkId: link.id, projectId, runIds: [runId] });
    const frames = await caller.runs.metricStream({ runId });
    const read = (async () => {
      for await (const _ of frames) {
        // frames until the revocation
      }
    })();
    await revokeShareLink(db.handle.db, link.id);
    const late = new Promise((resolve) => setTimeout(resolve, 5000, "still open 5 s after the revocation"));
    await expect(Promise.race([read, late])).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  });

  it("keeps the stream of a credential that stays valid going", async () => {
    expect(steady.ended).toBe(false);
    const step = await report();
    await until(() => steady.steps.includes(step), 10_000, "the steady stream receives a new point");
    expect(steady.error).toBeNull();
    steady.close();
  });
});
