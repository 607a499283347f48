/**
 * A base's import (POST /api/bases/<name>/import) sent again with the same Idempotency-Key, as a client retries when
 * the answer was lost: the retry gets the first import's record, where it used to fail on the uploaded files that
 * the first import had already consumed.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PUT as uploadFile } from "@/app/api/bases/[name]/files/[file]/route";
import { POST as importBase } from "@/app/api/bases/[name]/import/route";
import { type DatabaseHandle, setDatabase } from "@/server/db";
import { writeHFModelFolder } from "../support/hf-model-fixtures";
import { openTestDatabase } from "./support/database";

const folder = fs.mkdtempSync(path.join(os.tmpdir(), "tinkerlab-idempotent-import-"));
process.env.TINKERLAB_AUTH = "local";
process.env.ARTIFACTS_DIR = path.join(folder, "artifacts");
const source = path.join(folder, "tiny-llama");

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let handle: DatabaseHandle;
beforeAll(async () => {
  db = await openTestDatabase();
  handle = db.handle;
  setDatabase(handle);
  writeHFModelFolder(source, "llama3", { tokenizer: true, seed: 3 });
});
afterAll(async () => {
  await db.close();
  fs.rmSync(folder, { recursive: true, force: true });
});

const url = (tail: string) => `http://127.0.0.1:3000/api/bases/${tail}`;

async function upload(name: string) {
  for (const file of fs.readdirSync(source)) {
    const answer = await uploadFile(new Request(url(`${name}/files/${file}`), { method: "PUT", body: fs.readFileSync(path.join(source, file)) }), {
      params: Promise.resolve({ name, file }),
    });
    expect(answer.status, await answer.clone().text()).toBe(200);
  }
}

const importWith = (name: string, headers: Record<string, string>, body: object = { contextLength: 32 }) =>
  importBase(new Request(url(`${name}/import`), { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }), {
    params: Promise.resolve({ name }),
  });

describe("a base's import with an Idempotency-Key", () => {
  it("answers a retry with the first import's record, and refuses the key with other options", async () => {
    await upload("retried-llama");
    const first = await importWith("retried-llama", { "idempotency-key": "import-retried-0001" });
    expect(first.status, await first.clone().text()).toBe(200);
    const record = await first.json();
    expect(record).toMatchObject({ name: "retried-llama", modelType: "llama" });

    const retried = await importWith("retried-llama", { "idempotency-key": "import-retried-0001" });
    expect(retried.status, await retried.clone().text()).toBe(200);
    expect(await retried.json()).toEqual(record);

    const other = await importWith("retried-llama", { "idempotency-key": "import-retried-0001" }, { contextLength: 16 });
    expect(other.status).toBe(422);
    expect((await other.json()).error).toMatch(/^this idempotency key was used with different input/);
  }, 120_000);

  it("refuses a malformed key before importing anything, naming what a key may be", async () => {
    const refused = await importWith("any-llama", { "idempotency-key": "a b" });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error).toMatch(/^idempotency-key: an idempotency key is 8 to 200 characters/);
  });
});
