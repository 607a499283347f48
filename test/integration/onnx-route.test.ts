/**
 * GET /api/models/<name>.onnx: a built-in base for anyone signed in, a run's checkpoint (its LoRA adapter merged
 * into its base) for members of its project; nobody and share-link holders are told to sign in, another project
 * hears 404 as for nothing. The file is exported once into the artifact store and reused, and computes what the
 * run's policy computes. Exports and set-aside checkpoints are refused with the reason.
 */
import { testRunConfig } from "../support/run-config";
import fs from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GET as downloadModel } from "@/app/api/models/[file]/route";
import { ONNX_GRAPH_LAYOUT } from "@/lib/onnx/export";
import { decodeModel } from "@/lib/onnx/proto";
import { createApiKey } from "@/server/auth/api-keys";
import { SHARE_HEADER } from "@/server/auth/constants";
import { createProject, setMember } from "@/server/auth/projects";
import { createShareLink } from "@/server/auth/share-links";
import { checkpoints, type DatabaseHandle, newId, runs, setDatabase, users } from "@/server/db";
import { BaseModel, TrainingClient } from "@/server/runtime";
import { baseModelDir } from "@/server/bases";
import { callerFor, openTestDatabase } from "./support/database";

const ort = createRequire(import.meta.url)("onnxruntime-node") as typeof import("onnxruntime-web");

const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-onnx-route-"));
// Read by serverEnv() on first use: API keys only (a request without one is nobody), and a scratch artifact store.
process.env.TINKERLAB_AUTH = "apikey";
process.env.ARTIFACTS_DIR = path.join(folder, "artifacts");

type Who = "anonymous" | "link" | "viewer" | "other";
const EVERYONE: Who[] = ["anonymous", "link", "viewer", "other"];
const BASE = "arithmetic-base";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
const fx = { checkpoint: "", exportId: "", setAside: "", share: "", keys: {} as Record<"viewer" | "other", string> };
const prompt = [257, 259, 49, 50, 43, 51, 61];
/** the LoRA run's policy at its checkpoint, for the logprobs the exported file must reproduce */
let client: TrainingClient;

beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  const d = handle.db;
  const alice = { id: "usr_alice", name: "alice", email: "alice@lab.test" };
  const vera = { id: "usr_vera", name: "vera", email: "vera@lab.test" };
  const mallory = { id: "usr_mallory", name: "mallory", email: "mallory@lab.test" };
  await d.insert(users).values([alice, vera, mallory]);
  const p1 = (await createProject(d, { name: "P1", ownerId: alice.id })).id;
  const p2 = (await createProject(d, { name: "P2", ownerId: mallory.id })).id;
  await setMember(d, p1, vera.id, "viewer");
  fx.keys.viewer = (await createApiKey(d, { userId: vera.id, name: "laptop", projectId: p1, role: "viewer" })).key;
  fx.keys.other = (await createApiKey(d, { userId: mallory.id, name: "laptop", projectId: p2, role: "owner" })).key;

  const experiment = await callerFor(handle, alice).experiments.create({ name: "adder", projectId: p1, template: "arithmetic" });
  const runId = newId("run");
  await d.insert(runs).values({
    id: runId,
    projectId: p1,
    experimentId: experiment.id,
    experimentVersionId: experiment.versionId,
    createdBy: alice.id,
    name: "adder-run",
    status: "completed",
    config: testRunConfig({ agent: { base: BASE, training: { mode: "lora" } } }),
    totalSteps: 2,
    step: 2,
  });
  fx.share = (
    await createShareLink(d, { projectId: p1, kind: "run", runIds: [runId], view: {}, title: "adder-run", createdBy: alice.id, expiresAt: null })
  ).token;

  // The run's checkpoint: a LoRA adapter on the built-in base, moved by two optimizer steps.
  client = new TrainingClient(BaseModel.load(baseModelDir(BASE)), { lora: { rank: 4, alpha: 8 }, seed: 1 });
  for (let i = 0; i < 2; i++) {
    await client.forwardBackward({ tokens: [[...prompt, 50, 261]] }, "cross_entropy");
    await client.optimStep({ lr: 5e-2 });
  }
  const stateDir = path.join(folder, "checkpoints", "step-2");
  await client.saveState(stateDir);
  const exportFile = path.join(folder, "model.safetensors");
  fs.writeFileSync(exportFile, "weights");
  fx.checkpoint = newId("ckpt");
  fx.exportId = newId("ckpt");
  fx.setAside = newId("ckpt");
  await d.insert(checkpoints).values([
    { id: fx.checkpoint, runId, step: 2, kind: "state", path: stateDir, sizeBytes: 10 },
    { id: fx.exportId, runId, step: 2, kind: "export", path: exportFile, sizeBytes: 7 },
    { id: fx.setAside, runId, step: 1, kind: "state", path: stateDir, sizeBytes: 10, setAsideReason: "checksum mismatch" },
  ]);
});

afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

const headersOf = (who: Who): Record<string, string> =>
  who === "anonymous" ? {} : who === "link" ? { [SHARE_HEADER]: fx.share } : { authorization: `Bearer ${fx.keys[who]}` };

function get(file: string, who: Who = "viewer") {
  const request = new Request(`http://127.0.0.1:3000/api/models/${file}`, { headers: headersOf(who) });
  return downloadModel(request, { params: Promise.resolve({ file }) });
}

async function statuses(file: string) {
  const out: Partial<Record<Who, number>> = {};
  for (const who of EVERYONE) {
    const response = await get(file, who);
    out[who] = response.status;
    await response.body?.cancel();
  }
  return out;
}

describe("GET /api/models/<name>.onnx", () => {
  it("serves a built-in base to anyone signed in, as an attachment, with its config in the file", async () => {
    expect(await statuses(`${BASE}.onnx`)).toEqual({ anonymous: 401, link: 403, viewer: 200, other: 200 });
    const response = await get(`${BASE}.onnx`, "other");
    expect(response.headers.get("content-type")).toBe("application/octet-stream");
    expect(response.headers.get("content-disposition")).toBe(`attachment; filename="${BASE}.onnx"`);
    expect(response.headers.get("cache-control")).toBe("private, max-age=3600");
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect(Number(response.headers.get("content-length"))).toBe(bytes.length);
    const model = decodeModel(bytes);
    const meta = Object.fromEntries((model.metadataProps ?? []).map((e) => [e.key, e.value]));
    expect(JSON.parse(meta["tinkerlab.config"]!)).toEqual(JSON.parse(fs.readFileSync(path.join(baseModelDir(BASE), "model_config.json"), "utf8")));
    expect(meta["tinkerlab.model"]).toBe(BASE);
    expect(fs.existsSync(path.join(process.env.ARTIFACTS_DIR!, "onnx", `v${ONNX_GRAPH_LAYOUT}`, `${BASE}.onnx`))).toBe(true);
  });

  it("serves a run's checkpoint to its project's members only; its file computes the run's policy", async () => {
    expect(await statuses(`${fx.checkpoint}.onnx`)).toEqual({ anonymous: 401, link: 403, viewer: 200, other: 404 });
    const cached = path.join(process.env.ARTIFACTS_DIR!, "onnx", `v${ONNX_GRAPH_LAYOUT}`, `${fx.checkpoint}.onnx`);
    const made = fs.statSync(cached).mtimeMs;
    const response = await get(`${fx.checkpoint}.onnx`);
    const bytes = new Uint8Array(await response.arrayBuffer());
    expect(fs.statSync(cached).mtimeMs).toBe(made); // exported once, then served from the artifact store
    expect(fs.readdirSync(path.dirname(cached)).filter((f) => f.endsWith(".tmp"))).toEqual([]);

    const meta = Object.fromEntries((decodeModel(bytes).metadataProps ?? []).map((e) => [e.key, e.value]));
    expect(meta["tinkerlab.lineage"]).toMatch(new RegExp(`^${fx.checkpoint} \\(run adder-run, step 2, LoRA\\) ← ${BASE}$`));
    const config = JSON.parse(meta["tinkerlab.config"]!);
    const session = await ort.InferenceSession.create(bytes);
    const feeds: Record<string, InstanceType<typeof ort.Tensor>> = {
      input_ids: new ort.Tensor("int64", BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]),
    };
    for (let l = 0; l < config.nLayers; l++)
      for (const kv of ["key", "value"])
        feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor("float32", new Float32Array(0), [1, config.nHeads, 0, config.dModel / config.nHeads]);
    const logits = (await session.run(feeds)).logits!.data as Float32Array;
    const expected = (await client.forward({ tokens: [prompt] })).logprobs[0]!;
    const V = config.vocabSize;
    for (let t = 1; t < prompt.length; t++) {
      const row = Array.from(logits.subarray((t - 1) * V, t * V));
      const max = Math.max(...row);
      const lse = max + Math.log(row.reduce((s, x) => s + Math.exp(x - max), 0));
      expect(Math.abs(row[prompt[t]!]! - lse - expected[t]!)).toBeLessThan(1e-4);
    }
  });

  it("answers 404 with what it accepts for other names, and refuses exports and set-aside checkpoints with the reason", async () => {
    const error = async (file: string, who: Who = "viewer") => {
      const response = await get(file, who);
      return { status: response.status, error: ((await response.json()) as { error: string }).error };
    };
    expect(await error(`${BASE}.safetensors`)).toEqual({ status: 404, error: expect.stringMatching(/ckpt_….onnx/) });
    expect(await error("no-such-base.onnx")).toEqual({
      status: 404,
      error: expect.stringMatching(/No model named 'no-such-base'.*a base, built-in or imported/),
    });
    expect(await error("../../etc.onnx")).toEqual({ status: 404, error: expect.stringMatching(/No model named/) });
    expect(await error(`${newId("ckpt")}.onnx`)).toEqual({ status: 404, error: expect.stringMatching(/No checkpoint/) });
    expect(await error(`${fx.exportId}.onnx`)).toEqual({ status: 404, error: expect.stringMatching(/is an export/) });
    expect(await error(`${fx.setAside}.onnx`)).toEqual({ status: 404, error: expect.stringMatching(/set aside as damaged \(checksum mismatch\)/) });
    // nobody hears nothing more than "sign in", whatever the name
    expect((await error("no-such-base.onnx", "anonymous")).status).toBe(401);
  });
});
