/**
 * Per-caller rate limits (server/api/rate-limits.ts, docs/RUNTIME.md "Rate limits"), over real HTTP on a server
 * whose signed-out callers are anonymous (TINKERLAB_AUTH=apikey here; a team server's are the same): a caller's burst
 * of a costly procedure passes and the call past it gets 429 with a Retry-After header and the words that say when to
 * retry, while another caller is untouched; signed out, every call counts against the address, and once it is spent
 * the gate refuses the address's requests before tRPC sees them, whatever address header the client writes.
 */
import http from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { POST as importBase } from "@/app/api/bases/[name]/import/route";
import { RATE_LIMITS, SIGNED_OUT_LIMIT } from "@/server/api/rate-limits";
import { createApiKey } from "@/server/auth/api-keys";
import { CLIENT_IP_HEADER } from "@/server/auth/constants";
import { createProject } from "@/server/auth/projects";
import { setDatabase, users } from "@/server/db";
import { type ApiServer, startApiServer } from "./support/api-server";
import { openTestDatabase } from "./support/database";

// Requests without credentials are anonymous (on a local server they are the local user's).
process.env.TINKERLAB_AUTH = "apikey";

let db: Awaited<ReturnType<typeof openTestDatabase>>;
let server: ApiServer;
const keys: string[] = [];
let adminKey = "";
beforeAll(async () => {
  db = await openTestDatabase();
  setDatabase(db.handle);
  server = await startApiServer();
  const ada = { id: "usr_ada", name: "Ada", email: "ada@example.com", role: "admin" };
  await db.handle.db.insert(users).values(ada);
  const { id: projectId } = await createProject(db.handle.db, { name: "Limits", ownerId: ada.id });
  for (const name of ["laptop", "ci"]) keys.push((await createApiKey(db.handle.db, { userId: ada.id, name, projectId, role: "editor" })).key);
  adminKey = (await createApiKey(db.handle.db, { userId: ada.id, name: "admin", projectId, role: "admin" })).key;
});
afterAll(async () => {
  await server?.close();
  await db?.close();
});

type Answer = { status: number; retryAfter: string | null; messages: string[] };

/**
 * A raw request to the tRPC endpoint from `localAddress` (another loopback address is another client): its status,
 * Retry-After header and the message of each call's answer.
 */
function request(path: string, options: { method?: string; body?: string; headers?: Record<string, string>; localAddress?: string } = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const req = http.request(`${server.url}/api/trpc/${path}`, {
      method: options.method ?? "GET",
      headers: { ...(options.body !== undefined ? { "content-type": "application/json" } : {}), ...options.headers },
      localAddress: options.localAddress ?? "127.0.0.1",
      agent: false,
    });
    req.on("error", reject);
    req.on("response", (response) => {
      let text = "";
      response.setEncoding("utf8");
      response.on("data", (piece: string) => (text += piece));
      response.on("end", () => {
        const parsed = JSON.parse(text) as Envelope | Envelope[];
        const messages = (Array.isArray(parsed) ? parsed : [parsed]).map((answer) => answer.error?.json.message ?? "ok");
        resolve({ status: response.statusCode!, retryAfter: response.headers["retry-after"] ?? null, messages });
      });
    });
    req.end(options.body);
  });
}
type Envelope = { error?: { json: { message: string } } };

/** `count` calls of health.check in one batch. */
const healthChecks = (count: number) => `${Array.from({ length: count }, () => "health.check").join(",")}?batch=1`;

describe("costly procedures, per caller", () => {
  const validate = (key: string) =>
    request("experiments.validate", {
      method: "POST",
      headers: { authorization: `Bearer ${key}` },
      body: JSON.stringify({ json: { experimentId: "exp_none", files: { "environment.ts": "export default 1;" } } }),
    });

  it("lets a burst of validations through, refuses the call past it with 429 and when to retry, and leaves another caller alone", async () => {
    const { burst, perMinute } = RATE_LIMITS["experiments.validate"];
    expect(burst).toBeGreaterThanOrEqual(20); // the editor's twenty at once, a page of validations
    // Ten more than the burst at once: the burst reaches the procedure, which finds no such experiment; the rest
    // (but for any the bucket refilled meanwhile, one every 60 / perMinute s) are refused.
    const answers = await Promise.all(Array.from({ length: burst + 10 }, () => validate(keys[0]!)));
    const passed = answers.filter((answer) => answer.status === 404).length;
    const refused = answers.filter((answer) => answer.status === 429);
    expect(passed + refused.length).toBe(burst + 10);
    expect(passed).toBeGreaterThanOrEqual(burst);
    expect(refused.length).toBeGreaterThanOrEqual(5);
    for (const answer of refused) {
      const retryAfter = Number(answer.retryAfter);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(answer.messages).toEqual([`too many experiments.validate calls: ${perMinute} a minute allowed; retry in ${retryAfter} s`]);
    }

    // The same person's other key is another caller.
    expect((await validate(keys[1]!)).status).toBe(404);
  });
});

describe("the base routes", () => {
  it("count a model import against its caller like a procedure, answering 429 with Retry-After", async () => {
    const { burst, perMinute } = RATE_LIMITS["bases.import"];
    const ask = () =>
      importBase(
        new Request("http://127.0.0.1/api/bases/not..a..name/import", {
          method: "POST",
          headers: { authorization: `Bearer ${adminKey}`, [CLIENT_IP_HEADER]: "127.0.0.1" },
          body: "{}",
        }),
        { params: Promise.resolve({ name: "not..a..name" }) },
      );
    // The burst reaches the route, which refuses the name; the call past it is refused for its rate first.
    const statuses: number[] = [];
    let last: Response | null = null;
    for (let made = 0; made < burst + 3; made++) {
      last = await ask();
      statuses.push(last.status);
      if (last.status === 429) break;
    }
    expect(statuses.slice(0, burst)).toEqual(Array.from({ length: burst }, () => 400));
    expect(last!.status).toBe(429);
    const retryAfter = Number(last!.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(await last!.json()).toEqual({ error: `too many bases.import calls: ${perMinute} a minute allowed; retry in ${retryAfter} s` });
  });
});

describe("signed-out callers, per address", () => {
  it("count every call against the address; once spent, the gate refuses it before tRPC, header or not", async () => {
    const calls = SIGNED_OUT_LIMIT.burst;
    const per = 40;
    for (let made = 0; made < calls; made += per) {
      const answer = await request(healthChecks(Math.min(per, calls - made)));
      expect(answer.status).toBe(200);
    }
    // A batch of as many again: more than the bucket can have refilled meanwhile.
    const routed = server.stats.routed;
    const refused = await request(healthChecks(per));
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(refused.messages).toEqual([
      `too many calls without signing in from 127.0.0.1: ${SIGNED_OUT_LIMIT.perMinute} a minute allowed; retry in ${refused.retryAfter} s, or sign in`,
    ]);
    expect(server.stats.routed).toBe(routed);

    // An address the client writes itself is replaced by the socket's.
    expect((await request(healthChecks(per), { headers: { [CLIENT_IP_HEADER]: "10.1.2.3" } })).status).toBe(429);
    // Another address, and a signed-in caller at this one, are not held back.
    expect((await request(healthChecks(1), { localAddress: "127.0.0.2" })).status).toBe(200);
    expect((await request(healthChecks(1), { headers: { authorization: `Bearer ${keys[1]}` } })).status).toBe(200);
  });

  it("counts signed-out calls that carry a credential that names no one, in tRPC, with a Retry-After header", async () => {
    const bogus = { authorization: "Bearer tl_not_a_key_of_this_server" };
    // One call a request, each answered 200 until the address's calls are spent (the bucket refills meanwhile, a
    // call every 60 / perMinute s, so a few more than the burst may pass).
    let answer = await request(healthChecks(1), { headers: bogus, localAddress: "127.0.0.3" });
    for (let made = 1; answer.status === 200 && made < 2 * SIGNED_OUT_LIMIT.burst; made++) {
      answer = await request(healthChecks(1), { headers: bogus, localAddress: "127.0.0.3" });
    }
    expect(answer.status).toBe(429);
    expect(Number(answer.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(answer.messages[0]).toMatch(/^too many calls without signing in from 127\.0\.0\.3: /);
  });
});
