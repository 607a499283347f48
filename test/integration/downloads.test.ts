/**
 * Downloads on a team server, over HTTP with the page proxy in front (proxy.ts, as Next.js runs it): a run's
 * rollouts as JSON Lines take an API key and a share link's token, and hold every stored rollout of both splits and
 * every step of an 8-step run unless narrowed; a request without a working credential hears a plain-text refusal,
 * never a redirect to the sign-in page. The CLI (bin/tinkerlab) exports such a run whole, and fails with its own
 * exit code, writing nothing, on a download answered with a redirect, a refusal, a missing file or an HTML page.
 *
 * The server here is the app's proxy and routes on a Node HTTP server, without a Next.js build: a path the proxy
 * lets through to a page is answered with a placeholder HTML page, where Next.js would render the page itself.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { NextRequest } from "next/server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as modelFile } from "@/app/api/models/[file]/route";
import { GET as trpcGet, POST as trpcPost } from "@/app/api/trpc/[trpc]/route";
import { GET as rolloutsJsonl } from "@/app/runs/[id]/rollouts.jsonl/route";
import { createClient } from "@/lib/client";
import { proxy } from "@/proxy";
import { createApiKey } from "@/server/auth/api-keys";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createProject } from "@/server/auth/projects";
import { createShareLink } from "@/server/auth/share-links";
import { type DatabaseHandle, newId, rollouts, runs, setDatabase, users } from "@/server/db";
import { testRunConfig } from "../support/run-config";
import { callerFor, openTestDatabase } from "./support/database";

process.env.TINKERLAB_AUTH = "team";
process.env.TINKERLAB_AUTH_SECRET = "a test secret that is long enough to sign cookies";

const ROOT = path.resolve(__dirname, "../..");
const STEPS = 8;
const TRAIN_PER_STEP = 128; // 16 groups of 8, as the run
const EVAL_STEPS = [4, 8];
const EVAL_PER_STEP = 32;

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
let server: http.Server;
let url = "";
const work = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-downloads-"));
const owner = { id: "usr_owner", name: "Olga", email: "olga@lab.test" };
const stranger = { id: "usr_stranger", name: "Sam", email: "sam@lab.test" };
const fx = { run: "", key: "", strangerKey: "", shareToken: "" };

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  await handle.db.insert(users).values([owner, stranger]);
  const project = (await createProject(handle.db, { name: "Lab", ownerId: owner.id })).id;
  const elsewhere = (await createProject(handle.db, { name: "Elsewhere", ownerId: stranger.id })).id;
  const experiment = await callerFor(handle, owner).experiments.create({ name: "adder", projectId: project, template: "arithmetic" });
  fx.run = newId("run");
  await handle.db.insert(runs).values({
    id: fx.run,
    projectId: project,
    experimentId: experiment.id,
    experimentVersionId: experiment.versionId,
    createdBy: owner.id,
    name: "adder-run",
    status: "completed",
    config: testRunConfig(),
    totalSteps: STEPS,
    step: STEPS,
  });
  const sample = (split: "train" | "eval", step: number, index: number, groupSize: number): typeof rollouts.$inferInsert => ({
    runId: fx.run,
    split,
    step,
    groupIndex: Math.floor(index / groupSize),
    sampleIndex: index % groupSize,
    prompt: "Answer with a number.",
    turns: [{ observation: `${step}+${index}=`, action: String(step + index), reward: 1 }],
    rewards: { correct: 1 },
    totalReward: 1,
  });
  const rows: (typeof rollouts.$inferInsert)[] = [];
  for (let step = 1; step <= STEPS; step++) for (let i = 0; i < TRAIN_PER_STEP; i++) rows.push(sample("train", step, i, 8));
  for (const step of EVAL_STEPS) for (let i = 0; i < EVAL_PER_STEP; i++) rows.push(sample("eval", step, i, 1));
  // Stored in an order of their own: the download sorts them.
  await handle.db.insert(rollouts).values(rows.reverse());
  fx.key = (await createApiKey(handle.db, { userId: owner.id, name: "laptop", projectId: project, role: "viewer" })).key;
  fx.strangerKey = (await createApiKey(handle.db, { userId: stranger.id, name: "theirs", projectId: elsewhere, role: "owner" })).key;
  fx.shareToken = (
    await createShareLink(handle.db, { projectId: project, kind: "run", runIds: [fx.run], view: {}, title: "adder-run", createdBy: owner.id, expiresAt: null })
  ).token;

  server = http.createServer((req, res) => {
    serve(req, res).catch((error: unknown) => res.destroy(error as Error));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);

afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  await db.close();
  fs.rmSync(work, { recursive: true, force: true });
});

/** What Next.js does with a request: the proxy for every path its matcher names, then the route or page. */
async function serve(req: http.IncomingMessage, res: http.ServerResponse) {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(", ") : value);
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  const request = new Request(`${url}${req.url}`, {
    method: req.method,
    headers,
    ...(hasBody ? { body: Readable.toWeb(req) as ReadableStream<Uint8Array>, duplex: "half" } : {}),
  } as RequestInit);
  let { pathname } = new URL(request.url);
  // proxy.ts's matcher: every path but the API's and Next's own files.
  if (!/^\/(api\/|_next\/|favicon\.ico)/.test(pathname)) {
    const gate = proxy(new NextRequest(request));
    const location = gate.headers.get("location");
    if (location) return reply(res, new Response(null, { status: gate.status, headers: { location } }));
    const rewrite = gate.headers.get("x-middleware-rewrite");
    if (rewrite) pathname = new URL(rewrite).pathname;
  }
  const rollout = pathname.match(/^\/runs\/([^/]+)\/rollouts\.jsonl$/);
  const model = pathname.match(/^\/api\/models\/([^/]+)$/);
  const response = pathname.startsWith("/api/trpc/")
    ? await (req.method === "GET" ? trpcGet : trpcPost)(request)
    : rollout
      ? await rolloutsJsonl(request, { params: Promise.resolve({ id: rollout[1]! }) })
      : model
        ? await modelFile(request, { params: Promise.resolve({ file: model[1]! }) })
        : pathname.startsWith("/api/")
          ? Response.json({ error: `no route ${pathname} here` }, { status: 404 })
          : new Response("<!doctype html><title>Tinkerlab</title><p>a page</p>", { headers: { "content-type": "text/html; charset=utf-8" } });
  return reply(res, response);
}

async function reply(res: http.ServerResponse, response: Response) {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) return void res.end();
  for await (const chunk of Readable.fromWeb(response.body as import("node:stream/web").ReadableStream)) res.write(chunk);
  res.end();
}

type Line = { runId: string; split: string; step: number; groupIndex: number; sampleIndex: number; turns: unknown[] };
const linesOf = (text: string): Line[] =>
  text
    .trimEnd()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line));

/** How many lines each split has at each step: "train@1" → 128. */
function countBySplitStep(lines: Line[]) {
  const counts: Record<string, number> = {};
  for (const line of lines) counts[`${line.split}@${line.step}`] = (counts[`${line.split}@${line.step}`] ?? 0) + 1;
  return counts;
}

const EVERY_ROLLOUT: Record<string, number> = {
  ...Object.fromEntries(Array.from({ length: STEPS }, (_, i) => [`train@${i + 1}`, TRAIN_PER_STEP])),
  ...Object.fromEntries(EVAL_STEPS.map((step) => [`eval@${step}`, EVAL_PER_STEP])),
};

describe("a run's rollouts as JSON Lines", () => {
  it("go to an API key and a share link's holder through the page proxy: every rollout, both splits, every step", async () => {
    const credentials: Record<string, string>[] = [{ authorization: `Bearer ${fx.key}` }, { [SHARE_HEADER]: fx.shareToken }];
    for (const credential of credentials) {
      const response = await fetch(`${url}/runs/${fx.run}/rollouts.jsonl`, { headers: credential, redirect: "manual" });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
      expect(response.headers.get("content-disposition")).toBe(`attachment; filename="${fx.run}-rollouts.jsonl"`);
      const lines = linesOf(await response.text());
      expect(countBySplitStep(lines)).toEqual(EVERY_ROLLOUT);
      // Training first, then evaluation, each by step, group and sample.
      const order = lines.map((l) => [l.split === "train" ? 0 : 1, l.step, l.groupIndex, l.sampleIndex]);
      const sorted = [...order].sort((a, b) => a[0]! - b[0]! || a[1]! - b[1]! || a[2]! - b[2]! || a[3]! - b[3]!);
      expect(order).toEqual(sorted);
      expect(lines[0]).toMatchObject({ runId: fx.run, split: "train", step: 1, groupIndex: 0, sampleIndex: 0 });
    }
  });

  it("narrow to a split, a step, or both; a step without rollouts says which steps have them", async () => {
    const get = (query: string) => fetch(`${url}/runs/${fx.run}/rollouts.jsonl${query}`, { headers: { authorization: `Bearer ${fx.key}` } });
    expect(countBySplitStep(linesOf(await (await get("?split=eval")).text()))).toEqual({ "eval@4": EVAL_PER_STEP, "eval@8": EVAL_PER_STEP });
    expect(countBySplitStep(linesOf(await (await get("?step=8")).text()))).toEqual({ "train@8": TRAIN_PER_STEP, "eval@8": EVAL_PER_STEP });
    const one = await get("?split=train&step=3");
    expect(one.headers.get("content-disposition")).toBe(`attachment; filename="${fx.run}-train-step-3.jsonl"`);
    expect(countBySplitStep(linesOf(await one.text()))).toEqual({ "train@3": TRAIN_PER_STEP });
    const missing = await get("?step=9");
    expect(missing.status).toBe(404);
    expect(await missing.text()).toBe(
      `Run '${fx.run}' has no train rollouts at step 9; its train rollouts span steps 1 to 8. It has no eval rollouts at step 9; its eval rollouts span steps 4 to 8.\n`,
    );
    const bad = await get("?split=test");
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/split: 'test' is not a split; use train or eval, or leave it out for both/);
  });

  it("refuse in plain text, never with a redirect: nobody 401, another project's key 404", async () => {
    const nobody = await fetch(`${url}/runs/${fx.run}/rollouts.jsonl`, { redirect: "manual" });
    expect(nobody.status).toBe(401);
    expect(nobody.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await nobody.text()).toMatch(/^Sign in required/);
    const stranger = await fetch(`${url}/runs/${fx.run}/rollouts.jsonl`, { headers: { authorization: `Bearer ${fx.strangerKey}` }, redirect: "manual" });
    expect(stranger.status).toBe(404);
    expect(await stranger.text()).toBe(`No run with id '${fx.run}'\n`);
    // The workbench's pages still send a visitor to sign in.
    const page = await fetch(`${url}/runs/${fx.run}`, { redirect: "manual" });
    expect(page.status).toBe(307);
  });

  it("are refused by the client when the answer is a redirect or a page, not the file", async () => {
    // A URL that is not the server's root: the proxy sends its paths to sign in, or to a page.
    await expect(createClient({ url: `${url}/workbench`, apiKey: fx.key }).runs.rolloutsJsonl(fx.run)).rejects.toMatchObject({
      status: 307,
      message: expect.stringMatching(/answered 307 to .*\/sign-in\?next=.* instead of an answer/),
    });
    await expect(createClient({ url: `${url}/s/tls_x`, apiKey: fx.key }).runs.rolloutsJsonl(fx.run)).rejects.toMatchObject({
      code: "WRONG_CONTENT",
      message: expect.stringMatching(/answered text\/html; charset=utf-8 where JSON Lines was expected/),
    });
  });
});

/** Runs the CLI in a folder of its own; resolves with its exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const home = fs.mkdtempSync(path.join(work, "home-"));
  return new Promise((resolve) => {
    const child = spawn(path.join(ROOT, "bin", "tinkerlab"), args, {
      cwd: work,
      env: { NODE_ENV: "production", PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe("the CLI's downloads", () => {
  it("exports a run whole with a key: every rollout of both splits and every step", async () => {
    const out = path.join(work, "export");
    const { code, stderr } = await cli(["runs", "export", fx.run, "-o", out, "--url", url, "--key", fx.key]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
    expect(countBySplitStep(linesOf(fs.readFileSync(path.join(out, "rollouts.jsonl"), "utf8")))).toEqual(EVERY_ROLLOUT);
  }, 60_000);

  it("fails with exit code 3, writing nothing, on a redirect, a refusal, a missing file or an HTML page", async () => {
    const cases = [
      // A redirect to sign in (a URL below the server's root, which the proxy sends there).
      { args: ["export", "arithmetic-base", "--url", `${url}/workbench`, "--key", fx.key], says: /answered 307 to .*\/sign-in/ },
      // No credential.
      { args: ["export", "arithmetic-base", "--url", url], says: /answered 401: Sign in required/ },
      // No such checkpoint.
      { args: ["export", "ckpt_nothere", "--url", url, "--key", fx.key], says: /answered 404: No checkpoint 'ckpt_nothere'/ },
      // A page where the file was asked for.
      {
        args: ["export", "arithmetic-base", "--url", `${url}/s/tls_x`, "--key", fx.key],
        says: /answered text\/html; charset=utf-8 where a model file was expected/,
      },
    ];
    for (const { args, says } of cases) {
      const file = path.join(work, `${args[1]}.onnx`);
      const { code, stderr } = await cli([...args, "-o", file]);
      expect({ args, code }).toEqual({ args, code: 3 });
      expect(stderr).toMatch(says);
      expect(fs.existsSync(file)).toBe(false);
    }
  }, 120_000);
});
